// Where a job's ranks run. Ranks that report the same host name share a
// host; on each host they are numbered in rank order (their local rank).
// A rank's local group is the ranks on its host, its cross group the ranks
// with its local rank on every host, in rank order.
#pragma once

#include <cstdint>
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
  std::vector<int> local_rank_of{0};  // every rank's local rank, by global rank
  // The fewest CPUs per rank on any machine of the job (the CPUs its ranks
  // may run on together, over its ranks), alike on every rank; 0 when a
  // rank did not say.
  double cpus_per_rank = 0;

  bool all_local() const { return local_size == size; }
};

// hosts[r]: rank r's host name.
Topology topology_of(const std::vector<std::string>& hosts, int rank);

// Where a rank says it runs: what it posts in the rendezvous store, which
// may be anyone's. Its host name groups it; its process lets a rank on
// the same host check the claim.
struct RankPlace {
  std::string host;
  int64_t pid = 0;
  uint64_t pid_namespace = 0;
  // The kernel it runs under (its boot id: the same in every network, UTS
  // or container namespace of one machine), and the CPUs it may run on.
  // Ranks under one kernel share its CPUs whatever their host names say.
  std::string machine;
  std::vector<uint64_t> cpu_mask;  // 64 CPUs per word

  static RankPlace mine();
  // "host\npid pidns machine mask": the first two lines of what a rank posts.
  std::string text() const;
  // From text(); *rest gets what follows it.
  static RankPlace parse(const std::string& text, std::string* rest);
};

// The same from what every rank said of where it runs, with cpus_per_rank.
Topology topology_of(const std::vector<RankPlace>& places, int rank);

// Checks, on this rank, what the others say of where they run, as far as
// this rank can see for itself: a rank that says it runs on this host, in
// this pid namespace, must be a live process of this user here; and when
// this rank's launcher says that every rank runs on this host
// (`launcher_single_host`, naming why), every rank must say so. Raises
// Error(kInvalidArgument) naming the rank and what it said otherwise: a
// process that is not one of the job's ranks wrote to the store.
void confirm_places(const std::vector<RankPlace>& places, int rank, const std::string& launcher_single_host);

// The ranks under this rank's kernel (itself included) and the CPUs they
// may run on together: {ranks, cpus}; {1, 0} when a rank did not say.
struct MachineSharing {
  int ranks = 1;
  int cpus = 0;
};
MachineSharing machine_sharing(const std::vector<RankPlace>& places, int rank);
// Tells the wait policy (note_host_sharing) what machine_sharing found.
void note_machine_sharing(const std::vector<RankPlace>& places, int rank);

}  // namespace ringcc
