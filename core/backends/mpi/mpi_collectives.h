// Collectives when RINGCC_TRANSPORT=mpi: every collective opens with one
// exchange in which each rank sends every other rank its header (and, for
// alltoall, its counts) over MPI point-to-point; small payloads ride along
// in the same message (up to RINGCC_MPI_INLINE_BYTES per rank), so a small
// collective completes in that single round and every rank reduces the
// contributions in rank order (the same bits everywhere). Every rank checks
// the headers as on the other transports: a mismatch raises the same error
// on every rank before any data moves.
//
// Larger payloads then run either as MPI's own collective (MPI_Allreduce,
// MPI_Allgatherv, MPI_Bcast, MPI_Reduce_scatter, MPI_Alltoallv) or as
// ringcc's algorithms over the MPI transport (ring_algorithms.h), chosen per
// collective and size (RINGCC_MPI_ALGORITHM=auto|native|ring; the auto
// crossovers are measured, see docs/benchmarks.md). A native MPI collective
// cannot be interrupted: it starts only after the exchange proved every rank
// present and in agreement, and a watchdog ends the job (MPI_Abort) with a
// message if it still outlives RINGCC_TIMEOUT_S.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/algorithms/ring_algorithms.h"
#include "core/collective/collective_args.h"
#include "core/transport/mpi_transport.h"

namespace ringcc {

class MpiCollectives {
 public:
  MpiCollectives(std::shared_ptr<MpiComm> comm, MpiTransport* transport);
  ~MpiCollectives();
  MpiCollectives(const MpiCollectives&) = delete;
  MpiCollectives& operator=(const MpiCollectives&) = delete;

  void run(CollectiveArgs& a, RingScratch& scratch, Deadline deadline);

  // Which path a collective of `bytes` per rank takes in auto mode (for
  // tests and docs): true for MPI's own collective.
  static bool auto_prefers_native(CollectiveKind kind, int64_t bytes, int size);

  // The settings that pick algorithms and size the header exchange, as the
  // environment sets them (every rank of a job must have the same):
  // RINGCC_MPI_ALGORITHM (0 auto, 1 native, 2 ring), RINGCC_MPI_RING_BYTES,
  // RINGCC_MPI_INLINE_BYTES.
  static int algorithm_from_env();
  static int64_t ring_bytes_from_env();
  static size_t inline_bytes_from_env();

 private:
  bool exchange(CollectiveArgs& a, Deadline deadline);
  void finish_inline(CollectiveArgs& a);
  bool native_wanted(const CollectiveArgs& a) const;
  void run_native(CollectiveArgs& a, RingScratch& scratch, Deadline deadline);
  void arm(Deadline deadline, const char* what);
  void disarm();
  void watchdog_loop();

  std::shared_ptr<MpiComm> comm_;
  MpiTransport* transport_;
  const MpiApi& api_;
  int rank_, size_;
  size_t inline_cap_;
  size_t blob_cap_;
  int algorithm_;  // 0 auto, 1 native, 2 ring
  PeerSet ps_;
  std::vector<uint8_t> send_blob_;
  std::vector<uint8_t> recv_blobs_;
  std::vector<size_t> recv_bytes_;
  std::vector<int64_t> alltoall_counts_;

  std::mutex wd_mu_;
  std::condition_variable wd_cv_;
  bool wd_armed_ = false, wd_stop_ = false;
  bool wd_idle_ = false;  // the watchdog waits with nothing armed
  Deadline wd_deadline_{};
  const char* wd_what_ = "";
  std::thread wd_thread_;
};

}  // namespace ringcc
