// A reduce-scatter whose output lies inside its input, run so that no
// algorithm needs to care: every algorithm may write its output before it
// has read all of its input (the shared-memory one piece by piece, the
// ring its last block), and an output over rows not yet read would take
// the reduction's results as input.
#pragma once

#include "core/backends/backend.h"

namespace ringcc {

// Runs `a` on `backend`; a host reduce-scatter whose output overlaps its
// input runs into a buffer of its own, copied to the output once done.
void run_output_apart(Backend& backend, CollectiveArgs& a, Deadline deadline);

}  // namespace ringcc
