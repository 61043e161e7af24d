// Per-call phase timing of device collectives, for finding where their time
// goes (RINGCC_GPU_TRACE). For each collective it keeps
//   - host marks: microseconds since the call reached the communicator
//     (before the ranks agreed on it through the host path), at the end of
//     the agreement, at points the backend names, and once everything was
//     enqueued;
//   - device marks: timestamps a one-thread kernel (ringcc_timestamp) takes
//     from the GPU's global nanosecond timer between the operations the
//     backend enqueues. The timer is the same for every process on the GPU,
//     so the marks of ranks that share one show when each rank's work ran
//     and how long the device sat between them.
// A record is written once its device marks are done (checked at the next
// call and at the end): RINGCC_GPU_TRACE=1 logs one line per call (log
// level warning), any other value is a path prefix: each rank appends JSON
// lines to <prefix>.rank<R>.jsonl. A diagnostic: each device mark costs a
// kernel launch.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/collective/collective_args.h"
#include "core/device/cuda_device.h"

namespace ringcc {
namespace device {

class GpuTrace {
 public:
  using Clock = std::chrono::steady_clock;

  // Null unless RINGCC_GPU_TRACE is set (to anything but "" or "0").
  static std::unique_ptr<GpuTrace> from_env(CudaDevice& device, int rank);
  ~GpuTrace();
  GpuTrace(const GpuTrace&) = delete;
  GpuTrace& operator=(const GpuTrace&) = delete;

  // A collective `a` on `backend`; `started` is when the call reached the
  // communicator. Writes the records of earlier calls that are done.
  void begin(const CollectiveArgs& a, const char* backend, Clock::time_point started);
  void host_mark(const char* name);
  // Enqueues a timestamp on `stream` (nothing once the slots ran out).
  void device_mark(cuda::CUstream stream, const char* name);
  // Everything is enqueued on `stream`: the record waits for the device.
  void end(cuda::CUstream stream);
  // Writes every record, waiting (bounded) for the device's marks.
  void flush();

 private:
  struct Record {
    uint64_t call = 0;
    std::string kind, backend;
    int64_t bytes = 0;
    int64_t realtime_ns = 0;                             // the host's realtime clock when the call started
    std::vector<std::pair<const char*, double>> host;    // name, us since the start
    std::vector<std::pair<const char*, size_t>> device;  // name, slot
    cuda::CUevent done = nullptr;
  };
  GpuTrace(CudaDevice& device, int rank, std::string path);
  void write_done(bool wait);
  void write(const Record& r);

  CudaDevice& dev_;
  int rank_;
  std::string path_;  // "" logs
  std::ofstream out_;
  // Pinned host memory mapped into the device: the kernel writes, the host reads.
  unsigned long long* slots_ = nullptr;
  cuda::CUdeviceptr slots_on_device_ = 0;
  size_t capacity_ = 0, used_ = 0;
  uint64_t calls_ = 0;
  Clock::time_point started_;
  bool active_ = false;
  Record current_;
  std::deque<Record> pending_;
};

}  // namespace device
}  // namespace ringcc
