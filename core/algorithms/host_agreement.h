// The agreement that opens every collective (agree_on_collective), for
// ranks grouped by host: the ranks of a host first pool their headers (and
// what rides along) in shared memory, in one phase, then each exchanges
// the host's set with its peers of the same local rank on the other hosts,
// by recursive doubling: one shared-memory phase and O(log H) round trips
// over the network for H hosts, where the flat agreement takes O(log N)
// round trips, the first ones between ranks of one host over sockets.
// Verdict, errors and ridden results are those of agree_on_collective.
#pragma once

#include "core/algorithms/ring_algorithms.h"
#include "core/algorithms/shm_collectives.h"

namespace ringcc {

// world: every rank of the job (its indices are global ranks); cross: the
// ranks of this rank's local rank, one per host; local: this host's ranks.
// Returns true when the collective rode along and is complete.
bool agree_by_host(const PeerSet& world, const PeerSet& cross, ShmCollectives& local, CollectiveArgs& a,
                   Deadline deadline);

}  // namespace ringcc
