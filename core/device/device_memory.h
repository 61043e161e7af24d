// Small owners of CUDA resources and helpers the GPU backends share: device
// and pinned host buffers, events, the pieces of a (possibly fused) device
// collective's input and output, and a watchdog that notices collectives
// that never complete, dead local peers or a backend's own asynchronous
// errors.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/collective/collective_args.h"
#include "core/device/cuda_device.h"

namespace ringcc {
namespace device {

// cuMemAlloc'd device memory, freed on destruction (grows, never shrinks).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(CudaDevice& device) : device_(device) {}
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // At least `bytes` (contents are lost when it grows; callers make sure no
  // work still uses the old memory).
  void* reserve(size_t bytes);
  void* data() const { return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr_)); }
  size_t size() const { return size_; }

 private:
  CudaDevice& device_;
  cuda::CUdeviceptr ptr_ = 0;
  size_t size_ = 0;
};

// Page-locked host memory (cuMemHostAlloc, portable), freed on destruction.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(CudaDevice& device) : device_(device) {}
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* reserve(size_t bytes);
  void* data() const { return ptr_; }

 private:
  CudaDevice& device_;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// An event without timing (cheap to record and query).
class Event {
 public:
  explicit Event(CudaDevice& device, unsigned int flags = cuda::CU_EVENT_DISABLE_TIMING);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cuda::CUevent get() const { return event_; }

 private:
  CudaDevice& device_;
  cuda::CUevent event_ = nullptr;
};

// The contiguous pieces that make up elements [off, off + len) of a device
// collective's input (or output): one piece for a plain buffer, several
// for a fused batch (CollectiveArgs::segments). fn(ptr, rel, count): ptr
// holds `count` elements that belong at position `rel` of the range (ptr
// is null for a segment without input or output).
void for_each_piece(const CollectiveArgs& a, bool output, int64_t off, int64_t len,
                    const std::function<void(uint8_t* ptr, int64_t rel, int64_t count)>& fn);

// The stream a device collective runs on, as a CUstream.
inline cuda::CUstream stream_of(const CollectiveArgs& a) { return static_cast<cuda::CUstream>(a.stream); }

// A watchdog thread for one backend: every few milliseconds it checks that
// the events it was given complete within the timeout, that the other
// ranks on this host are alive, and the backend's own `check` (which
// returns a reason to give up, or ""). On the first problem it calls
// `fail(reason)` once, from its thread, and stops watching.
class Watchdog {
 public:
  Watchdog(CudaDevice& device, double timeout_s, std::vector<std::pair<int, int>> local_peer_pids,
           std::function<std::string()> check, std::function<void(const std::string&)> fail);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  // Records an event on `stream` now: the work queued there so far must
  // complete within the timeout. `what` names it in the reason.
  void track(cuda::CUstream stream, const char* what);
  // Brackets the enqueueing of a collective: a driver call that blocks
  // (a full stream queue, or a driver that runs work as it is enqueued)
  // counts against the timeout too.
  void enter(const char* what);
  void leave();
  // Stops the thread (idempotent).
  void stop();

 private:
  struct Pending {
    cuda::CUevent event;
    std::chrono::steady_clock::time_point since;
    const char* what;
  };
  void loop();
  std::string poll();

  CudaDevice& device_;
  double timeout_s_;
  std::vector<std::pair<int, int>> pids_;  // (rank, pid)
  std::function<std::string()> check_;
  std::function<void(const std::string&)> fail_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  bool enqueueing_ = false;
  Pending enqueue_{};
  std::vector<cuda::CUevent> free_events_;
  bool stopping_ = false;
  bool failed_ = false;
  std::thread thread_;
};

}  // namespace device
}  // namespace ringcc
