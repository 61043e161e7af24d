#include "core/device/gpu_report.h"

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

}  // namespace

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

std::string ranks_without(const std::vector<GpuRankInfo>& ranks, bool GpuRankInfo::* field) {
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

std::string encode_rank_info(const GpuRankInfo& i) {
  std::ostringstream os;
  os << i.host << '\n'
     << i.uuid << '\n'
     << i.device << '\n'
     << i.pid << '\n'
     << (i.nccl ? 1 : 0) << '\n'
     << (i.nvrtc ? 1 : 0) << '\n'
     << i.forced;
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

size_t hosts_of(const std::vector<GpuRankInfo>& ranks) {
  std::set<std::string> hosts;
  for (const auto& r : ranks) hosts.insert(r.host);
  return hosts.size();
}

size_t gpus_of(const std::vector<GpuRankInfo>& ranks) {
  std::set<std::string> uuids;
  for (const auto& r : ranks) uuids.insert(r.uuid);
  return uuids.size();
}

std::vector<std::pair<int, int>> local_peer_pids(const std::vector<GpuRankInfo>& ranks, int rank) {
  std::vector<std::pair<int, int>> out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (static_cast<int>(r) != rank && ranks[r].host == ranks[static_cast<size_t>(rank)].host) {
      out.emplace_back(static_cast<int>(r), ranks[r].pid);
    }
  }
  return out;
}

}  // namespace device
}  // namespace ringcc
