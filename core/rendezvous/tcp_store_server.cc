#include "core/rendezvous/tcp_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/log.h"
#include "core/base/sha256.h"
#include "core/base/thread_name.h"
#include "core/base/wire.h"
#include "core/rendezvous/tcp_store_protocol.h"

namespace ringcc {

using namespace store_protocol;  // NOLINT(build/namespaces)

namespace {

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
  // Closes a client that misbehaved, with a warning (rate-limited).
  void drop_client(Client& c, const char* what, const std::string& why);
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
          drop_client(c, "closed the connection from", e.what());
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
    int fd = ::accept4(listener_.fd(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
          RINGCC_LOG(kWarning, "the rendezvous store cannot accept more connections: ", std::strerror(err),
                     " (raise the open files limit, ulimit -n)");
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
    drop_client(c, "closed the connection from", e.what());
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
        drop_client(c, "closed the connection from", "it sent too much data");
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
    close_client(c, LogLevel::kDebug, "rendezvous store: lost " + c.peer + ": " + std::strerror(errno));
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
    close_client(c, LogLevel::kDebug, "rendezvous store: lost " + c.peer + ": " + std::strerror(errno));
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
    drop_client(c, "refused a connection from", "authentication failed");
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
    drop_client(c, "closed the connection from", std::string("malformed request (") + problem + ")");
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

void TcpStoreServer::Loop::execute(Client& c, uint8_t op, const std::string& key, std::string value) {
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
      drop_client(c, "refused a connection from", "authentication failed (no answer within 5 s)");
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
        drop_client(*c, "closed the connection from", e.what());
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

void TcpStoreServer::Loop::drop_client(Client& c, const char* what, const std::string& why) {
  // Strangers may connect as often as they like: one line per source
  // address and reason every few seconds, with a count.
  log_limited(LogLevel::kWarning, endpoint_host(c.peer) + " " + what + " " + why,
              std::string(what) + " " + c.peer + ": " + why);
  close_client(c, LogLevel::kDebug, "");
}

void TcpStoreServer::Loop::close_client(Client& c, LogLevel level, const std::string& why) {
  if (c.closed) return;
  if (!why.empty() && log_enabled(level)) log_message(level, why);
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
  thread_ = std::thread([this] {
    name_this_thread("ringcc-store");
    loop_->run();
  });
}

TcpStoreServer::~TcpStoreServer() {
  loop_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ringcc
