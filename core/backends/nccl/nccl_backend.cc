#include "core/backends/nccl/nccl_backend.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/base/sha256.h"
#include "core/device/gpu_libraries.h"
#include "core/device/gpu_trace.h"

namespace ringcc {

using namespace ringcc::nccl;
using device::CudaDevice;

namespace {

void from_hex(const std::string& hex, void* out, size_t size) {
  if (hex.size() != 2 * size) raise(ErrorKind::kInternal, "malformed NCCL unique id in the store");
  auto* b = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < size; ++i) b[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
}

// Ops per NCCL group: large batches go in several groups.
constexpr size_t kGroupOps = 1024;

}  // namespace

NcclBackend::NcclBackend(const BackendJob& job, Deadline deadline)
    : job_(job),
      dev_(*job.device),
      nccl_(device::nccl_library("the NCCL backend")),
      version_(device::library_info(device::GpuLibrary::kNccl).version_code),
      scratch_(*job.device) {
  ncclUniqueId id{};
  const std::string key = job_.key_prefix + "nccl/id";
  if (job_.rank == 0) {
    check(nccl_.ncclGetUniqueId(&id), "ncclGetUniqueId", deadline);
    if (job_.size > 1) job_.store->set(key, to_hex(&id, sizeof(id)));
  } else {
    from_hex(job_.store->get(key, until(deadline)), &id, sizeof(id));
  }
  CudaDevice::Scope scope(dev_);  // NCCL takes the device from the current context
  ncclComm_t comm = nullptr;
  if (nccl_.ncclCommInitRankConfig) {
    ncclConfig_t config;
    config.blocking = 0;
    nonblocking_ = true;
    const ncclResult_t r = nccl_.ncclCommInitRankConfig(&comm, job_.size, id, job_.rank, &config);
    comm_ = comm;
    try {
      check(r, "ncclCommInitRankConfig", deadline);
    } catch (...) {
      if (comm) nccl_.ncclCommAbort(comm);
      comm_ = nullptr;
      throw;
    }
  } else {
    check(nccl_.ncclCommInitRank(&comm, job_.size, id, job_.rank), "ncclCommInitRank", deadline);
    comm_ = comm;
  }
  // The scale kernels, compiled (or read from the cache) now rather than
  // inside a collective that the watchdog times; without NVRTC, scaling
  // raises when it is asked for.
  if (library_info(device::GpuLibrary::kNvrtc).found) {
    try {
      dev_.load_kernels();
    } catch (const Error& e) {
      RINGCC_LOG(kWarning, "ringcc's device kernels (pre/postscale, integer average) are unavailable: ", e.what());
    }
  }
  watchdog_ = std::make_unique<device::Watchdog>(
      dev_, job_.timeout_s, job_.local_peer_pids(),
      [this]() -> std::string {
        std::lock_guard<std::mutex> lock(mu_);
        if (!comm_) return "";
        ncclResult_t state = ncclSuccess;
        if (nccl_.ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return "";
        if (state == ncclSuccess || state == ncclInProgress) return "";
        return "NCCL reported an asynchronous error: " + last_error(state);
      },
      [this](const std::string& why) { abort(why); });
  RINGCC_LOG(kDebug, "NCCL ", device::library_info(device::GpuLibrary::kNccl).version, " communicator of ", job_.size,
             " ranks on ", dev_.properties().uuid, nonblocking_ ? " (non-blocking)" : "");
}

NcclBackend::~NcclBackend() {
  if (watchdog_) watchdog_->stop();
  std::lock_guard<std::mutex> lock(mu_);
  if (!comm_) return;
  CudaDevice::Scope scope(dev_);
  if (aborted_.load()) {
    nccl_.ncclCommAbort(comm_);
  } else {
    // Flush what was enqueued, then free (bounded: abort if it hangs).
    const Deadline deadline = deadline_after(job_.timeout_s);
    bool clean = true;
    if (nccl_.ncclCommFinalize) {
      ncclResult_t r = nccl_.ncclCommFinalize(comm_);
      ncclResult_t state = r;
      while (state == ncclInProgress && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (nccl_.ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
      }
      clean = state == ncclSuccess;
    }
    if (clean) {
      nccl_.ncclCommDestroy(comm_);
    } else {
      nccl_.ncclCommAbort(comm_);
    }
  }
  comm_ = nullptr;
}

std::string NcclBackend::last_error(ncclResult_t r) const {
  std::string text = nccl_.ncclGetErrorString ? nccl_.ncclGetErrorString(r) : "";
  if (nccl_.ncclGetLastError) {
    const char* last = nccl_.ncclGetLastError(comm_);
    if (last && *last) text += std::string(": ") + last;
  }
  return text;
}

ncclResult_t NcclBackend::call(const std::function<ncclResult_t(ncclComm_t)>& f) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!comm_) raise(ErrorKind::kPeerFailure, "NCCL collectives were aborted: ", reason_);
  return f(comm_);
}

void NcclBackend::check(ncclResult_t r, const char* what, Deadline deadline) {
  if (r == ncclInProgress) {
    // A non-blocking communicator finishes the call in the background.
    ncclResult_t state = ncclInProgress;
    auto pause = std::chrono::microseconds(20);
    while (state == ncclInProgress) {
      if (call([&](ncclComm_t c) { return nccl_.ncclCommGetAsyncError(c, &state); }) != ncclSuccess) break;
      if (state != ncclInProgress) break;
      if (aborted_.load()) check_usable();
      if (Clock::now() >= deadline) {
        abort(std::string(what) + " did not finish within " + collective_timeout_variable());
        raise(ErrorKind::kTimeout, what, " timed out after ", job_.timeout_s, " s (", collective_timeout_variable(),
              " sets the limit): a peer did not take part");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    }
    r = state;
  }
  if (r == ncclSuccess) return;
  std::string text;
  {
    std::lock_guard<std::mutex> lock(mu_);
    text = last_error(r);
  }
  if (r == ncclRemoteError || r == ncclSystemError) {
    raise(ErrorKind::kPeerFailure, what, " failed: ", text);
  }
  if (r == ncclInvalidArgument || r == ncclInvalidUsage) {
    raise(ErrorKind::kInvalidArgument, what, " failed: ", text);
  }
  raise(ErrorKind::kInternal, what, " failed: ", text);
}

void NcclBackend::check_usable() const {
  if (aborted_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    raise(ErrorKind::kPeerFailure, "NCCL collectives were aborted: ", reason_);
  }
}

ncclDataType_t NcclBackend::nccl_type(DataType dtype) const {
  switch (dtype) {
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      if (version_ < nccl_version(2, 10, 0)) {
        raise(ErrorKind::kUnsupportedType, "bfloat16 needs NCCL 2.10 or newer");
      }
      return ncclBfloat16;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kUInt8:
      return ncclUint8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
  }
  raise(ErrorKind::kUnsupportedType, "unsupported dtype value ", static_cast<int>(dtype));
}

ncclRedOp_t NcclBackend::nccl_op(ReduceOp op) const {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return ncclSum;
    case ReduceOp::kProduct:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
  }
  raise(ErrorKind::kInvalidArgument, "invalid reduce op value ", static_cast<int>(op));
}

void NcclBackend::group(const std::function<void()>& calls, const char* what, Deadline deadline) {
  // ncclGroupStart/End are per thread, not per communicator.
  check(nccl_.ncclGroupStart(), "ncclGroupStart", deadline);
  try {
    calls();
  } catch (...) {
    nccl_.ncclGroupEnd();
    throw;
  }
  check(nccl_.ncclGroupEnd(), what, deadline);
}

void NcclBackend::run(CollectiveArgs& a, Deadline deadline) {
  check_usable();
  CudaDevice::Scope scope(dev_);
  watchdog_->enter(collective_name(a.kind));
  struct Leave {
    device::Watchdog& w;
    ~Leave() { w.leave(); }
  } leave{*watchdog_};
  switch (a.kind) {
    case CollectiveKind::kAllreduce:
      allreduce(a, deadline);
      break;
    case CollectiveKind::kReduceScatter:
      reduce_scatter(a, deadline);
      break;
    case CollectiveKind::kAllgather:
      allgather(a, deadline);
      break;
    case CollectiveKind::kBroadcast:
      broadcast(a, deadline);
      break;
    case CollectiveKind::kAlltoall:
      alltoall(a, deadline);
      break;
    case CollectiveKind::kBarrier:
      barrier(a, deadline);
      break;
    case CollectiveKind::kLocalError:
      return;
  }
  watchdog_->track(device::stream_of(a), collective_name(a.kind));
}

void NcclBackend::allreduce(CollectiveArgs& a, Deadline deadline) {
  const cuda::CUstream s = device::stream_of(a);
  const ncclDataType_t type = nccl_type(a.dtype);
  const bool is_float = a.dtype == DataType::kFloat16 || a.dtype == DataType::kBFloat16 ||
                        a.dtype == DataType::kFloat32 || a.dtype == DataType::kFloat64;
  // Average (a sum with postscale 1/size by now): NCCL's avg when that is
  // all, for floats (its integer average rounds differently from ringcc's).
  ncclRedOp_t op = nccl_op(a.op);
  double post = a.postscale;
  if (op == ncclSum && is_float && job_.size > 1 && post == 1.0 / job_.size && version_ >= nccl_version(2, 10, 0)) {
    op = ncclAvg;
    post = 1.0;
  }
  a.result_count = a.count;
  auto one = [&](const void* in, void* out, int64_t count) {
    if (count == 0) return;
    if (a.prescale != 1.0) {
      dev_.scale(s, out, in, count, a.dtype, a.prescale);
      in = out;
    }
    check(call([&](ncclComm_t c) { return nccl_.ncclAllReduce(in, out, static_cast<size_t>(count), type, op, c, s); }),
          "ncclAllReduce", deadline);
  };
  if (a.segments.empty()) {
    one(a.in, a.out, a.count);
    if (job_.trace) job_.trace->host_mark("nccl-enqueued");
  } else {
    for (const BufferSegment& seg : a.segments) {
      if ((!seg.in || !seg.out) && seg.count > 0) {
        raise(ErrorKind::kInternal, "a fused device allreduce needs every segment's buffers");
      }
    }
    // One NCCL group per kGroupOps segments (prescaling is enqueued before
    // the group opens: kernels are not NCCL calls).
    for (size_t first = 0; first < a.segments.size(); first += kGroupOps) {
      const size_t last = std::min(a.segments.size(), first + kGroupOps);
      if (a.prescale != 1.0) {
        for (size_t i = first; i < last; ++i) {
          const BufferSegment& seg = a.segments[i];
          dev_.scale(s, seg.out, seg.in, seg.count, a.dtype, a.prescale);
        }
      }
      group(
          [&] {
            for (size_t i = first; i < last; ++i) {
              const BufferSegment& seg = a.segments[i];
              if (seg.count == 0) continue;
              const void* in = a.prescale != 1.0 ? seg.out : seg.in;
              check(call([&](ncclComm_t c) {
                      return nccl_.ncclAllReduce(in, seg.out, static_cast<size_t>(seg.count), type, op, c, s);
                    }),
                    "ncclAllReduce", deadline);
            }
          },
          "ncclGroupEnd (fused allreduce)", deadline);
    }
  }
  if (post != 1.0) {
    if (a.segments.empty()) {
      dev_.scale(s, a.out, a.out, a.count, a.dtype, post);
    } else {
      for (const BufferSegment& seg : a.segments) dev_.scale(s, seg.out, seg.out, seg.count, a.dtype, post);
    }
  }
}

void NcclBackend::reduce_scatter(CollectiveArgs& a, Deadline deadline) {
  const cuda::CUstream s = device::stream_of(a);
  const ncclDataType_t type = nccl_type(a.dtype);
  const ncclRedOp_t op = nccl_op(a.op);
  const int n = job_.size;
  const int64_t rows = a.row_elems > 0 ? a.count / a.row_elems : 0;
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  a.result_count = block_rows(rows, n, job_.rank) * a.row_elems;
  const void* in = a.in;
  if (a.prescale != 1.0 && a.count > 0) {
    // The last user of the scratch buffer may have been another stream.
    if (scratch_stream_ && scratch_stream_ != s) dev_.order_after(s, scratch_stream_);
    scratch_stream_ = s;
    void* scaled = scratch_.reserve(static_cast<size_t>(a.count * es));
    dev_.scale(s, scaled, a.in, a.count, a.dtype, a.prescale);
    in = scaled;
  }
  if (rows % n == 0) {
    if (a.result_count > 0) {
      check(call([&](ncclComm_t c) {
              return nccl_.ncclReduceScatter(in, a.out, static_cast<size_t>(a.result_count), type, op, c, s);
            }),
            "ncclReduceScatter", deadline);
    }
  } else {
    // Uneven blocks: one reduce per block, rooted at its owner.
    group(
        [&] {
          for (int r = 0; r < n; ++r) {
            const int64_t first = block_first_row(rows, n, r) * a.row_elems;
            const int64_t len = block_rows(rows, n, r) * a.row_elems;
            if (len == 0) continue;
            check(call([&](ncclComm_t c) {
                    return nccl_.ncclReduce(static_cast<const uint8_t*>(in) + first * es, a.out,
                                            static_cast<size_t>(len), type, op, r, c, s);
                  }),
                  "ncclReduce", deadline);
          }
        },
        "ncclGroupEnd (reduce_scatter)", deadline);
  }
  if (a.postscale != 1.0) dev_.scale(s, a.out, a.out, a.result_count, a.dtype, a.postscale);
}

void NcclBackend::allgather(CollectiveArgs& a, Deadline deadline) {
  const cuda::CUstream s = device::stream_of(a);
  const ncclDataType_t type = nccl_type(a.dtype);
  const int n = job_.size;
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  int64_t total = 0;
  bool even = true;
  for (int r = 0; r < n; ++r) {
    total += a.recv_counts[static_cast<size_t>(r)];
    even = even && a.recv_counts[static_cast<size_t>(r)] == a.recv_counts[0];
  }
  a.result_count = total;
  auto* out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(total));
  a.out = out;
  if (total == 0) return;
  if (even) {
    check(call([&](ncclComm_t c) {
            return nccl_.ncclAllGather(a.in, out, static_cast<size_t>(a.recv_counts[0]), type, c, s);
          }),
          "ncclAllGather", deadline);
    return;
  }
  // A ragged first dimension: every rank broadcasts its rows into place.
  group(
      [&] {
        int64_t displ = 0;
        for (int r = 0; r < n; ++r) {
          const int64_t count = a.recv_counts[static_cast<size_t>(r)];
          if (count > 0) {
            check(call([&](ncclComm_t c) {
                    return nccl_.ncclBroadcast(a.in, out + displ * es, static_cast<size_t>(count), type, r, c, s);
                  }),
                  "ncclBroadcast", deadline);
          }
          displ += count;
        }
      },
      "ncclGroupEnd (allgather)", deadline);
}

void NcclBackend::broadcast(CollectiveArgs& a, Deadline deadline) {
  a.result_count = a.count;
  if (a.count == 0) return;
  const ncclDataType_t type = nccl_type(a.dtype);
  check(call([&](ncclComm_t c) {
          return nccl_.ncclBroadcast(a.in, a.out, static_cast<size_t>(a.count), type, a.root, c, device::stream_of(a));
        }),
        "ncclBroadcast", deadline);
}

void NcclBackend::alltoall(CollectiveArgs& a, Deadline deadline) {
  const cuda::CUstream s = device::stream_of(a);
  const ncclDataType_t type = nccl_type(a.dtype);
  const int n = job_.size;
  const int me = job_.rank;
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  int64_t total = 0;
  for (int64_t c : a.recv_counts) total += c;
  a.result_count = total;
  auto* out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(total));
  a.out = out;
  const auto* in = static_cast<const uint8_t*>(a.in);
  std::vector<int64_t> sdispl(static_cast<size_t>(n) + 1, 0), rdispl(static_cast<size_t>(n) + 1, 0);
  for (int r = 0; r < n; ++r) {
    sdispl[static_cast<size_t>(r) + 1] = sdispl[static_cast<size_t>(r)] + a.send_counts[static_cast<size_t>(r)];
    rdispl[static_cast<size_t>(r) + 1] = rdispl[static_cast<size_t>(r)] + a.recv_counts[static_cast<size_t>(r)];
  }
  const int64_t self = a.send_counts[static_cast<size_t>(me)];
  if (self > 0) {
    dev_.check(
        dev_.api().cuMemcpyDtoDAsync_v2(reinterpret_cast<cuda::CUdeviceptr>(out + rdispl[static_cast<size_t>(me)] * es),
                                        reinterpret_cast<cuda::CUdeviceptr>(in + sdispl[static_cast<size_t>(me)] * es),
                                        static_cast<size_t>(self * es), s),
        "cuMemcpyDtoDAsync");
  }
  group(
      [&] {
        for (int k = 1; k < n; ++k) {
          const int to = (me + k) % n, from = (me - k + n) % n;
          const int64_t sc = a.send_counts[static_cast<size_t>(to)];
          const int64_t rc = a.recv_counts[static_cast<size_t>(from)];
          if (sc > 0) {
            check(call([&](ncclComm_t c) {
                    return nccl_.ncclSend(in + sdispl[static_cast<size_t>(to)] * es, static_cast<size_t>(sc), type, to,
                                          c, s);
                  }),
                  "ncclSend", deadline);
          }
          if (rc > 0) {
            check(call([&](ncclComm_t c) {
                    return nccl_.ncclRecv(out + rdispl[static_cast<size_t>(from)] * es, static_cast<size_t>(rc), type,
                                          from, c, s);
                  }),
                  "ncclRecv", deadline);
          }
        }
      },
      "ncclGroupEnd (alltoall)", deadline);
}

void NcclBackend::barrier(CollectiveArgs& a, Deadline deadline) {
  void* word = scratch_.reserve(sizeof(float));
  check(call([&](ncclComm_t c) {
          return nccl_.ncclAllReduce(word, word, 1, ncclFloat32, ncclSum, c, device::stream_of(a));
        }),
        "ncclAllReduce (barrier)", deadline);
  a.result_count = 0;
}

void NcclBackend::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.load()) return;
    reason_ = reason;
    aborted_.store(true);
  }
  RINGCC_LOG(kError, "NCCL collectives aborted: ", reason);
  // ncclCommAbort stops the kernels this rank enqueued (they may be waiting
  // for a dead peer) and frees the communicator; later calls raise.
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_) {
    try {
      CudaDevice::Scope scope(dev_);
      nccl_.ncclCommAbort(comm_);
    } catch (...) {
    }
    comm_ = nullptr;
  }
}

namespace {

std::string refuses(const BackendJob& job, bool forced) {
  const std::string no_nccl = device::ranks_without(job.gpus, &device::GpuRankInfo::nccl);
  if (!no_nccl.empty()) {
    return "NCCL was not found on rank(s) " + no_nccl +
           ": pip install nvidia-nccl-cu13 (CUDA 13) or nvidia-nccl-cu12 (CUDA 12), or point RINGCC_NCCL_LIB at a "
           "libnccl.so.2";
  }
  const std::string shared = device::first_shared_gpu(job.gpus);
  if (!shared.empty()) {
    return shared + ", and NCCL refuses ranks that share a GPU (\"Duplicate GPU detected\")" +
           (forced ? "; use RINGCC_GPU_BACKEND=ipc or host, or give each rank its own GPU" : "");
  }
  return "";
}

std::unique_ptr<Backend> make(const BackendJob& job, Deadline deadline) {
  return std::make_unique<NcclBackend>(job, deadline);
}

}  // namespace

BackendEntry nccl_backend() { return {"nccl", MemoryKind::kCuda, &refuses, &make, nullptr}; }

}  // namespace ringcc
