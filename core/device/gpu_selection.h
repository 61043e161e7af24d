// Which GPU backend serves a communicator's CUDA collectives, decided alike
// on every rank from what each rank reports of itself:
//   every rank on its own GPU (distinct device UUIDs), NCCL everywhere: NCCL;
//   every rank on one host and one GPU, NVRTC everywhere: CUDA IPC;
//   anything else (mixed hosts and shared GPUs, no NCCL, no NVRTC): host staging.
// RINGCC_GPU_BACKEND=nccl|ipc|host forces one (every rank must say the
// same); a forced backend that cannot serve the job is an error that names
// the ranks and what is missing.
#pragma once

#include <string>
#include <vector>

namespace ringcc {
namespace device {

enum class GpuBackendKind { kNccl, kIpc, kHostStaging };

const char* gpu_backend_name(GpuBackendKind kind);  // "nccl", "ipc", "host"

// What one rank tells the others when the GPU backend is set up.
struct GpuRankInfo {
  std::string host;      // host name
  std::string uuid;      // of the rank's CUDA device
  int device = 0;        // its ordinal in the rank's process
  int pid = 0;
  bool nccl = false;     // NCCL found
  bool nvrtc = false;    // NVRTC found (device kernels)
  std::string forced;    // RINGCC_GPU_BACKEND ("" when unset)
};

std::string encode_rank_info(const GpuRankInfo& info);
GpuRankInfo decode_rank_info(const std::string& text);

// At most this many ranks share one GPU through CUDA IPC (the device
// reduction reads one source per rank).
constexpr int kMaxIpcRanks = 16;

struct GpuChoice {
  GpuBackendKind kind = GpuBackendKind::kHostStaging;
  std::string reason;  // why, for the log
};

// The same verdict on every rank for the same list; raises
// Error(kInvalidArgument) when RINGCC_GPU_BACKEND differs between ranks,
// names something unknown or cannot serve these ranks.
GpuChoice choose_gpu_backend(const std::vector<GpuRankInfo>& ranks);

}  // namespace device
}  // namespace ringcc
