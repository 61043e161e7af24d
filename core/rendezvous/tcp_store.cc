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
#include "core/base/wire.h"
#include "core/rendezvous/tcp_store_protocol.h"

namespace ringcc {

using namespace store_protocol;  // NOLINT(build/namespaces)

namespace {

}  // namespace
// ===========================================================================
// Client
// ===========================================================================

TcpStore::TcpStore(const std::string& host, int port, const std::string& secret, Deadline connect_deadline)
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

Socket TcpStore::open_connection(Deadline deadline, bool* greeted, std::chrono::milliseconds refused_limit,
                                 std::chrono::milliseconds greeting_wait) const {
  Socket conn = Socket::connect(host_, port_, deadline, refused_limit);
  conn.set_nodelay(true);
  // The handshake gets its own few seconds even if connecting took until
  // the deadline.
  const Deadline handshake_deadline = std::max(deadline, Clock::now() + kHandshakeTimeout);
  const Deadline greeting_deadline = greeting_wait == std::chrono::milliseconds::max()
                                         ? handshake_deadline
                                         : std::min(handshake_deadline, Clock::now() + greeting_wait);

  char greeting[kGreetingSize];
  conn.recv_all(greeting, sizeof(greeting), greeting_deadline, who_);
  if (greeted) *greeted = true;
  RINGCC_CHECK(std::memcmp(greeting, kMagic, sizeof(kMagic)) == 0 && static_cast<uint8_t>(greeting[4]) == kVersion,
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
               " refused our credentials (RINGCC_SECRET differs?", secret_.empty() ? " it is not set here)" : ")");
  // The store proves in turn that it knows the secret: a process that took
  // the port first cannot pose as rank 0's store.
  Digest server_proof;
  conn.recv_all(server_proof.data(), server_proof.size(), handshake_deadline, who_);
  RINGCC_CHECK(digest_equal(server_proof, store_proof(secret_, kServerProofContext, server_nonce, client_nonce)),
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

TcpStore::Reply TcpStore::request(uint8_t op, const std::string& key, const std::string& value, Deadline deadline) {
  RINGCC_CHECK(key.size() <= kMaxKeySize, ErrorKind::kInvalidArgument, "a rendezvous store key must be at most ",
               kMaxKeySize, " bytes, got ", key.size());
  RINGCC_CHECK(value.size() <= kMaxValueSize, ErrorKind::kInvalidArgument, "a rendezvous store value must be at most ",
               kMaxValueSize, " bytes, got ", value.size());
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
    RINGCC_CHECK(size <= kMaxValueSize + kMaxKeySize, ErrorKind::kInternal, who_, " sent a malformed reply");
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
  RINGCC_CHECK(reply.status == kOk, ErrorKind::kInternal, who_, " answered a set with status ", int(reply.status));
}

std::string TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const int64_t timeout_ms = std::clamp<int64_t>(timeout.count(), 0, kMaxWaitMs);
  auto raise_timeout = [&] {
    // The job's per-rank keys end in the rank that posts them: name it.
    const size_t slash = key.rfind('/');
    const std::string last = slash == std::string::npos ? "" : key.substr(slash + 1);
    const bool per_rank =
        !last.empty() && last.size() < 10 && last.find_first_not_of("0123456789") == std::string::npos;
    raise(ErrorKind::kTimeout, "timed out after ", format_seconds(timeout_ms / 1000.0), " s waiting for key '", key,
          "' in the rendezvous store at ", address(),
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
  RINGCC_CHECK(reply.status == kOk, ErrorKind::kInternal, who_, " answered a get with status ", int(reply.status));
  return std::move(reply.payload);
}

bool TcpStore::try_get(const std::string& key, std::string* value) {
  Reply reply = request(kTryGet, key, "", deadline_after(io_timeout_s_));
  if (reply.status == kNotFound) return false;
  RINGCC_CHECK(reply.status == kOk, ErrorKind::kInternal, who_, " answered a try_get with status ", int(reply.status));
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
