// The process's runtime: ringcc.init()'s communicator and its background
// engine, joining and leaving the job, and every communicator of this
// process (for aborting them all). Implements global_communicator.h, the
// part of it that the rest of the extension (handles, XLA FFI) uses; the
// module's binding tables (collectives.cc) call the rest.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "bindings/global_communicator.h"
#include "core/communicator.h"
#include "core/engine/engine.h"

namespace ringcc_py {

// ringcc.init()'s communicator and engine; each raises
// Error(kNotInitialized) before init(). Need the GIL.
ringcc::Communicator& comm();
ringcc::Engine& engine();

// The same, or null before init() (no error). Need the GIL.
bool is_initialized();
std::shared_ptr<ringcc::Communicator> communicator_if_initialized();
ringcc::Engine* engine_if_initialized();

// Counts `c` among the communicators that abort_all() aborts (held weakly).
void register_communicator(const std::shared_ptr<ringcc::Communicator>& c);

// ringcc.init(mpi_handle=None): joins the job (through MPI when given a
// communicator's handle or started by an MPI launcher without a store
// address) and starts the background engine; nothing when initialized.
void init_runtime(const pybind11::object& mpi_handle);

// ringcc.shutdown(): leaves the job (the engine first), within
// RINGCC_TIMEOUT_S; nothing before init().
void shutdown_runtime();

// ringcc._abort(reason, first_failure): aborts every live communicator of
// this process, logging why (an error for a first failure, a warning for one
// that another rank's failure caused); false when there is none.
bool abort_all(const std::string& reason, bool first_failure);

}  // namespace ringcc_py
