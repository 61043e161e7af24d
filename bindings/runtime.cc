// The process's runtime (runtime.h): ringcc.init()'s communicator and
// engine, their lifecycle, and the registry of this process's communicators.
#include "bindings/runtime.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <vector>

#include "bindings/errors.h"
#include "bindings/interpreter_exit.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/log.h"
#include "core/os/mpi_library.h"
#include "core/rendezvous/prefix_store.h"
#include "core/rendezvous/rendezvous.h"
#include "core/rendezvous/store.h"

namespace py = pybind11;
using ringcc::ErrorKind;

namespace ringcc_py {

namespace {

std::shared_ptr<ringcc::Communicator> g_comm;
std::mutex g_comm_mu;                      // guards g_comm against threads without the GIL (XLA's)
std::unique_ptr<ringcc::Engine> g_engine;  // named collectives of g_comm's ranks
// Guards the replacement of g_engine against threads without the GIL (the
// kernels of frameworks loaded as libraries of their own, kernel_api.cc).
std::mutex g_engine_mu;

// Every communicator of this process (the module's, its engine's, the
// adapters'), so that a process that exits on an error can abort them all.
std::mutex g_registry_mu;
std::vector<std::weak_ptr<ringcc::Communicator>> g_registry;

std::vector<std::shared_ptr<ringcc::Communicator>> live_communicators() {
  std::vector<std::shared_ptr<ringcc::Communicator>> live;
  std::lock_guard<std::mutex> lock(g_registry_mu);
  for (const auto& w : g_registry) {
    if (auto c = w.lock()) live.push_back(std::move(c));
  }
  return live;
}

}  // namespace

void register_communicator(const std::shared_ptr<ringcc::Communicator>& c) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  g_registry.erase(std::remove_if(g_registry.begin(), g_registry.end(), [](const auto& w) { return w.expired(); }),
                   g_registry.end());
  g_registry.push_back(c);
}

ringcc::Engine& engine() {
  if (!g_engine) {
    ringcc::raise(ErrorKind::kNotInitialized, "ringcc is not initialized: call ringcc.init() first");
  }
  return *g_engine;
}

ringcc::Communicator& comm() {
  if (!g_comm) {
    ringcc::raise(ErrorKind::kNotInitialized, "ringcc is not initialized: call ringcc.init() first");
  }
  return *g_comm;
}

bool is_initialized() { return static_cast<bool>(g_comm); }

std::shared_ptr<ringcc::Communicator> communicator_if_initialized() { return g_comm; }

ringcc::Engine* engine_if_initialized() { return g_engine.get(); }

std::shared_ptr<ringcc::Communicator> global_communicator() {
  std::lock_guard<std::mutex> lock(g_comm_mu);
  if (!g_comm) {
    ringcc::raise(ErrorKind::kNotInitialized, "ringcc is not initialized: call ringcc.init() first");
  }
  return g_comm;
}

void with_engine(const std::function<void(ringcc::Engine&)>& use) {
  std::lock_guard<std::mutex> lock(g_engine_mu);
  if (!g_engine) {
    ringcc::raise(ErrorKind::kNotInitialized, "ringcc is not initialized: call ringcc.init() first");
  }
  use(*g_engine);
}

ringcc::EngineWaiter nudge_engine(const std::shared_ptr<ringcc::Work>& waiting) {
  if (!g_engine) return ringcc::EngineWaiter();
  g_engine->nudge(waiting);
  return g_engine->waiter();
}

void init_runtime(const py::object& mpi_handle) {
  if (g_comm) return;
  // The job through MPI: a communicator was given, or an MPI launcher
  // started us without a store address (or RINGCC_TRANSPORT=mpi asks for
  // MPI). Otherwise from the launcher's variables, as always.
  const bool given = !mpi_handle.is_none();
  const bool under_mpi = ringcc::launched_by_mpi() && !ringcc::env_is_set("RINGCC_RANK");
  const bool no_address = !ringcc::env_is_set("RINGCC_MASTER_ADDR") && !ringcc::env_is_set("MASTER_ADDR");
  const bool want_mpi_data = ringcc::env_str("RINGCC_TRANSPORT", "") == "mpi";
  ringcc::RendezvousInfo info;
  if (given || (under_mpi && (no_address || want_mpi_data))) {
    const ringcc::MpiPluginInfo& plugin = ringcc::mpi_plugin_info();
    if (!plugin.loaded && !given && !want_mpi_data) {
      info = ringcc::rendezvous_from_env();  // raises the usual "set RINGCC_MASTER_ADDR" error
    } else {
      if (!plugin.loaded) ringcc::mpi_api();  // raises NotInitializedError: why, and what was tried
      const int64_t handle = given ? py::cast<int64_t>(mpi_handle) : -1;
      BlockingCall call;
      info = ringcc::rendezvous_from_mpi(handle);
    }
  } else {
    info = ringcc::rendezvous_from_env();
  }
  std::shared_ptr<ringcc::Communicator> c;
  std::unique_ptr<ringcc::Engine> e;
  {
    BlockingCall call;
    c = std::make_shared<ringcc::Communicator>(info);
    // The engine gets a communicator of its own: its collectives run in
    // the order the ranks negotiate, independent of direct calls.
    ringcc::RendezvousInfo engine_info = info;
    engine_info.advertise_address = c->advertise_address();
    engine_info.secret = c->secret();
    std::shared_ptr<ringcc::Store> store;
    if (c->store()) store = std::make_shared<ringcc::PrefixStore>("engine", c->store());
    auto ec = std::make_shared<ringcc::Communicator>(engine_info, store);
    e = std::make_unique<ringcc::Engine>(ec, ringcc::EngineOptions::from_env());
    register_communicator(ec);
  }
  register_communicator(c);
  if (c->rank() == 0) RINGCC_LOG(kInfo, c->describe());  // RINGCC_LOG_LEVEL=info: what the job set up
  {
    std::lock_guard<std::mutex> lock(g_comm_mu);
    g_comm = c;
  }
  std::lock_guard<std::mutex> engine_lock(g_engine_mu);
  g_engine = std::move(e);
}

void shutdown_runtime() {
  if (!g_comm) return;
  check_not_in_signal_handler();  // before anything is let go of
  std::shared_ptr<ringcc::Communicator> c;
  {
    std::lock_guard<std::mutex> lock(g_comm_mu);
    c.swap(g_comm);
  }
  std::unique_ptr<ringcc::Engine> e;
  {
    std::lock_guard<std::mutex> engine_lock(g_engine_mu);
    e = std::move(g_engine);
  }
  BlockingCall call;
  // Interrupted, the rest is aborted rather than waited for, and the
  // handler's exception is raised once everything is released.
  std::exception_ptr interrupted;
  try {
    if (e) e->shutdown();
  } catch (const ringcc::Error& error) {
    if (error.kind() != ErrorKind::kInterrupted) throw;
    interrupted = std::current_exception();
    c->abort("interrupted by a signal (its handler raised) while shutting down");
  }
  {
    ringcc::UninterruptibleWait quiet;
    e.reset();
  }
  const std::string leaving = c->describe_leaving();
  try {
    c->shutdown();
  } catch (const ringcc::Error& error) {
    if (error.kind() != ErrorKind::kInterrupted) throw;
    if (!interrupted) interrupted = std::current_exception();
  }
  if (interrupted) std::rethrow_exception(interrupted);
  RINGCC_LOG(kInfo, leaving);
}

bool abort_all(const std::string& reason, bool first_failure) {
  auto live = live_communicators();
  if (live.empty()) return false;
  // The rank the log lines carry (the last communicator made), so that
  // the line names this process as its prefix does.
  const int rank = ringcc::log_rank() >= 0 ? ringcc::log_rank() : live.front()->rank();
  // ringrun reads the first of these lines to name the rank that failed
  // first; a rank that fails because of another's failure says so, as a
  // warning: the error is the other rank's.
  if (first_failure) {
    RINGCC_LOG(kError, "rank ", rank, " aborts the job: ", reason);
  } else {
    RINGCC_LOG(kWarning, "rank ", rank, " aborts after a failure elsewhere in the job: ", reason);
  }
  GilRelease release;
  for (auto& c : live) c->abort(reason);
  return true;
}

}  // namespace ringcc_py
