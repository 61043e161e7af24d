#include "core/os/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <thread>
#include <vector>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"

namespace ringcc {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// With several addresses to try, one that does not answer is given this long
// per round before the next is tried.
constexpr double kAttemptSeconds = 3.0;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Milliseconds left until deadline, rounded up so that a poll() does not wake
// just before it, clamped to [0, INT_MAX].
int poll_timeout_ms(Deadline deadline) {
  auto now = Clock::now();
  if (deadline <= now) return 0;
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now).count();
  int64_t ms = (left + 999) / 1000;
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

// Waits for events on fd until deadline. Returns false on timeout.
bool wait_for(int fd, short events, Deadline deadline) {
  for (;;) {
    poll_interrupt();
    pollfd pfd{fd, events, 0};
    int rc = ::poll(&pfd, 1, interrupt_slice_ms(poll_timeout_ms(deadline)));
    if (rc > 0) return true;
    if (rc == 0) {
      if (Clock::now() >= deadline) return false;
      continue;  // woke a little early
    }
    if (errno != EINTR) raise(ErrorKind::kInternal, "poll() failed: ", errno_text(errno));
  }
}

// A resolved socket address (IPv4 or IPv6).
struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
};

void check_port(int port) {
  RINGCC_CHECK(port >= 0 && port <= 65535, ErrorKind::kInvalidArgument, "port must be in [0, 65535], got ", port);
}

// Every address of host (a name, an IPv4 or an IPv6 address), in the order
// getaddrinfo() prefers (RFC 6724), without repeats.
std::vector<Address> resolve(const std::string& host, int port, bool passive) {
  check_port(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr) {
    raise(ErrorKind::kInvalidArgument, "cannot resolve host '", host,
          "': ", rc == EAI_SYSTEM ? errno_text(errno) : ::gai_strerror(rc));
  }
  std::vector<Address> out;
  for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) || ai->ai_addrlen > sizeof(sockaddr_storage)) {
      continue;
    }
    Address a;
    std::memcpy(&a.storage, ai->ai_addr, ai->ai_addrlen);
    a.length = ai->ai_addrlen;
    bool seen = false;
    for (const Address& b : out) {
      seen |= b.length == a.length && std::memcmp(&b.storage, &a.storage, a.length) == 0;
    }
    if (!seen) out.push_back(a);
  }
  ::freeaddrinfo(result);
  if (out.empty()) raise(ErrorKind::kInvalidArgument, "cannot resolve host '", host, "': no IPv4 or IPv6 address");
  return out;
}

Address any_address(int family, int port) {
  Address a;
  if (family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    a.length = sizeof(sockaddr_in6);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    in->sin_port = htons(static_cast<uint16_t>(port));
    a.length = sizeof(sockaddr_in);
  }
  return a;
}

Address local_name(int fd) {
  Address a;
  a.length = sizeof(a.storage);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) {
    raise(ErrorKind::kInternal, "getsockname() failed: ", errno_text(errno));
  }
  return a;
}

int port_of(const sockaddr* addr) {
  if (addr->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port);
  if (addr->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port);
  return 0;
}

Socket new_tcp_socket(int family) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) raise(ErrorKind::kInternal, "socket() failed: ", errno_text(errno));
  return Socket(fd);
}

// Errors after which connecting again may succeed: the listener is not up
// yet, its backlog is full, or the network is briefly unavailable.
bool connect_error_is_transient(int err) {
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case ETIMEDOUT:
    case ENETUNREACH:
    case ENETDOWN:
    case EHOSTUNREACH:
    case EHOSTDOWN:
    case EAGAIN:
    case EINTR:
    case EADDRNOTAVAIL:
    case ENOENT:
      return true;
    default:
      return false;
  }
}

// One non-blocking connection attempt bounded by deadline. Returns 0 on
// success, else the errno of the failure (ETIMEDOUT when the deadline passed).
int try_connect(const Socket& sock, const Address& addr, Deadline deadline) {
  if (::connect(sock.fd(), addr.get(), addr.length) == 0) return 0;
  if (errno != EINPROGRESS && errno != EINTR) return errno;
  if (!wait_for(sock.fd(), POLLOUT, deadline)) return ETIMEDOUT;
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(sock.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

// A connection to a port of this host on which nothing listens can, rarely,
// connect to itself (TCP simultaneous open when the ephemeral port chosen
// equals the target). Such a socket is useless.
bool connected_to_itself(int fd) {
  Address local = local_name(fd);
  Address peer;
  peer.length = sizeof(peer.storage);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer.storage), &peer.length) != 0) return false;
  return sockaddr_endpoint(local.get()) == sockaddr_endpoint(peer.get());
}

[[noreturn]] void raise_io_timeout(Clock::time_point start, Deadline deadline, const std::string& who) {
  raise(ErrorKind::kTimeout, "timed out after ", format_seconds(std::max(0.0, seconds_between(start, deadline))),
        " s waiting for ", who);
}

}  // namespace

Socket::~Socket() { close(); }

Socket::Socket(Socket&& other) noexcept : fd_(other.release()) {}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

int Socket::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

Socket Socket::listen(const std::string& host_text, int port, int backlog) {
  const std::string host = unbracket_host(host_text);
  check_port(port);
  const std::string where = endpoint_text(host.empty() ? "*" : host, port);
  // No host: every address, IPv6 and IPv4 alike on one dual-stack socket;
  // IPv4 alone where the kernel has no IPv6.
  const std::vector<Address> addresses =
      host.empty() ? std::vector<Address>{any_address(AF_INET6, port), any_address(AF_INET, port)}
                   : resolve(host, port, /*passive=*/true);
  std::string failure;
  for (const Address& addr : addresses) {
    const int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      failure = std::string("socket() failed: ") + errno_text(errno);
      continue;
    }
    Socket sock(fd);
    int one = 1;
    ::setsockopt(sock.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (addr.family() == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr.storage);
      int v6only = IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr) ? 0 : 1;  // "::" takes IPv4 too
      ::setsockopt(sock.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
    }
    if (::bind(sock.fd(), addr.get(), addr.length) != 0) {
      failure = std::string("bind() failed: ") + errno_text(errno);
      continue;
    }
    if (::listen(sock.fd(), backlog) != 0) {
      raise(ErrorKind::kInternal, "cannot listen on ", where, ": listen() failed: ", errno_text(errno));
    }
    return sock;
  }
  raise(ErrorKind::kInternal, "cannot listen on ", where, ": ", failure);
}

Socket Socket::connect(const std::string& host, int port, Deadline deadline) {
  return connect(host, port, deadline, std::chrono::milliseconds::max());
}

Socket Socket::connect(const std::string& host_text, int port, Deadline deadline,
                       std::chrono::milliseconds refused_limit) {
  const auto start = Clock::now();
  const std::string host = unbracket_host(host_text);
  const std::string where = endpoint_text(host, port);
  Deadline refused_since = Deadline::max();
  const std::vector<Address> addresses = resolve(host, port, /*passive=*/false);
  auto backoff = std::chrono::milliseconds(10);
  int last_error = 0;
  for (;;) {
    // Each round tries every address of the host in turn (a name may have
    // an IPv6 and an IPv4 address, only one of them listened on); with
    // several, one that does not answer gets a few seconds, not all.
    bool all_refused = true;
    for (const Address& addr : addresses) {
      Socket sock = new_tcp_socket(addr.family());
      sock.set_nonblocking(true);
      const Deadline attempt = addresses.size() > 1 ? std::min(deadline, deadline_after(kAttemptSeconds)) : deadline;
      int err = try_connect(sock, addr, attempt);
      if (err == 0 && connected_to_itself(sock.fd())) err = ECONNREFUSED;
      if (err == 0) {
        sock.set_nonblocking(false);
        return sock;
      }
      if (!connect_error_is_transient(err)) {
        raise(ErrorKind::kInternal, "cannot connect to ", where, " (", sockaddr_host(addr.get()),
              "): ", errno_text(err));
      }
      all_refused &= err == ECONNREFUSED;
      if (last_error == 0 || last_error == ECONNREFUSED) last_error = err;  // the most telling one
      if (Clock::now() >= deadline) break;
    }
    auto now = Clock::now();
    if (all_refused && refused_limit != std::chrono::milliseconds::max()) {
      if (refused_since == Deadline::max()) refused_since = now;
      if (std::chrono::duration_cast<std::chrono::milliseconds>(now - refused_since) >= refused_limit) {
        raise(ErrorKind::kPeerFailure, "nothing listens at ", where,
              " any more (connection refused): the process serving it has exited");
      }
    } else {
      refused_since = Deadline::max();
    }
    if (now >= deadline) break;
    poll_interrupt();
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
  raise(ErrorKind::kTimeout, "timed out connecting to ", where, " after ",
        format_seconds(seconds_between(start, Clock::now())), " s (last error: ", errno_text(last_error), ")");
}

Socket Socket::accept(Deadline deadline, std::string* peer_addr) const {
  // A non-blocking listener makes accept() return EAGAIN, rather than block
  // past the deadline, when the connection poll() saw is gone (taken by
  // another thread, or aborted). Accepted sockets do not inherit the flag.
  int flags = ::fcntl(fd_, F_GETFL, 0);
  if (flags >= 0 && !(flags & O_NONBLOCK)) ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  for (;;) {
    if (!wait_for(fd_, POLLIN, deadline)) return Socket();
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd >= 0) {
      if (peer_addr) *peer_addr = sockaddr_endpoint(reinterpret_cast<const sockaddr*>(&addr));
      return Socket(fd);
    }
    // The pending connection may have gone away between poll() and accept().
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED || errno == EPROTO) {
      continue;
    }
    raise(ErrorKind::kInternal, "accept() failed: ", errno_text(errno));
  }
}

int Socket::local_port() const { return port_of(local_name(fd_).get()); }

std::string Socket::local_address() const { return sockaddr_host(local_name(fd_).get()); }

void Socket::set_nodelay(bool on) {
  int value = on ? 1 : 0;
  if (::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &value, sizeof(value)) != 0) {
    raise(ErrorKind::kInternal, "setsockopt(TCP_NODELAY) failed: ", errno_text(errno));
  }
}

void Socket::set_nonblocking(bool on) {
  int flags = ::fcntl(fd_, F_GETFL, 0);
  if (flags < 0) raise(ErrorKind::kInternal, "fcntl(F_GETFL) failed: ", errno_text(errno));
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd_, F_SETFL, flags) != 0) {
    raise(ErrorKind::kInternal, "fcntl(F_SETFL) failed: ", errno_text(errno));
  }
}

bool raise_open_files_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return false;
  limit.rlim_cur = limit.rlim_max;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

void Socket::set_buffer_sizes(int bytes) {
  // The kernel caps these at net.core.{w,r}mem_max; failure is harmless.
  // Setting them turns the kernel's tuning of these buffers off: 0 keeps it.
  if (bytes <= 0) return;
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

std::string Socket::congestion_control() const {
  char name[64] = {};
  socklen_t len = sizeof(name) - 1;
  if (::getsockopt(fd_, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "";
  return std::string(name, ::strnlen(name, len));
}

bool Socket::set_congestion_control(const std::string& name) {
  return ::setsockopt(fd_, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0;
}

// Both loops use MSG_DONTWAIT and poll(), so they work on blocking and
// non-blocking sockets alike and never wait past the deadline.
void Socket::send_all(const void* data, size_t size, Deadline deadline, const std::string& who) const {
  const auto start = Clock::now();
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd_, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd_, POLLOUT, deadline)) raise_io_timeout(start, deadline, who);
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      raise(ErrorKind::kPeerFailure, who, errno == EPIPE ? " closed the connection" : " reset the connection");
    }
    raise(ErrorKind::kInternal, "sending to ", who, " failed: ", errno_text(errno));
  }
}

void Socket::recv_all(void* data, size_t size, Deadline deadline, const std::string& who) const {
  const auto start = Clock::now();
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd_, p, size, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) raise(ErrorKind::kPeerFailure, who, " closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd_, POLLIN, deadline)) raise_io_timeout(start, deadline, who);
      continue;
    }
    if (errno == ECONNRESET) raise(ErrorKind::kPeerFailure, who, " reset the connection");
    raise(ErrorKind::kInternal, "receiving from ", who, " failed: ", errno_text(errno));
  }
}

std::string unbracket_host(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

std::string endpoint_text(const std::string& host, int port) {
  const std::string bare = unbracket_host(host);
  if (bare.find(':') != std::string::npos) return "[" + bare + "]:" + std::to_string(port);
  return bare + ":" + std::to_string(port);
}

std::string sockaddr_host(const sockaddr* addr) {
  if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {  // an IPv4 peer of a dual-stack socket
      char text[INET_ADDRSTRLEN] = {0};
      ::inet_ntop(AF_INET, in6->sin6_addr.s6_addr + 12, text, sizeof(text));
      return text;
    }
    char text[NI_MAXHOST] = {0};  // with "%interface" for a link-local address
    if (::getnameinfo(addr, sizeof(sockaddr_in6), text, sizeof(text), nullptr, 0, NI_NUMERICHOST) == 0) {
      return text;
    }
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    return text;
  }
  if (addr->sa_family == AF_INET) {
    char text[INET_ADDRSTRLEN] = {0};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof(text));
    return text;
  }
  return "?";
}

std::string endpoint_host(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || (endpoint.find(':') != colon && endpoint[0] != '[')) return endpoint;
  return unbracket_host(endpoint.substr(0, colon));
}

std::string sockaddr_endpoint(const sockaddr* addr) { return endpoint_text(sockaddr_host(addr), port_of(addr)); }

std::string host_name() {
  std::string name = env_str("RINGCC_HOSTNAME", "");
  if (!name.empty()) return name;
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) {
    raise(ErrorKind::kInternal, "gethostname() failed: ", errno_text(errno));
  }
  return buf;
}

}  // namespace ringcc
