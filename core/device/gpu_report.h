// What each rank tells the others about its GPU when a communicator sets up
// its device backend (core/backends/registry.h chooses it from these
// reports, alike on every rank), and what the choice asks of them.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ringcc {
namespace device {

struct GpuRankInfo {
  std::string host;  // host name
  std::string uuid;  // of the rank's CUDA device
  int device = 0;    // its ordinal in the rank's process
  int pid = 0;
  bool nccl = false;   // NCCL found
  bool nvrtc = false;  // NVRTC found (device kernels)
  std::string forced;  // RINGCC_GPU_BACKEND ("" when unset)
};

std::string encode_rank_info(const GpuRankInfo& info);
GpuRankInfo decode_rank_info(const std::string& text);

// How many distinct hosts, and distinct GPUs, the ranks use.
size_t hosts_of(const std::vector<GpuRankInfo>& ranks);
size_t gpus_of(const std::vector<GpuRankInfo>& ranks);
// "ranks 0 and 2 share GPU-..." for the first GPU that ranks share, else "".
std::string first_shared_gpu(const std::vector<GpuRankInfo>& ranks);
// The ranks (as "0, 3") whose report lacks `field` (nccl, nvrtc), "" when none.
std::string ranks_without(const std::vector<GpuRankInfo>& ranks, bool GpuRankInfo::* field);
// (rank, process id) of the ranks other than `rank` on its host, for liveness checks.
std::vector<std::pair<int, int>> local_peer_pids(const std::vector<GpuRankInfo>& ranks, int rank);

}  // namespace device
}  // namespace ringcc
