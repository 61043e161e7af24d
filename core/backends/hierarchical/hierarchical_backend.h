// Allreduce across hosts with several ranks each: reduce-scatter within
// the host in shared memory, allreduce of each rank's shard with its peers
// of the same local rank on the other hosts (the cross group, over TCP),
// then allgather within the host; from RINGCC_HIERARCHICAL_PIPELINE_BYTES
// on, the phases overlap piece by piece (pipelined_phases.h), as the
// reduce-scatter's do.
// Allgather, broadcast and (ranks placed host by host) reduce-scatter
// cross the network once per host too. Every collective opens with the
// agreement by host (host_agreement.h); the others (alltoall, barrier,
// reduce-scatter of ranks placed otherwise) then run the flat algorithms
// over every rank. Chosen when the ranks span hosts, every host runs more
// than one rank and as many as the others, and
// RINGCC_HIERARCHICAL_ALLREDUCE (HOROVOD_HIERARCHICAL_ALLREDUCE) is not 0.
#pragma once

#include "core/backends/backend.h"

namespace ringcc {

BackendEntry hierarchical_backend();

}  // namespace ringcc
