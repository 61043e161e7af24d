#include "core/rendezvous/topology.h"

#include <map>

namespace ringcc {

Topology topology_of(const std::vector<std::string>& hosts, int rank) {
  Topology t;
  t.rank = rank;
  t.size = static_cast<int>(hosts.size());
  const std::string& mine = hosts[static_cast<size_t>(rank)];
  std::vector<int> local_rank_of(hosts.size());
  std::map<std::string, int> per_host;
  t.local_ranks.clear();
  for (size_t r = 0; r < hosts.size(); ++r) {
    local_rank_of[r] = per_host[hosts[r]]++;
    if (hosts[r] == mine) t.local_ranks.push_back(static_cast<int>(r));
  }
  t.local_size = static_cast<int>(t.local_ranks.size());
  t.local_rank = local_rank_of[static_cast<size_t>(rank)];
  t.hosts = static_cast<int>(per_host.size());
  for (const auto& entry : per_host) t.homogeneous = t.homogeneous && entry.second == t.local_size;
  t.cross_ranks.clear();
  t.cross_rank = 0;
  for (size_t r = 0; r < hosts.size(); ++r) {
    if (local_rank_of[r] != t.local_rank) continue;
    if (static_cast<int>(r) < rank) ++t.cross_rank;
    t.cross_ranks.push_back(static_cast<int>(r));
  }
  t.cross_size = static_cast<int>(t.cross_ranks.size());
  return t;
}

}  // namespace ringcc
