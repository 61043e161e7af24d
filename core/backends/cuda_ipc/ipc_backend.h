// GPU collectives among ranks that share one GPU (NCCL refuses them:
// "Duplicate GPU detected"): workstations, MPS deployments, test machines.
//
// Each rank allocates one device staging area once and exports it with
// cuIpcGetMemHandle through the rendezvous store; every rank maps every
// peer's area (cuIpcOpenMemHandle), so ringcc's kernels read the peers'
// data directly. Each step of a collective copies this rank's data into
// its area, then publishes the step's generation number in a flag word of
// every rank's flag page (cuStreamWriteValue32, which fences the copy), and
// makes its stream wait for the words the peers wrote in its own page
// (cuStreamWaitValue32) before reading their areas: the ordering lives on
// the stream, with no host round trip. A rank waits only on its own
// memory, which stays valid (and can be released) whatever happens to a
// peer.
// Allreduce is one-shot (every rank reduces everything from every area)
// for two ranks or small sizes, else reduce-scatter then allgather through
// the areas. Large collectives run in steps of the area's size.
//
//   RINGCC_IPC_BUFFER_BYTES   staging area per rank (default 64 MiB: a
//                             64 MiB allreduce in one step)
//   RINGCC_IPC_ONESHOT_BYTES  allreduce up to this size is one-shot (1 MiB)
//   RINGCC_IPC_FLAGS          where the flag words live: "device" (default,
//                             at the start of each rank's staging area) or
//                             "host" (a page of POSIX shared memory per
//                             rank, registered with cuMemHostRegister: the
//                             classic target of stream memory operations)
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backends/backend.h"
#include "core/device/device_memory.h"
#include "core/os/shm_segment.h"

namespace ringcc {

class IpcBackend : public Backend {
 public:
  // Collective over the job: exchanges the areas' handles through the store.
  IpcBackend(const BackendJob& job, Deadline deadline);
  ~IpcBackend() override;

  const char* name() const override { return "ipc"; }
  MemoryKind memory() const override { return MemoryKind::kCuda; }
  void run(CollectiveArgs& a, Deadline deadline) override;
  void abort(const std::string& reason) override;

 private:
  enum Flag { kReady = 0, kReduced = 1, kDone = 2 };
  // A rank's flag page: for each Flag, one word per writer rank, 64 bytes
  // apart. At the start of its allocation (or in shared host memory).
  static constexpr size_t kFlagBytes = 4096;

  // The word `which` that rank `from` writes in rank `owner`'s page.
  cuda::CUdeviceptr flag(int owner, Flag which, int from) const;
  uint8_t* area(int rank) const;
  void check_usable() const;
  void advise_mps() const;
  void begin_step(cuda::CUstream s);
  // Writes this step's generation as this rank's word `which` in the pages
  // of every peer (and, for kDone, its own: the next step, maybe on another
  // stream, waits for it before it overwrites this rank's area).
  void signal(cuda::CUstream s, Flag which);
  // The stream waits until `peer` has signalled `which` for this step (for
  // kDone: the previous step) in this rank's page.
  void wait_for(cuda::CUstream s, int peer, Flag which);
  void wait_all(cuda::CUstream s, Flag which);
  void copy(cuda::CUstream s, void* dst, const void* src, int64_t count, size_t es);
  void copy_in(cuda::CUstream s, const CollectiveArgs& a, int64_t off, int64_t len, uint8_t* dst);
  void copy_out(cuda::CUstream s, const CollectiveArgs& a, int64_t off, int64_t len, const uint8_t* src);

  void allreduce(CollectiveArgs& a);
  void reduce_scatter(CollectiveArgs& a);
  void allgather(CollectiveArgs& a);
  void broadcast(CollectiveArgs& a);
  void alltoall(CollectiveArgs& a);
  void release_waits();
  void set_up_host_flags(Deadline deadline);

  BackendJob job_;
  device::CudaDevice& dev_;
  const cuda::DriverApi& api_;
  int n_ = 1, me_ = 0;
  size_t capacity_ = 0;  // bytes of each staging area
  size_t oneshot_bytes_ = 0;
  cuda::CUdeviceptr own_ = 0;            // this rank's allocation
  std::vector<cuda::CUdeviceptr> base_;  // every rank's allocation as mapped here
  // Every rank's flag words as this process's device sees them: the start
  // of its allocation, or its registered shared-memory page.
  std::vector<cuda::CUdeviceptr> flags_;
  std::vector<ShmSegment> flag_pages_;  // RINGCC_IPC_FLAGS=host: every rank's page, mapped here
  cuda::CUstream aux_ = nullptr;        // non-blocking: setup and releases
  std::atomic<uint32_t> gen_{0};        // the generation of the current step
  std::atomic<bool> aborted_{false};
  mutable std::mutex reason_mu_;
  std::string reason_;
  std::unique_ptr<device::Watchdog> watchdog_;
};

BackendEntry cuda_ipc_backend();

}  // namespace ringcc
