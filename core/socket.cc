#include "core/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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

#include "core/env.h"
#include "core/error.h"
#include "core/interrupt.h"

namespace ringcc {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// "60", "0.25": a duration for messages.
std::string format_seconds(double seconds) {
  std::ostringstream os;
  if (seconds >= 100) {
    os << std::llround(seconds);
  } else {
    os << std::setprecision(3) << seconds;
  }
  return os.str();
}

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

// Resolves an IPv4 address for host. An empty host or "0.0.0.0" with
// `passive` means every local address.
sockaddr_in resolve(const std::string& host, int port, bool passive) {
  RINGCC_CHECK(port >= 0 && port <= 65535, ErrorKind::kInvalidArgument,
               "port must be in [0, 65535], got ", port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (passive && (host.empty() || host == "0.0.0.0")) {
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    return addr;
  }
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) return addr;

  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    raise(ErrorKind::kInvalidArgument, "cannot resolve host '", host, "': ",
          rc == EAI_SYSTEM ? errno_text(errno) : ::gai_strerror(rc));
  }
  addr.sin_addr = reinterpret_cast<sockaddr_in*>(result->ai_addr)->sin_addr;
  ::freeaddrinfo(result);
  return addr;
}

std::string address_text(const sockaddr_in& addr) {
  char text[INET_ADDRSTRLEN] = {0};
  ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  return text;
}

sockaddr_in local_name(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    raise(ErrorKind::kInternal, "getsockname() failed: ", errno_text(errno));
  }
  return addr;
}

Socket new_tcp_socket() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
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
int try_connect(const Socket& sock, const sockaddr_in& addr, Deadline deadline) {
  if (::connect(sock.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) return 0;
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
  sockaddr_in local = local_name(fd);
  sockaddr_in peer{};
  socklen_t len = sizeof(peer);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;
  return local.sin_port == peer.sin_port && local.sin_addr.s_addr == peer.sin_addr.s_addr;
}

[[noreturn]] void raise_io_timeout(Clock::time_point start, Deadline deadline,
                                   const std::string& who) {
  raise(ErrorKind::kTimeout, "timed out after ",
        format_seconds(std::max(0.0, seconds_between(start, deadline))), " s waiting for ", who);
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

Socket Socket::listen(const std::string& host, int port, int backlog) {
  const std::string where = (host.empty() ? "0.0.0.0" : host) + ":" + std::to_string(port);
  sockaddr_in addr = resolve(host, port, /*passive=*/true);
  Socket sock = new_tcp_socket();
  int one = 1;
  ::setsockopt(sock.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(sock.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    raise(ErrorKind::kInternal, "cannot listen on ", where, ": bind() failed: ", errno_text(errno));
  }
  if (::listen(sock.fd(), backlog) != 0) {
    raise(ErrorKind::kInternal, "cannot listen on ", where, ": listen() failed: ",
          errno_text(errno));
  }
  return sock;
}

Socket Socket::connect(const std::string& host, int port, Deadline deadline) {
  return connect(host, port, deadline, std::chrono::milliseconds::max());
}

Socket Socket::connect(const std::string& host, int port, Deadline deadline,
                       std::chrono::milliseconds refused_limit) {
  const auto start = Clock::now();
  Deadline refused_since = Deadline::max();
  sockaddr_in addr = resolve(host, port, /*passive=*/false);
  auto backoff = std::chrono::milliseconds(10);
  int last_error = 0;
  for (;;) {
    Socket sock = new_tcp_socket();
    sock.set_nonblocking(true);
    last_error = try_connect(sock, addr, deadline);
    if (last_error == 0 && connected_to_itself(sock.fd())) last_error = ECONNREFUSED;
    if (last_error == 0) {
      sock.set_nonblocking(false);
      return sock;
    }
    if (!connect_error_is_transient(last_error)) {
      raise(ErrorKind::kInternal, "cannot connect to ", host, ":", port, ": ",
            errno_text(last_error));
    }
    auto now = Clock::now();
    if (last_error == ECONNREFUSED && refused_limit != std::chrono::milliseconds::max()) {
      if (refused_since == Deadline::max()) refused_since = now;
      if (std::chrono::duration_cast<std::chrono::milliseconds>(now - refused_since) >=
          refused_limit) {
        raise(ErrorKind::kPeerFailure, "nothing listens at ", host, ":", port,
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
  raise(ErrorKind::kTimeout, "timed out connecting to ", host, ":", port, " after ",
        format_seconds(seconds_between(start, Clock::now())), " s (last error: ",
        errno_text(last_error), ")");
}

Socket Socket::accept(Deadline deadline, std::string* peer_addr) const {
  // A non-blocking listener makes accept() return EAGAIN, rather than block
  // past the deadline, when the connection poll() saw is gone (taken by
  // another thread, or aborted). Accepted sockets do not inherit the flag.
  int flags = ::fcntl(fd_, F_GETFL, 0);
  if (flags >= 0 && !(flags & O_NONBLOCK)) ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  for (;;) {
    if (!wait_for(fd_, POLLIN, deadline)) return Socket();
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd >= 0) {
      if (peer_addr) *peer_addr = address_text(addr) + ":" + std::to_string(ntohs(addr.sin_port));
      return Socket(fd);
    }
    // The pending connection may have gone away between poll() and accept().
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED ||
        errno == EPROTO) {
      continue;
    }
    raise(ErrorKind::kInternal, "accept() failed: ", errno_text(errno));
  }
}

int Socket::local_port() const { return ntohs(local_name(fd_).sin_port); }

std::string Socket::local_address() const { return address_text(local_name(fd_)); }

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

void Socket::set_buffer_sizes(int bytes) {
  // The kernel caps these at net.core.{w,r}mem_max; failure is harmless.
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

// Both loops use MSG_DONTWAIT and poll(), so they work on blocking and
// non-blocking sockets alike and never wait past the deadline.
void Socket::send_all(const void* data, size_t size, Deadline deadline,
                      const std::string& who) const {
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
      raise(ErrorKind::kPeerFailure, who, errno == EPIPE ? " closed the connection"
                                                         : " reset the connection");
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
