// The TCP transport: authenticated connections to every peer it is asked
// to reach, two streams each way (one_way(): see tcp_transport.cc), each
// on one socket or striped over several (RINGCC_TCP_SOCKETS). Large
// messages are striped across a peer's sockets; progress is driven by the
// waiting thread with non-blocking I/O, so there is no extra thread on the
// data path. A listener thread lives as long as the transport and refuses
// (and logs) any connection that cannot prove it holds the job's secret;
// a connecting rank likewise refuses a listener that cannot prove it
// (mutual HMAC-SHA-256, see tcp_transport.cc).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/base/sha256.h"
#include "core/os/socket.h"
#include "core/transport/transport.h"

namespace ringcc {

// The proof each side of a link handshake sends (tcp_transport.cc gives the
// handshake): HMAC(secret, role || job id || both ranks || socket index ||
// both nonces), role being the sender's.
constexpr char kLinkConnectorRole[] = "ringcc-link-connector";
constexpr char kLinkAcceptorRole[] = "ringcc-link-acceptor";
Digest link_proof(const std::string& secret, const char* role, const std::string& job_id, int32_t acceptor,
                  int32_t connector, int32_t index, const std::string& acceptor_nonce,
                  const std::string& connector_nonce);

struct TcpPeerAddress {
  std::string host;
  int port = 0;
};

class TcpTransport : public Transport {
 public:
  // Listens on listen_host ("" for every IPv4 address) at an ephemeral
  // port. job_id names the communicator: links authenticate with the
  // secret and the job id together.
  TcpTransport(int rank, int size, std::string secret, std::string job_id, const std::string& listen_host);
  ~TcpTransport() override;

  // Sockets per stream (RINGCC_TCP_SOCKETS; a peer has three times as
  // many connections: sockets_per_peer_from_env()) and the bytes sent on
  // one before the next (RINGCC_TCP_STRIPE_BYTES): every rank of a job
  // must have the same.
  static int sockets_from_env();
  static int sockets_per_peer_from_env();
  static uint64_t stripe_bytes_from_env();

  int listen_port() const { return listener_.local_port(); }

  // Establishes connections to `peers` (global ranks): the higher rank of
  // each pair connects, the lower accepts. Every rank must call it with a
  // symmetric peer set. addresses is indexed by rank.
  void connect(const std::vector<int>& peers, const std::vector<TcpPeerAddress>& addresses, Deadline deadline);

  const char* name() const override { return "tcp"; }
  bool reaches(int peer) const override;
  std::unique_ptr<Request> isend(int peer, const void* data, size_t size) override;
  std::unique_ptr<Request> irecv(int peer, void* data, size_t size) override;
  Transport* one_way() override;
  void abort(const std::string& reason) override;
  void leave() override;

  struct Piece;
  struct Link;
  struct PendingHandshake;
  class OneWay;
  static constexpr int kSharedStream = 0, kOneWayStream = 1, kStreams = 2;

 private:
  std::unique_ptr<Request> post(int peer, uint8_t* data, size_t size, bool is_send, int stream);
  void accept_loop();
  void accept_pending(std::vector<std::unique_ptr<PendingHandshake>>* pending);
  // Reads the connector's claim; false once the connection was accepted
  // into its link or refused.
  bool advance_handshake(PendingHandshake& p);
  void refuse(PendingHandshake& p, const std::string& why);

  int rank_;
  int size_;
  std::string secret_;
  std::string job_id_;
  int stripes_;           // sockets per stream (RINGCC_TCP_SOCKETS)
  int sockets_per_peer_;   // the shared stream's, then each rank's one-way stream's
  uint64_t stripe_bytes_;
  Socket listener_;
  std::unique_ptr<Transport> one_way_;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Link>> links_;  // indexed by peer rank
  std::vector<bool> connected_;               // peers connect() was asked for
};

}  // namespace ringcc
