#include "core/device/gpu_collectives.h"

#include <unistd.h>

#include "core/backends/cuda_ipc/ipc_backend.h"
#include "core/device/device_memory.h"
#include "core/backends/host_staging/staging_backend.h"
#include "core/backends/nccl/nccl_backend.h"
#include "core/device/gpu_libraries.h"
#include "core/device/gpu_selection.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/socket.h"

namespace ringcc {
namespace device {

namespace {

// The least time the ranks give each other to set a GPU backend up.
constexpr double kSetUpSeconds = 120;

std::chrono::milliseconds until(Deadline deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

}  // namespace

GpuCollectives::GpuCollectives(int rank, int size, std::shared_ptr<Store> store, std::string key_prefix,
                               double timeout_s, std::function<void(CollectiveArgs&)> host_run)
    : rank_(rank),
      size_(size),
      store_(std::move(store)),
      key_prefix_(std::move(key_prefix)),
      timeout_s_(timeout_s),
      host_run_(std::move(host_run)) {}

GpuCollectives::~GpuCollectives() = default;

std::string GpuCollectives::backend_name() const {
  std::lock_guard<std::mutex> lock(mu_);
  return backend_ ? backend_->name() : "";
}

void GpuCollectives::set_up(int device, Deadline deadline) {
  CudaDevice& dev = CudaDevice::get(device);
  GpuRankInfo mine;
  mine.host = host_name();
  mine.uuid = dev.properties().uuid;
  mine.device = device;
  mine.pid = static_cast<int>(::getpid());
  mine.nccl = nccl_available();
  mine.nvrtc = library_info(GpuLibrary::kNvrtc).found;
  mine.forced = env_str("RINGCC_GPU_BACKEND", "");
  DeviceJob job;
  job.rank = rank_;
  job.size = size_;
  job.store = store_;
  job.key_prefix = key_prefix_;
  job.device = &dev;
  job.timeout_s = timeout_s_;
  job.host_run = host_run_;
  trace_ = GpuTrace::from_env(dev, rank_);
  job.trace = trace_.get();
  job.ranks.resize(static_cast<size_t>(size_));
  job.ranks[static_cast<size_t>(rank_)] = mine;
  if (size_ > 1) {
    store_->set(key_prefix_ + "rank/" + std::to_string(rank_), encode_rank_info(mine));
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      job.ranks[static_cast<size_t>(r)] =
          decode_rank_info(store_->get(key_prefix_ + "rank/" + std::to_string(r), until(deadline)));
    }
  }
  const GpuChoice choice = choose_gpu_backend(job.ranks);
  std::unique_ptr<DeviceBackend> backend;
  switch (choice.kind) {
    case GpuBackendKind::kNccl: backend = std::make_unique<NcclBackend>(job, deadline); break;
    case GpuBackendKind::kIpc: backend = std::make_unique<IpcBackend>(job, deadline); break;
    case GpuBackendKind::kHostStaging: backend = std::make_unique<StagingBackend>(job); break;
  }
  if (choice.kind == GpuBackendKind::kHostStaging && mine.forced.empty()) {
    RINGCC_LOG(kWarning, "GPU collectives go through host memory (slow): ", choice.reason,
               "; RINGCC_GPU_BACKEND=nccl|ipc|host chooses one");
  }
  RINGCC_LOG(kDebug, "GPU backend ", backend->name(), " on ", mine.uuid, " (cuda:", device, "): ", choice.reason);
  std::lock_guard<std::mutex> lock(mu_);
  backend_ = std::move(backend);
  device_ = device;
}

void GpuCollectives::run(CollectiveArgs& a, Deadline deadline, Clock::time_point started) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_.empty()) raise(ErrorKind::kPeerFailure, "GPU collectives were aborted: ", aborted_);
  }
  if (!backend_) {
    // Setting up compiles (or loads) the device kernels and starts NCCL on
    // every rank before they meet: a one-time step, bounded more loosely.
    set_up(a.device, std::max(deadline, deadline_after(std::max(timeout_s_, kSetUpSeconds))));
  }
  if (a.device != device_) {
    raise(ErrorKind::kInvalidArgument, "this communicator runs its GPU collectives on cuda:", device_,
          ", but the tensor is on cuda:", a.device);
  }
  GpuTrace* trace = a.kind == CollectiveKind::kBarrier || a.kind == CollectiveKind::kLocalError ? nullptr : trace_.get();
  if (trace) {
    trace->begin(a, backend_->name(), started);
    trace->device_mark(device::stream_of(a), "start");
  }
  backend_->run(a, deadline);
  if (trace) {
    trace->device_mark(device::stream_of(a), "end");
    trace->end(device::stream_of(a));
  }
}

void GpuCollectives::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.empty()) aborted_ = reason.empty() ? "aborted" : reason;
  if (backend_) backend_->abort(reason);
}

}  // namespace device
}  // namespace ringcc
