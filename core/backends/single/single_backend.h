// The backend of a job of one rank: no peer, so no link, no shared memory
// and no store; a collective checks its arguments as every backend does
// (make_header, check_agreement), then copies its input to its output
// (scaled where asked), or does nothing when it runs in place.
#pragma once

#include "core/backends/backend.h"

namespace ringcc {

BackendEntry single_backend();

}  // namespace ringcc
