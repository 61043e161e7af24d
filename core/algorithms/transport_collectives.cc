// Dispatch of a collective over a transport: the agreement first (it
// checks that the ranks agree, doubles as the barrier and carries small
// allreduces), then the algorithm.
#include "core/algorithms/ring_algorithms.h"
#include "core/base/error.h"

namespace ringcc {

void run_over_transport(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline) {
  if (agree_on_collective(ps, a, deadline)) return;  // a small allreduce rode along
  if (a.agree_only) return;                           // a device collective: its data moves on the device
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
