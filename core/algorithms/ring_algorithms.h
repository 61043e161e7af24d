// Collectives over a point-to-point Transport, for ranks that do not all
// share one host (or when RINGCC_TRANSPORT=tcp forces sockets): ring
// allreduce (reduce-scatter then allgather, pipelined in chunks), ring
// allgather with per-rank lengths, a pipelined chain broadcast, ring
// reduce-scatter and a pairwise alltoall.
#pragma once

#include <cstdint>
#include <functional>
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

// Entry point: the agreement (agree_on_collective), then the algorithm.
void run_over_transport(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline);
// The algorithm alone, for a caller that ran the agreement its own way.
void run_agreed_over_transport(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline);

// Every rank learns every rank's header and checks them (raising the same
// error on every rank on disagreement), in O(log n) steps; it doubles as a
// barrier and fills a.recv_counts. An allreduce or a broadcast of at most
// inline_allreduce_bytes(), or an allgather whose blocks together are at
// most that, rides along and is complete when this returns true; false:
// the data is still to move.
bool agree_on_collective(const PeerSet& ps, CollectiveArgs& a, Deadline deadline);
// RINGCC_INLINE_BYTES (default 64 KiB; 0: never), read once.
int64_t inline_allreduce_bytes();

// Elements per pipelined chunk for pieces of at most `longest` elements of
// `element_bytes` each: ring_chunk_bytes(), but a piece shorter than that
// is still cut in kPipelineDepth chunks (none under kMinChunkBytes), so
// that reducing or forwarding one overlaps the transfer of the next.
constexpr int64_t kPipelineDepth = 4;
constexpr int64_t kMinChunkBytes = 16 << 10;
int64_t pipeline_chunk_elems(int64_t longest, size_t element_bytes);

// Receives `len` elements from rank `from` over `t` in chunks of
// `chunk_elems`, alternating between the two halves of `staging` (2 *
// chunk_elems elements), and reduces each chunk with src into dst (src
// null: into dst in place) while the next arrives; `also` (the caller's
// own send) keeps progressing. `what` names the collective in a timeout.
void ring_recv_reduce(Transport* t, int from, uint8_t* dst, const uint8_t* src, int64_t len, const CollectiveArgs& a,
                      uint8_t* staging, int64_t chunk_elems, Request* also, Deadline deadline, const char* what);

// Where a ring allreduce finds its segments when the caller places them
// (the segment finished by ring position j is `length[j]` elements at
// element `offset[j]` of a.out), and when it may touch them: ready(j)
// before segment j is first sent or reduced into (in the order me, me - 1,
// ..., me + 1), done(j) once the ring neither reads nor writes it again (in
// the order me + 1, me, ..., me + 2). Either may raise to stop the ring.
// With placed segments the ring leaves a.in, prescale and postscale to the
// caller: it reduces a.out in place.
struct RingSegments {
  std::vector<int64_t> offset, length;
  std::function<void(int)> ready, done;
};

// The pieces, each in its own file; they expect the agreement done.
void ring_allreduce(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline,
                    const RingSegments* placed = nullptr);
// With placed segments it reduces them in place in a.out, leaving segment
// me the result, and leaves a.in, prescale and postscale to the caller;
// ready(j) comes before segment j is first sent or reduced into (in the
// order me - 1, me - 2, ..., me), done is not called.
void ring_reduce_scatter(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline,
                         const RingSegments* placed = nullptr);
// With places, the block of ring position j goes to places[j] (a.out is
// left alone).
void ring_allgather(const PeerSet& ps, CollectiveArgs& a, Deadline deadline, uint8_t* const* places = nullptr);
void chain_broadcast(const PeerSet& ps, CollectiveArgs& a, Deadline deadline);
void pairwise_alltoall(const PeerSet& ps, CollectiveArgs& a, Deadline deadline);

}  // namespace ringcc
