// Where a job's ranks run. Ranks that report the same host name share a
// host; on each host they are numbered in rank order (their local rank).
// A rank's local group is the ranks on its host, its cross group the ranks
// with its local rank on every host, in rank order.
#pragma once

#include <string>
#include <vector>

namespace ringcc {

struct Topology {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;
  int cross_rank = 0, cross_size = 1;
  int hosts = 1;
  bool homogeneous = true;          // every host runs as many ranks
  std::vector<int> local_ranks{0};  // global ranks of the local group
  std::vector<int> cross_ranks{0};  // global ranks of the cross group

  bool all_local() const { return local_size == size; }
};

// hosts[r]: rank r's host name.
Topology topology_of(const std::vector<std::string>& hosts, int rank);

}  // namespace ringcc
