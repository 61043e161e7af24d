#include "core/device/device_memory.h"

#include <algorithm>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/thread_name.h"
#include "core/device/gpu_libraries.h"
#include "core/os/shm_segment.h"

namespace ringcc {
namespace device {

using namespace ringcc::cuda;

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) {
    CudaDevice::Scope scope(device_);
    device_.api().cuMemFree_v2(ptr_);
  }
}

void* DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= size_ && ptr_) return data();
  CudaDevice::Scope scope(device_);
  if (ptr_) {
    device_.api().cuMemFree_v2(ptr_);
    ptr_ = 0;
    size_ = 0;
  }
  const size_t want = std::max<size_t>(bytes, 256);
  device_.check(device_.api().cuMemAlloc_v2(&ptr_, want), "cuMemAlloc");
  size_ = want;
  return data();
}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_) {
    CudaDevice::Scope scope(device_);
    device_.api().cuMemFreeHost(ptr_);
  }
}

void* PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= size_ && ptr_) return ptr_;
  CudaDevice::Scope scope(device_);
  if (ptr_) {
    device_.api().cuMemFreeHost(ptr_);
    ptr_ = nullptr;
    size_ = 0;
  }
  const size_t want = std::max<size_t>(bytes, 4096);
  device_.check(device_.api().cuMemHostAlloc(&ptr_, want, kMemHostAllocPortable), "cuMemHostAlloc");
  size_ = want;
  return ptr_;
}

Event::Event(CudaDevice& device, unsigned int flags) : device_(device) {
  CudaDevice::Scope scope(device_);
  device_.check(device_.api().cuEventCreate(&event_, flags), "cuEventCreate");
}

Event::~Event() {
  if (event_) {
    CudaDevice::Scope scope(device_);
    device_.api().cuEventDestroy_v2(event_);
  }
}

void for_each_piece(const CollectiveArgs& a, bool output, int64_t off, int64_t len,
                    const std::function<void(uint8_t*, int64_t, int64_t)>& fn) {
  if (len <= 0) return;
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  if (a.segments.empty()) {
    auto* base = static_cast<uint8_t*>(output ? a.out : const_cast<void*>(a.in));
    fn(base + off * es, 0, len);
    return;
  }
  int64_t start = 0;
  for (const BufferSegment& s : a.segments) {
    const int64_t end = start + s.count;
    const int64_t lo = std::max(start, off), hi = std::min(end, off + len);
    if (lo < hi) {
      auto* base = static_cast<uint8_t*>(output ? s.out : const_cast<void*>(s.in));
      fn(base ? base + (lo - start) * es : nullptr, lo - off, hi - lo);
    }
    if (end >= off + len) break;
    start = end;
  }
}

Watchdog::Watchdog(CudaDevice& device, double timeout_s, std::vector<std::pair<int, int>> local_peer_pids,
                   std::function<std::string()> check, std::function<void(const std::string&)> fail)
    : device_(device),
      timeout_s_(timeout_s),
      pids_(std::move(local_peer_pids)),
      check_(std::move(check)),
      fail_(std::move(fail)) {
  thread_ = std::thread([this] {
    name_this_thread("ringcc-gpu-wait");
    loop();
  });
}

Watchdog::~Watchdog() {
  stop();
  CudaDevice::Scope scope(device_);
  for (auto& p : pending_) device_.api().cuEventDestroy_v2(p.event);
  for (auto e : free_events_) device_.api().cuEventDestroy_v2(e);
}

void Watchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
      return;
    }
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Watchdog::track(CUstream stream, const char* what) {
  CUevent event = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_ || stopping_) return;
    if (!free_events_.empty()) {
      event = free_events_.back();
      free_events_.pop_back();
    }
  }
  CudaDevice::Scope scope(device_);
  if (!event) device_.check(device_.api().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  device_.check(device_.api().cuEventRecord(event, stream), "cuEventRecord");
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back({event, std::chrono::steady_clock::now(), what});
}

void Watchdog::enter(const char* what) {
  std::lock_guard<std::mutex> lock(mu_);
  enqueueing_ = true;
  enqueue_ = {nullptr, std::chrono::steady_clock::now(), what};
}

void Watchdog::leave() {
  std::lock_guard<std::mutex> lock(mu_);
  enqueueing_ = false;
}

std::string Watchdog::poll() {
  if (check_) {
    std::string why = check_();
    if (!why.empty()) return why;
  }
  for (const auto& [rank, pid] : pids_) {
    if (pid > 0 && !process_alive(pid)) {
      return detail::concat("rank ", rank, " (pid ", pid, ") exited or crashed");
    }
  }
  CudaDevice::Scope scope(device_);
  const auto now = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (enqueueing_) {
    const double age = std::chrono::duration<double>(now - enqueue_.since).count();
    if (age > timeout_s_) {
      return detail::concat("enqueueing ", enqueue_.what, " has taken ", static_cast<int>(age),
                            " s (", collective_timeout_variable(), " is ", timeout_s_,
                            " s): a peer stopped taking part");
    }
  }
  while (!pending_.empty()) {
    Pending p = pending_.front();
    lock.unlock();
    const CUresult r = device_.api().cuEventQuery(p.event);
    lock.lock();
    if (r == CUDA_SUCCESS) {
      pending_.pop_front();
      free_events_.push_back(p.event);
      continue;
    }
    if (r != CUDA_ERROR_NOT_READY) {
      return detail::concat(p.what, " failed on the device: ", cuda_error_text(device_.api(), r));
    }
    const double age = std::chrono::duration<double>(now - p.since).count();
    if (age > timeout_s_) {
      return detail::concat(p.what, " enqueued ", static_cast<int>(age),
                            " s ago has not completed (", collective_timeout_variable(), " is ", timeout_s_,
                            " s): a peer stopped taking part");
    }
    break;
  }
  return "";
}

void Watchdog::loop() {
  const auto period = std::chrono::milliseconds(20);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, period, [this] { return stopping_; });
      if (stopping_) return;
    }
    std::string why;
    try {
      why = poll();
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!why.empty()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (failed_) return;
        failed_ = true;
      }
      fail_(why);
      return;
    }
  }
}

}  // namespace device
}  // namespace ringcc
