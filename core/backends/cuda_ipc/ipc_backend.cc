#include "core/backends/cuda_ipc/ipc_backend.h"

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

using namespace ringcc::cuda;
using device::CudaDevice;

namespace {

std::string hex_of(const void* data, size_t size) { return to_hex(data, size); }

void from_hex(const std::string& hex, void* out, size_t size) {
  if (hex.size() != 2 * size) raise(ErrorKind::kInternal, "malformed CUDA IPC handle in the store");
  auto* b = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < size; ++i) b[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
}

// Element counts per step are multiples of this, so that every piece of
// an area starts 16-byte aligned (the kernels' vector path).
constexpr int64_t kAlignElems = 64;

int64_t round_down(int64_t v, int64_t m) { return v / m * m; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

IpcBackend::IpcBackend(const BackendJob& job, Deadline deadline)
    : job_(job), dev_(*job.device), api_(job.device->api()), n_(job.size), me_(job.rank) {
  if (n_ > CudaDevice::kMaxSources) {
    raise(ErrorKind::kInvalidArgument, "CUDA IPC serves at most ", CudaDevice::kMaxSources, " ranks");
  }
  capacity_ =
      static_cast<size_t>(std::max<int64_t>(round_down(env_int("RINGCC_IPC_BUFFER_BYTES", 64 << 20), 4096), 64 * 1024));
  oneshot_bytes_ = static_cast<size_t>(std::max<int64_t>(env_int("RINGCC_IPC_ONESHOT_BYTES", 1 << 20), 0));
  dev_.load_kernels();  // compile (or fetch) now, not inside the first collective
  CudaDevice::Scope scope(dev_);
  dev_.check(api_.cuStreamCreate(&aux_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  dev_.check(api_.cuMemAlloc_v2(&own_, kFlagBytes + capacity_), "cuMemAlloc (CUDA IPC staging area)");
  dev_.check(api_.cuMemsetD8Async(own_, 0, kFlagBytes, aux_), "cuMemsetD8Async");
  dev_.check(api_.cuStreamSynchronize(aux_), "cuStreamSynchronize");
  if (n_ > 1) {
    CUipcMemHandle handle{};
    dev_.check(api_.cuIpcGetMemHandle(&handle, own_), "cuIpcGetMemHandle");
    job_.store->set(job_.key_prefix + "ipc/" + std::to_string(me_), hex_of(&handle, sizeof(handle)));
  }
  base_.assign(static_cast<size_t>(n_), 0);
  base_[static_cast<size_t>(me_)] = own_;
  for (int r = 0; r < n_; ++r) {
    if (r == me_) continue;
    const std::string hex = job_.store->get(job_.key_prefix + "ipc/" + std::to_string(r), until(deadline));
    CUipcMemHandle peer{};
    from_hex(hex, &peer, sizeof(peer));
    CUdeviceptr mapped = 0;
    const CUresult res = api_.cuIpcOpenMemHandle_v2(&mapped, peer, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (res != CUDA_SUCCESS) {
      raise(ErrorKind::kInvalidArgument, "CUDA IPC: cannot map rank ", r, "'s staging area (",
            device::cuda_error_text(api_, res),
            "); processes in different containers or PID namespaces, or without permission to "
            "share device memory, cannot use CUDA IPC: set RINGCC_GPU_BACKEND=host");
    }
    base_[static_cast<size_t>(r)] = mapped;
  }
  const std::string flags = env_str("RINGCC_IPC_FLAGS", "device");
  if (flags == "host") {
    set_up_host_flags(deadline);
  } else if (flags == "device") {
    flags_ = base_;
  } else {
    raise(ErrorKind::kInvalidArgument, "RINGCC_IPC_FLAGS must be device or host, got '", flags, "'");
  }
  watchdog_ = std::make_unique<device::Watchdog>(dev_, job_.timeout_s, job_.local_peer_pids(), nullptr,
                                                 [this](const std::string& why) { abort(why); });
  RINGCC_LOG(kDebug, "CUDA IPC among ", n_, " ranks on ", dev_.properties().uuid, ": ", capacity_ >> 20,
             " MiB staging per rank, kernels ", dev_.kernels_origin());
  if (n_ > 1 && me_ == 0 && dev_.properties().mps == 0) advise_mps();
}

// Without MPS the GPU runs the processes' contexts in turns, and every
// collective among them waits for those turns: about 0.3 ms a call on an
// H100 whatever the size up to 1 MiB, against 0.04 ms under MPS
// (docs/gpu.md). Said once per process, by the group's first rank.
void IpcBackend::advise_mps() const {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  RINGCC_LOG(kWarning, n_, " ranks share GPU ", dev_.properties().uuid,
             " without MPS: the GPU runs their processes in turns, which costs each collective about 0.3 ms; "
             "start NVIDIA's Multi-Process Service (nvidia-cuda-mps-control -d) before the job to run them "
             "side by side (docs/gpu.md, \"Ranks sharing a GPU\")");
}

IpcBackend::~IpcBackend() {
  if (watchdog_) watchdog_->stop();
  try {
    CudaDevice::Scope scope(dev_);
    bool quiet = false;
    if (!aborted_.load()) {
      // Every rank, this one included, must be done with the areas of the
      // last step (the peers reading this rank's, this rank reading
      // theirs) before they are unmapped and freed: wait for every done
      // flag (bounded).
      const uint32_t g = gen_.load();
      for (int r = 0; r < n_ && g > 0; ++r) {
        api_.cuStreamWaitValue32_v2(aux_, flag(me_, kDone, r), g, CU_STREAM_WAIT_VALUE_GEQ);
      }
      const Deadline deadline = deadline_after(job_.timeout_s);
      for (;;) {
        const CUresult r = api_.cuStreamQuery(aux_);
        if (r != CUDA_ERROR_NOT_READY) {
          quiet = r == CUDA_SUCCESS;
          break;
        }
        if (Clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    for (int r = 0; r < n_; ++r) {
      if (r != me_ && base_.size() > static_cast<size_t>(r) && base_[static_cast<size_t>(r)]) {
        api_.cuIpcCloseMemHandle(base_[static_cast<size_t>(r)]);
      }
    }
    if (quiet) {
      for (auto& page : flag_pages_) {
        if (page.data()) api_.cuMemHostUnregister(page.data());
      }
    } else {
      // Work may still wait on the pages: they stay mapped and registered.
      new std::vector<ShmSegment>(std::move(flag_pages_));
    }
    // After an abort (or a peer that never finished) the area may still be
    // read: it is left allocated rather than freed under a reader.
    if (quiet && own_) api_.cuMemFree_v2(own_);
    if (aux_ && quiet) api_.cuStreamDestroy_v2(aux_);
  } catch (...) {
  }
}

CUdeviceptr IpcBackend::flag(int owner, Flag which, int from) const {
  static_assert(3 * 1024 <= kFlagBytes, "the flag page holds 3 x 16 words, 64 bytes apart");
  return flags_[static_cast<size_t>(owner)] + static_cast<CUdeviceptr>(which) * 1024 +
         static_cast<CUdeviceptr>(from) * 64;
}

void IpcBackend::set_up_host_flags(Deadline deadline) {
  // One page per rank, named in the store; every rank maps and registers
  // every page, then the names are removed (the mappings stay).
  uint8_t nonce[8];
  random_bytes(nonce, sizeof(nonce));
  const std::string mine = "/ringcc-ipcflags-" + std::to_string(job_.gpus[static_cast<size_t>(me_)].pid) + "-" +
                           to_hex(nonce, sizeof(nonce));
  flag_pages_.resize(static_cast<size_t>(n_));
  flag_pages_[static_cast<size_t>(me_)] = ShmSegment::create(mine, 4096);
  if (n_ > 1) job_.store->set(job_.key_prefix + "ipcflags/" + std::to_string(me_), mine);
  for (int r = 0; r < n_; ++r) {
    if (r == me_) continue;
    const std::string name = job_.store->get(job_.key_prefix + "ipcflags/" + std::to_string(r), until(deadline));
    flag_pages_[static_cast<size_t>(r)] = ShmSegment::open(name, 4096);
  }
  flags_.assign(static_cast<size_t>(n_), 0);
  for (int r = 0; r < n_; ++r) {
    void* page = flag_pages_[static_cast<size_t>(r)].data();
    dev_.check(api_.cuMemHostRegister_v2(page, 4096, kMemHostRegisterPortable | kMemHostRegisterDeviceMap),
               "cuMemHostRegister (CUDA IPC flags)");
    dev_.check(api_.cuMemHostGetDevicePointer_v2(&flags_[static_cast<size_t>(r)], page, 0),
               "cuMemHostGetDevicePointer");
  }
  if (n_ > 1) {
    job_.store->set(job_.key_prefix + "ipcflags-mapped/" + std::to_string(me_), "1");
    for (int r = 0; r < n_; ++r) {
      if (r != me_) job_.store->get(job_.key_prefix + "ipcflags-mapped/" + std::to_string(r), until(deadline));
    }
  }
  ShmSegment::unlink(mine);
}

uint8_t* IpcBackend::area(int rank) const {
  return reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(base_[static_cast<size_t>(rank)] + kFlagBytes));
}

void IpcBackend::check_usable() const {
  if (aborted_.load()) {
    std::lock_guard<std::mutex> lock(reason_mu_);
    raise(ErrorKind::kPeerFailure, "CUDA IPC collectives were aborted: ", reason_);
  }
}

void IpcBackend::begin_step(CUstream s) {
  check_usable();
  const uint32_t g = gen_.load() + 1;
  gen_.store(g);
  // Every rank must be done with this rank's area from the last step: the
  // peers reading it, and this rank too, whose last step may have run on
  // another stream (this rank's own done word, written at the end of it).
  if (g > 1) {
    for (int r = 0; r < n_; ++r) wait_for(s, r, kDone);
  }
}

void IpcBackend::signal(CUstream s, Flag which) {
  const uint32_t g = gen_.load();
  for (int r = 0; r < n_; ++r) {
    if (r == me_ && which != kDone) continue;  // this rank's own done word: for the next step and the teardown
    dev_.check(api_.cuStreamWriteValue32_v2(s, flag(r, which, me_), g, CU_STREAM_WRITE_VALUE_DEFAULT),
               "cuStreamWriteValue32");
  }
}

void IpcBackend::wait_for(CUstream s, int peer, Flag which) {
  uint32_t value = gen_.load();
  if (which == kDone) value -= 1;  // the previous step's
  dev_.check(api_.cuStreamWaitValue32_v2(s, flag(me_, which, peer), value, CU_STREAM_WAIT_VALUE_GEQ),
             "cuStreamWaitValue32");
}

void IpcBackend::wait_all(CUstream s, Flag which) {
  for (int r = 0; r < n_; ++r) {
    if (r != me_) wait_for(s, r, which);
  }
}

void IpcBackend::copy(CUstream s, void* dst, const void* src, int64_t count, size_t es) {
  if (count <= 0 || dst == src) return;
  dev_.check(api_.cuMemcpyDtoDAsync_v2(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                                       static_cast<size_t>(count) * es, s),
             "cuMemcpyDtoDAsync");
}

// Elements [off, off + len) of the input (scaled by prescale) to dst.
void IpcBackend::copy_in(CUstream s, const CollectiveArgs& a, int64_t off, int64_t len, uint8_t* dst) {
  const size_t es = dtype_size(a.dtype);
  device::for_each_piece(a, false, off, len, [&](uint8_t* src, int64_t rel, int64_t count) {
    uint8_t* to = dst + rel * static_cast<int64_t>(es);
    if (!src) {
      dev_.check(api_.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(to), 0, static_cast<size_t>(count) * es, s),
                 "cuMemsetD8Async");
    } else if (a.prescale != 1.0) {
      dev_.scale(s, to, src, count, a.dtype, a.prescale);
    } else {
      copy(s, to, src, count, es);
    }
  });
}

// src to elements [off, off + len) of the output.
void IpcBackend::copy_out(CUstream s, const CollectiveArgs& a, int64_t off, int64_t len, const uint8_t* src) {
  const size_t es = dtype_size(a.dtype);
  device::for_each_piece(a, true, off, len, [&](uint8_t* dst, int64_t rel, int64_t count) {
    if (dst) copy(s, dst, src + rel * static_cast<int64_t>(es), count, es);
  });
}

void IpcBackend::run(CollectiveArgs& a, Deadline) {
  check_usable();
  const CUstream s = device::stream_of(a);
  CudaDevice::Scope scope(dev_);
  watchdog_->enter(collective_name(a.kind));
  struct Leave {
    device::Watchdog& w;
    ~Leave() { w.leave(); }
  } leave{*watchdog_};
  try {
    switch (a.kind) {
      case CollectiveKind::kAllreduce:
        allreduce(a);
        break;
      case CollectiveKind::kReduceScatter:
        reduce_scatter(a);
        break;
      case CollectiveKind::kAllgather:
        allgather(a);
        break;
      case CollectiveKind::kBroadcast:
        broadcast(a);
        break;
      case CollectiveKind::kAlltoall:
        alltoall(a);
        break;
      case CollectiveKind::kBarrier:
      case CollectiveKind::kLocalError:
        return;  // the host agreement was the barrier
    }
  } catch (const Error& e) {
    // The peers wait for steps this rank will not take: stop everyone.
    if (e.kind() != ErrorKind::kPeerFailure) abort(std::string("rank ") + std::to_string(me_) + ": " + e.what());
    throw;
  }
  watchdog_->track(s, collective_name(a.kind));
  check_usable();  // aborted while enqueueing: the results are not to be trusted
}

void IpcBackend::allreduce(CollectiveArgs& a) {
  const CUstream s = device::stream_of(a);
  const size_t es = dtype_size(a.dtype);
  const int64_t count = a.count;
  a.result_count = count;
  if (count == 0) return;
  const bool one_shot = a.segments.empty() && (n_ <= 2 || static_cast<size_t>(count) * es <= oneshot_bytes_);
  const int64_t step = round_down(static_cast<int64_t>(capacity_ / es), kAlignElems);
  std::vector<const void*> srcs(static_cast<size_t>(n_));
  for (int64_t off = 0; off < count; off += step) {
    const int64_t m = std::min(step, count - off);
    // RINGCC_GPU_TRACE marks the phases of the first step.
    auto mark = [&](const char* name) {
      if (job_.trace && off == 0) job_.trace->device_mark(s, name);
    };
    begin_step(s);
    mark("area-free");
    copy_in(s, a, off, m, area(me_));
    signal(s, kReady);
    mark("sent");
    wait_all(s, kReady);
    mark("peers-ready");
    if (one_shot) {
      // Every rank reduces the same sources in rank order: identical results.
      for (int r = 0; r < n_; ++r) srcs[static_cast<size_t>(r)] = area(r);
      dev_.reduce(s, static_cast<uint8_t*>(a.out) + off * static_cast<int64_t>(es), srcs.data(), n_, m, a.dtype, a.op,
                  a.postscale);
      mark("reduced");
    } else {
      const int64_t shard = std::max<int64_t>(kAlignElems, ceil_div(ceil_div(m, n_), kAlignElems) * kAlignElems);
      auto lo = [&](int r) { return std::min<int64_t>(shard * r, m); };
      const int64_t my_lo = lo(me_), my_len = lo(me_ + 1) - my_lo;
      for (int r = 0; r < n_; ++r) srcs[static_cast<size_t>(r)] = area(r) + my_lo * static_cast<int64_t>(es);
      dev_.reduce(s, area(me_) + my_lo * static_cast<int64_t>(es), srcs.data(), n_, my_len, a.dtype, a.op, a.postscale);
      mark("reduced");
      signal(s, kReduced);
      wait_all(s, kReduced);
      mark("peers-reduced");
      for (int r = 0; r < n_; ++r) {
        const int64_t rlo = lo(r), rlen = lo(r + 1) - rlo;
        copy_out(s, a, off + rlo, rlen, area(r) + rlo * static_cast<int64_t>(es));
      }
    }
    signal(s, kDone);
  }
}

void IpcBackend::reduce_scatter(CollectiveArgs& a) {
  const CUstream s = device::stream_of(a);
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  const int64_t rows = a.row_elems > 0 ? a.count / a.row_elems : 0;
  auto first = [&](int r) { return block_first_row(rows, n_, r) * a.row_elems; };
  auto len = [&](int r) { return block_rows(rows, n_, r) * a.row_elems; };
  int64_t longest = 0;
  for (int r = 0; r < n_; ++r) longest = std::max(longest, len(r));
  a.result_count = len(me_);
  const int64_t q = round_down(static_cast<int64_t>(capacity_) / es / n_, kAlignElems);
  const auto* in = static_cast<const uint8_t*>(a.in);
  std::vector<const void*> srcs(static_cast<size_t>(n_));
  for (int64_t off = 0; off < longest; off += q) {
    begin_step(s);
    for (int r = 0; r < n_; ++r) {
      const int64_t m = std::clamp<int64_t>(len(r) - off, 0, q);
      uint8_t* to = area(me_) + r * q * es;
      const uint8_t* from = in + (first(r) + off) * es;
      if (m == 0) continue;
      if (a.prescale != 1.0) {
        dev_.scale(s, to, from, m, a.dtype, a.prescale);
      } else {
        copy(s, to, from, m, static_cast<size_t>(es));
      }
    }
    signal(s, kReady);
    wait_all(s, kReady);
    const int64_t m = std::clamp<int64_t>(len(me_) - off, 0, q);
    for (int r = 0; r < n_; ++r) srcs[static_cast<size_t>(r)] = area(r) + me_ * q * es;
    dev_.reduce(s, static_cast<uint8_t*>(a.out) + off * es, srcs.data(), n_, m, a.dtype, a.op, a.postscale);
    signal(s, kDone);
  }
}

void IpcBackend::allgather(CollectiveArgs& a) {
  const CUstream s = device::stream_of(a);
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  std::vector<int64_t> displ(static_cast<size_t>(n_) + 1, 0);
  int64_t longest = 0;
  for (int r = 0; r < n_; ++r) {
    displ[static_cast<size_t>(r) + 1] = displ[static_cast<size_t>(r)] + a.recv_counts[static_cast<size_t>(r)];
    longest = std::max(longest, a.recv_counts[static_cast<size_t>(r)]);
  }
  a.result_count = displ.back();
  auto* out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(a.result_count));
  a.out = out;
  const int64_t step = round_down(static_cast<int64_t>(capacity_) / es, kAlignElems);
  const auto* in = static_cast<const uint8_t*>(a.in);
  for (int64_t off = 0; off < longest; off += step) {
    begin_step(s);
    const int64_t mine = std::clamp<int64_t>(a.count - off, 0, step);
    copy(s, area(me_), in + off * es, mine, static_cast<size_t>(es));
    signal(s, kReady);
    copy(s, out + (displ[static_cast<size_t>(me_)] + off) * es, in + off * es, mine, static_cast<size_t>(es));
    wait_all(s, kReady);
    for (int r = 0; r < n_; ++r) {
      if (r == me_) continue;
      const int64_t m = std::clamp<int64_t>(a.recv_counts[static_cast<size_t>(r)] - off, 0, step);
      copy(s, out + (displ[static_cast<size_t>(r)] + off) * es, area(r), m, static_cast<size_t>(es));
    }
    signal(s, kDone);
  }
}

void IpcBackend::broadcast(CollectiveArgs& a) {
  const CUstream s = device::stream_of(a);
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  a.result_count = a.count;
  const int64_t step = round_down(static_cast<int64_t>(capacity_) / es, kAlignElems);
  const auto* in = static_cast<const uint8_t*>(a.in);
  auto* out = static_cast<uint8_t*>(a.out);
  for (int64_t off = 0; off < a.count; off += step) {
    const int64_t m = std::min(step, a.count - off);
    begin_step(s);
    if (me_ == a.root) {
      copy(s, area(me_), in + off * es, m, static_cast<size_t>(es));
      signal(s, kReady);
      copy(s, out + off * es, in + off * es, m, static_cast<size_t>(es));
    } else {
      wait_for(s, a.root, kReady);
      copy(s, out + off * es, area(a.root), m, static_cast<size_t>(es));
    }
    signal(s, kDone);
  }
}

void IpcBackend::alltoall(CollectiveArgs& a) {
  const CUstream s = device::stream_of(a);
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  const size_t n = static_cast<size_t>(n_);
  if (a.alltoall_counts.size() != n * n) {
    raise(ErrorKind::kInternal, "device alltoall without every rank's counts");
  }
  auto sent = [&](int from, int to) {
    return a.alltoall_counts[static_cast<size_t>(from) * n + static_cast<size_t>(to)];
  };
  std::vector<int64_t> sdispl(n + 1, 0), rdispl(n + 1, 0);
  int64_t longest = 0;
  for (int r = 0; r < n_; ++r) {
    sdispl[static_cast<size_t>(r) + 1] = sdispl[static_cast<size_t>(r)] + sent(me_, r);
    rdispl[static_cast<size_t>(r) + 1] = rdispl[static_cast<size_t>(r)] + sent(r, me_);
    for (int q = 0; q < n_; ++q) longest = std::max(longest, sent(r, q));
  }
  a.recv_counts.assign(n, 0);
  for (int r = 0; r < n_; ++r) a.recv_counts[static_cast<size_t>(r)] = sent(r, me_);
  a.result_count = rdispl.back();
  auto* out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(a.result_count));
  a.out = out;
  const int64_t slot = round_down(static_cast<int64_t>(capacity_) / es / n_, kAlignElems);
  const auto* in = static_cast<const uint8_t*>(a.in);
  for (int64_t off = 0; off < longest; off += slot) {
    begin_step(s);
    for (int q = 0; q < n_; ++q) {
      const int64_t m = std::clamp<int64_t>(sent(me_, q) - off, 0, slot);
      copy(s, area(me_) + q * slot * es, in + (sdispl[static_cast<size_t>(q)] + off) * es, m, static_cast<size_t>(es));
    }
    signal(s, kReady);
    wait_all(s, kReady);
    for (int r = 0; r < n_; ++r) {
      const int64_t m = std::clamp<int64_t>(sent(r, me_) - off, 0, slot);
      copy(s, out + (rdispl[static_cast<size_t>(r)] + off) * es, area(r) + me_ * slot * es, m, static_cast<size_t>(es));
    }
    signal(s, kDone);
  }
}

void IpcBackend::release_waits() {
  // Far ahead of any generation this rank or a peer can be waiting for (the
  // waits compare cyclically): every word of this rank's page (its own
  // waits end), and this rank's word in every peer's page (peers still
  // waiting for this rank stop too; a dead peer's page is written in vain).
  const uint32_t value = gen_.load() + (1u << 28);
  CudaDevice::Scope scope(dev_);
  for (Flag f : {kReady, kReduced, kDone}) {
    for (int r = 0; r < n_; ++r) {
      api_.cuStreamWriteValue32_v2(aux_, flag(me_, f, r), value, CU_STREAM_WRITE_VALUE_DEFAULT);
      if (r != me_) api_.cuStreamWriteValue32_v2(aux_, flag(r, f, me_), value, CU_STREAM_WRITE_VALUE_DEFAULT);
    }
  }
}

void IpcBackend::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(reason_mu_);
    if (aborted_.load()) return;
    reason_ = reason;
    aborted_.store(true);
  }
  RINGCC_LOG(kError, "CUDA IPC collectives aborted: ", reason);
  try {
    release_waits();
  } catch (...) {
  }
}

namespace {

// The device reduction reads one source per rank.
constexpr size_t kMaxIpcRanks = 16;

std::string refuses(const BackendJob& job, bool forced) {
  const size_t hosts = device::hosts_of(job.gpus);
  if (hosts > 1) return "the ranks span " + std::to_string(hosts) + " hosts (CUDA IPC needs every rank on one host)";
  const std::string no_nvrtc = device::ranks_without(job.gpus, &device::GpuRankInfo::nvrtc);
  if (!no_nvrtc.empty()) {
    return "NVRTC (for CUDA IPC's device kernels) was not found on rank(s) " + no_nvrtc +
           ": pip install nvidia-cuda-nvrtc (CUDA 13) or nvidia-cuda-nvrtc-cu12 (CUDA 12), or point "
           "RINGCC_NVRTC_LIB at a libnvrtc.so";
  }
  if (job.gpus.size() > kMaxIpcRanks) {
    return "CUDA IPC serves at most " + std::to_string(kMaxIpcRanks) + " ranks, not " + std::to_string(job.gpus.size());
  }
  // Ranks on GPUs of their own are NCCL's; CUDA IPC serves them only when told to.
  const size_t gpus = device::gpus_of(job.gpus);
  if (!forced && gpus > 1)
    return "the ranks use " + std::to_string(gpus) + " GPUs (CUDA IPC serves ranks that share one)";
  return "";
}

std::unique_ptr<Backend> make(const BackendJob& job, Deadline deadline) {
  return std::make_unique<IpcBackend>(job, deadline);
}

}  // namespace

BackendEntry cuda_ipc_backend() { return {"ipc", MemoryKind::kCuda, &refuses, &make, nullptr}; }

}  // namespace ringcc
