// The hierarchical allreduce and reduce-scatter with their shared-memory
// phases overlapping the ring between hosts. The buffer is cut in one
// piece per host; a helper thread (PhaseHelper) reduce-scatters the
// pieces within the host in the order the ring consumes them, while the
// calling thread runs the ring over this rank's part of every piece. The
// allreduce's helper then allgathers within the host each piece the ring
// has finished. The ring keeps its steps: only the first piece's
// shared-memory phase (and the allreduce's last allgather) is not hidden
// behind the network.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/algorithms/ring_algorithms.h"
#include "core/algorithms/shm_collectives.h"
#include "core/base/deadline.h"
#include "core/collective/collective_args.h"

namespace ringcc {

// Runs an allreduce (the agreement done, a.op not kAverage) of a.count
// elements over `cross` (one rank per host, this rank's local rank on
// every host) and `local` (the ranks of this host).
void pipelined_hierarchical_allreduce(const PeerSet& cross, ShmCollectives& local, int local_rank, CollectiveArgs& a,
                                      RingScratch& scratch, Deadline deadline);

// Runs the phases of a reduce-scatter whose ranks are placed host by
// host (the agreement done): reduce_within(h) reduce-scatters within this
// host the piece of the input that holds host h's ranks' blocks, into
// segment h of `sums` in between.out; the ring over `cross` (`between`,
// one segment per host) then leaves segment cross.me reduced over every
// host. The helper runs reduce_within in the order the ring reads the
// segments.
void pipelined_hierarchical_reduce_scatter(const PeerSet& cross, ShmCollectives& local,
                                           const std::function<void(int)>& reduce_within, CollectiveArgs& between,
                                           RingSegments sums, RingScratch& scratch, Deadline deadline);

// RINGCC_HIERARCHICAL_PIPELINE_BYTES: allreduces and reduce-scatters of at
// least this many bytes take the pipelined path; 0: never. Unset: from 4
// MiB when every machine of the job has at least 2 CPUs per rank (the
// helper thread needs a CPU of its own to overlap anything), else never.
// cpus_per_rank is alike on every rank (Topology), and so is the choice.
// Read when a job's backend is made, as the shared-settings check reads it.
int64_t hierarchical_pipeline_bytes(double cpus_per_rank);
// As the shared-settings check shows it: "auto" when unset, else the bytes.
std::string hierarchical_pipeline_setting();

}  // namespace ringcc
