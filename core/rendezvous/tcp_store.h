// The default rendezvous store. Rank 0 runs a TcpStoreServer; every rank
// (rank 0 included) talks to it through a TcpStore client.
//
// Wire protocol (all integers little-endian):
//   greeting, server -> client on accept:
//     "RCST" | u8 version (2) | u8 auth (0 or 1) | auth ? 32-byte server nonce : nothing
//   when auth is 1 (mutual HMAC-SHA-256 with the job secret):
//     client -> server: 32-byte client nonce |
//                       HMAC(secret, "ringcc-store-client" || server nonce || client nonce)
//     server -> client: u8 0 (refused, then closes) or
//                       u8 1 | HMAC(secret, "ringcc-store-server" || server nonce || client nonce)
//     the client closes unless the server's proof is right.
//   request:  u8 op | u64 key size | u64 value size | key | value
//   reply:    u8 status | u64 payload size | payload
// Ops: set (value = the value), get (value = i64 timeout in ms; the server
// answers when the key is set or the timeout passes), try_get (no value),
// add (value = i64 delta; counters are stored as decimal text).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/os/socket.h"
#include "core/rendezvous/store.h"

namespace ringcc {

// Serves the store from a background thread: one poll() loop over the
// listening socket and every client, so a slow or hostile client never
// blocks the others. With a non-empty secret, every connection must prove it
// knows the secret (HMAC over fresh nonces) within 5 s or is closed, and the
// server proves it in turn.
class TcpStoreServer {
 public:
  // Listens on host:port (port 0 picks a free port). Raises Error(kInternal)
  // when the address cannot be bound.
  TcpStoreServer(const std::string& host, int port, const std::string& secret);
  // Stops the thread and closes every connection; connected clients see the
  // store close the connection.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }

 private:
  class Loop;  // the poll() loop and all state it owns
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  int port_ = 0;
};

// A client of a TcpStoreServer. Thread-safe: each request runs on a
// connection of its own (taken from a pool, opened on demand), so a thread
// blocked in get() does not hold up a set() from another thread.
class TcpStore : public Store {
 public:
  // Connects (retrying until connect_deadline while the server comes up) and
  // authenticates with secret. Raises Error(kTimeout) when the server cannot
  // be reached, Error(kPeerFailure) when it refuses our credentials or
  // cannot prove that it knows the secret itself.
  TcpStore(const std::string& host, int port, const std::string& secret, Deadline connect_deadline);
  ~TcpStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  bool try_get(const std::string& key, std::string* value) override;
  int64_t add(const std::string& key, int64_t delta) override;
  TcpStore* rank0_store() override { return this; }

  // The local IPv4 address of our connection to the store: an address of
  // this host that the store's host (and so, usually, other ranks) can reach.
  std::string local_address() const { return local_address_; }

 private:
  struct Reply {
    uint8_t status = 0;
    std::string payload;
  };

  // greeted (optional) is set once the server's greeting arrived.
  // refused_limit: see Socket::connect. greeting_wait: how long the
  // greeting may take (max: the handshake's whole time).
  Socket open_connection(Deadline deadline, bool* greeted = nullptr,
                         std::chrono::milliseconds refused_limit = std::chrono::milliseconds::max(),
                         std::chrono::milliseconds greeting_wait = std::chrono::milliseconds::max()) const;
  Socket checkout();
  void checkin(Socket conn);
  Reply request(uint8_t op, const std::string& key, const std::string& value, Deadline deadline);
  std::string address() const;  // "HOST:PORT"

  const std::string host_;
  const int port_;
  const std::string secret_;
  const std::string who_;  // names the store in error messages
  double io_timeout_s_;    // bound on each request other than a blocking get
  std::string local_address_;

  std::mutex mutex_;          // guards idle_ and failure_
  std::vector<Socket> idle_;  // authenticated connections not in use
  std::string failure_;       // once the store closed on us: why; later requests fail fast
};

}  // namespace ringcc
