#include "core/backends/host_staging/staging_backend.h"

#include <algorithm>
#include <mutex>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/device/gpu_trace.h"

namespace ringcc {

using namespace ringcc::cuda;
using device::CudaDevice;

StagingBackend::StagingBackend(const BackendJob& job)
    : job_(job),
      dev_(*job.device),
      api_(job.device->api()),
      chunk_bytes_(
          static_cast<size_t>(std::max<int64_t>(env_int("RINGCC_STAGING_CHUNK_BYTES", 4 << 20) / 256 * 256, 4096))),
      chunk_{device::PinnedBuffer(*job.device), device::PinnedBuffer(*job.device)},
      in_(*job.device),
      out_(*job.device),
      copied_{device::Event(*job.device), device::Event(*job.device)},
      last_(*job.device) {
  if (job.gpus[static_cast<size_t>(job.rank)].forced.empty()) {
    RINGCC_LOG(kWarning, "GPU collectives go through host memory (slow): ", job.chosen_because,
               "; RINGCC_GPU_BACKEND=nccl|ipc|host chooses one");
  }
}

StagingBackend::~StagingBackend() {
  // The last copies out of the pinned buffers finish before they are freed.
  if (pending_) {
    CudaDevice::Scope scope(dev_);
    api_.cuEventSynchronize(last_.get());
  }
}

void StagingBackend::check_usable() const {
  if (aborted_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    raise(ErrorKind::kPeerFailure, "GPU collectives were aborted: ", reason_);
  }
}

void StagingBackend::to_host(CUstream s, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  dev_.check(api_.cuMemcpyDtoHAsync_v2(dst, reinterpret_cast<CUdeviceptr>(src), bytes, s), "cuMemcpyDtoHAsync");
}

void StagingBackend::to_device(CUstream s, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  dev_.check(api_.cuMemcpyHtoDAsync_v2(reinterpret_cast<CUdeviceptr>(dst), src, bytes, s), "cuMemcpyHtoDAsync");
}

void StagingBackend::wait(CUevent e, CUstream s) {
  dev_.check(api_.cuEventRecord(e, s), "cuEventRecord");
  dev_.check(api_.cuEventSynchronize(e), "cuEventSynchronize");
}

void StagingBackend::after_previous() {
  // The host waits for the caller's stream anyway; waiting here too lets
  // the pinned buffers grow (and be freed) safely.
  if (pending_) dev_.check(api_.cuEventSynchronize(last_.get()), "cuEventSynchronize");
}

void StagingBackend::finish(CUstream s) {
  dev_.check(api_.cuEventRecord(last_.get(), s), "cuEventRecord");
  pending_ = true;
}

void StagingBackend::run(CollectiveArgs& a, Deadline) {
  check_usable();
  static std::once_flag logged;
  std::call_once(logged, [&] {
    RINGCC_LOG(kInfo, "GPU collectives of ", job_.size, " ranks go through host memory (host staging)");
  });
  CudaDevice::Scope scope(dev_);
  if (a.kind == CollectiveKind::kAllreduce) {
    allreduce(a);
  } else if (a.kind != CollectiveKind::kBarrier && a.kind != CollectiveKind::kLocalError) {
    whole(a);
  }
}

void StagingBackend::allreduce(CollectiveArgs& a) {
  const CUstream s = device::stream_of(a);
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  const int64_t count = a.count;
  a.result_count = count;
  if (count == 0) return;
  const int64_t step = std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes_) / es);
  const int64_t chunks = (count + step - 1) / step;
  after_previous();
  if (job_.trace) job_.trace->host_mark("previous-done");
  uint8_t* buf[2] = {static_cast<uint8_t*>(chunk_[0].reserve(static_cast<size_t>(step * es))),
                     static_cast<uint8_t*>(chunk_[1].reserve(static_cast<size_t>(step * es)))};
  // Chunk k goes down into buf[k % 2] as soon as buf[k % 2]'s copy up of
  // chunk k - 2 is done (stream order), so two chunks are in flight.
  auto down = [&](int64_t k) {
    const int64_t off = k * step, m = std::min(step, count - off);
    uint8_t* dst = buf[k % 2];
    device::for_each_piece(a, false, off, m, [&](uint8_t* src, int64_t rel, int64_t n) {
      if (src) {
        to_host(s, dst + rel * es, src, static_cast<size_t>(n * es));
      } else {
        std::fill(dst + rel * es, dst + (rel + n) * es, 0);
      }
    });
    dev_.check(api_.cuEventRecord(copied_[k % 2].get(), s), "cuEventRecord");
  };
  down(0);
  if (chunks > 1) down(1);
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t off = k * step, m = std::min(step, count - off);
    dev_.check(api_.cuEventSynchronize(copied_[k % 2].get()), "cuEventSynchronize");
    if (job_.trace && k == 0) job_.trace->host_mark("on-host");
    CollectiveArgs host;
    host.kind = CollectiveKind::kAllreduce;
    host.dtype = a.dtype;
    host.op = a.op;
    host.in = host.out = buf[k % 2];
    host.count = host.out_count = m;
    host.prescale = a.prescale;
    host.postscale = a.postscale;
    job_.host_run(host);
    if (job_.trace && k == 0) job_.trace->host_mark("reduced-on-host");
    device::for_each_piece(a, true, off, m, [&](uint8_t* dst, int64_t rel, int64_t n) {
      if (dst) to_device(s, dst, buf[k % 2] + rel * es, static_cast<size_t>(n * es));
    });
    if (k + 2 < chunks) down(k + 2);
  }
  finish(s);
}

// Every other collective in one piece: input down, the host algorithm on
// pinned buffers, output up.
void StagingBackend::whole(CollectiveArgs& a) {
  const CUstream s = device::stream_of(a);
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  const size_t in_bytes = static_cast<size_t>(a.count * es);
  after_previous();
  uint8_t* hin = static_cast<uint8_t*>(in_.reserve(in_bytes));
  // A broadcast needs only the root's input on the host.
  if (a.kind != CollectiveKind::kBroadcast || a.root == job_.rank) to_host(s, hin, a.in, in_bytes);
  wait(copied_[0].get(), s);

  CollectiveArgs host;
  static_cast<CollectiveScalars&>(host) = static_cast<const CollectiveScalars&>(a);
  host.memory = MemoryKind::kHost;
  host.agree_only = false;
  host.stream = nullptr;
  host.device = -1;
  host.in = hin;
  host.send_counts = a.send_counts;
  int64_t out_elems = a.count;  // broadcast
  if (a.kind == CollectiveKind::kReduceScatter) {
    const int64_t rows = a.row_elems > 0 ? a.count / a.row_elems : 0;
    out_elems = block_rows(rows, job_.size, job_.rank) * a.row_elems;
  }
  uint8_t* hout = nullptr;
  if (a.kind == CollectiveKind::kAllgather || a.kind == CollectiveKind::kAlltoall) {
    host.out = nullptr;
    host.out_count = -1;
    host.allocate = [&](int64_t elements) -> void* {
      hout = static_cast<uint8_t*>(out_.reserve(static_cast<size_t>(std::max<int64_t>(elements, 1) * es)));
      return hout;
    };
  } else {
    hout = static_cast<uint8_t*>(out_.reserve(static_cast<size_t>(std::max<int64_t>(out_elems, 1) * es)));
    host.out = hout;
    host.out_count = out_elems;
  }
  job_.host_run(host);
  const bool gathered = a.kind == CollectiveKind::kAllgather || a.kind == CollectiveKind::kAlltoall;
  a.result_count = gathered ? host.result_count : out_elems;
  a.recv_counts = host.recv_counts;
  void* out = a.out;
  if (gathered) {
    out = a.out_count >= 0 ? a.out : a.allocate(a.result_count);
    a.out = out;
  }
  if (!hout) hout = static_cast<uint8_t*>(out_.reserve(1));
  to_device(s, out, hout, static_cast<size_t>(a.result_count * es));
  finish(s);
}

void StagingBackend::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.load()) return;
  reason_ = reason;
  aborted_.store(true);
}

namespace {

// Host memory serves every job.
std::string refuses(const BackendJob& /*job*/, bool /*forced*/) { return ""; }

std::unique_ptr<Backend> make(const BackendJob& job, Deadline /*deadline*/) {
  return std::make_unique<StagingBackend>(job);
}

}  // namespace

BackendEntry host_staging_backend() { return {"host", MemoryKind::kCuda, &refuses, &make, nullptr}; }

}  // namespace ringcc
