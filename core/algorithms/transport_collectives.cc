// Dispatch of a collective over a transport: header exchange first (it
// checks agreement and doubles as the barrier), then the algorithm.
#include "core/algorithms/ring_algorithms.h"
#include "core/base/error.h"

namespace ringcc {

void run_over_transport(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline) {
  ring_exchange_headers(ps, a, deadline);
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
