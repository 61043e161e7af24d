#include "core/tcp_transport.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"

namespace ringcc {

namespace {

constexpr char kMagic[4] = {'R', 'C', 'C', '1'};
constexpr size_t kNonceBytes = 32;
constexpr double kHandshakeSeconds = 5.0;

Digest link_proof(const std::string& secret, const uint8_t* nonce, int32_t acceptor,
                  int32_t connector, int32_t index) {
  std::string msg = "ringcc-link";
  msg.append(reinterpret_cast<const char*>(nonce), kNonceBytes);
  msg.append(reinterpret_cast<const char*>(&acceptor), sizeof(acceptor));
  msg.append(reinterpret_cast<const char*>(&connector), sizeof(connector));
  msg.append(reinterpret_cast<const char*>(&index), sizeof(index));
  return hmac_sha256(secret, msg.data(), msg.size());
}

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

}  // namespace

// A contiguous byte range queued on one socket, in one direction.
struct TcpTransport::Piece {
  uint8_t* ptr;
  size_t left;
  bool done = false;
};

// The sockets to one peer and, per socket, the FIFO of pieces in flight.
struct TcpTransport::Link {
  int peer;
  std::vector<Socket> sockets;
  std::vector<std::deque<std::shared_ptr<Piece>>> send_q;
  std::vector<std::deque<std::shared_ptr<Piece>>> recv_q;
  uint64_t send_offset = 0;  // bytes queued so far on the outgoing stream
  uint64_t recv_offset = 0;  // bytes asked for so far on the incoming stream
  bool failed = false;
  std::string failure;

  [[noreturn]] void fail(const std::string& why) {
    failed = true;
    failure = why;
    raise(ErrorKind::kPeerFailure, why);
  }

  void check() {
    if (failed) raise(ErrorKind::kPeerFailure, failure);
  }

  // Moves bytes on socket i until the kernel would block.
  void pump_send(size_t i) {
    auto& q = send_q[i];
    while (!q.empty()) {
      Piece& p = *q.front();
      while (p.left > 0) {
        ssize_t n = ::send(sockets[i].fd(), p.ptr, p.left, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
          p.ptr += n;
          p.left -= static_cast<size_t>(n);
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0 && errno == EINTR) continue;
        fail(rank_name(peer) + " closed the connection while we were sending to it (" +
             std::strerror(errno) + "); it may have exited or crashed");
      }
      p.done = true;
      q.pop_front();
    }
  }

  void pump_recv(size_t i) {
    auto& q = recv_q[i];
    while (!q.empty()) {
      Piece& p = *q.front();
      while (p.left > 0) {
        ssize_t n = ::recv(sockets[i].fd(), p.ptr, p.left, MSG_DONTWAIT);
        if (n > 0) {
          p.ptr += n;
          p.left -= static_cast<size_t>(n);
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) fail(rank_name(peer) + " closed the connection; it may have exited or crashed");
        fail(rank_name(peer) + " reset the connection (" + std::strerror(errno) + ")");
      }
      p.done = true;
      q.pop_front();
    }
  }
};

namespace {

class TcpRequest : public Request {
 public:
  TcpRequest(TcpTransport::Link* link, bool is_send) : link_(link), is_send_(is_send) {}

  void add(size_t socket, std::shared_ptr<TcpTransport::Piece> piece) {
    sockets_.push_back(socket);
    pieces_.push_back(std::move(piece));
  }

  bool progress() override {
    if (complete_) return true;
    link_->check();
    bool all = true;
    for (size_t k = 0; k < pieces_.size(); ++k) {
      if (pieces_[k]->done) continue;
      if (is_send_) link_->pump_send(sockets_[k]); else link_->pump_recv(sockets_[k]);
      all = all && pieces_[k]->done;
    }
    complete_ = all;
    return all;
  }

  void block(int timeout_ms) override {
    std::vector<pollfd> fds;
    for (size_t k = 0; k < pieces_.size(); ++k) {
      if (pieces_[k]->done) continue;
      fds.push_back({link_->sockets[sockets_[k]].fd(),
                     static_cast<short>(is_send_ ? POLLOUT : POLLIN), 0});
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), timeout_ms);
  }

  bool add_pollfds(std::vector<pollfd>* fds) override {
    for (size_t k = 0; k < pieces_.size(); ++k) {
      if (pieces_[k]->done) continue;
      fds->push_back({link_->sockets[sockets_[k]].fd(),
                      static_cast<short>(is_send_ ? POLLOUT : POLLIN), 0});
    }
    return true;
  }

  int peer() const override { return link_->peer; }

 private:
  TcpTransport::Link* link_;
  bool is_send_;
  bool complete_ = false;
  std::vector<size_t> sockets_;
  std::vector<std::shared_ptr<TcpTransport::Piece>> pieces_;
};

}  // namespace

int TcpTransport::sockets_from_env() {
  // One socket per peer: the waiting thread drives every socket, so more
  // add no parallelism; over loopback two cost 10-20% of the busbw.
  return static_cast<int>(std::clamp<int64_t>(env_int("RINGCC_TCP_SOCKETS", 1), 1, 16));
}

uint64_t TcpTransport::stripe_bytes_from_env() {
  // 512 KiB: a ring chunk (RINGCC_CHUNK_BYTES, 1 MiB) spans two stripes.
  // 128 KiB stripes cost a third of the loopback busbw at 1 MiB
  // (more, smaller receives and a socket switch every 128 KiB).
  return static_cast<uint64_t>(
      std::max<int64_t>(env_int("RINGCC_TCP_STRIPE_BYTES", 512 << 10), 1024));
}

TcpTransport::TcpTransport(int rank, int size, std::string secret)
    : rank_(rank),
      size_(size),
      secret_(std::move(secret)),
      sockets_per_peer_(sockets_from_env()),
      stripe_bytes_(stripe_bytes_from_env()),
      listener_(Socket::listen(env_str("RINGCC_LISTEN_ADDR", ""), 0)),
      links_(size) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    auto link = std::make_unique<Link>();
    link->peer = peer;
    link->sockets.resize(static_cast<size_t>(sockets_per_peer_));
    link->send_q.resize(static_cast<size_t>(sockets_per_peer_));
    link->recv_q.resize(static_cast<size_t>(sockets_per_peer_));
    links_[peer] = std::move(link);
  }
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpTransport::~TcpTransport() {
  stopping_ = true;
  if (acceptor_.joinable()) acceptor_.join();
}

void TcpTransport::accept_loop() {
  while (!stopping_) {
    std::string from;
    Socket sock = listener_.accept(deadline_after(0.1), &from);
    if (!sock.valid()) continue;
    handshake_incoming(std::move(sock), from);
  }
}

void TcpTransport::handshake_incoming(Socket sock, const std::string& from) {
  auto refuse = [&](const std::string& why) {
    ++refused_;
    RINGCC_LOG(kWarning, "refused a connection from ", from, ": ", why);
  };
  try {
    Deadline deadline = deadline_after(kHandshakeSeconds);
    uint8_t nonce[kNonceBytes];
    random_bytes(nonce, sizeof(nonce));
    int32_t me = rank_;
    std::string greeting(kMagic, 4);
    greeting.append(reinterpret_cast<const char*>(nonce), sizeof(nonce));
    greeting.append(reinterpret_cast<const char*>(&me), sizeof(me));
    sock.send_all(greeting.data(), greeting.size(), deadline, "a connecting peer");

    char magic[4];
    int32_t peer = -1, index = -1;
    Digest proof;
    sock.recv_all(magic, sizeof(magic), deadline, "a connecting peer");
    if (std::memcmp(magic, kMagic, 4) != 0) return refuse("not a ringcc peer (bad greeting)");
    sock.recv_all(&peer, sizeof(peer), deadline, "a connecting peer");
    sock.recv_all(&index, sizeof(index), deadline, "a connecting peer");
    sock.recv_all(proof.data(), proof.size(), deadline, "a connecting peer");
    if (peer < 0 || peer >= size_ || index < 0 || index >= sockets_per_peer_) {
      return refuse("claims an impossible rank or socket index");
    }
    if (!digest_equal(proof, link_proof(secret_, nonce, me, peer, index))) {
      return refuse("authentication failed (wrong job secret), claimed rank " +
                    std::to_string(peer));
    }
    // Only higher ranks connect to us; each socket slot is taken once.
    std::unique_lock<std::mutex> lock(mu_);
    Link* link = links_[peer].get();
    if (peer <= rank_ || link->sockets[static_cast<size_t>(index)].valid()) {
      lock.unlock();
      return refuse("unexpected or duplicate connection claiming rank " + std::to_string(peer));
    }
    uint8_t ok = 1;
    sock.send_all(&ok, 1, deadline, rank_name(peer));
    sock.set_nodelay(true);
    sock.set_nonblocking(true);
    link->sockets[static_cast<size_t>(index)] = std::move(sock);
    cv_.notify_all();
  } catch (const Error& e) {
    refuse(e.what());
  }
}

void TcpTransport::connect(const std::vector<int>& peers,
                           const std::vector<TcpPeerAddress>& addresses, Deadline deadline) {
  const int buffer_bytes = static_cast<int>(env_int("RINGCC_TCP_BUFFER_BYTES", 4 << 20));
  // We connect to lower ranks; higher ranks connect to us.
  for (int peer : peers) {
    if (peer >= rank_) continue;
    const TcpPeerAddress& addr = addresses[static_cast<size_t>(peer)];
    for (int index = 0; index < sockets_per_peer_; ++index) {
      Socket sock = Socket::connect(addr.host, addr.port, deadline);
      sock.set_buffer_sizes(buffer_bytes);
      Deadline hs = std::min(deadline, deadline_after(kHandshakeSeconds * 2));
      char magic[4];
      uint8_t nonce[kNonceBytes];
      int32_t acceptor = -1;
      std::string who = rank_name(peer) + " at " + addr.host + ":" + std::to_string(addr.port);
      sock.recv_all(magic, 4, hs, who);
      sock.recv_all(nonce, sizeof(nonce), hs, who);
      sock.recv_all(&acceptor, sizeof(acceptor), hs, who);
      if (std::memcmp(magic, kMagic, 4) != 0 || acceptor != peer) {
        raise(ErrorKind::kPeerFailure, "the process at ", addr.host, ":", addr.port,
              " is not ringcc ", rank_name(peer), " of this job");
      }
      int32_t me = rank_, idx = index;
      Digest proof = link_proof(secret_, nonce, acceptor, me, idx);
      std::string answer(kMagic, 4);
      answer.append(reinterpret_cast<const char*>(&me), sizeof(me));
      answer.append(reinterpret_cast<const char*>(&idx), sizeof(idx));
      answer.append(reinterpret_cast<const char*>(proof.data()), proof.size());
      sock.send_all(answer.data(), answer.size(), hs, who);
      uint8_t ok = 0;
      try {
        sock.recv_all(&ok, 1, hs, who);
      } catch (const Error&) {
        ok = 0;
      }
      if (ok != 1) {
        raise(ErrorKind::kPeerFailure, who, " refused our connection: the job secret differs",
              " (RINGCC_SECRET) or the rank is already connected");
      }
      sock.set_nodelay(true);
      sock.set_nonblocking(true);
      std::lock_guard<std::mutex> lock(mu_);
      links_[peer]->sockets[static_cast<size_t>(index)] = std::move(sock);
    }
  }
  auto missing = [&] {
    std::string out;
    for (int peer : peers) {
      if (peer <= rank_) continue;
      for (const auto& sock : links_[peer]->sockets) {
        if (!sock.valid()) {
          out += (out.empty() ? "" : ", ") + std::to_string(peer);
          break;
        }
      }
    }
    return out;
  };
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return missing().empty(); })) {
    raise(ErrorKind::kTimeout, "timed out after ", timeout_seconds(),
          " s waiting for rank(s) ", missing(), " to connect over TCP");
  }
  connected_.assign(static_cast<size_t>(size_), false);
  for (int peer : peers) connected_[static_cast<size_t>(peer)] = true;
  for (auto& link : links_) {
    if (!link) continue;
    for (auto& s : link->sockets) s.set_buffer_sizes(buffer_bytes);
  }
}

bool TcpTransport::reaches(int peer) const {
  return peer >= 0 && peer < size_ && peer < static_cast<int>(connected_.size()) &&
         connected_[static_cast<size_t>(peer)];
}

// A peer's sockets carry one logical byte stream per direction: stream
// offset o travels on socket (o / stripe) % sockets. Both ends derive the
// same mapping from offsets alone, so message boundaries need not match
// between sender and receiver.
std::unique_ptr<Request> TcpTransport::post(int peer, uint8_t* data, size_t size, bool is_send,
                                            const MemoryContext& mem) {
  RINGCC_CHECK(mem.kind == MemoryKind::kHost, ErrorKind::kInvalidArgument,
               "the TCP transport carries host memory only");
  RINGCC_CHECK(reaches(peer), ErrorKind::kInternal, "no TCP connection to rank ", peer);
  Link* link = links_[peer].get();
  link->check();
  auto req = std::make_unique<TcpRequest>(link, is_send);
  uint64_t& offset = is_send ? link->send_offset : link->recv_offset;
  auto& queues = is_send ? link->send_q : link->recv_q;
  const size_t sockets = link->sockets.size();
  size_t done = 0;
  while (done < size) {
    const uint64_t unit = offset / stripe_bytes_;
    const size_t socket = static_cast<size_t>(unit % sockets);
    const size_t take = static_cast<size_t>(
        std::min<uint64_t>(size - done, (unit + 1) * stripe_bytes_ - offset));
    auto piece = std::make_shared<Piece>(Piece{data + done, take});
    queues[socket].push_back(piece);
    req->add(socket, std::move(piece));
    done += take;
    offset += take;
  }
  return req;
}

std::unique_ptr<Request> TcpTransport::isend(int peer, const void* data, size_t size,
                                             const MemoryContext& mem) {
  return post(peer, static_cast<uint8_t*>(const_cast<void*>(data)), size, true, mem);
}

std::unique_ptr<Request> TcpTransport::irecv(int peer, void* data, size_t size,
                                             const MemoryContext& mem) {
  return post(peer, static_cast<uint8_t*>(data), size, false, mem);
}

void TcpTransport::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& link : links_) {
    if (!link) continue;
    for (auto& s : link->sockets) {
      if (s.valid()) ::shutdown(s.fd(), SHUT_RDWR);
    }
    link->failed = true;
    link->failure = "this rank aborted: " + reason;
  }
}

}  // namespace ringcc
