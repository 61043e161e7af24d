// Dispatch of a collective over a transport: the agreement first (it
// checks that the ranks agree, doubles as the barrier and carries small
// allreduces), then the algorithm.
#include <algorithm>

#include "core/algorithms/ring_algorithms.h"
#include "core/base/error.h"

namespace ringcc {

int64_t pipeline_chunk_elems(int64_t longest, size_t element_bytes) {
  const auto es = static_cast<int64_t>(element_bytes);
  const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(ring_chunk_bytes()) / es);
  const int64_t floor = std::max<int64_t>(1, kMinChunkBytes / es);
  const int64_t split = (longest + kPipelineDepth - 1) / kPipelineDepth;
  return std::min(chunk, std::max(floor, split));
}

void run_over_transport(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline) {
  if (agree_on_collective(ps, a, deadline)) return;  // a small allreduce rode along
  run_agreed_over_transport(ps, a, scratch, deadline);
}

void run_agreed_over_transport(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline) {
  if (a.agree_only) return;  // a device collective: its data moves on the device
  switch (a.kind) {
    case CollectiveKind::kAllreduce:
      return ring_allreduce(ps, a, scratch, deadline);
    case CollectiveKind::kReduceScatter:
      return ring_reduce_scatter(ps, a, scratch, deadline);
    case CollectiveKind::kAllgather:
      return ring_allgather(ps, a, deadline);
    case CollectiveKind::kBroadcast:
      return chain_broadcast(ps, a, deadline);
    case CollectiveKind::kAlltoall:
      return pairwise_alltoall(ps, a, deadline);
    case CollectiveKind::kBarrier:
    case CollectiveKind::kLocalError:
      return;
  }
  raise(ErrorKind::kInternal, "unknown collective kind ", static_cast<int>(a.kind));
}

}  // namespace ringcc
