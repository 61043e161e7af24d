#include "core/device/gpu_selection.h"

#include <map>
#include <set>
#include <sstream>

#include "core/base/error.h"

namespace ringcc {
namespace device {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string piece;
  std::stringstream ss(s);
  while (std::getline(ss, piece, sep)) out.push_back(piece);
  return out;
}

// "ranks 0 and 2 share GPU-..." for the first shared device, else "".
std::string first_shared_gpu(const std::vector<GpuRankInfo>& ranks) {
  std::map<std::string, std::vector<int>> by_uuid;
  for (size_t r = 0; r < ranks.size(); ++r) by_uuid[ranks[r].uuid].push_back(static_cast<int>(r));
  for (const auto& [uuid, who] : by_uuid) {
    if (who.size() > 1) {
      std::ostringstream os;
      os << "ranks";
      for (size_t i = 0; i < who.size(); ++i) os << (i ? (i + 1 == who.size() ? " and " : ", ") : " ") << who[i];
      os << " share " << uuid;
      return os.str();
    }
  }
  return "";
}

std::string ranks_without(const std::vector<GpuRankInfo>& ranks, bool GpuRankInfo::*field) {
  std::ostringstream os;
  bool any = false;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!(ranks[r].*field)) {
      os << (any ? ", " : "") << r;
      any = true;
    }
  }
  return os.str();
}

}  // namespace

const char* gpu_backend_name(GpuBackendKind kind) {
  switch (kind) {
    case GpuBackendKind::kNccl: return "nccl";
    case GpuBackendKind::kIpc: return "ipc";
    case GpuBackendKind::kHostStaging: return "host";
  }
  return "?";
}

std::string encode_rank_info(const GpuRankInfo& i) {
  std::ostringstream os;
  os << i.host << '\n' << i.uuid << '\n' << i.device << '\n' << i.pid << '\n' << (i.nccl ? 1 : 0) << '\n'
     << (i.nvrtc ? 1 : 0) << '\n' << i.forced;
  return os.str();
}

GpuRankInfo decode_rank_info(const std::string& text) {
  const auto f = split(text, '\n');
  if (f.size() < 6) raise(ErrorKind::kInternal, "malformed GPU rank information '", text, "'");
  GpuRankInfo i;
  i.host = f[0];
  i.uuid = f[1];
  i.device = std::stoi(f[2]);
  i.pid = std::stoi(f[3]);
  i.nccl = f[4] == "1";
  i.nvrtc = f[5] == "1";
  i.forced = f.size() > 6 ? f[6] : "";
  return i;
}

GpuChoice choose_gpu_backend(const std::vector<GpuRankInfo>& ranks) {
  const size_t n = ranks.size();
  std::set<std::string> hosts, uuids, forced;
  for (const auto& r : ranks) {
    hosts.insert(r.host);
    uuids.insert(r.uuid);
    forced.insert(r.forced);
  }
  if (forced.size() > 1) {
    std::ostringstream os;
    for (size_t r = 0; r < n; ++r) os << (r ? ", " : "") << "rank " << r << ": '" << ranks[r].forced << "'";
    raise(ErrorKind::kInvalidArgument, "RINGCC_GPU_BACKEND differs between ranks (", os.str(),
          "); set the same value (nccl, ipc or host) on every rank, or none");
  }
  const std::string want = n ? ranks[0].forced : "";
  const bool distinct = uuids.size() == n;
  const bool one_host = hosts.size() == 1;
  const bool one_gpu = uuids.size() == 1;
  const std::string no_nccl = ranks_without(ranks, &GpuRankInfo::nccl);
  const std::string no_nvrtc = ranks_without(ranks, &GpuRankInfo::nvrtc);
  GpuChoice c;
  if (want == "nccl") {
    if (!no_nccl.empty()) {
      raise(ErrorKind::kInvalidArgument, "RINGCC_GPU_BACKEND=nccl, but NCCL was not found on rank(s) ",
            no_nccl, ": pip install nvidia-nccl-cu13 (CUDA 13) or nvidia-nccl-cu12 (CUDA 12), or point "
            "RINGCC_NCCL_LIB at a libnccl.so.2");
    }
    if (!distinct) {
      raise(ErrorKind::kInvalidArgument, "RINGCC_GPU_BACKEND=nccl, but ", first_shared_gpu(ranks),
            ", and NCCL refuses ranks that share a GPU (\"Duplicate GPU detected\"); use "
            "RINGCC_GPU_BACKEND=ipc or host, or give each rank its own GPU");
    }
    c.kind = GpuBackendKind::kNccl;
    c.reason = "RINGCC_GPU_BACKEND=nccl";
    return c;
  }
  if (want == "ipc") {
    if (!one_host) {
      raise(ErrorKind::kInvalidArgument, "RINGCC_GPU_BACKEND=ipc needs every rank on one host, but the "
            "ranks span ", hosts.size(), " hosts");
    }
    if (!no_nvrtc.empty()) {
      raise(ErrorKind::kInvalidArgument, "RINGCC_GPU_BACKEND=ipc needs NVRTC for its device kernels, "
            "which was not found on rank(s) ", no_nvrtc, ": pip install nvidia-cuda-nvrtc (CUDA 13) "
            "or nvidia-cuda-nvrtc-cu12 (CUDA 12), or point RINGCC_NVRTC_LIB at a libnvrtc.so");
    }
    if (n > static_cast<size_t>(kMaxIpcRanks)) {
      raise(ErrorKind::kInvalidArgument, "RINGCC_GPU_BACKEND=ipc serves at most ", kMaxIpcRanks,
            " ranks, not ", n);
    }
    c.kind = GpuBackendKind::kIpc;
    c.reason = "RINGCC_GPU_BACKEND=ipc";
    return c;
  }
  if (want == "host") {
    c.kind = GpuBackendKind::kHostStaging;
    c.reason = "RINGCC_GPU_BACKEND=host";
    return c;
  }
  if (!want.empty()) {
    raise(ErrorKind::kInvalidArgument, "RINGCC_GPU_BACKEND must be nccl, ipc or host, got '", want, "'");
  }
  if (distinct && no_nccl.empty()) {
    c.kind = GpuBackendKind::kNccl;
    c.reason = n == 1 ? "one rank, NCCL found" : "every rank has its own GPU and NCCL";
    return c;
  }
  if (one_host && one_gpu && no_nvrtc.empty() && n <= static_cast<size_t>(kMaxIpcRanks)) {
    c.kind = GpuBackendKind::kIpc;
    c.reason = n == 1 ? "one rank without NCCL" : "every rank shares one GPU";
    return c;
  }
  c.kind = GpuBackendKind::kHostStaging;
  std::ostringstream why;
  if (distinct) {
    why << "NCCL was not found on rank(s) " << no_nccl;
  } else if (!one_host || !one_gpu) {
    why << first_shared_gpu(ranks) << " (NCCL refuses that) while the ranks use " << uuids.size()
        << " GPUs on " << hosts.size() << " host(s) (CUDA IPC needs one GPU on one host)";
  } else if (!no_nvrtc.empty()) {
    why << "the ranks share one GPU, but NVRTC (for CUDA IPC's kernels) was not found on rank(s) "
        << no_nvrtc;
  } else {
    why << n << " ranks share one GPU, more than CUDA IPC's " << kMaxIpcRanks;
  }
  c.reason = why.str();
  return c;
}

}  // namespace device
}  // namespace ringcc
