// GPU collectives through host memory, where neither NCCL nor CUDA IPC can
// serve (no NCCL, no IPC permission, ranks on several hosts sharing GPUs):
// device-to-host copies into pinned buffers, ringcc's host algorithms (the
// communicator's own host path, handed in as BackendJob::host_run), then
// host-to-device copies. Allreduce is pipelined in chunks: while the host
// reduces one chunk, the stream copies the next one down and the previous
// one back up. The host waits for the caller's stream (the data must be on
// the host before it can be reduced); the result is written back in stream
// order. Chosen once per communicator, and logged once.
//
//   RINGCC_STAGING_CHUNK_BYTES  bytes per pipelined chunk (default 4 MiB)
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "core/backends/backend.h"
#include "core/device/device_memory.h"

namespace ringcc {

class StagingBackend : public Backend {
 public:
  explicit StagingBackend(const BackendJob& job);
  ~StagingBackend() override;

  const char* name() const override { return "host"; }
  MemoryKind memory() const override { return MemoryKind::kCuda; }
  void run(CollectiveArgs& a, Deadline deadline) override;
  void abort(const std::string& reason) override;

 private:
  void check_usable() const;
  void to_host(cuda::CUstream s, void* dst, const void* src, size_t bytes);
  void to_device(cuda::CUstream s, void* dst, const void* src, size_t bytes);
  void wait(cuda::CUevent e, cuda::CUstream s);
  // Before this collective's copies reuse the pinned buffers: the last
  // collective's copies out of them (maybe on another stream) are done.
  void after_previous();
  void finish(cuda::CUstream s);
  void allreduce(CollectiveArgs& a);
  void whole(CollectiveArgs& a);

  BackendJob job_;
  device::CudaDevice& dev_;
  const cuda::DriverApi& api_;
  size_t chunk_bytes_;
  device::PinnedBuffer chunk_[2];
  device::PinnedBuffer in_, out_;
  device::Event copied_[2];
  device::Event last_;
  bool pending_ = false;  // last_ was recorded
  std::atomic<bool> aborted_{false};
  mutable std::mutex mu_;
  std::string reason_;
};

BackendEntry host_staging_backend();

}  // namespace ringcc
