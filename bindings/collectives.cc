// The module's binding tables: the class Communicator, joining and leaving
// the job (runtime.h), what ringcc.init()'s communicator is, and the
// module's collectives and engine controls. The work is elsewhere: the
// runtime (runtime.cc), argument conversion and launch (arguments.cc,
// launch.cc), the Python store (python_store.cc), the fast and raw entry
// points (fast_paths.cc).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "bindings/arguments.h"
#include "bindings/buffer_view.h"
#include "bindings/errors.h"
#include "bindings/fast_paths.h"
#include "bindings/handle.h"
#include "bindings/interpreter_exit.h"
#include "bindings/launch.h"
#include "bindings/output_memory.h"
#include "bindings/output_rows.h"
#include "bindings/python_store.h"
#include "bindings/runtime.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/communicator.h"
#include "core/engine/engine.h"
#include "core/os/cpu_placement.h"
#include "core/os/mpi_library.h"
#include "core/os/wait_policy.h"
#include "core/rendezvous/rendezvous.h"

namespace py = pybind11;
using ringcc::CollectiveArgs;
using ringcc::CollectiveKind;
using ringcc::ErrorKind;

namespace ringcc_py {

namespace {

using CommPtr = std::shared_ptr<ringcc::Communicator>;

// The class Communicator, for adapters that run several process groups.
void bind_communicator(py::module_& m) {
  // A communicator of its own, for adapters that run several process
  // groups: rank and size within the group, and a Python store to meet in.
  py::class_<ringcc::Communicator, CommPtr>(m, "Communicator")
      .def(py::init([](int rank, int size, py::object store, double timeout_s) {
             ringcc::RendezvousInfo info;
             info.rank = rank;
             info.size = size;
             info.timeout_s = timeout_s;
             info.source = "an adapter's store";
             if (rank < 0 || size < 1 || rank >= size) {
               ringcc::raise(ErrorKind::kInvalidArgument, "invalid rank ", rank, " for size ", size);
             }
             auto bridge = python_store(store);
             std::shared_ptr<ringcc::Communicator> c;
             {
               BlockingCall call;
               c = std::make_shared<ringcc::Communicator>(info, bridge);
             }
             register_communicator(c);
             return c;
           }),
           py::arg("rank"), py::arg("size"), py::arg("store"), py::arg("timeout_s") = 0.0,
           "Joins a group of `size` ranks through `store` (set/get/add/check). timeout_s bounds\n"
           "every wait of this communicator (0: RINGCC_TIMEOUT_S).")
      .def(
          "abort", [](CommPtr c, const std::string& reason) { c->abort(reason); }, py::arg("reason"),
          "Fails any collective blocked on this rank, here and on its peers; the communicator\n"
          "is unusable afterwards. Safe from any thread.")
      .def(
          "report_error",
          [](CommPtr c, const std::string& message, const std::string& kind) {
            report_failed_call(c.get(), kind_of(kind), message, "");
          },
          py::arg("message"), py::arg("kind") = "allreduce",
          "Takes part, as a failed participant, in the next collective in issue order (one of\n"
          "`kind` this rank could not start), so that the peers raise MismatchError naming\n"
          "this rank and `message` for that call. Returns at once.")
      .def_property_readonly("timeout_s", &ringcc::Communicator::timeout_s)
      .def("describe", &ringcc::Communicator::describe,
           "One line on what the job set up: ranks, hosts, transport and why, interface, host algorithms, "
           "fusion threshold, bounds.")
      .def_property_readonly("waiting_for", &ringcc::Communicator::waiting_for,
                             "The rank a running collective is blocked on right now, -1 when none (or where\n"
                             "its backend cannot tell: shared memory can).")
      .def_property_readonly("rank", &ringcc::Communicator::rank)
      .def_property_readonly("size", &ringcc::Communicator::size)
      .def_property_readonly("local_rank", &ringcc::Communicator::local_rank)
      .def_property_readonly("local_size", &ringcc::Communicator::local_size)
      .def_property_readonly("cross_rank", &ringcc::Communicator::cross_rank)
      .def_property_readonly("cross_size", &ringcc::Communicator::cross_size)
      .def_property_readonly("transport_name", &ringcc::Communicator::transport_name)
      .def_property_readonly("_object_key", [](const ringcc::Communicator& c) { return py::bytes(c.object_key()); })
      .def_property_readonly("gpu_backend", &ringcc::Communicator::gpu_backend_name,
                             "\"nccl\", \"ipc\" or \"host\" once a CUDA collective ran, else \"\".")
      .def("shutdown",
           [](CommPtr c) {
             BlockingCall call;
             c->shutdown();
           })
      .def_property("compare_shapes", &ringcc::Communicator::compares_shapes,
                    &ringcc::Communicator::set_compares_shapes,
                    "Whether the ranks compare the shapes of the tensors of each collective (default),\n"
                    "or their element counts only. `label` (a str) of the collectives below names the\n"
                    "tensor in their errors; None names it by its place in issue order.")
      .def(
          "allreduce",
          [](CommPtr c, py::object t, py::object out, py::object op, py::object pre, py::object post, bool inplace,
             bool async,
             py::object label) { return do_allreduce(*c, t, out, op, pre, post, inplace, async, py::none(), label); },
          py::arg("tensor"), py::arg("out") = py::none(), py::arg("op") = 0, py::arg("prescale") = 1.0,
          py::arg("postscale") = 1.0, py::arg("inplace") = false, py::arg("async_op") = false,
          py::arg("label") = py::none())
      .def(
          "broadcast",
          [](CommPtr c, py::object t, py::object out, py::object root, bool inplace, bool async, py::object label) {
            return do_broadcast(*c, t, out, root, inplace, async, py::none(), label);
          },
          py::arg("tensor"), py::arg("out") = py::none(), py::arg("root") = 0, py::arg("inplace") = false,
          py::arg("async_op") = false, py::arg("label") = py::none())
      .def(
          "allgather",
          [](CommPtr c, py::object t, py::object out, bool async, py::object label) {
            return do_allgather(*c, t, out, async, py::none(), label);
          },
          py::arg("tensor"), py::arg("out") = py::none(), py::arg("async_op") = false, py::arg("label") = py::none())
      .def(
          "reduce_scatter",
          [](CommPtr c, py::object t, py::object out, py::object op, py::object pre, py::object post, bool async,
             py::object label) { return do_reduce_scatter(*c, t, out, op, pre, post, async, py::none(), label); },
          py::arg("tensor"), py::arg("out") = py::none(), py::arg("op") = 0, py::arg("prescale") = 1.0,
          py::arg("postscale") = 1.0, py::arg("async_op") = false, py::arg("label") = py::none())
      .def(
          "alltoall",
          [](CommPtr c, py::object t, py::object splits, py::object out, bool async, py::object label) {
            return do_alltoall(*c, t, splits, out, async, py::none(), label);
          },
          py::arg("tensor"), py::arg("splits") = py::none(), py::arg("out") = py::none(), py::arg("async_op") = false,
          py::arg("label") = py::none())
      .def(
          "barrier", [](CommPtr c, bool async) { return do_barrier(*c, async); }, py::arg("async_op") = false)
      .def(
          "grouped_allreduce",
          [](CommPtr c, py::object ts, py::object op, py::object pre, py::object post, bool inplace, bool async) {
            return do_grouped_allreduce(*c, ts, op, pre, post, inplace, async);
          },
          py::arg("tensors"), py::arg("op") = 0, py::arg("prescale") = 1.0, py::arg("postscale") = 1.0,
          py::arg("inplace") = false, py::arg("async_op") = false);
}

// Joining the job: ringcc.init()'s communicator and its engine's.
void bind_init(py::module_& m) {
  m.def("init", [](py::object mpi_handle) { init_runtime(mpi_handle); }, py::arg("mpi_handle") = py::none());
}

// MPI's state, leaving the job, and aborting every communicator.
void bind_lifecycle(py::module_& m) {
  m.def(
      "mpi_built", [] { return ringcc::mpi_plugin_info().loaded; },
      "True when ringcc's MPI plugin is present and loads (MPI usable).");
  m.def("mpi_info", [] {
    const ringcc::MpiPluginInfo& p = ringcc::mpi_plugin_info();
    py::dict d;
    d["built"] = p.loaded;
    d["plugin"] = p.path;
    d["library"] = p.library;
    d["error"] = p.error;
    d["libmpi"] = p.libmpi;
    d["abi"] = p.abi;
    d["found_by"] = p.found_by;
    d["tried"] = p.tried;
    return d;
  });
  m.def("_set_mpi_search_dirs", &ringcc::mpi_set_search_dirs,
        "The Python environment's lib directories, searched for libmpi (before the first use of MPI).");
  m.def("_mpi_finalize_if_ours", [] {
    if (ringcc::mpi_plugin_info().loaded) ringcc::mpi_finalize_if_ours();
  });
  m.def(
      "shutdown", [] { shutdown_runtime(); },
      "Leaves the job; within RINGCC_TIMEOUT_S whatever is pending here or elsewhere.");
  m.def(
      "_abort", [](const std::string& reason, bool first_failure) { return abort_all(reason, first_failure); },
      py::arg("reason"), py::arg("first_failure") = true,
      "Aborts every communicator of this process: whatever a peer waits for from this rank\n"
      "fails at once with PeerFailureError naming it and `reason`. For a process that exits\n"
      "on an error.");
}

// What ringcc.init()'s communicator is: rank, size, transport.
void bind_queries(py::module_& m) {
  m.def("is_initialized", [] { return is_initialized(); });
  m.def(
      "collective_timeout_s", [] { return ringcc::collective_timeout_seconds(); },
      "The bound on a collective's waits for a live peer, as the environment sets it now "
      "(RINGCC_COLLECTIVE_TIMEOUT_S, else RINGCC_TIMEOUT_S when set, else 600).");
  m.def(
      "setup_timeout_s", [] { return ringcc::timeout_seconds(); },
      "The bound on the waits of joining a job (RINGCC_TIMEOUT_S, default 60).");
  m.def("global_communicator", [] {
    std::shared_ptr<ringcc::Communicator> c = communicator_if_initialized();
    return c ? py::cast(c) : py::none();
  });
  m.def("rank", [] { return comm().rank(); });
  m.def("size", [] { return comm().size(); });
  m.def("local_rank", [] { return comm().local_rank(); });
  m.def("local_size", [] { return comm().local_size(); });
  m.def("cross_rank", [] { return comm().cross_rank(); });
  m.def("cross_size", [] { return comm().cross_size(); });
  m.def("transport_name", [] { return comm().transport_name(); });
  m.def(
      "_object_key", [] { return py::bytes(comm().object_key()); },
      "The key of the MACs over pickled objects that ranks send each other (ringcc/_objects.py).");
  m.def(
      "gpu_backend", [] { return comm().gpu_backend_name(); },
      "The backend of CUDA collectives (\"nccl\", \"ipc\", \"host\"), \"\" before the first one.");
  m.def("fusion_threshold", [] { return comm().fusion_threshold(); });
  m.def(
      "wait_policy",
      [] {
        py::dict d;
        d["setting"] = ringcc::wait_policy_setting();
        const auto& plan = ringcc::WaitPlan::current();
        d["mode"] = ringcc::wait_mode_name(plan.mode());
        d["spin_us"] = static_cast<int64_t>(plan.budget().count());
        d["oversubscribed"] = ringcc::host_oversubscribed();
        d["affinity_cpus"] = ringcc::affinity_cpus();
        return d;
      },
      "How this thread waits for peers now (RINGCC_WAIT_POLICY): the setting, the mode "
      "its next wait uses (spin, yield or block) and its spin budget in microseconds, "
      "whether the ranks on this host outnumber their CPUs, and the CPUs in this "
      "process's affinity mask.");
}

// The collectives of the module (ringcc/__init__.py) and the engine's controls.
void bind_module_collectives(py::module_& m) {
  // The module-level collectives (ringcc/__init__.py passes its arguments
  // through as given: converting them here makes every bad one the call's
  // error on every rank, see fail_call). name: None, or a non-empty str
  // that hands the call to the engine.
  m.def(
      "_allreduce",
      [](py::object t, py::object out, py::object op, py::object pre, py::object post, bool inplace, bool async,
         py::object name, int64_t layout) -> py::object {
        if (inplace && !async && name.is_none()) {
          // The latency-bound path (small blocking in-place allreduces in
          // loops): no Prepared, no result callback.
          ringcc::Communicator& c = comm();
          CollectiveArgs a;
          HostTensor in;  // its shape, which `a` points at, lives until the call returns
          try {
            const Reduction r(op, pre, post);
            in = writable_host_tensor(t.ptr(), "tensor");
            a = in_place_allreduce(in, static_cast<int>(r.op), r.pre, r.post);
            if (c.compares_shapes()) describe_shape(a, in);
          } catch (...) {
            fail_call(&c, CollectiveKind::kAllreduce, "");
          }
          {
            BlockingCall call;
            c.run(a);
          }
          return t;
        }
        return do_allreduce(comm(), t, out, op, pre, post, inplace, async, name, py::none(), layout);
      },
      py::arg("tensor"), py::arg("out"), py::arg("op"), py::arg("pre"), py::arg("post"), py::arg("inplace"),
      py::arg("async_op"), py::arg("name") = py::none(), py::arg("layout") = 0);
  m.def(
      "_broadcast",
      [](py::object t, py::object out, py::object root, bool inplace, bool async, py::object name) {
        return do_broadcast(comm(), t, out, root, inplace, async, name);
      },
      py::arg("tensor"), py::arg("out"), py::arg("root"), py::arg("inplace"), py::arg("async_op"),
      py::arg("name") = py::none());
  m.def(
      "_allgather",
      [](py::object t, py::object out, bool async, py::object name, int64_t layout) {
        return do_allgather(comm(), t, out, async, name, py::none(), layout);
      },
      py::arg("tensor"), py::arg("out"), py::arg("async_op"), py::arg("name") = py::none(), py::arg("layout") = 0);
  m.def(
      "_reduce_scatter",
      [](py::object t, py::object out, py::object op, py::object pre, py::object post, bool async, py::object name,
         int64_t layout) { return do_reduce_scatter(comm(), t, out, op, pre, post, async, name, py::none(), layout); },
      py::arg("tensor"), py::arg("out"), py::arg("op"), py::arg("pre"), py::arg("post"), py::arg("async_op"),
      py::arg("name") = py::none(), py::arg("layout") = 0);
  m.def(
      "_alltoall",
      [](py::object t, py::object splits, py::object out, bool async, py::object name) {
        return do_alltoall(comm(), t, splits, out, async, name);
      },
      py::arg("tensor"), py::arg("splits"), py::arg("out"), py::arg("async_op"), py::arg("name") = py::none());
  m.def(
      "_fail_call",
      [](const std::string& kind, const std::string& message, py::object name, int64_t layout) {
        // The name is checked as the collectives check it; a bad one leaves
        // the call unnamed (it fails in issue order).
        std::string named;
        try {
          named = name_of(name);
        } catch (...) {
        }
        std::shared_ptr<ringcc::Communicator> c = communicator_if_initialized();
        report_failed_call(c.get(), kind_of(kind), message, named, layout);
      },
      py::arg("kind"), py::arg("message"), py::arg("name") = py::none(), py::arg("layout") = 0,
      "For adapters whose own argument checks failed: takes part in the call as a failed\n"
      "participant (in issue order on ringcc.init()'s communicator, or under `name` in the\n"
      "engine), so that the peers raise MismatchError naming this rank and `message` for\n"
      "that call. `layout`: the call's, as its collective would carry it (-1: one of several\n"
      "collectives of a grouped call this rank fails together). Returns at once; nothing\n"
      "before init().");
  m.def(
      "join",
      [] {
        ringcc::Engine& e = engine();
        std::shared_ptr<ringcc::Work> work = e.join();
        try {
          ringcc::EngineWaiter waiter = e.waiter();
          BlockingCall call;
          work->wait(-1);
        } catch (...) {
          if (work->done()) e.join_collected(work);  // its error, told now; not an interrupted wait
          throw;
        }
        e.join_collected(work);
        return work->list()[0].result_count;
      },
      "Blocks until every rank has joined; meanwhile this rank takes part in the others'\n"
      "named collectives with zeros. Returns the last rank to join.");
  m.def("start_timeline", [](const std::string& path) { engine().start_timeline(path); });
  m.def("stop_timeline", [] { engine().stop_timeline(); });
  m.def("engine_stats", [] {
    ringcc::EngineStats st = engine().stats();
    py::dict d;
    d["cycles"] = st.cycles;
    d["cached_cycles"] = st.cached_cycles;
    d["negotiation_us"] = st.negotiation_us;
    d["cached_negotiation_us"] = st.cached_negotiation_us;
    d["cached_decide_us"] = st.cached_decide_us;
    d["cached_exchange_us"] = st.cached_exchange_us;
    d["cached_peer_wait_us"] = st.cached_peer_wait_us;
    d["cached_overhead_us"] = st.cached_overhead_us;
    d["fused_collectives"] = st.fused_collectives;
    d["tensors"] = st.tensors;
    return d;
  });
  m.def("_barrier", [](bool async) { return do_barrier(comm(), async); });
  m.def("_grouped_allreduce",
        [](py::object ts, py::object op, py::object pre, py::object post, bool inplace, bool async) {
          return do_grouped_allreduce(comm(), ts, op, pre, post, inplace, async);
        });
}

}  // namespace

void bind_collectives(py::module_& m) {
  bind_handle(m);
  bind_output_memory(m.ptr());
  bind_output_rows(m.ptr());
  m.def("_pooled_output_bytes", [] { return pooled_output_bytes(); });
  m.def("_named_output_bytes", [] { return named_output_bytes(); });
  m.def("_named_output_reuses", [] { return named_output_reuses(); });
  m.def("_cpu_moves", [] { return ringcc::cpu_moves(); });
  bind_fast_paths(m);
  bind_communicator(m);
  bind_init(m);
  bind_lifecycle(m);
  bind_queries(m);
  bind_module_collectives(m);
}

}  // namespace ringcc_py
