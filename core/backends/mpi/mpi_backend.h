// Collectives over MPI (RINGCC_TRANSPORT=mpi in a job started through MPI):
// mpi_collectives.h says how.
#pragma once

#include "core/backends/backend.h"

namespace ringcc {

BackendEntry mpi_backend();

}  // namespace ringcc
