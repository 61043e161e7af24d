// Collectives over a point-to-point Transport, for ranks that do not all
// share one host (or when RINGCC_TRANSPORT=tcp forces sockets): ring
// allreduce (reduce-scatter then allgather, pipelined in chunks), ring
// allgather with per-rank lengths, a pipelined chain broadcast, ring
// reduce-scatter and a pairwise alltoall.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/deadline.h"
#include "core/collective/collective_args.h"
#include "core/transport/transport.h"

namespace ringcc {

// The ranks an algorithm runs over and how to reach each of them.
struct PeerSet {
  std::vector<int> ranks;         // global ranks, in ring order
  int me = 0;                     // my index in ranks
  std::vector<Transport*> links;  // indexed by index in ranks (null for me)

  int size() const { return static_cast<int>(ranks.size()); }
  int right() const { return (me + 1) % size(); }
  int left() const { return (me + size() - 1) % size(); }
};

// Reusable scratch memory for the algorithms (grown on demand).
struct RingScratch {
  std::vector<uint8_t> chunks;  // receive staging for the reduce steps
  std::vector<uint8_t> work;    // reduce-scatter's copy of the input
  uint8_t* get(std::vector<uint8_t>& v, size_t bytes) {
    if (v.size() < bytes) v.resize(bytes);
    return v.data();
  }
};

// Entry point: exchanges and checks headers, then runs the algorithm.
void run_over_transport(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline);

// The pieces, each in its own file.
void ring_exchange_headers(const PeerSet& ps, CollectiveArgs& a, Deadline deadline);
void ring_allreduce(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline);
void ring_reduce_scatter(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline);
void ring_allgather(const PeerSet& ps, CollectiveArgs& a, Deadline deadline);
void chain_broadcast(const PeerSet& ps, CollectiveArgs& a, Deadline deadline);
void pairwise_alltoall(const PeerSet& ps, CollectiveArgs& a, Deadline deadline);

}  // namespace ringcc
