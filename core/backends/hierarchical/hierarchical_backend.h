// Allreduce across hosts with several ranks each: reduce-scatter within
// the host in shared memory, allreduce of each rank's shard with its peers
// of the same local rank on the other hosts (the cross group, over TCP),
// then allgather within the host; from RINGCC_HIERARCHICAL_PIPELINE_BYTES
// on, the phases overlap piece by piece (pipelined_phases.h), as the
// reduce-scatter's do.
// Allgather, broadcast and (ranks placed host by host) reduce-scatter
// cross the network once per host too. Chosen when the ranks span hosts,
// every host runs more than one rank and as many as the others, and
// RINGCC_HIERARCHICAL_ALLREDUCE (HOROVOD_HIERARCHICAL_ALLREDUCE) is not 0;
// the other collectives go to the next backend (p2p).
#pragma once

#include "core/backends/backend.h"

namespace ringcc {

BackendEntry hierarchical_backend();

}  // namespace ringcc
