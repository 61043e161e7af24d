#include "core/rendezvous/tcp_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <unordered_map>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/log.h"
#include "core/base/sha256.h"
#include "core/base/wire.h"

namespace ringcc {
namespace {

// ---- Wire format (see tcp_store.h) ----

constexpr char kMagic[4] = {'R', 'C', 'S', 'T'};
constexpr uint8_t kVersion = 2;
constexpr size_t kGreetingSize = 6;  // magic, version, auth flag
constexpr size_t kNonceSize = 32;
constexpr char kClientProofContext[] = "ringcc-store-client";
constexpr char kServerProofContext[] = "ringcc-store-server";
constexpr size_t kRequestHeaderSize = 17;  // op, key size, value size
constexpr size_t kReplyHeaderSize = 9;     // status, payload size
constexpr uint64_t kMaxKeySize = uint64_t(1) << 20;
constexpr uint64_t kMaxValueSize = uint64_t(1) << 30;
constexpr uint64_t kMaxRequestSize = kRequestHeaderSize + kMaxKeySize + kMaxValueSize;
// Longest blocking get the server accepts (a year), so deadlines never overflow.
constexpr int64_t kMaxWaitMs = int64_t(365) * 24 * 3600 * 1000;

constexpr auto kHandshakeTimeout = std::chrono::seconds(5);
// How long past a get's own timeout a client waits for the server to report
// that timeout before deciding the server is stuck.
constexpr auto kGetReplyGrace = std::chrono::seconds(5);
// How long a store that was reached before may refuse connections before the
// client decides that it has exited.
constexpr auto kRefusedMeansGone = std::chrono::milliseconds(500);

enum Op : uint8_t { kSet = 1, kGet = 2, kTryGet = 3, kAdd = 4 };
enum Status : uint8_t { kOk = 0, kNotFound = 1, kTimedOut = 2, kFailed = 3 };

std::string encode_i64(int64_t v) {
  std::string s;
  put_i64(&s, v);
  return s;
}

// s holds 8 bytes (the requests and replies that carry a number are checked).
int64_t decode_i64(const std::string& s) { return static_cast<int64_t>(load_u64(s.data())); }

// The proofs of the store's handshake: each side's HMAC covers both fresh
// nonces and names its own role, so neither can be replayed or reflected.
Digest store_proof(const std::string& secret, const char* context, const std::string& server_nonce,
                   const std::string& client_nonce) {
  std::string message = std::string(context) + server_nonce + client_nonce;
  return hmac_sha256(secret, message.data(), message.size());
}

// Counters are stored as decimal text so a get() of one reads naturally.
bool parse_counter(const std::string& text, int64_t* value) {
  if (text.empty() || text.size() > 20) return false;
  char* end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || end != text.c_str() + text.size()) return false;
  *value = parsed;
  return true;
}

std::string format_seconds(double seconds) {
  std::ostringstream os;
  if (seconds >= 100) {
    os << std::llround(seconds);
  } else {
    os << std::setprecision(3) << seconds;
  }
  return os.str();
}

// Owns a plain file descriptor (the server's wake-up eventfd).
class OwnedFd {
 public:
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Raises the soft limit on open files to the hard limit; true if it rose.
bool raise_open_files_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return false;
  limit.rlim_cur = limit.rlim_max;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

}  // namespace

// ===========================================================================
// Server
// ===========================================================================

class TcpStoreServer::Loop {
 public:
  Loop(const std::string& host, int port, const std::string& secret);
  int port() const { return port_; }
  // Serves until stop(); on a fatal error, logs it and closes every socket so
  // that clients fail fast instead of waiting out their timeouts.
  void run();
  // Thread-safe: asks run() to return.
  void stop();

 private:
  struct Client {
    uint64_t id = 0;
    Socket sock;
    std::string peer;  // "ip:port", for log messages
    bool closed = false;

    bool authenticated = false;
    Deadline auth_deadline{};
    std::string server_nonce;  // sent in the greeting

    std::string inbox;  // received bytes; those before inbox_pos are consumed
    size_t inbox_pos = 0;
    std::string outbox;  // bytes to send; those before outbox_pos are sent
    size_t outbox_pos = 0;

    // A get() waiting for its key to be set. While waiting, the client's
    // later requests stay in the inbox.
    bool waiting = false;
    std::string waiting_key;
    Deadline waiting_until{};

    size_t buffered() const { return inbox.size() - inbox_pos; }
    const char* unread() const { return inbox.data() + inbox_pos; }
    bool has_output() const { return outbox_pos < outbox.size(); }
  };

  void accept_clients();
  void add_client(Socket sock, const std::string& peer);
  void read_from(Client& c);
  void flush(Client& c);
  void process_inbox(Client& c);
  bool authenticate(Client& c);
  bool handle_request(Client& c);
  void execute(Client& c, uint8_t op, const std::string& key, std::string value);
  void reply(Client& c, Status status, const std::string& payload);
  void start_waiting(Client& c, const std::string& key, int64_t timeout_ms);
  void stop_waiting(Client& c);
  void wake_waiters(const std::string& key);
  void expire_deadlines();
  void run_resumed_clients();
  Deadline next_deadline() const;
  void close_client(Client& c, LogLevel level, const std::string& why);
  void reap_closed_clients();

  Socket listener_;
  OwnedFd wake_fd_;
  int port_ = 0;
  const std::string secret_;
  std::atomic<bool> stopping_{false};

  uint64_t next_client_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Client>> clients_;
  std::unordered_map<std::string, std::string> data_;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;  // key -> waiting client ids
  std::vector<Client*> resumed_;  // clients whose get was answered; their inbox may hold more
  std::vector<char> read_buffer_ = std::vector<char>(256 * 1024);

  Deadline accept_paused_until_{};  // after running out of file descriptors
  bool tried_raising_fd_limit_ = false;
  bool warned_fd_exhaustion_ = false;
};

TcpStoreServer::Loop::Loop(const std::string& host, int port, const std::string& secret)
    : listener_(Socket::listen(host, port, /*backlog=*/4096)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      secret_(secret) {
  RINGCC_CHECK(wake_fd_.get() >= 0, ErrorKind::kInternal, "eventfd() failed: ", std::strerror(errno));
  listener_.set_nonblocking(true);
  port_ = listener_.local_port();
  RINGCC_LOG(kDebug, "rendezvous store listening on ", endpoint_text(host.empty() ? "*" : host, port_),
             secret_.empty() ? " (no secret)" : " (authenticated)");
}

void TcpStoreServer::Loop::stop() {
  stopping_.store(true);
  uint64_t one = 1;
  // Only fails if the counter would overflow, which a pending wake-up covers.
  (void)!::write(wake_fd_.get(), &one, sizeof(one));
}

void TcpStoreServer::Loop::run() {
  try {
    std::vector<pollfd> fds;
    std::vector<Client*> polled;
    while (!stopping_.load()) {
      fds.clear();
      polled.clear();
      fds.push_back({wake_fd_.get(), POLLIN, 0});
      bool accepting = Clock::now() >= accept_paused_until_;
      fds.push_back({accepting ? listener_.fd() : -1, POLLIN, 0});  // poll() skips fd -1
      for (auto& entry : clients_) {
        Client& c = *entry.second;
        short events = POLLIN;
        if (c.has_output()) events |= POLLOUT;
        fds.push_back({c.sock.fd(), events, 0});
        polled.push_back(&c);
      }

      // Wake at the next deadline, and at least once a second regardless.
      Deadline wake_at = std::min(next_deadline(), Clock::now() + std::chrono::seconds(1));
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake_at - Clock::now());
      int timeout_ms = static_cast<int>(std::max<int64_t>(0, wait.count() + 1));
      int rc = ::poll(fds.data(), fds.size(), timeout_ms);
      if (rc < 0) {
        if (errno == EINTR) continue;
        raise(ErrorKind::kInternal, "poll() failed: ", std::strerror(errno));
      }
      if (fds[0].revents != 0) {
        uint64_t count = 0;
        (void)!::read(wake_fd_.get(), &count, sizeof(count));
      }
      if (stopping_.load()) break;
      if (fds[1].revents != 0) accept_clients();

      for (size_t i = 0; i < polled.size(); ++i) {
        short revents = fds[i + 2].revents;
        Client& c = *polled[i];
        if (revents == 0 || c.closed) continue;
        try {
          if (revents & POLLOUT) flush(c);
          if (!c.closed && (revents & (POLLIN | POLLHUP | POLLERR))) read_from(c);
        } catch (const std::exception& e) {
          // E.g. bad_alloc on a huge request: drop that client, serve the rest.
          close_client(c, LogLevel::kWarning,
                       "closed the connection from " + c.peer + ": " + e.what());
        }
      }
      run_resumed_clients();
      expire_deadlines();
      run_resumed_clients();
      reap_closed_clients();
    }
  } catch (const std::exception& e) {
    RINGCC_LOG(kError, "the rendezvous store on port ", port_, " stopped: ", e.what());
  }
  // The listener first: a client that connects now is refused, not left
  // in the backlog of a store that is going away.
  listener_.close();
  clients_.clear();
}

void TcpStoreServer::Loop::accept_clients() {
  // Bounded so a flood of connections cannot starve the existing clients.
  for (int i = 0; i < 512; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = ::accept4(listener_.fd(), reinterpret_cast<sockaddr*>(&addr), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        if (!tried_raising_fd_limit_) {
          tried_raising_fd_limit_ = true;
          if (err == EMFILE && raise_open_files_limit()) continue;
        }
        if (!warned_fd_exhaustion_) {
          warned_fd_exhaustion_ = true;
          RINGCC_LOG(kWarning, "the rendezvous store cannot accept more connections: ",
                     std::strerror(err), " (raise the open files limit, ulimit -n)");
        }
        // The connection stays in the backlog; try again shortly.
        accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
        return;
      }
      raise(ErrorKind::kInternal, "accept() failed: ", std::strerror(err));
    }
    add_client(Socket(fd), sockaddr_endpoint(reinterpret_cast<const sockaddr*>(&addr)));
  }
}

void TcpStoreServer::Loop::add_client(Socket sock, const std::string& peer) {
  auto owned = std::make_unique<Client>();
  Client& c = *owned;
  c.id = next_client_id_++;
  c.sock = std::move(sock);
  c.peer = peer;
  clients_.emplace(c.id, std::move(owned));
  try {
    c.sock.set_nodelay(true);
    c.outbox.append(kMagic, sizeof(kMagic));
    c.outbox.push_back(static_cast<char>(kVersion));
    c.outbox.push_back(secret_.empty() ? 0 : 1);
    if (secret_.empty()) {
      c.authenticated = true;
    } else {
      c.server_nonce.assign(kNonceSize, '\0');
      random_bytes(&c.server_nonce[0], c.server_nonce.size());
      c.auth_deadline = Clock::now() + kHandshakeTimeout;
      c.outbox += c.server_nonce;
    }
    RINGCC_LOG(kDebug, "rendezvous store: connection from ", peer);
    flush(c);
  } catch (const std::exception& e) {
    close_client(c, LogLevel::kWarning, "closed the connection from " + peer + ": " + e.what());
  }
}

void TcpStoreServer::Loop::read_from(Client& c) {
  // Take at most a few MiB per turn so one fast sender cannot starve the others.
  size_t budget = 8 * read_buffer_.size();
  while (budget > 0) {
    ssize_t n = ::recv(c.sock.fd(), read_buffer_.data(), read_buffer_.size(), MSG_DONTWAIT);
    if (n > 0) {
      c.inbox.append(read_buffer_.data(), static_cast<size_t>(n));
      budget -= std::min(budget, static_cast<size_t>(n));
      if (c.buffered() > kMaxRequestSize) {
        close_client(c, LogLevel::kWarning,
                     "closed the connection from " + c.peer + ": it sent too much data");
        return;
      }
      continue;
    }
    if (n == 0) {
      process_inbox(c);  // apply what it sent before leaving
      close_client(c, LogLevel::kDebug, "rendezvous store: " + c.peer + " disconnected");
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    close_client(c, LogLevel::kDebug,
                 "rendezvous store: lost " + c.peer + ": " + std::strerror(errno));
    return;
  }
  process_inbox(c);
}

void TcpStoreServer::Loop::flush(Client& c) {
  while (!c.closed && c.has_output()) {
    ssize_t n = ::send(c.sock.fd(), c.outbox.data() + c.outbox_pos, c.outbox.size() - c.outbox_pos,
                       MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      c.outbox_pos += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // POLLOUT resumes
    close_client(c, LogLevel::kDebug,
                 "rendezvous store: lost " + c.peer + ": " + std::strerror(errno));
    return;
  }
  if (!c.has_output()) {
    // Give back the memory of a large reply instead of keeping it per client.
    if (c.outbox.capacity() > (1u << 20)) {
      std::string().swap(c.outbox);
    } else {
      c.outbox.clear();
    }
    c.outbox_pos = 0;
  }
}

void TcpStoreServer::Loop::process_inbox(Client& c) {
  while (!c.closed && !c.waiting) {
    bool progressed = c.authenticated ? handle_request(c) : authenticate(c);
    if (!progressed) break;
  }
  if (c.inbox_pos == c.inbox.size()) {
    if (c.inbox.capacity() > (1u << 20)) {
      std::string().swap(c.inbox);
    } else {
      c.inbox.clear();
    }
    c.inbox_pos = 0;
  } else if (c.inbox_pos > c.inbox.size() / 2) {
    c.inbox.erase(0, c.inbox_pos);
    c.inbox_pos = 0;
  }
}

bool TcpStoreServer::Loop::authenticate(Client& c) {
  if (c.buffered() < kNonceSize + sizeof(Digest)) return false;
  const std::string client_nonce(c.unread(), kNonceSize);
  Digest proof;
  std::memcpy(proof.data(), c.unread() + kNonceSize, proof.size());
  c.inbox_pos += kNonceSize + proof.size();
  if (!digest_equal(proof, store_proof(secret_, kClientProofContext, c.server_nonce, client_nonce))) {
    c.outbox.push_back(0);  // refused; sent before the close so the client can say why
    flush(c);
    close_client(c, LogLevel::kWarning,
                 "refused a connection from " + c.peer + ": authentication failed");
    return false;
  }
  c.authenticated = true;
  c.outbox.push_back(1);  // accepted, and our own proof
  const Digest ours = store_proof(secret_, kServerProofContext, c.server_nonce, client_nonce);
  c.outbox.append(reinterpret_cast<const char*>(ours.data()), ours.size());
  flush(c);
  return true;
}

bool TcpStoreServer::Loop::handle_request(Client& c) {
  if (c.buffered() < kRequestHeaderSize) return false;
  const char* header = c.unread();
  uint8_t op = static_cast<uint8_t>(header[0]);
  uint64_t key_size = load_u64(header + 1);
  uint64_t value_size = load_u64(header + 9);

  const char* problem = nullptr;
  if (op < kSet || op > kAdd) {
    problem = "unknown operation";
  } else if (key_size > kMaxKeySize) {
    problem = "key too large";
  } else if (value_size > kMaxValueSize) {
    problem = "value too large";
  } else if ((op == kGet || op == kAdd) && value_size != 8) {
    problem = "bad argument size";
  } else if (op == kTryGet && value_size != 0) {
    problem = "bad argument size";
  }
  if (problem != nullptr) {
    close_client(c, LogLevel::kWarning,
                 "closed the connection from " + c.peer + ": malformed request (" + problem + ")");
    return false;
  }

  const uint64_t total = kRequestHeaderSize + key_size + value_size;
  if (c.buffered() < total) return false;
  std::string key(header + kRequestHeaderSize, key_size);
  std::string value(header + kRequestHeaderSize + key_size, value_size);
  c.inbox_pos += total;
  execute(c, op, key, std::move(value));
  return true;
}

void TcpStoreServer::Loop::execute(Client& c, uint8_t op, const std::string& key,
                                   std::string value) {
  switch (op) {
    case kSet:
      data_[key] = std::move(value);
      reply(c, kOk, "");
      wake_waiters(key);
      return;
    case kGet: {
      auto it = data_.find(key);
      if (it != data_.end()) {
        reply(c, kOk, it->second);
        return;
      }
      int64_t timeout_ms = decode_i64(value);
      if (timeout_ms <= 0) {
        reply(c, kTimedOut, "");
      } else {
        start_waiting(c, key, timeout_ms);
      }
      return;
    }
    case kTryGet: {
      auto it = data_.find(key);
      if (it != data_.end()) {
        reply(c, kOk, it->second);
      } else {
        reply(c, kNotFound, "");
      }
      return;
    }
    case kAdd: {
      int64_t delta = decode_i64(value);
      int64_t current = 0;
      auto it = data_.find(key);
      if (it != data_.end() && !parse_counter(it->second, &current)) {
        reply(c, kFailed, "key '" + key + "' holds a value that is not an integer");
        return;
      }
      int64_t sum = 0;
      if (__builtin_add_overflow(current, delta, &sum)) {
        reply(c, kFailed, "adding " + std::to_string(delta) + " to key '" + key + "' overflows");
        return;
      }
      data_[key] = std::to_string(sum);
      reply(c, kOk, encode_i64(sum));
      wake_waiters(key);
      return;
    }
  }
}

void TcpStoreServer::Loop::reply(Client& c, Status status, const std::string& payload) {
  if (c.closed) return;
  c.outbox.push_back(static_cast<char>(status));
  put_u64(&c.outbox, payload.size());
  c.outbox += payload;
  flush(c);
}

void TcpStoreServer::Loop::start_waiting(Client& c, const std::string& key, int64_t timeout_ms) {
  c.waiting = true;
  c.waiting_key = key;
  c.waiting_until = Clock::now() + std::chrono::milliseconds(std::min(timeout_ms, kMaxWaitMs));
  waiters_[key].push_back(c.id);
}

void TcpStoreServer::Loop::stop_waiting(Client& c) {
  if (!c.waiting) return;
  c.waiting = false;
  auto it = waiters_.find(c.waiting_key);
  if (it != waiters_.end()) {
    auto& ids = it->second;
    ids.erase(std::remove(ids.begin(), ids.end(), c.id), ids.end());
    if (ids.empty()) waiters_.erase(it);
  }
  c.waiting_key.clear();
}

void TcpStoreServer::Loop::wake_waiters(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  waiters_.erase(it);
  const std::string& value = data_[key];
  for (uint64_t id : ids) {
    auto found = clients_.find(id);
    if (found == clients_.end()) continue;
    Client& waiter = *found->second;
    if (waiter.closed || !waiter.waiting) continue;
    waiter.waiting = false;
    waiter.waiting_key.clear();
    reply(waiter, kOk, value);
    // Its pipelined requests run later, not from inside this request.
    resumed_.push_back(&waiter);
  }
}

void TcpStoreServer::Loop::expire_deadlines() {
  const auto now = Clock::now();
  for (auto& entry : clients_) {
    Client& c = *entry.second;
    if (c.closed) continue;
    if (!c.authenticated && now >= c.auth_deadline) {
      close_client(c, LogLevel::kWarning,
                   "refused a connection from " + c.peer +
                       ": authentication failed (no answer within 5 s)");
    } else if (c.waiting && now >= c.waiting_until) {
      stop_waiting(c);
      reply(c, kTimedOut, "");
      resumed_.push_back(&c);
    }
  }
}

void TcpStoreServer::Loop::run_resumed_clients() {
  while (!resumed_.empty()) {
    std::vector<Client*> batch;
    batch.swap(resumed_);
    for (Client* c : batch) {
      if (c->closed) continue;
      try {
        process_inbox(*c);
      } catch (const std::exception& e) {
        close_client(*c, LogLevel::kWarning,
                     "closed the connection from " + c->peer + ": " + e.what());
      }
    }
  }
}

Deadline TcpStoreServer::Loop::next_deadline() const {
  Deadline next = Deadline::max();
  for (const auto& entry : clients_) {
    const Client& c = *entry.second;
    if (c.closed) continue;
    if (!c.authenticated) next = std::min(next, c.auth_deadline);
    if (c.waiting) next = std::min(next, c.waiting_until);
  }
  if (accept_paused_until_ > Clock::now()) next = std::min(next, accept_paused_until_);
  return next;
}

void TcpStoreServer::Loop::close_client(Client& c, LogLevel level, const std::string& why) {
  if (c.closed) return;
  if (log_enabled(level)) log_message(level, why);
  stop_waiting(c);
  c.closed = true;
  c.sock.close();
}

void TcpStoreServer::Loop::reap_closed_clients() {
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (it->second->closed) {
      it = clients_.erase(it);
    } else {
      ++it;
    }
  }
}

TcpStoreServer::TcpStoreServer(const std::string& host, int port, const std::string& secret)
    : loop_(std::make_unique<Loop>(host, port, secret)) {
  port_ = loop_->port();
  thread_ = std::thread([this] { loop_->run(); });
}

TcpStoreServer::~TcpStoreServer() {
  loop_->stop();
  if (thread_.joinable()) thread_.join();
}

// ===========================================================================
// Client
// ===========================================================================

TcpStore::TcpStore(const std::string& host, int port, const std::string& secret,
                   Deadline connect_deadline)
    : host_(host),
      port_(port),
      secret_(secret),
      who_("the rendezvous store at " + endpoint_text(host, port) + " (rank 0)"),
      io_timeout_s_(timeout_seconds()) {
  // A store that is shutting down (a previous job on the same port) may
  // accept and then drop us before its greeting, or leave a connection it
  // was accepting half-open when a new store binds the port at once (no
  // greeting ever comes): try again until the deadline, with a short wait
  // for the greeting that grows for a slow server.
  Socket conn;
  auto greeting_wait = std::chrono::milliseconds(1000);
  for (;;) {
    bool greeted = false;
    try {
      conn = open_connection(connect_deadline, &greeted, std::chrono::milliseconds::max(), greeting_wait);
      break;
    } catch (const Error& e) {
      const bool retry = e.kind() == ErrorKind::kPeerFailure || e.kind() == ErrorKind::kTimeout;
      if (greeted || !retry || Clock::now() >= connect_deadline) throw;
      greeting_wait = std::min(greeting_wait * 2, std::chrono::milliseconds(kHandshakeTimeout));
      poll_interrupt();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  local_address_ = conn.local_address();
  idle_.push_back(std::move(conn));
}

TcpStore::~TcpStore() = default;

std::string TcpStore::address() const { return endpoint_text(host_, port_); }

Socket TcpStore::open_connection(Deadline deadline, bool* greeted,
                                 std::chrono::milliseconds refused_limit,
                                 std::chrono::milliseconds greeting_wait) const {
  Socket conn = Socket::connect(host_, port_, deadline, refused_limit);
  conn.set_nodelay(true);
  // The handshake gets its own few seconds even if connecting took until
  // the deadline.
  const Deadline handshake_deadline = std::max(deadline, Clock::now() + kHandshakeTimeout);
  const Deadline greeting_deadline =
      greeting_wait == std::chrono::milliseconds::max()
          ? handshake_deadline
          : std::min(handshake_deadline, Clock::now() + greeting_wait);

  char greeting[kGreetingSize];
  conn.recv_all(greeting, sizeof(greeting), greeting_deadline, who_);
  if (greeted) *greeted = true;
  RINGCC_CHECK(std::memcmp(greeting, kMagic, sizeof(kMagic)) == 0 &&
                   static_cast<uint8_t>(greeting[4]) == kVersion,
               ErrorKind::kPeerFailure, address(),
               " is not a ringcc rendezvous store of this version (unexpected greeting)");
  const bool server_wants_secret = greeting[5] != 0;
  if (!server_wants_secret) {
    RINGCC_CHECK(secret_.empty(), ErrorKind::kPeerFailure, "the rendezvous store at ", address(),
                 " does not use a secret but RINGCC_SECRET is set here (RINGCC_SECRET differs?)");
    return conn;
  }

  std::string server_nonce(kNonceSize, '\0');
  conn.recv_all(&server_nonce[0], server_nonce.size(), handshake_deadline, who_);
  std::string client_nonce(kNonceSize, '\0');
  random_bytes(&client_nonce[0], client_nonce.size());
  const Digest proof = store_proof(secret_, kClientProofContext, server_nonce, client_nonce);
  std::string answer = client_nonce;
  answer.append(reinterpret_cast<const char*>(proof.data()), proof.size());
  conn.send_all(answer.data(), answer.size(), handshake_deadline, who_);
  uint8_t verdict = 0;
  try {
    conn.recv_all(&verdict, 1, handshake_deadline, who_);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kPeerFailure) throw;
    raise(ErrorKind::kPeerFailure, "the rendezvous store at ", address(),
          " closed the connection while authenticating us (RINGCC_SECRET differs?)");
  }
  RINGCC_CHECK(verdict == 1, ErrorKind::kPeerFailure, "the rendezvous store at ", address(),
               " refused our credentials (RINGCC_SECRET differs?",
               secret_.empty() ? " it is not set here)" : ")");
  // The store proves in turn that it knows the secret: a process that took
  // the port first cannot pose as rank 0's store.
  Digest server_proof;
  conn.recv_all(server_proof.data(), server_proof.size(), handshake_deadline, who_);
  RINGCC_CHECK(digest_equal(server_proof,
                            store_proof(secret_, kServerProofContext, server_nonce, client_nonce)),
               ErrorKind::kPeerFailure, "the process at ", address(),
               " could not prove that it knows the job secret: it is not this job's rendezvous "
               "store");
  return conn;
}

Socket TcpStore::checkout() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.empty()) raise(ErrorKind::kPeerFailure, failure_);
    if (!idle_.empty()) {
      Socket conn = std::move(idle_.back());
      idle_.pop_back();
      return conn;
    }
  }
  // Every connection is busy (another thread waits in get()): open one more.
  // The store was reached before, so a port that keeps refusing means rank 0
  // has exited: fail within a moment rather than at the timeout.
  try {
    return open_connection(deadline_after(io_timeout_s_), nullptr, kRefusedMeansGone);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kPeerFailure) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure_.empty()) failure_ = e.what();
    }
    throw;
  }
}

void TcpStore::checkin(Socket conn) {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(std::move(conn));
}

TcpStore::Reply TcpStore::request(uint8_t op, const std::string& key, const std::string& value,
                                  Deadline deadline) {
  RINGCC_CHECK(key.size() <= kMaxKeySize, ErrorKind::kInvalidArgument,
               "a rendezvous store key must be at most ", kMaxKeySize, " bytes, got ", key.size());
  RINGCC_CHECK(value.size() <= kMaxValueSize, ErrorKind::kInvalidArgument,
               "a rendezvous store value must be at most ", kMaxValueSize, " bytes, got ",
               value.size());
  Socket conn = checkout();
  Reply reply;
  try {
    std::string message;
    message.push_back(static_cast<char>(op));
    put_u64(&message, key.size());
    put_u64(&message, value.size());
    message += key;
    // Large values go out directly rather than through a copy.
    const bool inline_value = value.size() <= 64 * 1024;
    if (inline_value) message += value;
    conn.send_all(message.data(), message.size(), deadline, who_);
    if (!inline_value) conn.send_all(value.data(), value.size(), deadline, who_);

    char header[kReplyHeaderSize];
    conn.recv_all(header, sizeof(header), deadline, who_);
    reply.status = static_cast<uint8_t>(header[0]);
    uint64_t size = load_u64(header + 1);
    RINGCC_CHECK(size <= kMaxValueSize + kMaxKeySize, ErrorKind::kInternal, who_,
                 " sent a malformed reply");
    reply.payload.resize(size);
    conn.recv_all(&reply.payload[0], size, deadline, who_);
    // Only a connection whose exchange completed goes back to the pool; one
    // that failed midway is out of step with the server and is dropped.
    checkin(std::move(conn));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kPeerFailure) throw;
    // Closed or reset: either way the store is gone (rank 0 died or shut
    // down). Later requests fail fast with the same message.
    std::string why = who_ + " closed the connection";
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure_.empty()) failure_ = why;
    }
    raise(ErrorKind::kPeerFailure, why);
  }
  if (reply.status == kFailed) raise(ErrorKind::kInvalidArgument, reply.payload);
  return reply;
}

void TcpStore::set(const std::string& key, const std::string& value) {
  Reply reply = request(kSet, key, value, deadline_after(io_timeout_s_));
  RINGCC_CHECK(reply.status == kOk, ErrorKind::kInternal, who_, " answered a set with status ",
               int(reply.status));
}

std::string TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const int64_t timeout_ms = std::clamp<int64_t>(timeout.count(), 0, kMaxWaitMs);
  auto raise_timeout = [&] {
    // The job's per-rank keys end in the rank that posts them: name it.
    const size_t slash = key.rfind('/');
    const std::string last = slash == std::string::npos ? "" : key.substr(slash + 1);
    const bool per_rank = !last.empty() && last.size() < 10 &&
                          last.find_first_not_of("0123456789") == std::string::npos;
    raise(ErrorKind::kTimeout, "timed out after ", format_seconds(timeout_ms / 1000.0),
          " s waiting for key '", key, "' in the rendezvous store at ", address(),
          per_rank ? " (rank " + last + " posts it: it exited, crashed, hangs or never got there)" : "");
  };
  Reply reply;
  try {
    Deadline deadline = Clock::now() + std::chrono::milliseconds(timeout_ms) + kGetReplyGrace;
    reply = request(kGet, key, encode_i64(timeout_ms), deadline);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kTimeout) raise_timeout();
    throw;
  }
  if (reply.status == kTimedOut) raise_timeout();
  RINGCC_CHECK(reply.status == kOk, ErrorKind::kInternal, who_, " answered a get with status ",
               int(reply.status));
  return std::move(reply.payload);
}

bool TcpStore::try_get(const std::string& key, std::string* value) {
  Reply reply = request(kTryGet, key, "", deadline_after(io_timeout_s_));
  if (reply.status == kNotFound) return false;
  RINGCC_CHECK(reply.status == kOk, ErrorKind::kInternal, who_, " answered a try_get with status ",
               int(reply.status));
  if (value != nullptr) *value = std::move(reply.payload);
  return true;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  Reply reply = request(kAdd, key, encode_i64(delta), deadline_after(io_timeout_s_));
  RINGCC_CHECK(reply.status == kOk && reply.payload.size() == 8, ErrorKind::kInternal, who_,
               " answered an add with status ", int(reply.status));
  return decode_i64(reply.payload);
}

}  // namespace ringcc
