// The collectives as the Python package calls them: arguments become a
// CollectiveArgs over raw memory, the core runs it with the GIL released,
// and the result becomes a NumPy array (or the caller's own output).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "bindings/buffer_view.h"
#include "bindings/device_arrays.h"
#include "bindings/errors.h"
#include "bindings/fastcall_args.h"
#include "bindings/global_communicator.h"
#include "bindings/handle.h"
#include "bindings/interpreter_exit.h"
#include "bindings/output_memory.h"
#include "bindings/output_rows.h"
#include "bindings/prepared.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/log.h"
#include "core/base/thread_exit.h"
#include "core/communicator.h"
#include "core/engine/engine.h"
#include "core/os/mpi_library.h"
#include "core/os/wait_policy.h"
#include "core/rendezvous/prefix_store.h"
#include "core/rendezvous/rendezvous.h"
#include "core/rendezvous/store.h"

namespace py = pybind11;
using ringcc::CollectiveArgs;
using ringcc::CollectiveKind;
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

void register_communicator(const std::shared_ptr<ringcc::Communicator>& c) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  g_registry.erase(std::remove_if(g_registry.begin(), g_registry.end(), [](const auto& w) { return w.expired(); }),
                   g_registry.end());
  g_registry.push_back(c);
}

std::vector<std::shared_ptr<ringcc::Communicator>> live_communicators() {
  std::vector<std::shared_ptr<ringcc::Communicator>> live;
  std::lock_guard<std::mutex> lock(g_registry_mu);
  for (const auto& w : g_registry) {
    if (auto c = w.lock()) live.push_back(std::move(c));
  }
  return live;
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

py::object default_result(Prepared& p) { return p.out; }

// A named collective of CUDA tensors runs when the background engine gets
// to it, fused with others, on the process's side stream for the device
// (ordered after the caller's stream now); waiting for its handle orders
// the waiting thread's stream after it. Returns the stream it runs on.
void* route_named_device(ringcc::CollectiveScalars& a) {
  if (a.memory == ringcc::MemoryKind::kHost) return nullptr;
  a.stream = side_stream_after(a.device, a.stream);
  return a.stream;
}

// A handle of a device collective orders its waiter's stream (handle.h).
void note_device(HandleState& h, const ringcc::CollectiveScalars& a, py::handle like) {
  if (a.memory == ringcc::MemoryKind::kHost) return;
  h.device = a.device;
  h.stream = a.stream;
  h.device_like = py::reinterpret_borrow<py::object>(like);
}

// ---------------------------------------------------------------------------
// Calls that fail on this rank before they reach the core.
//
// Whatever goes wrong while a call's arguments become a CollectiveArgs (a
// bad op, root, scale factor, name, tensor, output or splits, a Python
// exception from a conversion), this rank still takes part in the same
// call, as a failed participant: in issue order on the communicator for an
// unnamed call, under its name in the engine for a named one. Its peers
// then raise MismatchError naming this rank and the reason for that call,
// and the next call is in step on every rank. This rank raises its own
// error at once.

// A collective's kind by its name ("allreduce", "reduce_scatter" or
// "reducescatter", ...), for adapters.
CollectiveKind kind_of(const std::string& name) {
  for (CollectiveKind k : {CollectiveKind::kAllreduce, CollectiveKind::kAllgather, CollectiveKind::kBroadcast,
                           CollectiveKind::kReduceScatter, CollectiveKind::kAlltoall, CollectiveKind::kBarrier}) {
    if (name == ringcc::collective_name(k)) return k;
  }
  if (name == "reducescatter") return CollectiveKind::kReduceScatter;
  ringcc::raise(ErrorKind::kInvalidArgument, "unknown collective '", name, "'");
}

// Takes part in the call as a failed participant without waiting for the
// peers: queued in issue order (name empty) or handed to the engine.
void report_failed_call(ringcc::Communicator* c, CollectiveKind kind, const std::string& why, const std::string& name) {
  if (!name.empty()) {
    if (g_engine) g_engine->enqueue(name, ringcc::failed_call(kind, why), nullptr, 0);
    return;
  }
  if (c) {
    GilRelease release;
    c->submit(ringcc::failed_call(kind, why));
  }
}

// The message of the exception being handled, for the peers: ringcc's own
// errors by their message, others with their class ("TypeError: ...").
// Needs the GIL. Sets *take_part to false for errors that leave no job to
// tell (ringcc not initialized).
std::string current_error_text(bool* take_part) {
  *take_part = true;
  try {
    throw;
  } catch (const ringcc::Error& e) {
    *take_part = e.kind() != ErrorKind::kNotInitialized;
    return e.what();
  } catch (py::error_already_set& e) {
    static PyObject* const base = [] {
      py::object cls = py::module_::import("ringcc._core").attr("RingccError");
      return cls.release().ptr();
    }();
    std::string message = py::str(e.value());
    if (PyObject_IsInstance(e.value().ptr(), base) == 1) {
      *take_part = !e.matches(py::module_::import("ringcc._core").attr("NotInitializedError"));
      return message;
    }
    return std::string(py::str(e.type().attr("__name__"))) + ": " + message;
  } catch (const std::exception& e) {
    return e.what();
  } catch (const ringcc::ThreadExit&) {
    throw;
  } catch (...) {
    return "unknown error";
  }
}

// Called from a catch block: takes part in the call as a failed participant
// (see above), then rethrows the error being handled.
[[noreturn]] void fail_call(ringcc::Communicator* c, CollectiveKind kind, const std::string& name) {
  try {
    bool take_part = true;
    const std::string why = current_error_text(&take_part);
    if (take_part) report_failed_call(c, kind, why, name);
  } catch (const ringcc::ThreadExit&) {
    throw;
  } catch (...) {
    // The call's own error is the one to raise; nobody else can be told.
  }
  throw;
}

// Arguments as the core takes them. Each raises the error the call then
// reports (see fail_call).

// A collective's name: None -> "" (unnamed); otherwise a non-empty str.
std::string name_of(py::handle name) {
  if (name.is_none()) return "";
  if (PyUnicode_Check(name.ptr())) {
    Py_ssize_t n = 0;
    const char* text = PyUnicode_AsUTF8AndSize(name.ptr(), &n);
    if (!text) throw py::error_already_set();
    if (n > 0) return std::string(text, static_cast<size_t>(n));
  }
  ringcc::raise(ErrorKind::kInvalidArgument, "name must be a non-empty string, got ", std::string(py::repr(name)));
}

// A reduction: an int code (ringcc.Sum ... Product) or a name ("sum",
// "average", ...), as ringcc._op() reads it.
ringcc::ReduceOp reduce_op_of(py::handle op) {
  if (PyLong_CheckExact(op.ptr())) {
    const long v = PyLong_AsLong(op.ptr());
    if (v >= 0 && v <= static_cast<long>(ringcc::ReduceOp::kProduct)) {
      return static_cast<ringcc::ReduceOp>(v);
    }
    PyErr_Clear();
  }
  py::object code = py::module_::import("ringcc").attr("_op")(op);
  return static_cast<ringcc::ReduceOp>(code.cast<int>());
}

// A scale factor: anything float() takes without parsing text.
double scale_factor_of(py::handle v, const char* what) {
  if (PyFloat_CheckExact(v.ptr())) return PyFloat_AS_DOUBLE(v.ptr());
  if (!PyUnicode_Check(v.ptr()) && !PyBytes_Check(v.ptr())) {
    const double d = PyFloat_AsDouble(v.ptr());
    if (!(d == -1.0 && PyErr_Occurred())) return d;
    PyErr_Clear();
  }
  throw py::type_error(std::string(what) + " must be a real number, got " + std::string(py::repr(v)));
}

// A broadcast root: an int (range-checked by the core against the size).
int root_of(py::handle v, const ringcc::Communicator& c) {
  PyObject* index = PyNumber_Index(v.ptr());
  if (!index) {
    PyErr_Clear();
    throw py::type_error("root must be an int, got " + std::string(py::repr(v)));
  }
  int overflow = 0;
  const long long r = PyLong_AsLongLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (overflow || r < std::numeric_limits<int>::min() || r > std::numeric_limits<int>::max()) {
    ringcc::raise(ErrorKind::kInvalidArgument, "broadcast: root rank ", std::string(py::str(v)),
                  " is out of range for ", c.size(), " ranks");
  }
  return static_cast<int>(r);
}

// output_for() of a CUDA input: `out` on the same device, or a new device
// array (bindings/device_arrays.h).
py::object device_output_for(const py::object& out, const BufferView& in, const std::vector<int64_t>& shape,
                             int64_t count, CollectiveArgs& a) {
  if (out.is_none()) {
    py::object arr = new_device_array(in.origin, shape, in.dtype, in.device, in.stream);
    BufferView v = view_of(arr, true, "out");
    a.out = v.ptr;
    a.out_count = count;
    return arr;
  }
  BufferView v = view_of(out, true, "out");
  if (v.memory != in.memory || v.device != in.device) {
    ringcc::raise(ErrorKind::kInvalidArgument, "out is in ", ringcc::memory_kind_name(v.memory),
                  v.device >= 0 ? " (cuda:" + std::to_string(v.device) + ")" : std::string(), " but the input is in ",
                  ringcc::memory_kind_name(in.memory), " (cuda:", in.device, ")");
  }
  if (v.dtype != in.dtype) {
    ringcc::raise(ErrorKind::kInvalidArgument, "out has dtype ", ringcc::dtype_name(v.dtype), " but the input has ",
                  ringcc::dtype_name(in.dtype));
  }
  if (count >= 0 && v.count != count) {
    ringcc::raise(ErrorKind::kInvalidArgument, "out holds ", v.count, " elements but ", count, " are needed");
  }
  a.out = v.ptr;
  a.out_count = v.count;
  return out;
}

// Output for an out-of-place call: the caller's `out`, checked, or a new
// array shaped like `like`.
py::object output_for(const py::object& out, const BufferView& in, const std::vector<int64_t>& shape, int64_t count,
                      CollectiveArgs& a) {
  if (in.memory != ringcc::MemoryKind::kHost) return device_output_for(out, in, shape, count, a);
  if (out.is_none()) {
    py::array arr = new_array(in.numpy_dtype.is_none() ? numpy_dtype_for(in.dtype) : in.numpy_dtype, shape);
    a.out = arr.mutable_data();
    a.out_count = count;
    return arr;
  }
  BufferView v = view_of(out, true, "out");
  if (v.dtype != in.dtype) {
    ringcc::raise(ErrorKind::kInvalidArgument, "out has dtype ", ringcc::dtype_name(v.dtype), " but the input has ",
                  ringcc::dtype_name(in.dtype));
  }
  if (count >= 0 && v.count != count) {
    ringcc::raise(ErrorKind::kInvalidArgument, "out holds ", v.count, " elements but ", count, " are needed");
  }
  a.out = v.ptr;
  a.out_count = v.count;
  return out;
}

// An allocator for outputs whose size is known only after the header
// exchange: it takes the GIL to create the NumPy array.
void allocate_late(Prepared& p, const BufferView& in) {
  std::vector<int64_t> row_shape(in.shape.size() > 1 ? in.shape.begin() + 1 : in.shape.end(), in.shape.end());
  const int64_t row_elems = in.row_elems();
  auto* self = &p;
  if (in.memory != ringcc::MemoryKind::kHost) {
    // A device array of the input's library; `like` stays alive in keep.
    p.keep.push_back(in.origin);
    py::handle like = in.origin;
    const ringcc::DataType dtype = in.dtype;
    const int device = in.device;
    void* stream = in.stream;
    p.args.allocate = [self, like, dtype, device, stream, row_shape, row_elems](int64_t elements) -> void* {
      GilForCall gil;
      std::vector<int64_t> shape{elements / row_elems};
      shape.insert(shape.end(), row_shape.begin(), row_shape.end());
      py::object arr = new_device_array(like, shape, dtype, device, stream);
      BufferView v = view_of(arr, true, "out");
      self->out = arr;
      return v.ptr;
    };
    return;
  }
  py::object dtype = in.numpy_dtype.is_none() ? numpy_dtype_for(in.dtype) : in.numpy_dtype;
  // The Prepared keeps the dtype alive while the collective may call this
  // (its handle outlives the collective); the allocator holds no Python
  // reference of its own, so it may be destroyed on any thread, without
  // the GIL (the core drops its copy of the arguments where it likes).
  p.keep.push_back(dtype);
  py::handle dtype_handle = dtype;
  p.args.allocate = [self, dtype_handle, row_shape, row_elems](int64_t elements) -> void* {
    GilForCall gil;
    std::vector<int64_t> shape{elements / row_elems};
    shape.insert(shape.end(), row_shape.begin(), row_shape.end());
    py::array arr = new_array(py::reinterpret_borrow<py::object>(dtype_handle), shape);
    self->out = arr;
    return arr.mutable_data();
  };
}

void fill_input(Prepared& p, const BufferView& in) {
  p.shape = in.shape;
  p.args.shape = p.shape.data();
  p.args.ndim = static_cast<int32_t>(p.shape.size());
  p.args.dtype = in.dtype;
  p.args.in = in.ptr;
  p.args.count = in.count;
  p.args.row_elems = in.row_elems();
  p.args.memory = in.memory;
  p.args.device = in.device;
  p.args.stream = in.stream;
  p.keep.push_back(in.owner);
  if (in.memory != ringcc::MemoryKind::kHost) p.device_like = in.origin;
}

// Input and output of a collective whose result has the input's shape
// (allreduce, broadcast): in place, into `out`, or into a new array.
void same_shape_output(Prepared& p, py::object tensor, py::object out, bool inplace) {
  BufferView in = view_of(tensor, inplace, "tensor");
  fill_input(p, in);
  if (inplace) {
    p.args.out = in.ptr;
    p.args.out_count = in.count;
    p.out = tensor;
  } else {
    p.out = output_for(out, in, in.shape, in.count, p.args);
  }
  p.keep.push_back(p.out);
  p.result = default_result;
}

// The arguments of an allreduce that writes its result over its input
// (the binding's fast paths, which need no Prepared).
CollectiveArgs in_place_allreduce(const HostTensor& in, int op, double pre, double post) {
  CollectiveArgs a;
  a.kind = CollectiveKind::kAllreduce;
  a.op = static_cast<ringcc::ReduceOp>(op);
  a.prescale = pre;
  a.postscale = post;
  a.dtype = in.dtype;
  a.in = in.ptr;
  a.out = in.ptr;
  a.count = in.count;
  a.out_count = in.count;
  a.row_elems = in.row_elems();
  a.memory = in.memory;
  a.device = in.device;
  a.stream = in.stream;
  return a;
}

// The shape of `in` for the ranks to compare; `in` stays alive (unmoved)
// until the collective completes.
void describe_shape(CollectiveArgs& a, const HostTensor& in) {
  a.shape = in.shape();
  a.ndim = static_cast<int32_t>(in.ndim);
}

// The arguments a reduction takes from Python, converted (raising the
// call's error when they cannot be).
struct Reduction {
  ringcc::ReduceOp op;
  double pre, post;
  Reduction(py::handle op_obj, py::handle pre_obj, py::handle post_obj)
      : op(reduce_op_of(op_obj)),
        pre(scale_factor_of(pre_obj, "prescale_factor")),
        post(scale_factor_of(post_obj, "postscale_factor")) {}
};

std::unique_ptr<Prepared> prep_allreduce(py::object tensor, py::object out, const Reduction& r, bool inplace) {
  auto p = std::make_unique<Prepared>();
  p->args.kind = CollectiveKind::kAllreduce;
  p->args.op = r.op;
  p->args.prescale = r.pre;
  p->args.postscale = r.post;
  same_shape_output(*p, tensor, out, inplace);
  return p;
}

// What error messages call the tensor (CollectiveScalars::label): None
// (its place in issue order) or a str, which p keeps alive.
void set_label(Prepared& p, py::handle label) {
  if (label.is_none()) return;
  if (!PyUnicode_Check(label.ptr())) {
    throw py::type_error("label must be a str or None, got " + std::string(py::repr(label)));
  }
  Py_ssize_t n = 0;
  const char* text = PyUnicode_AsUTF8AndSize(label.ptr(), &n);
  if (!text) throw py::error_already_set();
  p.keep.push_back(py::reinterpret_borrow<py::object>(label));
  p.args.label = std::string_view(text, static_cast<size_t>(n));
}

// The shape and label of a prepared collective as communicator `c` takes
// them: no shape where its ranks compare element counts only.
void finish_description(ringcc::Communicator& c, Prepared& p, py::handle label) {
  if (!c.compares_shapes()) p.args.ndim = -1;
  set_label(p, label);
}

}  // namespace

namespace {

// Runs a collective now, queues it in issue order (async), or hands it to
// the engine by name (async with a name). make() converts the arguments;
// whatever it raises, and a name or label that is not one, fails the call
// on every rank (see fail_call). `label`: how errors name the tensor of an
// unnamed call (None: its place in issue order).
template <class Make>  // () -> std::unique_ptr<Prepared>
py::object launch(ringcc::Communicator& c, CollectiveKind kind, Make&& make, bool async,
                  py::handle name_obj = py::none(), py::handle label = py::none()) {
  std::unique_ptr<Prepared> p;
  std::string name;
  try {
    name = name_of(name_obj);
    if (!name.empty()) engine();  // raises before init()
    p = make();
    finish_description(c, *p, label);
    if (!name.empty()) route_named_device(p->args);
  } catch (...) {
    fail_call(&c, kind, name);
  }
  if (!name.empty()) {
    HandleState h;
    note_device(h, p->args, p->device_like);
    // The Prepared keeps only what the result needs; the engine owns the args.
    h.work = engine().enqueue(name, std::move(p->args), p->shape.data(), p->shape.size());
    h.preps.push_back(std::move(p));
    h.named = true;
    return make_handle(std::move(h));
  }
  if (async) {
    std::shared_ptr<ringcc::Work> work;
    {
      GilRelease release;
      work = c.submit(p->args);
    }
    // The allocator points at the Prepared that the handle now owns.
    HandleState h;
    note_device(h, p->args, p->device_like);
    h.work = std::move(work);
    h.preps.push_back(std::move(p));
    return make_handle(std::move(h));
  }
  {
    BlockingCall call;
    c.run(p->args);
  }
  return p->result(*p);
}

py::object do_allreduce(ringcc::Communicator& c, py::object tensor, py::object out, py::handle op, py::handle pre,
                        py::handle post, bool inplace, bool async, py::handle name = py::none(),
                        py::handle label = py::none()) {
  return launch(
      c, CollectiveKind::kAllreduce, [&] { return prep_allreduce(tensor, out, Reduction(op, pre, post), inplace); },
      async, name, label);
}

py::object do_broadcast(ringcc::Communicator& c, py::object tensor, py::object out, py::handle root, bool inplace,
                        bool async, py::handle name = py::none(), py::handle label = py::none()) {
  return launch(
      c, CollectiveKind::kBroadcast,
      [&] {
        auto p = std::make_unique<Prepared>();
        p->args.kind = CollectiveKind::kBroadcast;
        p->args.root = root_of(root, c);
        same_shape_output(*p, tensor, out, inplace);
        return p;
      },
      async, name, label);
}

py::object do_allgather(ringcc::Communicator& c, py::object tensor, py::object out, bool async,
                        py::handle name = py::none(), py::handle label = py::none()) {
  return launch(
      c, CollectiveKind::kAllgather,
      [&] {
        auto p = std::make_unique<Prepared>();
        p->args.kind = CollectiveKind::kAllgather;
        BufferView in = view_of(tensor, false, "tensor");
        if (in.shape.empty()) in.shape = {1};
        fill_input(*p, in);
        if (out.is_none()) {
          allocate_late(*p, in);
        } else {
          output_for(out, in, {}, -1, p->args);
          p->out = out;
          p->keep.push_back(out);
        }
        p->result = default_result;
        return p;
      },
      async, name, label);
}

py::object do_reduce_scatter(ringcc::Communicator& c, py::object tensor, py::object out, py::handle op, py::handle pre,
                             py::handle post, bool async, py::handle name = py::none(), py::handle label = py::none()) {
  return launch(
      c, CollectiveKind::kReduceScatter,
      [&] {
        const Reduction r(op, pre, post);
        auto p = std::make_unique<Prepared>();
        p->args.kind = CollectiveKind::kReduceScatter;
        BufferView in = view_of(tensor, false, "tensor");
        if (in.shape.empty()) in.shape = {1};
        fill_input(*p, in);
        p->args.op = r.op;
        p->args.prescale = r.pre;
        p->args.postscale = r.post;
        std::vector<int64_t> shape = in.shape;
        shape[0] = ringcc::block_rows(in.rows(), c.size(), c.rank());
        p->out = output_for(out, in, shape, shape[0] * in.row_elems(), p->args);
        p->keep.push_back(p->out);
        p->result = default_result;
        return p;
      },
      async, name, label);
}

// Rows for each rank from `splits` (any iterable of ints, as int() reads
// them), in elements of `row`.
std::vector<int64_t> send_counts_of(py::handle splits, int64_t row) {
  std::vector<int64_t> counts;
  for (auto s : py::iter(splits)) {
    py::int_ rows(py::reinterpret_borrow<py::object>(s));  // int(s)
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(rows.ptr(), &overflow);
    if (overflow ||
        (row > 0 && (v > std::numeric_limits<int64_t>::max() / row || v < std::numeric_limits<int64_t>::min() / row))) {
      ringcc::raise(ErrorKind::kInvalidArgument, "alltoall: split ", std::string(py::str(rows)), " is out of range");
    }
    counts.push_back(static_cast<int64_t>(v) * row);
  }
  return counts;
}

py::object do_alltoall(ringcc::Communicator& c, py::object tensor, py::object splits, py::object out, bool async,
                       py::handle name = py::none(), py::handle label = py::none()) {
  return launch(
      c, CollectiveKind::kAlltoall,
      [&] {
        auto p = std::make_unique<Prepared>();
        p->args.kind = CollectiveKind::kAlltoall;
        BufferView in = view_of(tensor, false, "tensor");
        if (in.shape.empty()) in.shape = {1};
        fill_input(*p, in);
        const int n = c.size();
        const int64_t row = in.row_elems();
        if (splits.is_none()) {
          if (in.rows() % n != 0) {
            ringcc::raise(ErrorKind::kInvalidArgument, "alltoall: the first dimension (", in.rows(),
                          ") does not divide evenly over ", n, " ranks; pass splits");
          }
          p->args.send_counts.assign(static_cast<size_t>(n), in.rows() / n * row);
        } else {
          p->args.send_counts = send_counts_of(splits, row);
        }
        if (out.is_none()) {
          allocate_late(*p, in);
        } else {
          output_for(out, in, {}, -1, p->args);
          p->out = out;
          p->keep.push_back(out);
        }
        p->result = [row](Prepared& q) -> py::object {
          py::list received;
          for (int64_t k : q.args.recv_counts) received.append(k / row);
          return py::make_tuple(q.out, received);
        };
        return p;
      },
      async, name, label);
}

py::object do_barrier(ringcc::Communicator& c, bool async) {
  return launch(
      c, CollectiveKind::kBarrier,
      [] {
        auto p = std::make_unique<Prepared>();
        p->args.kind = CollectiveKind::kBarrier;
        p->result = [](Prepared&) { return py::object(py::none()); };
        return p;
      },
      async);
}

py::object do_grouped_allreduce(ringcc::Communicator& c, py::handle tensors, py::handle op, py::handle pre,
                                py::handle post, bool inplace, bool async) {
  std::vector<std::unique_ptr<Prepared>> preps;
  try {
    const Reduction r(op, pre, post);
    for (auto t : py::iter(tensors)) {
      preps.push_back(prep_allreduce(py::reinterpret_borrow<py::object>(t), py::none(), r, inplace));
    }
  } catch (...) {
    fail_call(&c, CollectiveKind::kAllreduce, "");
  }
  for (auto& p : preps) finish_description(c, *p, py::none());
  std::vector<CollectiveArgs> list;
  list.reserve(preps.size());
  for (auto& p : preps) list.push_back(p->args);
  if (async) {
    std::shared_ptr<ringcc::Work> work;
    {
      GilRelease release;
      work = c.submit_grouped(std::move(list));
    }
    HandleState h;
    if (!preps.empty()) note_device(h, preps[0]->args, preps[0]->device_like);
    h.work = std::move(work);
    h.preps = std::move(preps);
    h.grouped = true;
    return make_handle(std::move(h));
  }
  {
    BlockingCall call;
    c.grouped_allreduce(list);
  }
  py::list outs;
  for (auto& p : preps) outs.append(p->out);
  return outs;
}

// A rendezvous store implemented in Python (torch's c10d store, say):
// set(key, bytes), get(key) -> bytes, add(key, int) -> int and
// check([keys]) -> bool. Every call takes the GIL, behind the interpreter's
// exit gate (interpreter_exit.h): the communicator's worker calls it too.
class PythonStore : public ringcc::Store {
 public:
  explicit PythonStore(py::object store) : store_(std::move(store)) {}
  ~PythonStore() override {
    InterpreterEntry entry;
    if (!entry.admitted()) {
      // The interpreter is exiting: the object stays, untouched.
      store_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    store_ = py::object();
  }
  void set(const std::string& key, const std::string& value) override {
    GilForCall gil;
    store_.attr("set")(key, py::bytes(value));
  }
  // Polls check() rather than blocking in the store's wait(): a store
  // client that serves one request at a time (torch's TCPStore) would
  // otherwise hold up every other thread's requests while we wait.
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::microseconds(200);
    for (;;) {
      {
        GilForCall gil;
        if (py::cast<bool>(store_.attr("check")(py::list(py::make_tuple(key))))) {
          return py::cast<std::string>(store_.attr("get")(key));
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        ringcc::raise(ErrorKind::kTimeout, "timed out after ", timeout.count() / 1000.0, " s waiting for key '", key,
                      "' in the rendezvous store");
      }
      ringcc::poll_interrupt();
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
  }
  bool try_get(const std::string& key, std::string* value) override {
    GilForCall gil;
    if (!py::cast<bool>(store_.attr("check")(py::list(py::make_tuple(key))))) return false;
    *value = py::cast<std::string>(store_.attr("get")(key));
    return true;
  }
  int64_t add(const std::string& key, int64_t delta) override {
    GilForCall gil;
    return py::cast<int64_t>(store_.attr("add")(key, delta));
  }

 private:
  py::object store_;
};

using CommPtr = std::shared_ptr<ringcc::Communicator>;

// The per-tensor paths of training loops, written against the CPython API
// (pybind11's dispatcher and instance registry cost more than the work).

// A number for a scale factor: a float or an int, else false.
bool scale_of(PyObject* o, double* out) {
  if (PyFloat_CheckExact(o)) {
    *out = PyFloat_AS_DOUBLE(o);
    return true;
  }
  if (PyLong_CheckExact(o)) {
    *out = PyLong_AsDouble(o);
    if (*out == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    return true;
  }
  return false;
}

// From a catch block of a named call's fast path: fails the call under
// `name` on every rank (see fail_call) and sets the Python error.
PyObject* fail_named(CollectiveKind kind, const char* name, Py_ssize_t name_len) {
  try {
    fail_call(nullptr, kind, std::string(name, static_cast<size_t>(name_len)));
  } catch (...) {
    set_python_error();
  }
  return nullptr;
}

PyObject* fail_named_in_place(const char* name, Py_ssize_t name_len) {
  return fail_named(CollectiveKind::kAllreduce, name, name_len);
}

// Enqueues `a` (whose input is `in`) by name; a new Handle whose result is
// `result`, kept alive until the collective is done, as is `source` (the
// input of an out-of-place call; null for an in-place one).
PyObject* enqueue_named(ringcc::Engine& e, CollectiveArgs&& a, const HostTensor& in, PyObject* result, PyObject* source,
                        const char* name, Py_ssize_t name_len) {
  route_named_device(a);
  HandleState* h = nullptr;
  py::object handle = new_handle(&h);  // dropped as a done handle if enqueue raises
  note_device(*h, a, result);
  h->work = e.enqueue(std::string_view(name, static_cast<size_t>(name_len)), std::move(a), in.shape(), in.ndim);
  h->named = true;
  h->fixed_result = true;
  h->result = py::reinterpret_borrow<py::object>(result);
  if (source) h->source = py::reinterpret_borrow<py::object>(source);
  return handle.release().ptr();
}

// Enqueues the in-place allreduce `a` of `tensor` by name; a new Handle
// whose result is `tensor` (kept alive until the collective is done).
PyObject* enqueue_in_place(ringcc::Engine& e, PyObject* tensor, const char* name, Py_ssize_t name_len,
                           const HostTensor& in, int op, double pre, double post) {
  return enqueue_named(e, in_place_allreduce(in, op, pre, post), in, tensor, nullptr, name, name_len);
}

// A name for a fast path: a non-empty exact str, its UTF-8 text in *text.
bool fast_name(PyObject* name, const char** text, Py_ssize_t* len) {
  return name && PyUnicode_CheckExact(name) && PyUnicode_GET_LENGTH(name) > 0 &&
         (*text = PyUnicode_AsUTF8AndSize(name, len)) != nullptr;
}

// ringcc.allreduce_async with a name and no `out`, of a plain NumPy array:
// the output is allocated here (NumPy's C API, no Python call) and the
// collective goes to the engine like the in-place one. Everything else
// goes to `general`, the Python implementation.
PyObject* allreduce_async_out_of_place(PyObject* general, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const FastcallParams params("allreduce_async",
                                     {"tensor", "op", "name", "prescale_factor", "postscale_factor", "out"}, 2, 1);
  PyObject *tensor = nullptr, *op_obj = nullptr, *name = nullptr, *pre_obj = nullptr, *post_obj = nullptr,
           *out = nullptr;
  long op = 0;
  double pre = 1.0, post = 1.0;
  Py_ssize_t name_len = 0;
  const char* name_text = nullptr;
  HostTensor in;
  const bool fast = params.try_bind(args, nargs, kwnames, &tensor, &op_obj, &name, &pre_obj, &post_obj, &out) &&
                    (!out || out == Py_None) &&
                    (!op_obj || (PyLong_CheckExact(op_obj) && (op = PyLong_AsLong(op_obj)) >= 0 &&
                                 op <= static_cast<long>(ringcc::ReduceOp::kProduct))) &&
                    (!pre_obj || scale_of(pre_obj, &pre)) && (!post_obj || scale_of(post_obj, &post)) &&
                    fast_name(name, &name_text, &name_len) && plain_numpy(tensor, &in, false);
  if (!fast) {
    PyErr_Clear();
    return PyObject_Vectorcall(general, args, static_cast<size_t>(nargs), kwnames);
  }
  try {
    ringcc::Engine& e = engine();
    py::object result = py::reinterpret_steal<py::object>(
        new_pooled_numpy_like(tensor, static_cast<size_t>(in.count) * ringcc::dtype_size(in.dtype)));
    if (!result) throw py::error_already_set();
    CollectiveArgs a = in_place_allreduce(in, static_cast<int>(op), pre, post);
    a.out = py::detail::array_proxy(result.ptr())->data;
    return enqueue_named(e, std::move(a), in, result.ptr(), tensor, name_text, name_len);
  } catch (...) {
    return fail_named(CollectiveKind::kAllreduce, name_text, name_len);
  }
}

// The arguments of a broadcast from `root` of `in` into `out`.
CollectiveArgs broadcast_args(const HostTensor& in, void* out, int root) {
  CollectiveArgs a;
  a.kind = CollectiveKind::kBroadcast;
  a.root = root;
  a.dtype = in.dtype;
  a.in = in.ptr;
  a.out = out;
  a.count = in.count;
  a.out_count = in.count;
  a.row_elems = in.row_elems();
  a.memory = in.memory;
  return a;
}

// ringcc.broadcast_async (inplace false, no `out`) and broadcast_async_
// with a name, of a plain NumPy array and an int root: as above.
template <bool kInPlace>
PyObject* broadcast_async_fast(PyObject* general, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const FastcallParams params(kInPlace ? "broadcast_async_" : "broadcast_async",
                                     {"tensor", "root", "name", "out"}, 2, 1);
  PyObject *tensor = nullptr, *root_obj = nullptr, *name = nullptr, *out = nullptr;
  long root = 0;
  Py_ssize_t name_len = 0;
  const char* name_text = nullptr;
  HostTensor in;
  const bool fast = params.try_bind(args, nargs, kwnames, &tensor, &root_obj, &name, &out) && !(kInPlace && out) &&
                    (!out || out == Py_None) &&
                    (!root_obj || (PyLong_CheckExact(root_obj) && (root = PyLong_AsLong(root_obj)) >= 0 &&
                                   root <= std::numeric_limits<int>::max())) &&
                    fast_name(name, &name_text, &name_len) && plain_numpy(tensor, &in, kInPlace);
  if (!fast) {
    PyErr_Clear();
    return PyObject_Vectorcall(general, args, static_cast<size_t>(nargs), kwnames);
  }
  try {
    ringcc::Engine& e = engine();
    if (kInPlace) {
      return enqueue_named(e, broadcast_args(in, in.ptr, static_cast<int>(root)), in, tensor, nullptr, name_text,
                           name_len);
    }
    py::object result = py::reinterpret_steal<py::object>(
        new_pooled_numpy_like(tensor, static_cast<size_t>(in.count) * ringcc::dtype_size(in.dtype)));
    if (!result) throw py::error_already_set();
    return enqueue_named(e, broadcast_args(in, py::detail::array_proxy(result.ptr())->data, static_cast<int>(root)), in,
                         result.ptr(), tensor, name_text, name_len);
  } catch (...) {
    return fail_named(CollectiveKind::kBroadcast, name_text, name_len);
  }
}

// ringcc.allreduce_async_: a named in-place allreduce handed to the engine.
// `self` is the general Python implementation, called for everything but
// the common case (a tensor, an int op, a non-empty str name, numeric
// scales): other arguments, their errors and the unnamed path stay its.
// The handle's result is the tensor itself, kept alive until done.
PyObject* allreduce_async_inplace(PyObject* general, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const FastcallParams params("allreduce_async_",
                                     {"tensor", "op", "name", "prescale_factor", "postscale_factor"}, 2, 1);
  PyObject *tensor = nullptr, *op_obj = nullptr, *name = nullptr, *pre_obj = nullptr, *post_obj = nullptr;
  long op = 0;
  double pre = 1.0, post = 1.0;
  Py_ssize_t name_len = 0;
  const char* name_text = nullptr;
  // The usual call, allreduce_async_(tensor, name=...), binds without the
  // general parser (a keyword in the caller's code is the interned string).
  static PyObject* const name_key = PyUnicode_InternFromString("name");
  const bool tensor_and_name =
      nargs == 1 && kwnames && PyTuple_GET_SIZE(kwnames) == 1 && PyTuple_GET_ITEM(kwnames, 0) == name_key;
  if (tensor_and_name) {
    tensor = args[0];
    name = args[1];
  }
  const bool fast =
      (tensor_and_name || params.try_bind(args, nargs, kwnames, &tensor, &op_obj, &name, &pre_obj, &post_obj)) &&
      (!op_obj || (PyLong_CheckExact(op_obj) && (op = PyLong_AsLong(op_obj)) >= 0 &&
                   op <= static_cast<long>(ringcc::ReduceOp::kProduct))) &&
      name && PyUnicode_CheckExact(name) && PyUnicode_GET_LENGTH(name) > 0 && (!pre_obj || scale_of(pre_obj, &pre)) &&
      (!post_obj || scale_of(post_obj, &post)) && (name_text = PyUnicode_AsUTF8AndSize(name, &name_len)) != nullptr;
  if (!fast) {
    PyErr_Clear();
    return PyObject_Vectorcall(general, args, static_cast<size_t>(nargs), kwnames);
  }
  try {
    ringcc::Engine& e = engine();
    return enqueue_in_place(e, tensor, name_text, name_len, writable_host_tensor(tensor, "tensor"),
                            static_cast<int>(op), pre, post);
  } catch (...) {
    return fail_named_in_place(name_text, name_len);
  }
}

// A tensor an adapter described itself, but for its address (in.ptr is
// null): its shape (a tuple of ints) and core dtype code, checked; `fn`
// names the entry point in errors.
HostTensor raw_shape(const char* fn, PyObject* shape_obj, PyObject* dtype_obj) {
  const std::string f(fn);
  const long dtype = PyLong_AsLong(dtype_obj);
  if (dtype == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (dtype < 0 || dtype >= ringcc::kNumDataTypes) {
    throw py::value_error(f + ": invalid dtype code " + std::to_string(dtype));
  }
  if (!PyTuple_Check(shape_obj)) throw py::type_error(f + ": shape must be a tuple of ints");
  HostTensor in;
  in.dtype = static_cast<ringcc::DataType>(dtype);
  int64_t* shape = in.resize(static_cast<size_t>(PyTuple_GET_SIZE(shape_obj)));
  in.count = 1;
  for (size_t i = 0; i < in.ndim; ++i) {
    const long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape_obj, static_cast<Py_ssize_t>(i)));
    if (d == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (d < 0 || (d > 0 && in.count > std::numeric_limits<int64_t>::max() / d)) {
      throw py::value_error(f + ": invalid shape");
    }
    shape[i] = d;
    in.count *= d;
  }
  return in;
}

// A raw entry point's data_ptr argument for `count` elements.
void* raw_address(const char* fn, PyObject* ptr_obj, int64_t count) {
  void* ptr = PyLong_AsVoidPtr(ptr_obj);
  if (!ptr && PyErr_Occurred()) throw py::error_already_set();
  if (!ptr && count > 0) throw py::value_error(std::string(fn) + ": null data_ptr");
  return ptr;
}

// raw_shape() with its address, the data_ptr argument.
HostTensor raw_tensor(const char* fn, PyObject* ptr_obj, PyObject* shape_obj, PyObject* dtype_obj) {
  HostTensor in = raw_shape(fn, shape_obj, dtype_obj);
  in.ptr = raw_address(fn, ptr_obj, in.count);
  return in;
}

// The output of an out-of-place raw call and its description in *out: the
// (tensor, data_ptr) given, or where `tensor` is an _OutputRows, a new row
// of it for `source`. A new reference.
py::object raw_output(const char* fn, PyObject* tensor, PyObject* ptr_obj, PyObject* shape_obj, PyObject* dtype_obj,
                      PyObject* source, HostTensor* out) {
  *out = raw_shape(fn, shape_obj, dtype_obj);
  PyObject* row = nullptr;
  const size_t bytes = static_cast<size_t>(out->count) * ringcc::dtype_size(out->dtype);
  if (take_output_row(tensor, source, out->shape(), out->ndim, bytes, static_cast<int>(out->dtype), &row,
                      &out->ptr)) {
    return py::reinterpret_steal<py::object>(row);
  }
  out->ptr = raw_address(fn, ptr_obj, out->count);
  return py::reinterpret_borrow<py::object>(tensor);
}

// A raw entry point's name argument: a non-empty str, its text in *text;
// else a TypeError set and false.
bool raw_name(const char* fn, PyObject* name, const char** text, Py_ssize_t* len) {
  if (!PyUnicode_Check(name) || PyUnicode_GET_LENGTH(name) == 0) {
    PyErr_Format(PyExc_TypeError, "%s: name must be a non-empty str", fn);
    return false;
  }
  *text = PyUnicode_AsUTF8AndSize(name, len);
  return *text != nullptr;
}

// _core._broadcast_async_raw(tensor, data_ptr, shape, dtype, root, name
// [, source, source_ptr]): the named broadcast of memory an adapter
// described itself, in place, or (with source) from source's memory into
// tensor's (or a new row of an _OutputRows). The handle's result is `tensor`.
PyObject* broadcast_async_raw(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  static constexpr const char* kFn = "_broadcast_async_raw";
  if (nargs != 6 && nargs != 8) {
    PyErr_Format(PyExc_TypeError,
                 "%s takes 6 or 8 arguments (tensor, data_ptr, shape, dtype, root, name[, source, "
                 "source_ptr]), got %zd",
                 kFn, nargs);
    return nullptr;
  }
  Py_ssize_t name_len = 0;
  const char* name_text = nullptr;
  if (!raw_name(kFn, args[5], &name_text, &name_len)) return nullptr;
  try {
    const long root = PyLong_AsLong(args[4]);
    if (root == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (root < 0 || root > std::numeric_limits<int>::max()) {
      throw py::value_error(std::string(kFn) + ": invalid root " + std::to_string(root));
    }
    HostTensor in;
    if (nargs == 6) {
      in = raw_tensor(kFn, args[1], args[2], args[3]);
      return enqueue_named(engine(), broadcast_args(in, in.ptr, static_cast<int>(root)), in, args[0], nullptr,
                           name_text, name_len);
    }
    const py::object out = raw_output(kFn, args[0], args[1], args[2], args[3], args[6], &in);
    void* src = PyLong_AsVoidPtr(args[7]);
    if (!src && PyErr_Occurred()) throw py::error_already_set();
    if (!src && in.count > 0) throw py::value_error(std::string(kFn) + ": null source_ptr");
    CollectiveArgs a = broadcast_args(in, in.ptr, static_cast<int>(root));
    a.in = src;
    return enqueue_named(engine(), std::move(a), in, out.ptr(), args[6], name_text, name_len);
  } catch (...) {
    return fail_named(CollectiveKind::kBroadcast, name_text, name_len);
  }
}

// _core._allgather_async_raw(tensor, data_ptr, shape, dtype, name, allocate):
// the named allgather of memory an adapter described itself (shape with at
// least one dimension; rows along the first). Once the ranks' row counts
// are known, allocate(total_rows) (called with the GIL, on the engine's
// thread) returns the output: a contiguous host tensor with a data_ptr()
// method, which becomes the handle's result.
PyObject* allgather_async_raw(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  static constexpr const char* kFn = "_allgather_async_raw";
  if (nargs != 6) {
    PyErr_Format(PyExc_TypeError, "%s takes 6 arguments (tensor, data_ptr, shape, dtype, name, allocate), got %zd", kFn,
                 nargs);
    return nullptr;
  }
  Py_ssize_t name_len = 0;
  const char* name_text = nullptr;
  if (!raw_name(kFn, args[4], &name_text, &name_len)) return nullptr;
  try {
    const HostTensor in = raw_tensor(kFn, args[1], args[2], args[3]);
    if (in.ndim == 0) throw py::value_error(std::string(kFn) + ": shape needs a first dimension");
    if (!PyCallable_Check(args[5])) throw py::type_error(std::string(kFn) + ": allocate must be callable");
    ringcc::Engine& e = engine();
    auto p = std::make_unique<Prepared>();
    CollectiveArgs& a = p->args;
    a.kind = CollectiveKind::kAllgather;
    a.dtype = in.dtype;
    a.in = in.ptr;
    a.count = in.count;
    a.row_elems = in.row_elems();
    a.memory = in.memory;
    p->shape.assign(in.shape(), in.shape() + in.ndim);
    p->keep.push_back(py::reinterpret_borrow<py::object>(args[0]));
    p->keep.push_back(py::reinterpret_borrow<py::object>(args[5]));
    const int64_t row_elems = std::max<int64_t>(a.row_elems, 1);
    const size_t es = ringcc::dtype_size(in.dtype);
    Prepared* self = p.get();
    py::handle allocate = args[5];  // alive in keep
    a.allocate = [self, allocate, row_elems, es](int64_t elements) -> void* {
      GilForCall gil;
      py::object out = allocate(elements / row_elems);
      const int64_t bytes = py::cast<int64_t>(out.attr("nbytes"));
      if (bytes != elements * static_cast<int64_t>(es)) {
        ringcc::raise(ErrorKind::kInvalidArgument, "allgather: the output allocated holds ", bytes, " bytes, not ",
                      elements * static_cast<int64_t>(es));
      }
      self->out = out;
      return PyLong_AsVoidPtr(out.attr("data_ptr")().ptr());
    };
    p->result = default_result;
    std::shared_ptr<ringcc::Work> work = e.enqueue(std::string_view(name_text, static_cast<size_t>(name_len)),
                                                   std::move(p->args), p->shape.data(), p->shape.size());
    HandleState h;
    h.work = std::move(work);
    h.preps.push_back(std::move(p));
    h.named = true;
    return make_handle(std::move(h)).release().ptr();
  } catch (...) {
    return fail_named(CollectiveKind::kAllgather, name_text, name_len);
  }
}

// _core._comm_allreduce_async_raw(comm, tensor, data_ptr, shape, dtype, op,
// prescale, postscale, label[, source, source_ptr]): _allreduce_async_raw's
// collective, unnamed, in issue order on communicator `comm` (an adapter's
// process set); `label` (a str, or None for its place in issue order) names
// the tensor in its errors. The handle's result is `tensor` (or its new row).
PyObject* comm_allreduce_async_raw(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  static constexpr const char* kFn = "_comm_allreduce_async_raw";
  if (nargs != 9 && nargs != 11) {
    PyErr_Format(PyExc_TypeError,
                 "%s takes 9 or 11 arguments (comm, tensor, data_ptr, shape, dtype, op, prescale, "
                 "postscale, label[, source, source_ptr]), got %zd",
                 kFn, nargs);
    return nullptr;
  }
  ringcc::Communicator* c = nullptr;
  try {
    c = &py::cast<ringcc::Communicator&>(py::handle(args[0]));
  } catch (...) {
    PyErr_Format(PyExc_TypeError, "%s: comm must be a ringcc Communicator", kFn);
    return nullptr;
  }
  // Past the communicator, a bad argument fails the call on every rank of it.
  try {
    const long op = PyLong_AsLong(args[5]);
    if (op == -1 && PyErr_Occurred()) throw py::error_already_set();
    const double pre = scale_factor_of(args[6], "prescale_factor");
    const double post = scale_factor_of(args[7], "postscale_factor");
    if (op < 0 || op > static_cast<long>(ringcc::ReduceOp::kProduct)) {
      throw py::value_error(std::string(kFn) + ": invalid op code " + std::to_string(op));
    }
    std::string_view label;
    if (args[8] != Py_None) {
      Py_ssize_t n = 0;
      const char* text = PyUnicode_Check(args[8]) ? PyUnicode_AsUTF8AndSize(args[8], &n) : nullptr;
      if (!text) throw py::type_error(std::string(kFn) + ": label must be a str or None");
      label = std::string_view(text, static_cast<size_t>(n));
    }
    HostTensor in;
    py::object out;
    if (nargs == 11) {
      out = raw_output(kFn, args[1], args[2], args[3], args[4], args[9], &in);
    } else {
      in = raw_tensor(kFn, args[2], args[3], args[4]);
      out = py::reinterpret_borrow<py::object>(args[1]);
    }
    CollectiveArgs a = in_place_allreduce(in, static_cast<int>(op), pre, post);
    if (nargs == 11) {
      a.in = PyLong_AsVoidPtr(args[10]);
      if (!a.in && PyErr_Occurred()) throw py::error_already_set();
      if (!a.in && in.count > 0) throw py::value_error(std::string(kFn) + ": null source_ptr");
    }
    HandleState* h = nullptr;
    py::object handle = new_handle(&h);
    // The handle keeps what the queued collective's description points at.
    if (c->compares_shapes()) {
      h->shape.assign(in.shape(), in.shape() + in.ndim);
      a.shape = h->shape.data();
      a.ndim = static_cast<int32_t>(in.ndim);
    }
    h->label = py::reinterpret_borrow<py::object>(args[8]);
    a.label = label;
    {
      GilRelease release;
      h->work = c->submit(std::move(a));
    }
    h->fixed_result = true;
    h->result = out;
    if (nargs == 11) h->source = py::reinterpret_borrow<py::object>(args[9]);
    return handle.release().ptr();
  } catch (...) {
    try {
      fail_call(c, CollectiveKind::kAllreduce, "");
    } catch (...) {
      set_python_error();
    }
    return nullptr;
  }
}

// _core._allreduce_async_raw(tensor, data_ptr, shape, dtype, op, name,
// prescale, postscale): the named in-place allreduce of memory an adapter
// has described itself (a framework tensor whose address, shape and core
// dtype code it read, having checked that it is contiguous host memory).
// The handle's result is `tensor`, which keeps the memory alive. Spares a
// framework's DLPack export per tensor (torch's costs microseconds).
// With two more arguments (source, source_ptr) the call is out of place:
// it reads source's memory at source_ptr (same shape and dtype) and writes
// `tensor`'s, keeping source alive until done; `tensor` may then be an
// _OutputRows (data_ptr is not read): the output and result is a new row.
PyObject* allreduce_async_raw(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 8 && nargs != 10) {
    PyErr_Format(PyExc_TypeError,
                 "_allreduce_async_raw takes 8 or 10 arguments (tensor, data_ptr, shape, dtype, op, "
                 "name, prescale, postscale[, source, source_ptr]), got %zd",
                 nargs);
    return nullptr;
  }
  PyObject *tensor = args[0], *shape_obj = args[2], *name = args[5];
  if (!PyUnicode_Check(name) || PyUnicode_GET_LENGTH(name) == 0) {
    PyErr_SetString(PyExc_TypeError, "_allreduce_async_raw: name must be a non-empty str");
    return nullptr;
  }
  Py_ssize_t name_len = 0;
  const char* name_text = PyUnicode_AsUTF8AndSize(name, &name_len);
  if (!name_text) return nullptr;
  // Past the name, a bad argument fails the call under it on every rank.
  try {
    const long op = PyLong_AsLong(args[4]);
    if (op == -1 && PyErr_Occurred()) throw py::error_already_set();
    const double pre = scale_factor_of(args[6], "prescale_factor");
    const double post = scale_factor_of(args[7], "postscale_factor");
    if (op < 0 || op > static_cast<long>(ringcc::ReduceOp::kProduct)) {
      throw py::value_error("_allreduce_async_raw: invalid op code " + std::to_string(op));
    }
    HostTensor in;
    if (nargs == 8) {
      in = raw_tensor("_allreduce_async_raw", args[1], shape_obj, args[3]);
      return enqueue_in_place(engine(), tensor, name_text, name_len, in, static_cast<int>(op), pre, post);
    }
    const py::object out = raw_output("_allreduce_async_raw", tensor, args[1], shape_obj, args[3], args[8], &in);
    void* src = PyLong_AsVoidPtr(args[9]);
    if (!src && PyErr_Occurred()) throw py::error_already_set();
    if (!src && in.count > 0) throw py::value_error("_allreduce_async_raw: null source_ptr");
    CollectiveArgs a = in_place_allreduce(in, static_cast<int>(op), pre, post);
    a.in = src;
    return enqueue_named(engine(), std::move(a), in, out.ptr(), args[8], name_text, name_len);
  } catch (...) {
    return fail_named_in_place(name_text, name_len);
  }
}

PyMethodDef g_allreduce_async_inplace_def = {
    "allreduce_async_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(allreduce_async_inplace)),
    METH_FASTCALL | METH_KEYWORDS,
    "allreduce_async_($self, tensor, op=0, *, name=None, prescale_factor=1.0, postscale_factor=1.0)\n"
    "--\n\n"
    "Starts an in-place allreduce of `tensor`; returns a Handle whose result is `tensor`.\n"
    "With a `name`, the background engine matches it by name across ranks (any enqueue\n"
    "order) and fuses it with other ready tensors."};

PyMethodDef g_allreduce_async_def = {
    "allreduce_async", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(allreduce_async_out_of_place)),
    METH_FASTCALL | METH_KEYWORDS,
    "allreduce_async($self, tensor, op=0, *, name=None, prescale_factor=1.0, postscale_factor=1.0, "
    "out=None)\n--\n\n"
    "Starts an allreduce; returns a Handle. With a `name`, the background engine matches it by\n"
    "name across ranks (any enqueue order) and fuses it with other ready tensors; without one,\n"
    "collectives run in issue order."};

PyMethodDef g_broadcast_async_def = {
    "broadcast_async", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(broadcast_async_fast<false>)),
    METH_FASTCALL | METH_KEYWORDS,
    "broadcast_async($self, tensor, root=0, *, name=None, out=None)\n--\n\n"
    "Starts a broadcast of root's `tensor`; returns a Handle whose result is a new array (or `out`)."};

PyMethodDef g_broadcast_async_inplace_def = {
    "broadcast_async_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(broadcast_async_fast<true>)),
    METH_FASTCALL | METH_KEYWORDS,
    "broadcast_async_($self, tensor, root=0, *, name=None)\n--\n\n"
    "Starts an in-place broadcast of root's `tensor`; returns a Handle whose result is `tensor`."};

// ringcc.synchronize(handle, timeout=None): waits for a Handle (or calls
// any other handle's wait(timeout)) and returns its result.
PyObject* synchronize(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const FastcallParams params("synchronize", {"handle", "timeout"}, 2, 1);
  if (nargs == 1 && !kwnames) {
    // The loop over a step's handles, most of them done by the time it gets there.
    HandleState* h = handle_state(args[0]);
    if (PyObject* result = h ? finished_result(*h) : nullptr) return result;
  }
  PyObject *handle = nullptr, *timeout = Py_None;
  if (!params.bind(args, nargs, kwnames, &handle, &timeout)) return nullptr;
  HandleState* h = handle_state(handle);
  if (!h) return PyObject_CallMethod(handle, "wait", "O", timeout);
  return wait_handle(*h, timeout);
}

// ringcc.poll(handle): True once the collective behind it has completed.
PyObject* poll(PyObject*, PyObject* handle) {
  HandleState* h = handle_state(handle);
  if (!h) return PyObject_CallMethod(handle, "done", nullptr);
  return PyBool_FromLong(h->done());
}

PyMethodDef g_fast_functions[] = {
    {"synchronize", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(synchronize)),
     METH_FASTCALL | METH_KEYWORDS,
     "synchronize(handle, timeout=None)\n--\n\n"
     "Waits for `handle` and returns its result (raises its error)."},
    {"_allreduce_async_raw", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(allreduce_async_raw)),
     METH_FASTCALL,
     "_allreduce_async_raw(tensor, data_ptr, shape, dtype, op, name, prescale, postscale)\n--\n\n"
     "For adapters: the named in-place allreduce of contiguous host memory described by its\n"
     "address, shape (a tuple) and core dtype code; the Handle's result is `tensor`."},
    {"_comm_allreduce_async_raw", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(comm_allreduce_async_raw)),
     METH_FASTCALL,
     "_comm_allreduce_async_raw(comm, tensor, data_ptr, shape, dtype, op, prescale, postscale, label[, "
     "source, source_ptr])\n--\n\n"
     "For adapters: _allreduce_async_raw's allreduce, unnamed, in issue order on `comm`."},
    {"_broadcast_async_raw", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(broadcast_async_raw)),
     METH_FASTCALL,
     "_broadcast_async_raw(tensor, data_ptr, shape, dtype, root, name[, source, source_ptr])\n--\n\n"
     "For adapters: the named broadcast of contiguous host memory described by its address,\n"
     "shape and core dtype code, in place or from source's memory; the Handle's result is `tensor`."},
    {"_allgather_async_raw", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(allgather_async_raw)),
     METH_FASTCALL,
     "_allgather_async_raw(tensor, data_ptr, shape, dtype, name, allocate)\n--\n\n"
     "For adapters: the named allgather of contiguous host memory described by its address,\n"
     "shape and core dtype code; allocate(rows) makes the output, the Handle's result."},
    {"poll", poll, METH_O, "poll(handle)\n--\n\nTrue once the collective behind `handle` has completed."},
    {nullptr, nullptr, 0, nullptr},
};

void bind_fast_paths(py::module_& m) {
  if (PyModule_AddFunctions(m.ptr(), g_fast_functions) != 0) throw py::error_already_set();
  // {dtype name: core code}, for _allreduce_async_raw.
  py::dict codes;
  for (int i = 0; i < ringcc::kNumDataTypes; ++i) {
    codes[ringcc::dtype_name(static_cast<ringcc::DataType>(i))] = i;
  }
  m.attr("DTYPE_CODES") = codes;
  // _allreduce_async_inplace(general) -> ringcc.allreduce_async_ over `general`.
  m.def("_allreduce_async_inplace", [](py::object general) {
    PyObject* f = PyCFunction_NewEx(&g_allreduce_async_inplace_def, general.ptr(), nullptr);
    if (!f) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(f);
  });
  // _fast_path(which, general) -> the compiled fast path of ringcc.<which>
  // over `general`, the Python implementation it falls back to.
  m.def("_fast_path", [](const std::string& which, py::object general) {
    PyMethodDef* def = which == "allreduce_async"    ? &g_allreduce_async_def
                       : which == "broadcast_async"  ? &g_broadcast_async_def
                       : which == "broadcast_async_" ? &g_broadcast_async_inplace_def
                                                     : nullptr;
    if (!def) throw py::value_error("no fast path for '" + which + "'");
    PyObject* f = PyCFunction_NewEx(def, general.ptr(), nullptr);
    if (!f) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(f);
  });
}

}  // namespace

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

namespace {

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
             auto bridge = std::make_shared<PythonStore>(store);
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
      .def_property_readonly("_object_key",
                             [](const ringcc::Communicator& c) { return py::bytes(c.object_key()); })
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
  m.def(
      "init",
      [](py::object mpi_handle) {
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
        {
          std::lock_guard<std::mutex> lock(g_comm_mu);
          g_comm = c;
        }
        std::lock_guard<std::mutex> engine_lock(g_engine_mu);
        g_engine = std::move(e);
      },
      py::arg("mpi_handle") = py::none());
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
      "shutdown",
      [] {
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
        try {
          c->shutdown();
        } catch (const ringcc::Error& error) {
          if (error.kind() != ErrorKind::kInterrupted) throw;
          if (!interrupted) interrupted = std::current_exception();
        }
        if (interrupted) std::rethrow_exception(interrupted);
      },
      "Leaves the job; within RINGCC_TIMEOUT_S whatever is pending here or elsewhere.");
  m.def(
      "_abort",
      [](const std::string& reason, bool first_failure) {
        auto live = live_communicators();
        if (live.empty()) return false;
        // The rank the log lines carry (the last communicator made), so that
        // the line names this process as its prefix does.
        const int rank = ringcc::log_rank() >= 0 ? ringcc::log_rank() : live.front()->rank();
        // ringrun reads the first of these lines to name the rank that failed
        // first; a rank that fails because of another's failure says so.
        if (first_failure) {
          RINGCC_LOG(kError, "rank ", rank, " aborts the job: ", reason);
        } else {
          RINGCC_LOG(kError, "rank ", rank, " aborts after a failure elsewhere in the job: ", reason);
        }
        GilRelease release;
        for (auto& c : live) c->abort(reason);
        return true;
      },
      py::arg("reason"), py::arg("first_failure") = true,
      "Aborts every communicator of this process: whatever a peer waits for from this rank\n"
      "fails at once with PeerFailureError naming it and `reason`. For a process that exits\n"
      "on an error.");
}

// What ringcc.init()'s communicator is: rank, size, transport.
void bind_queries(py::module_& m) {
  m.def("is_initialized", [] { return static_cast<bool>(g_comm); });
  m.def("global_communicator", [] { return g_comm ? py::cast(g_comm) : py::none(); });
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
         py::object name) -> py::object {
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
        return do_allreduce(comm(), t, out, op, pre, post, inplace, async, name);
      },
      py::arg("tensor"), py::arg("out"), py::arg("op"), py::arg("pre"), py::arg("post"), py::arg("inplace"),
      py::arg("async_op"), py::arg("name") = py::none());
  m.def(
      "_broadcast",
      [](py::object t, py::object out, py::object root, bool inplace, bool async, py::object name) {
        return do_broadcast(comm(), t, out, root, inplace, async, name);
      },
      py::arg("tensor"), py::arg("out"), py::arg("root"), py::arg("inplace"), py::arg("async_op"),
      py::arg("name") = py::none());
  m.def(
      "_allgather",
      [](py::object t, py::object out, bool async, py::object name) {
        return do_allgather(comm(), t, out, async, name);
      },
      py::arg("tensor"), py::arg("out"), py::arg("async_op"), py::arg("name") = py::none());
  m.def(
      "_reduce_scatter",
      [](py::object t, py::object out, py::object op, py::object pre, py::object post, bool async, py::object name) {
        return do_reduce_scatter(comm(), t, out, op, pre, post, async, name);
      },
      py::arg("tensor"), py::arg("out"), py::arg("op"), py::arg("pre"), py::arg("post"), py::arg("async_op"),
      py::arg("name") = py::none());
  m.def(
      "_alltoall",
      [](py::object t, py::object splits, py::object out, bool async, py::object name) {
        return do_alltoall(comm(), t, splits, out, async, name);
      },
      py::arg("tensor"), py::arg("splits"), py::arg("out"), py::arg("async_op"), py::arg("name") = py::none());
  m.def(
      "_fail_call",
      [](const std::string& kind, const std::string& message, py::object name) {
        // The name is checked as the collectives check it; a bad one leaves
        // the call unnamed (it fails in issue order).
        std::string named;
        try {
          named = name_of(name);
        } catch (...) {
        }
        std::shared_ptr<ringcc::Communicator> c = g_comm;
        report_failed_call(c.get(), kind_of(kind), message, named);
      },
      py::arg("kind"), py::arg("message"), py::arg("name") = py::none(),
      "For adapters whose own argument checks failed: takes part in the call as a failed\n"
      "participant (in issue order on ringcc.init()'s communicator, or under `name` in the\n"
      "engine), so that the peers raise MismatchError naming this rank and `message` for\n"
      "that call. Returns at once; nothing before init().");
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
  bind_fast_paths(m);
  bind_communicator(m);
  bind_init(m);
  bind_lifecycle(m);
  bind_queries(m);
  bind_module_collectives(m);
}

}  // namespace ringcc_py
