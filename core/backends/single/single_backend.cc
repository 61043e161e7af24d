#include "core/backends/single/single_backend.h"

#include <atomic>
#include <cstring>
#include <mutex>

#include "core/base/error.h"
#include "core/collective/reduction.h"

namespace ringcc {

namespace {

// out = in * prescale * postscale, rounded after each factor as the ring
// and shared-memory algorithms do; nothing at all in place and unscaled.
void copy_scaled(void* out, const void* in, int64_t count, DataType dtype, double prescale, double postscale) {
  if (count <= 0) return;
  if (in == nullptr) {  // a fused segment without input contributes zeros
    std::memset(out, 0, static_cast<size_t>(count) * dtype_size(dtype));
  } else if (prescale != 1.0) {
    scale_copy(out, in, count, dtype, prescale);
  } else if (in != out) {
    std::memmove(out, in, static_cast<size_t>(count) * dtype_size(dtype));
  }
  if (in == nullptr && prescale != 1.0) scale_inplace(out, count, dtype, prescale);
  if (postscale != 1.0) scale_inplace(out, count, dtype, postscale);
}

// The output of a collective whose caller may leave its allocation to us.
void* output_of(CollectiveArgs& a, int64_t count) {
  if (a.out_count < 0) a.out = a.allocate(count);
  return a.out;
}

class SingleBackend : public Backend {
 public:
  const char* name() const override { return "single"; }
  MemoryKind memory() const override { return MemoryKind::kHost; }
  bool gathers_segments() const override { return true; }

  void run(CollectiveArgs& a, Deadline /*deadline*/) override {
    if (aborted_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(mu_);
      raise(ErrorKind::kPeerFailure, reason_);
    }
    // The same checks, and the same errors, as a job of several ranks.
    const bool alltoall = a.kind == CollectiveKind::kAlltoall;
    const std::vector<int64_t> counts = alltoall ? a.send_counts : std::vector<int64_t>{};
    check_agreement({make_header(a)}, {0}, counts, 0);
    a.recv_counts.assign(1, alltoall ? a.send_counts[0] : a.count);
    if (a.agree_only) {
      if (alltoall) a.alltoall_counts = counts;
      return;
    }
    a.result_count = a.recv_counts[0];
    switch (a.kind) {
      case CollectiveKind::kAllreduce:
        if (!a.segments.empty()) {
          for (const BufferSegment& s : a.segments) {
            if (s.out) copy_scaled(s.out, s.in, s.count, a.dtype, a.prescale, a.postscale);
          }
          return;
        }
        return copy_scaled(a.out, a.in, a.count, a.dtype, a.prescale, a.postscale);
      case CollectiveKind::kReduceScatter:
        return copy_scaled(a.out, a.in, a.count, a.dtype, a.prescale, a.postscale);
      case CollectiveKind::kAllgather:
      case CollectiveKind::kAlltoall:
        return copy_scaled(output_of(a, a.result_count), a.in, a.result_count, a.dtype, 1.0, 1.0);
      case CollectiveKind::kBroadcast:
        return copy_scaled(a.out, a.in, a.count, a.dtype, 1.0, 1.0);
      case CollectiveKind::kBarrier:
      case CollectiveKind::kLocalError:
        return;
    }
    raise(ErrorKind::kInternal, "unknown collective kind ", static_cast<int>(a.kind));
  }

  void abort(const std::string& reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.load(std::memory_order_relaxed)) return;
    reason_ = reason;
    aborted_.store(true, std::memory_order_release);
  }

 private:
  std::atomic<bool> aborted_{false};
  std::mutex mu_;
  std::string reason_;  // under mu_
};

std::string refuses(const BackendJob& job, bool /*forced*/) { return job.size == 1 ? "" : "more than one rank"; }

std::unique_ptr<Backend> make(const BackendJob& /*job*/, Deadline /*deadline*/) {
  return std::make_unique<SingleBackend>();
}

}  // namespace

BackendEntry single_backend() { return {"single", MemoryKind::kHost, &refuses, &make, nullptr}; }

}  // namespace ringcc
