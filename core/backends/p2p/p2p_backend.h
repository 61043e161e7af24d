// Collectives over the job's point-to-point links (TCP), with the
// algorithms of algorithms/ring_algorithms.h: chosen when the ranks do not
// all share a host, or RINGCC_TRANSPORT=tcp. (A job of one rank runs on the
// single backend.)
#pragma once

#include "core/backends/backend.h"

namespace ringcc {

BackendEntry p2p_backend();

}  // namespace ringcc
