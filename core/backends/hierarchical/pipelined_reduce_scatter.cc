#include "core/backends/hierarchical/phase_helper.h"
#include "core/backends/hierarchical/pipelined_phases.h"

namespace ringcc {

void pipelined_hierarchical_reduce_scatter(const PeerSet& cross, ShmCollectives& local,
                                           const std::function<void(int)>& reduce_within, CollectiveArgs& between,
                                           RingSegments sums, RingScratch& scratch, Deadline deadline) {
  const int hosts = cross.size(), me = cross.me;
  // The ring first sends segment me - 1, then reduces into me - 2, me - 3,
  // ..., me; place_of(j) is segment j's place in that order.
  auto place_of = [&](int j) { return ((me - 1 - j) % hosts + hosts) % hosts; };
  PhaseHelper h(local, "reduce_scatter", hosts, deadline);
  auto helper_body = [&] {
    for (int k = 0; k < hosts; ++k) {
      reduce_within(((me - 1 - k) % hosts + hosts) % hosts);
      h.reduced(k + 1);
    }
  };
  sums.ready = [&](int j) { h.wait_reduced(place_of(j) + 1); };
  sums.done = nullptr;
  h.run(helper_body, [&] { ring_reduce_scatter(cross, between, scratch, deadline, &sums); });
}

}  // namespace ringcc
