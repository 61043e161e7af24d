// Collectives among ranks that all share one host, through shared memory
// (algorithms/shm_collectives.h): chosen when every rank is on this host,
// unless RINGCC_TRANSPORT says tcp or mpi. Fused allreduces read their
// segments in place and write the results back in place.
#pragma once

#include "core/backends/backend.h"

namespace ringcc {

BackendEntry shm_backend();

}  // namespace ringcc
