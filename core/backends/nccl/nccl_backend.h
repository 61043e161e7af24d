// GPU collectives through NCCL, for ranks that each have their own GPU (on
// one host or many): one ncclComm per ringcc communicator, its unique id
// passed through the rendezvous store. Every call is enqueued on the
// caller's stream with no host synchronisation: allreduce (NCCL's own
// sum/prod/min/max; average as NCCL's avg where it equals ringcc's result,
// else a sum and ringcc's scale kernel; pre- and postscale with ringcc's
// kernels), allgather (ragged first dimension: a group of broadcasts),
// broadcast, reduce-scatter (uneven blocks: a group of reduces), alltoall
// with counts (a group of sends and receives), and fused batches as one
// NCCL group.
//
// The communicator is non-blocking (NCCL 2.14+): initialisation and every
// call are bounded by the deadline, and a watchdog thread polls
// ncclCommGetAsyncError, checks that enqueued collectives complete within
// RINGCC_TIMEOUT_S and that the other ranks on this host live; on a
// problem it calls ncclCommAbort, so that this rank's stream is freed and
// the next collective raises PeerFailureError with NCCL's own words
// (ncclGetLastError).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/backends/backend.h"
#include "core/device/device_memory.h"
#include "core/device/nccl_api.h"

namespace ringcc {

class NcclBackend : public Backend {
 public:
  NcclBackend(const BackendJob& job, Deadline deadline);
  ~NcclBackend() override;

  const char* name() const override { return "nccl"; }
  MemoryKind memory() const override { return MemoryKind::kCuda; }
  void run(CollectiveArgs& a, Deadline deadline) override;
  void abort(const std::string& reason) override;

 private:
  // Waits out ncclInProgress (non-blocking communicators) and raises on
  // any error, with NCCL's last error text.
  void check(nccl::ncclResult_t r, const char* what, Deadline deadline);
  // f(comm) under the lock that abort() takes; raises once aborted.
  nccl::ncclResult_t call(const std::function<nccl::ncclResult_t(nccl::ncclComm_t)>& f);
  std::string last_error(nccl::ncclResult_t r) const;
  void check_usable() const;
  nccl::ncclDataType_t nccl_type(DataType dtype) const;
  nccl::ncclRedOp_t nccl_op(ReduceOp op) const;
  void group(const std::function<void()>& calls, const char* what, Deadline deadline);

  void allreduce(CollectiveArgs& a, Deadline deadline);
  void reduce_scatter(CollectiveArgs& a, Deadline deadline);
  void allgather(CollectiveArgs& a, Deadline deadline);
  void broadcast(CollectiveArgs& a, Deadline deadline);
  void alltoall(CollectiveArgs& a, Deadline deadline);
  void barrier(CollectiveArgs& a, Deadline deadline);

  BackendJob job_;
  device::CudaDevice& dev_;
  const nccl::NcclApi& nccl_;
  int version_ = 0;
  nccl::ncclComm_t comm_ = nullptr;
  bool nonblocking_ = false;
  device::DeviceBuffer scratch_;             // prescaled inputs, the barrier's word
  cuda::CUstream scratch_stream_ = nullptr;  // the stream that used scratch_ last
  std::atomic<bool> aborted_{false};
  mutable std::mutex mu_;  // guards comm_ against abort from the watchdog
  std::string reason_;
  std::unique_ptr<device::Watchdog> watchdog_;
};

BackendEntry nccl_backend();

}  // namespace ringcc
