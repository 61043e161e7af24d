#include "core/transport/tcp_transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/log.h"
#include "core/base/sha256.h"
#include "core/base/thread_name.h"

namespace ringcc {

namespace {

// The link handshake (mutual HMAC-SHA-256 with the job secret; integers
// little-endian):
//   acceptor -> connector: "RCC2" | i32 acceptor rank | 32-byte acceptor nonce
//   connector -> acceptor: "RCC2" | i32 connector rank | i32 socket index |
//                          32-byte connector nonce | connector proof
//   acceptor -> connector: u8 1 | acceptor proof   (or it closes: refused)
// Each proof is HMAC(secret, role || job id || both ranks || socket index ||
// both nonces), with the role naming the side that sends it, so a proof is
// good for one connection of one job only: it cannot be replayed (the other
// side's nonce is fresh), reflected (the roles differ) or carried to another
// communicator (the job id differs). The connector checks the acceptor's
// proof too, so a process that took a peer's address cannot pose as it.
constexpr char kMagic[4] = {'R', 'C', 'C', '2'};
constexpr size_t kNonceBytes = 32;
constexpr size_t kGreetingBytes = 4 + 4 + kNonceBytes;
constexpr size_t kClaimBytes = 4 + 4 + 4 + kNonceBytes + sizeof(Digest);
constexpr double kHandshakeSeconds = 5.0;
// Connections still authenticating; more wait in the listen backlog.
constexpr size_t kMaxPendingHandshakes = 64;

void put_i32(std::string* out, int32_t v) {
  const uint32_t u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(u >> (8 * i)));
}

int32_t get_i32(const char* p) {
  uint32_t u = 0;
  for (int i = 0; i < 4; ++i) u |= uint32_t(static_cast<uint8_t>(p[i])) << (8 * i);
  return static_cast<int32_t>(u);
}

std::string fresh_nonce() {
  std::string nonce(kNonceBytes, '\0');
  random_bytes(&nonce[0], nonce.size());
  return nonce;
}

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

}  // namespace

Digest link_proof(const std::string& secret, const char* role, const std::string& job_id, int32_t acceptor,
                  int32_t connector, int32_t index, const std::string& acceptor_nonce,
                  const std::string& connector_nonce) {
  std::string msg(role);
  msg.push_back('\0');
  put_i32(&msg, static_cast<int32_t>(job_id.size()));
  msg += job_id;
  put_i32(&msg, acceptor);
  put_i32(&msg, connector);
  put_i32(&msg, index);
  msg += acceptor_nonce;
  msg += connector_nonce;
  return hmac_sha256(secret, msg.data(), msg.size());
}

// A connection accepted by the listener that has not proven itself yet.
struct TcpTransport::PendingHandshake {
  Socket sock;
  std::string from;   // "ip:port", for log messages
  std::string nonce;  // ours, sent in the greeting
  std::string inbox;  // the connector's claim as it arrives
  Deadline deadline;
};

// A contiguous byte range queued on one socket, in one direction.
struct TcpTransport::Piece {
  uint8_t* ptr;
  size_t left;
  bool done = false;
};

// The sockets to one peer and, per socket, the FIFO of pieces in flight.
// Two streams each way: the shared one on sockets [0, stripes) both ways,
// and the one-way one, the higher rank's on [stripes, 2 stripes) and the
// lower rank's on [2 stripes, 3 stripes), so that each of those sockets
// carries data one way only (and has a congestion control of its own:
// choose_congestion_control).
struct TcpTransport::Link {
  // Bytes read from a socket ahead of the pieces that want them.
  struct Staged {
    std::vector<uint8_t> buf;  // allocated when a socket first reads ahead
    size_t begin = 0, end = 0;
  };

  int peer;
  std::vector<Socket> sockets;
  std::vector<std::deque<std::shared_ptr<Piece>>> send_q;
  std::vector<std::deque<std::shared_ptr<Piece>>> recv_q;
  std::vector<Staged> staged;  // per socket
  std::vector<size_t> send_sockets[kStreams];  // each stream's sockets, in striping order
  std::vector<size_t> recv_sockets[kStreams];
  uint64_t send_offset[kStreams] = {};  // bytes queued so far on each outgoing stream
  uint64_t recv_offset[kStreams] = {};  // bytes asked for so far on each incoming stream
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
        fail(rank_name(peer) + " closed the connection while we were sending to it (" + std::strerror(errno) +
             "); it may have exited or crashed");
      }
      p.done = true;
      q.pop_front();
    }
  }

  // A piece shorter than kReadAheadBytes is read through the socket's
  // staging buffer, taking whatever has arrived (up to kReadAheadBytes):
  // the pieces that follow it on the stream (a frame's prefix, its
  // headers, its payload) are then often there already, and take no
  // system call of their own. Longer pieces are read in place.
  static constexpr size_t kReadAheadBytes = 4 << 10;

  void take_staged(Staged& st, Piece& p) {
    const size_t k = std::min(p.left, st.end - st.begin);
    std::memcpy(p.ptr, st.buf.data() + st.begin, k);
    st.begin += k;
    p.ptr += k;
    p.left -= k;
  }

  void pump_recv(size_t i) {
    auto& q = recv_q[i];
    Staged& st = staged[i];
    while (!q.empty()) {
      Piece& p = *q.front();
      if (st.begin < st.end) take_staged(st, p);
      while (p.left > 0) {
        const bool ahead = p.left < kReadAheadBytes;
        if (ahead && st.buf.empty()) st.buf.resize(kReadAheadBytes);
        ssize_t n = ahead ? ::recv(sockets[i].fd(), st.buf.data(), st.buf.size(), MSG_DONTWAIT)
                          : ::recv(sockets[i].fd(), p.ptr, p.left, MSG_DONTWAIT);
        if (n > 0 && ahead) {
          st.begin = 0;
          st.end = static_cast<size_t>(n);
          take_staged(st, p);
          continue;
        }
        if (n > 0) {
          p.ptr += n;
          p.left -= static_cast<size_t>(n);
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) {
          fail(rank_name(peer) + " closed the connection (it shut ringcc down, exited or crashed)");
        }
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
      if (is_send_)
        link_->pump_send(sockets_[k]);
      else
        link_->pump_recv(sockets_[k]);
      all = all && pieces_[k]->done;
    }
    complete_ = all;
    return all;
  }

  void block(int timeout_ms) override {
    std::vector<pollfd> fds;
    for (size_t k = 0; k < pieces_.size(); ++k) {
      if (pieces_[k]->done) continue;
      fds.push_back({link_->sockets[sockets_[k]].fd(), static_cast<short>(is_send_ ? POLLOUT : POLLIN), 0});
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), timeout_ms);
  }

  bool add_pollfds(std::vector<pollfd>* fds) override {
    for (size_t k = 0; k < pieces_.size(); ++k) {
      if (pieces_[k]->done) continue;
      fds->push_back({link_->sockets[sockets_[k]].fd(), static_cast<short>(is_send_ ? POLLOUT : POLLIN), 0});
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

// RINGCC_TCP_CONGESTION: the congestion control of the one-way streams'
// sockets, which carry bursts under RINGCC_TCP_ONE_WAY_BYTES. "auto"
// (default) keeps the kernel's choice unless it paces (bbr), and then
// asks for reno. A pacing sender transmits from its pacing timer on
// whichever CPU that fires, besides the sending thread's CPU and the one
// that processes acknowledgements; packets of one connection then reach
// the receiver out of order (veth, per-CPU backlogs), and the sender
// retransmits what was only late. Across namespace hosts on 2 CPUs, bbr
// left the 2-rank 1 MiB allreduce at 488-769 us against 264-275 with
// reno, which retransmitted nothing. Long transfers went the other way
// (a 64 MiB allreduce 44 ms with bbr, 66-68 with reno, which halves its
// window on every reordering it takes for a loss), so the shared stream,
// which carries them, keeps the kernel's choice. "system" keeps it on
// every socket; any other value names the one to ask for. Returns the one
// in use.
std::string choose_congestion_control(Socket& sock, const std::string& setting) {
  const std::string kernel_choice = sock.congestion_control();
  if (setting == "system") return kernel_choice;
  std::string wanted = setting;
  if (setting == "auto") {
    if (kernel_choice.rfind("bbr", 0) != 0) return kernel_choice;
    wanted = "reno";
  }
  if (sock.set_congestion_control(wanted)) return wanted;
  log_limited(LogLevel::kWarning, "tcp-congestion",
              "the kernel refused congestion control '" + wanted + "' (RINGCC_TCP_CONGESTION=" + setting +
                  "): not built in, or not in net.ipv4.tcp_allowed_congestion_control; keeping '" + kernel_choice +
                  "'");
  return kernel_choice;
}

}  // namespace

int TcpTransport::sockets_from_env() {
  // One socket per stream: the waiting thread drives every socket, so more
  // add no parallelism; over loopback two cost 10-20% of the busbw.
  return static_cast<int>(std::clamp<int64_t>(env_int("RINGCC_TCP_SOCKETS", 1), 1, 16));
}

int TcpTransport::sockets_per_peer_from_env() { return 3 * sockets_from_env(); }

uint64_t TcpTransport::stripe_bytes_from_env() {
  // 512 KiB: a ring chunk (RINGCC_CHUNK_BYTES, 1 MiB) spans two stripes.
  // 128 KiB stripes cost a third of the loopback busbw at 1 MiB
  // (more, smaller receives and a socket switch every 128 KiB).
  return static_cast<uint64_t>(std::max<int64_t>(env_int("RINGCC_TCP_STRIPE_BYTES", 512 << 10), 1024));
}

// The transport seen through its one-way streams.
class TcpTransport::OneWay : public Transport {
 public:
  explicit OneWay(TcpTransport* t) : t_(t) {}
  const char* name() const override { return t_->name(); }
  bool reaches(int peer) const override { return t_->reaches(peer); }
  std::unique_ptr<Request> isend(int peer, const void* data, size_t size) override {
    return t_->post(peer, static_cast<uint8_t*>(const_cast<void*>(data)), size, true, kOneWayStream);
  }
  std::unique_ptr<Request> irecv(int peer, void* data, size_t size) override {
    return t_->post(peer, static_cast<uint8_t*>(data), size, false, kOneWayStream);
  }
  void abort(const std::string& reason) override { t_->abort(reason); }
  void leave() override { t_->leave(); }

 private:
  TcpTransport* t_;
};

TcpTransport::TcpTransport(int rank, int size, std::string secret, std::string job_id, const std::string& listen_host)
    : rank_(rank),
      size_(size),
      secret_(std::move(secret)),
      job_id_(std::move(job_id)),
      stripes_(sockets_from_env()),
      sockets_per_peer_(sockets_per_peer_from_env()),
      stripe_bytes_(stripe_bytes_from_env()),
      listener_(Socket::listen(listen_host, 0)),
      one_way_(std::make_unique<OneWay>(this)),
      links_(size) {
  listener_.set_nonblocking(true);
  raise_open_files_limit();  // sockets to every peer, two or more each
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    auto link = std::make_unique<Link>();
    link->peer = peer;
    link->sockets.resize(static_cast<size_t>(sockets_per_peer_));
    link->send_q.resize(static_cast<size_t>(sockets_per_peer_));
    link->recv_q.resize(static_cast<size_t>(sockets_per_peer_));
    link->staged.resize(static_cast<size_t>(sockets_per_peer_));
    const size_t stripes = static_cast<size_t>(stripes_);
    const size_t higher_way = stripes, lower_way = 2 * stripes;  // where each rank's one-way stream starts
    for (size_t i = 0; i < stripes; ++i) {
      link->send_sockets[kSharedStream].push_back(i);
      link->recv_sockets[kSharedStream].push_back(i);
      link->send_sockets[kOneWayStream].push_back((rank_ < peer ? lower_way : higher_way) + i);
      link->recv_sockets[kOneWayStream].push_back((rank_ < peer ? higher_way : lower_way) + i);
    }
    links_[peer] = std::move(link);
  }
  acceptor_ = std::thread([this] {
    name_this_thread("ringcc-accept");
    accept_loop();
  });
}

TcpTransport::~TcpTransport() {
  stopping_ = true;
  if (acceptor_.joinable()) acceptor_.join();
}

// One poll() loop over the listener and every connection still
// authenticating, so a stranger that connects and stays silent holds up
// nobody: real peers authenticate beside it.
void TcpTransport::accept_loop() {
  std::vector<std::unique_ptr<PendingHandshake>> pending;
  std::vector<pollfd> fds;
  while (!stopping_) {
    fds.clear();
    const bool accepting = pending.size() < kMaxPendingHandshakes;
    fds.push_back({accepting ? listener_.fd() : -1, POLLIN, 0});
    Deadline wake = deadline_after(0.1);  // notices stopping_ within 100 ms
    for (const auto& p : pending) {
      fds.push_back({p->sock.fd(), POLLIN, 0});
      wake = std::min(wake, p->deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now());
    const int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait.count() + 1)));
    if (rc < 0 && errno != EINTR) {
      RINGCC_LOG(kError, "the TCP listener stopped: poll() failed: ", std::strerror(errno));
      return;
    }
    std::vector<std::unique_ptr<PendingHandshake>> still;
    for (size_t i = 0; i < pending.size(); ++i) {
      PendingHandshake& p = *pending[i];
      bool waiting = rc <= 0 || fds[i + 1].revents == 0 || advance_handshake(p);
      if (waiting && Clock::now() >= p.deadline) {
        refuse(p, "no answer to the handshake within 5 s");
        waiting = false;
      }
      if (waiting) still.push_back(std::move(pending[i]));
    }
    pending.swap(still);
    if (accepting && rc > 0 && fds[0].revents != 0) accept_pending(&pending);
  }
}

void TcpTransport::accept_pending(std::vector<std::unique_ptr<PendingHandshake>>* pending) {
  while (pending->size() < kMaxPendingHandshakes) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd = ::accept4(listener_.fd(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // none left (EAGAIN), or a transient error: poll again
    auto p = std::make_unique<PendingHandshake>();
    p->sock = Socket(fd);
    p->from = sockaddr_endpoint(reinterpret_cast<const sockaddr*>(&addr));
    p->nonce = fresh_nonce();
    p->deadline = deadline_after(kHandshakeSeconds);
    std::string greeting(kMagic, 4);
    put_i32(&greeting, rank_);
    greeting += p->nonce;
    // A fresh socket's send buffer always holds the few bytes of a greeting.
    const ssize_t sent = ::send(fd, greeting.data(), greeting.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent != static_cast<ssize_t>(greeting.size())) {
      refuse(*p, "the connection failed before the handshake");
      continue;
    }
    pending->push_back(std::move(p));
  }
}

void TcpTransport::refuse(PendingHandshake& p, const std::string& why) {
  // Strangers may connect as often as they like: one line per source
  // address and reason every few seconds, with a count.
  log_limited(LogLevel::kWarning, endpoint_host(p.from) + " " + why,
              "refused a connection from " + p.from + ": " + why);
  p.sock.close();
}

bool TcpTransport::advance_handshake(PendingHandshake& p) {
  // Reads what has arrived of the claim; true while more may come.
  char buf[kClaimBytes];
  bool closed = false;
  while (p.inbox.size() < kClaimBytes) {
    const ssize_t n = ::recv(p.sock.fd(), buf, kClaimBytes - p.inbox.size(), MSG_DONTWAIT);
    if (n > 0) {
      p.inbox.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      closed = !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
      break;
    }
  }
  const bool bad_magic = p.inbox.size() >= 4 && std::memcmp(p.inbox.data(), kMagic, 4) != 0;
  if (bad_magic) {
    refuse(p, "not a ringcc peer (bad greeting)");
    return false;
  }
  if (p.inbox.size() < kClaimBytes) {
    if (!closed) return true;
    refuse(p, "the connection closed during the handshake");
    return false;
  }
  const char* claim = p.inbox.data();
  const int32_t peer = get_i32(claim + 4);
  const int32_t index = get_i32(claim + 8);
  const std::string peer_nonce(claim + 12, kNonceBytes);
  Digest proof;
  std::memcpy(proof.data(), claim + 12 + kNonceBytes, proof.size());
  if (peer < 0 || peer >= size_ || index < 0 || index >= sockets_per_peer_) {
    refuse(p, "claims an impossible rank or socket index");
    return false;
  }
  if (!digest_equal(proof, link_proof(secret_, kLinkConnectorRole, job_id_, rank_, peer, index, p.nonce, peer_nonce))) {
    refuse(p, "authentication failed (wrong job secret), claimed rank " + std::to_string(peer));
    return false;
  }
  // Only higher ranks connect to us; each socket slot is taken once.
  std::lock_guard<std::mutex> lock(mu_);
  Link* link = links_[peer].get();
  if (peer <= rank_ || link->sockets[static_cast<size_t>(index)].valid()) {
    refuse(p, "unexpected or duplicate connection claiming rank " + std::to_string(peer));
    return false;
  }
  std::string verdict(1, '\1');
  const Digest ours = link_proof(secret_, kLinkAcceptorRole, job_id_, rank_, peer, index, p.nonce, peer_nonce);
  verdict.append(reinterpret_cast<const char*>(ours.data()), ours.size());
  const ssize_t sent = ::send(p.sock.fd(), verdict.data(), verdict.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent != static_cast<ssize_t>(verdict.size())) {
    refuse(p, "the connection failed during the handshake, claimed rank " + std::to_string(peer));
    return false;
  }
  p.sock.set_nodelay(true);
  link->sockets[static_cast<size_t>(index)] = std::move(p.sock);
  cv_.notify_all();
  return false;
}

void TcpTransport::connect(const std::vector<int>& peers, const std::vector<TcpPeerAddress>& addresses,
                           Deadline deadline) {
  const int buffer_bytes =
      static_cast<int>(env_int_in("RINGCC_TCP_BUFFER_BYTES", 4 << 20, 0, std::numeric_limits<int>::max()));
  const std::string congestion = env_str("RINGCC_TCP_CONGESTION", "auto");
  // We connect to lower ranks; higher ranks connect to us.
  for (int peer : peers) {
    if (peer >= rank_) continue;
    const TcpPeerAddress& addr = addresses[static_cast<size_t>(peer)];
    for (int index = 0; index < sockets_per_peer_; ++index) {
      Socket sock = Socket::connect(addr.host, addr.port, deadline);
      sock.set_buffer_sizes(buffer_bytes);
      Deadline hs = std::min(deadline, deadline_after(kHandshakeSeconds * 2));
      std::string who = rank_name(peer) + " at " + endpoint_text(addr.host, addr.port);
      char greeting[kGreetingBytes];
      sock.recv_all(greeting, sizeof(greeting), hs, who);
      const int32_t acceptor = get_i32(greeting + 4);
      if (std::memcmp(greeting, kMagic, 4) != 0 || acceptor != peer) {
        raise(ErrorKind::kPeerFailure, "the process at ", endpoint_text(addr.host, addr.port), " is not ringcc ",
              rank_name(peer), " of this job");
      }
      const std::string peer_nonce(greeting + 8, kNonceBytes);
      const std::string nonce = fresh_nonce();
      const int32_t me = rank_, idx = index;
      const Digest proof = link_proof(secret_, kLinkConnectorRole, job_id_, acceptor, me, idx, peer_nonce, nonce);
      std::string claim(kMagic, 4);
      put_i32(&claim, me);
      put_i32(&claim, idx);
      claim += nonce;
      claim.append(reinterpret_cast<const char*>(proof.data()), proof.size());
      sock.send_all(claim.data(), claim.size(), hs, who);
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
      Digest their_proof;
      bool proven = false;
      try {
        sock.recv_all(their_proof.data(), their_proof.size(), hs, who);
        proven = digest_equal(their_proof,
                              link_proof(secret_, kLinkAcceptorRole, job_id_, acceptor, me, idx, peer_nonce, nonce));
      } catch (const Error&) {
      }
      if (!proven) {
        raise(ErrorKind::kPeerFailure, "the process at ", endpoint_text(addr.host, addr.port),
              " could not prove that it is ", rank_name(peer),
              " of this job (it does not know the job secret); nothing was sent to it");
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
  while (!missing().empty()) {
    if (Clock::now() >= deadline) {
      raise(ErrorKind::kTimeout, "timed out after ", timeout_seconds(), " s waiting for rank(s) ", missing(),
            " to connect over TCP");
    }
    lock.unlock();
    poll_interrupt();
    lock.lock();
    cv_.wait_until(lock, std::min(deadline, Clock::now() + kInterruptPoll), [&] { return missing().empty(); });
  }
  connected_.assign(static_cast<size_t>(size_), false);
  for (int peer : peers) connected_[static_cast<size_t>(peer)] = true;
  std::string shared_cc, one_way_cc;
  for (auto& link : links_) {
    if (!link) continue;
    for (size_t i = 0; i < link->sockets.size(); ++i) {
      Socket& s = link->sockets[i];
      s.set_buffer_sizes(buffer_bytes);
      if (i < static_cast<size_t>(stripes_)) {
        shared_cc = s.congestion_control();
      } else {
        one_way_cc = choose_congestion_control(s, congestion);
      }
    }
  }
  if (!one_way_cc.empty()) {
    RINGCC_LOG(kDebug, "TCP links: congestion control ", one_way_cc, " on the one-way streams (RINGCC_TCP_CONGESTION=",
               congestion, "), ", shared_cc, " on the shared one");
  }
}

bool TcpTransport::reaches(int peer) const {
  return peer >= 0 && peer < size_ && peer < static_cast<int>(connected_.size()) &&
         connected_[static_cast<size_t>(peer)];
}

// Each logical byte stream (per direction, shared or one-way) is striped
// over its sockets: stream offset o travels on the stream's socket
// (o / stripe) % stripes. Both ends derive the same mapping from offsets
// alone, so message boundaries need not match between sender and receiver.
std::unique_ptr<Request> TcpTransport::post(int peer, uint8_t* data, size_t size, bool is_send, int stream) {
  RINGCC_CHECK(reaches(peer), ErrorKind::kInternal, "no TCP connection to rank ", peer);
  Link* link = links_[peer].get();
  link->check();
  auto req = std::make_unique<TcpRequest>(link, is_send);
  uint64_t& offset = is_send ? link->send_offset[stream] : link->recv_offset[stream];
  auto& queues = is_send ? link->send_q : link->recv_q;
  const std::vector<size_t>& sockets = is_send ? link->send_sockets[stream] : link->recv_sockets[stream];
  size_t done = 0;
  while (done < size) {
    const uint64_t unit = offset / stripe_bytes_;
    const size_t socket = sockets[static_cast<size_t>(unit % sockets.size())];
    const size_t take = static_cast<size_t>(std::min<uint64_t>(size - done, (unit + 1) * stripe_bytes_ - offset));
    auto piece = std::make_shared<Piece>(Piece{data + done, take});
    queues[socket].push_back(piece);
    req->add(socket, std::move(piece));
    done += take;
    offset += take;
  }
  return req;
}

std::unique_ptr<Request> TcpTransport::isend(int peer, const void* data, size_t size) {
  return post(peer, static_cast<uint8_t*>(const_cast<void*>(data)), size, true, kSharedStream);
}

std::unique_ptr<Request> TcpTransport::irecv(int peer, void* data, size_t size) {
  return post(peer, static_cast<uint8_t*>(data), size, false, kSharedStream);
}

Transport* TcpTransport::one_way() { return one_way_.get(); }

void TcpTransport::leave() {
  // Our end of each stream: the peers read what we sent, then end of file.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& link : links_) {
    if (!link) continue;
    for (auto& s : link->sockets) {
      if (s.valid()) ::shutdown(s.fd(), SHUT_WR);
    }
  }
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
