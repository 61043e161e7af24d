#include "core/device/gpu_trace.h"

#include <cstdio>
#include <sstream>
#include <thread>

#include "core/base/env.h"
#include "core/base/log.h"
#include "core/device/gpu_libraries.h"

namespace ringcc {
namespace device {

using namespace ringcc::cuda;

namespace {

constexpr size_t kSlots = 1 << 14;
// The most a record waits for its device marks when the trace is flushed.
constexpr double kFlushWaitS = 10.0;

int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

}  // namespace

std::unique_ptr<GpuTrace> GpuTrace::from_env(CudaDevice& device, int rank) {
  const std::string value = env_str("RINGCC_GPU_TRACE", "");
  if (value.empty() || value == "0") return nullptr;
  return std::unique_ptr<GpuTrace>(new GpuTrace(device, rank, value == "1" ? "" : value));
}

GpuTrace::GpuTrace(CudaDevice& device, int rank, std::string path) : dev_(device), rank_(rank), path_(std::move(path)) {
  if (!path_.empty()) {
    const std::string file = path_ + ".rank" + std::to_string(rank_) + ".jsonl";
    out_.open(file, std::ios::app);
    if (!out_) RINGCC_LOG(kWarning, "RINGCC_GPU_TRACE: cannot write ", file, "; the trace goes to the log");
  }
  CudaDevice::Scope scope(dev_);
  void* host = nullptr;
  if (dev_.api().cuMemHostAlloc(&host, kSlots * sizeof(unsigned long long),
                                kMemHostAllocPortable | kMemHostAllocDeviceMap) == CUDA_SUCCESS &&
      dev_.api().cuMemHostGetDevicePointer_v2(&slots_on_device_, host, 0) == CUDA_SUCCESS) {
    slots_ = static_cast<unsigned long long*>(host);
    capacity_ = kSlots;
  } else {
    if (host) dev_.api().cuMemFreeHost(host);
    RINGCC_LOG(kWarning, "RINGCC_GPU_TRACE: no mapped pinned memory for device timestamps; host marks only");
  }
  RINGCC_LOG(kDebug, "RINGCC_GPU_TRACE: tracing device collectives to ", path_.empty() ? "the log" : path_);
}

GpuTrace::~GpuTrace() {
  try {
    flush();
    CudaDevice::Scope scope(dev_);
    for (auto& r : pending_) {
      if (r.done) dev_.api().cuEventDestroy_v2(r.done);
    }
    // Device marks may still be queued when a flush gave up: the slots stay.
    if (slots_ && pending_.empty()) dev_.api().cuMemFreeHost(slots_);
  } catch (...) {
  }
}

void GpuTrace::begin(const CollectiveArgs& a, const char* backend, Clock::time_point started) {
  write_done(false);
  if (pending_.empty()) used_ = 0;  // every slot is free again
  started_ = started;
  current_ = Record{};
  current_.call = ++calls_;
  current_.kind = collective_name(a.kind == CollectiveKind::kLocalError ? a.failed_kind : a.kind);
  current_.backend = backend;
  current_.bytes = a.count * static_cast<int64_t>(dtype_size(a.dtype));
  current_.realtime_ns =
      realtime_ns() - std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started).count();
  active_ = true;
  host_mark("agreed");
}

void GpuTrace::host_mark(const char* name) {
  if (!active_) return;
  current_.host.emplace_back(name, std::chrono::duration<double, std::micro>(Clock::now() - started_).count());
}

void GpuTrace::device_mark(CUstream stream, const char* name) {
  if (!active_ || !slots_ || used_ >= capacity_) return;
  const size_t slot = used_++;
  slots_[slot] = 0;
  auto* target = reinterpret_cast<unsigned long long*>(static_cast<uintptr_t>(slots_on_device_)) + slot;
  if (dev_.launch_timestamp(stream, target)) {
    current_.device.emplace_back(name, slot);
  } else {
    RINGCC_LOG(kWarning, "RINGCC_GPU_TRACE: ringcc's device kernels are unavailable (NVRTC): host marks only");
    capacity_ = 0;  // no more device marks
  }
}

void GpuTrace::end(CUstream stream) {
  if (!active_) return;
  host_mark("enqueued");
  active_ = false;
  Record r = std::move(current_);
  if (!r.device.empty()) {
    CudaDevice::Scope scope(dev_);
    if (dev_.api().cuEventCreate(&r.done, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS ||
        dev_.api().cuEventRecord(r.done, stream) != CUDA_SUCCESS) {
      r.device.clear();
    }
  }
  pending_.push_back(std::move(r));
}

void GpuTrace::flush() {
  active_ = false;
  write_done(true);
}

void GpuTrace::write_done(bool wait) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(kFlushWaitS);
  while (!pending_.empty()) {
    Record& r = pending_.front();
    if (r.done) {
      CudaDevice::Scope scope(dev_);
      CUresult q = dev_.api().cuEventQuery(r.done);
      while (q == CUDA_ERROR_NOT_READY && wait && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        q = dev_.api().cuEventQuery(r.done);
      }
      if (q == CUDA_ERROR_NOT_READY) return;  // later
      dev_.api().cuEventDestroy_v2(r.done);
      r.done = nullptr;
      if (q != CUDA_SUCCESS) r.device.clear();
    }
    write(r);
    pending_.pop_front();
  }
}

void GpuTrace::write(const Record& r) {
  // Device marks: nanoseconds of the GPU's timer; as microseconds after the
  // first, and the first relative to the host's start of the call (meaningful
  // where the GPU's timer follows the host's realtime clock, as NVIDIA's
  // drivers keep it on Linux).
  std::vector<std::pair<const char*, unsigned long long>> device;
  for (const auto& [name, slot] : r.device) device.emplace_back(name, slots_[slot]);
  std::ostringstream os;
  if (out_.is_open()) {
    os << "{\"rank\": " << rank_ << ", \"call\": " << r.call << ", \"kind\": \"" << r.kind << "\", \"backend\": \""
       << r.backend << "\", \"bytes\": " << r.bytes << ", \"host_start_ns\": " << r.realtime_ns << ", \"host_us\": {";
    for (size_t i = 0; i < r.host.size(); ++i)
      os << (i ? ", " : "") << "\"" << r.host[i].first << "\": " << fixed(r.host[i].second);
    os << "}, \"device_ns\": {";
    for (size_t i = 0; i < device.size(); ++i)
      os << (i ? ", " : "") << "\"" << device[i].first << "\": " << device[i].second;
    os << "}}\n";
    out_ << os.str();
    out_.flush();
    return;
  }
  os << "GPU trace: " << r.kind << " of " << r.bytes << " B (" << r.backend << ", call " << r.call << "): host";
  for (const auto& [name, us] : r.host) os << " " << name << " " << fixed(us) << " us";
  if (!device.empty()) {
    const double lag = (static_cast<double>(device[0].second) - static_cast<double>(r.realtime_ns)) / 1e3;
    os << "; device " << device[0].first << " at host start + " << fixed(lag) << " us";
    for (size_t i = 1; i < device.size(); ++i) {
      os << ", " << device[i].first << " +"
         << fixed((static_cast<double>(device[i].second) - static_cast<double>(device[i - 1].second)) / 1e3) << " us";
    }
  }
  RINGCC_LOG(kWarning, os.str());
}

}  // namespace device
}  // namespace ringcc
