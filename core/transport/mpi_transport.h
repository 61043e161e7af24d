// The MPI transport: point-to-point over MPI non-blocking sends and
// receives on a communicator of ringcc's own (a duplicate of the user's), so
// the algorithms of ring_algorithms.h run over MPI unchanged.
//
// Like TCP it carries a byte stream per peer and direction: the algorithms
// may receive a message in other pieces than it was sent in (a chain
// broadcast forwards chunk by chunk what the root sent at once). Sends go out
// in pieces of at most RINGCC_CHUNK_BYTES; receives take the next piece
// with a matched probe (MPI_Improbe): straight into place when it fits,
// else through a staging buffer whose rest feeds the next receive.
//
// Requests progress through MPI_Test; they offer no descriptor to poll, so a
// waiter spins briefly and then sleeps in short slices (block()).
// abort() tells every peer (a message on a tag of its own), so that a
// rank waiting on us fails at once instead of at its timeout.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/os/mpi_library.h"
#include "core/transport/transport.h"

namespace ringcc {

class MpiTransport : public Transport {
 public:
  static constexpr int kDataTag = 1;
  static constexpr int kHeaderTag = 2;
  static constexpr int kAbortTag = 3;

  explicit MpiTransport(std::shared_ptr<MpiComm> comm);
  ~MpiTransport() override;

  const char* name() const override { return "mpi"; }
  bool reaches(int peer) const override;
  std::unique_ptr<Request> isend(int peer, const void* data, size_t size) override;
  std::unique_ptr<Request> irecv(int peer, void* data, size_t size) override;
  void abort(const std::string& reason) override;

  MpiComm& comm() { return *comm_; }
  // Raises Error(kPeerFailure) when this transport failed or a peer told us
  // it aborted.
  void check_failed();

  struct Recv;
  struct Link;

 private:
  std::shared_ptr<MpiComm> comm_;
  const MpiApi& api_;
  size_t piece_bytes_;
  std::vector<std::unique_ptr<Link>> links_;
  std::string failure_;
  std::vector<uint8_t> abort_message_;  // kept alive for the abort sends
  std::vector<rcmpi_req*> abort_sends_;
};

}  // namespace ringcc
