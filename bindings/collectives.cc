// The collectives as the Python package calls them: arguments become a
// CollectiveArgs over raw memory, the core runs it with the GIL released,
// and the result becomes a NumPy array (or the caller's own output).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <thread>
#include <mutex>

#include "bindings/buffer_view.h"
#include "bindings/errors.h"
#include "bindings/fastcall_args.h"
#include "bindings/global_communicator.h"
#include "bindings/handle.h"
#include "bindings/prepared.h"
#include "core/communicator.h"
#include "core/engine.h"
#include "core/prefix_store.h"
#include "core/env.h"
#include "core/error.h"
#include "core/mpi_library.h"
#include "core/rendezvous.h"
#include "core/store.h"

namespace py = pybind11;
using ringcc::CollectiveArgs;
using ringcc::CollectiveKind;
using ringcc::ErrorKind;

namespace ringcc_py {

namespace {

std::shared_ptr<ringcc::Communicator> g_comm;
std::mutex g_comm_mu;  // guards g_comm against threads without the GIL (XLA's)
std::unique_ptr<ringcc::Engine> g_engine;  // named collectives of g_comm's ranks

ringcc::Engine& engine() {
  if (!g_engine) {
    ringcc::raise(ErrorKind::kNotInitialized,
                  "ringcc is not initialized: call ringcc.init() first");
  }
  return *g_engine;
}

ringcc::Communicator& comm() {
  if (!g_comm) {
    ringcc::raise(ErrorKind::kNotInitialized,
                  "ringcc is not initialized: call ringcc.init() first");
  }
  return *g_comm;
}

py::object default_result(Prepared& p) { return p.out; }

// Runs a collective that failed on this rank before it started, so that
// peers fail at once, then rethrows the original error.
[[noreturn]] void fail_locally(ringcc::Communicator& c, CollectiveKind kind, const ringcc::Error& e) {
  if (e.kind() != ErrorKind::kNotInitialized) {
    CollectiveArgs failed;
    failed.kind = CollectiveKind::kLocalError;
    failed.failed_kind = kind;
    failed.local_error = e.what();
    try {
      py::gil_scoped_release release;
      c.run(failed);
    } catch (...) {
    }
  }
  throw;
}

// Output for an out-of-place call: the caller's `out`, checked, or a new
// array shaped like `like`.
py::object output_for(const py::object& out, const BufferView& in, const std::vector<int64_t>& shape,
                      int64_t count, CollectiveArgs& a) {
  if (out.is_none()) {
    py::array arr = new_array(in.numpy_dtype.is_none() ? numpy_dtype_for(in.dtype) : in.numpy_dtype, shape);
    a.out = arr.mutable_data();
    a.out_count = count;
    return arr;
  }
  BufferView v = view_of(out, true, "out");
  if (v.dtype != in.dtype) {
    ringcc::raise(ErrorKind::kInvalidArgument, "out has dtype ", ringcc::dtype_name(v.dtype),
                  " but the input has ", ringcc::dtype_name(in.dtype));
  }
  if (count >= 0 && v.count != count) {
    ringcc::raise(ErrorKind::kInvalidArgument, "out holds ", v.count, " elements but ", count,
                  " are needed");
  }
  a.out = v.ptr;
  a.out_count = v.count;
  return out;
}

// An allocator for outputs whose size is known only after the header
// exchange: it takes the GIL to create the NumPy array.
void allocate_late(Prepared& p, const BufferView& in) {
  py::object dtype = in.numpy_dtype.is_none() ? numpy_dtype_for(in.dtype) : in.numpy_dtype;
  std::vector<int64_t> row_shape(in.shape.size() > 1 ? in.shape.begin() + 1 : in.shape.end(),
                                 in.shape.end());
  const int64_t row_elems = in.row_elems();
  auto* self = &p;
  // The Prepared keeps the dtype alive while the collective may call this
  // (its handle outlives the collective); the allocator holds no Python
  // reference of its own, so it may be destroyed on any thread, without
  // the GIL (the core drops its copy of the arguments where it likes).
  p.keep.push_back(dtype);
  py::handle dtype_handle = dtype;
  p.args.allocate = [self, dtype_handle, row_shape, row_elems](int64_t elements) -> void* {
    py::gil_scoped_acquire gil;
    std::vector<int64_t> shape{elements / row_elems};
    shape.insert(shape.end(), row_shape.begin(), row_shape.end());
    py::array arr = new_array(py::reinterpret_borrow<py::object>(dtype_handle), shape);
    self->out = arr;
    return arr.mutable_data();
  };
}

void fill_input(Prepared& p, const BufferView& in) {
  p.shape = in.shape;
  p.args.dtype = in.dtype;
  p.args.in = in.ptr;
  p.args.count = in.count;
  p.args.row_elems = in.row_elems();
  p.keep.push_back(in.owner);
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
  return a;
}

std::unique_ptr<Prepared> prep_allreduce(py::object tensor, py::object out, int op, double pre,
                                         double post, bool inplace) {
  auto p = std::make_unique<Prepared>();
  p->args.kind = CollectiveKind::kAllreduce;
  p->args.op = static_cast<ringcc::ReduceOp>(op);
  p->args.prescale = pre;
  p->args.postscale = post;
  same_shape_output(*p, tensor, out, inplace);
  return p;
}

}  // namespace

namespace {

// Runs a collective now, queues it in issue order (async), or hands it to
// the engine by name (async with a name).
template <class Make>  // () -> std::unique_ptr<Prepared>
py::object launch(ringcc::Communicator& c, CollectiveKind kind, Make&& make, bool async,
                  const std::string& name = "") {
  std::unique_ptr<Prepared> p;
  if (!name.empty()) {
    ringcc::Engine& e = engine();
    p = make();  // a bad argument raises here; named peers learn of it as a stall
    // The Prepared keeps only what the result needs; the engine owns the args.
    std::shared_ptr<ringcc::Work> work = e.enqueue(name, std::move(p->args), p->shape.data(), p->shape.size());
    HandleState h;
    h.work = std::move(work);
    h.preps.push_back(std::move(p));
    h.named = true;
    return make_handle(std::move(h));
  }
  try {
    p = make();
  } catch (const ringcc::Error& e) {
    fail_locally(c, kind, e);
  }
  if (async) {
    std::shared_ptr<ringcc::Work> work;
    {
      py::gil_scoped_release release;
      work = c.submit(p->args);
    }
    // The allocator points at the Prepared that the handle now owns.
    HandleState h;
    h.work = std::move(work);
    h.preps.push_back(std::move(p));
    return make_handle(std::move(h));
  }
  {
    py::gil_scoped_release release;
    c.run(p->args);
  }
  return p->result(*p);
}

py::object do_allreduce(ringcc::Communicator& c, py::object tensor, py::object out, int op,
                        double pre, double post, bool inplace, bool async,
                        const std::string& name = "") {
  return launch(c, CollectiveKind::kAllreduce,
                [&] { return prep_allreduce(tensor, out, op, pre, post, inplace); }, async, name);
}

py::object do_broadcast(ringcc::Communicator& c, py::object tensor, py::object out, int root,
                        bool inplace, bool async, const std::string& name = "") {
  return launch(c, CollectiveKind::kBroadcast, [&] {
    auto p = std::make_unique<Prepared>();
    p->args.kind = CollectiveKind::kBroadcast;
    p->args.root = root;
    same_shape_output(*p, tensor, out, inplace);
    return p;
  }, async, name);
}

py::object do_allgather(ringcc::Communicator& c, py::object tensor, py::object out, bool async,
                        const std::string& name = "") {
  return launch(c, CollectiveKind::kAllgather, [&] {
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
  }, async, name);
}

py::object do_reduce_scatter(ringcc::Communicator& c, py::object tensor, py::object out, int op,
                             double pre, double post, bool async, const std::string& name = "") {
  return launch(c, CollectiveKind::kReduceScatter, [&] {
    auto p = std::make_unique<Prepared>();
    p->args.kind = CollectiveKind::kReduceScatter;
    BufferView in = view_of(tensor, false, "tensor");
    if (in.shape.empty()) in.shape = {1};
    fill_input(*p, in);
    p->args.op = static_cast<ringcc::ReduceOp>(op);
    p->args.prescale = pre;
    p->args.postscale = post;
    std::vector<int64_t> shape = in.shape;
    shape[0] = ringcc::block_rows(in.rows(), c.size(), c.rank());
    p->out = output_for(out, in, shape, shape[0] * in.row_elems(), p->args);
    p->keep.push_back(p->out);
    p->result = default_result;
    return p;
  }, async, name);
}

py::object do_alltoall(ringcc::Communicator& c, py::object tensor, py::object splits,
                       py::object out, bool async, const std::string& name = "") {
  return launch(c, CollectiveKind::kAlltoall, [&] {
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
      for (auto s : splits) p->args.send_counts.push_back(py::cast<int64_t>(s) * row);
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
  }, async, name);
}

py::object do_barrier(ringcc::Communicator& c, bool async, const std::string& name = "") {
  return launch(c, CollectiveKind::kBarrier, [] {
    auto p = std::make_unique<Prepared>();
    p->args.kind = CollectiveKind::kBarrier;
    p->result = [](Prepared&) { return py::object(py::none()); };
    return p;
  }, async, name);
}

py::object do_grouped_allreduce(ringcc::Communicator& c, py::list tensors, int op, double pre,
                                double post, bool inplace, bool async) {
  std::vector<std::unique_ptr<Prepared>> preps;
  preps.reserve(tensors.size());
  try {
    for (auto t : tensors) {
      preps.push_back(prep_allreduce(py::reinterpret_borrow<py::object>(t), py::none(), op, pre,
                                     post, inplace));
    }
  } catch (const ringcc::Error& e) {
    fail_locally(c, CollectiveKind::kAllreduce, e);
  }
  std::vector<CollectiveArgs> list;
  list.reserve(preps.size());
  for (auto& p : preps) list.push_back(p->args);
  if (async) {
    std::shared_ptr<ringcc::Work> work;
    {
      py::gil_scoped_release release;
      work = c.submit_grouped(std::move(list));
    }
    HandleState h;
    h.work = std::move(work);
    h.preps = std::move(preps);
    h.grouped = true;
    return make_handle(std::move(h));
  }
  {
    py::gil_scoped_release release;
    c.grouped_allreduce(list);
  }
  py::list outs;
  for (auto& p : preps) outs.append(p->out);
  return outs;
}

// A rendezvous store implemented in Python (torch's c10d store, say):
// set(key, bytes), get(key) -> bytes, add(key, int) -> int, check([keys])
// -> bool, and wait([keys], timedelta). Every call takes the GIL.
class PythonStore : public ringcc::Store {
 public:
  explicit PythonStore(py::object store) : store_(std::move(store)) {}
  ~PythonStore() override {
    py::gil_scoped_acquire gil;
    store_ = py::object();
  }
  void set(const std::string& key, const std::string& value) override {
    py::gil_scoped_acquire gil;
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
        py::gil_scoped_acquire gil;
        if (py::cast<bool>(store_.attr("check")(py::list(py::make_tuple(key))))) {
          return py::cast<std::string>(store_.attr("get")(key));
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        ringcc::raise(ErrorKind::kTimeout, "timed out after ", timeout.count() / 1000.0,
                      " s waiting for key '", key, "' in the rendezvous store");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
  }
  bool try_get(const std::string& key, std::string* value) override {
    py::gil_scoped_acquire gil;
    if (!py::cast<bool>(store_.attr("check")(py::list(py::make_tuple(key))))) return false;
    *value = py::cast<std::string>(store_.attr("get")(key));
    return true;
  }
  int64_t add(const std::string& key, int64_t delta) override {
    py::gil_scoped_acquire gil;
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

// Enqueues the in-place allreduce `a` of `tensor` by name; a new Handle
// whose result is `tensor` (kept alive until the collective is done).
PyObject* enqueue_in_place(ringcc::Engine& e, PyObject* tensor, const char* name,
                           Py_ssize_t name_len, const HostTensor& in, int op, double pre, double post) {
  HandleState* h = nullptr;
  py::object handle = new_handle(&h);  // dropped as a done handle if enqueue raises
  h->work = e.enqueue(std::string_view(name, static_cast<size_t>(name_len)),
                      in_place_allreduce(in, op, pre, post), in.shape(), in.ndim);
  h->named = true;
  h->fixed_result = true;
  h->result = py::reinterpret_borrow<py::object>(tensor);
  return handle.release().ptr();
}

// ringcc.allreduce_async_: a named in-place allreduce handed to the engine.
// `self` is the general Python implementation, called for everything but
// the common case (a tensor, an int op, a non-empty str name, numeric
// scales): other arguments, their errors and the unnamed path stay its.
// The handle's result is the tensor itself, kept alive until done.
PyObject* allreduce_async_inplace(PyObject* general, PyObject* const* args, Py_ssize_t nargs,
                                  PyObject* kwnames) {
  static const FastcallParams params(
      "allreduce_async_", {"tensor", "op", "name", "prescale_factor", "postscale_factor"}, 2, 1);
  PyObject *tensor = nullptr, *op_obj = nullptr, *name = nullptr, *pre_obj = nullptr,
           *post_obj = nullptr;
  long op = 0;
  double pre = 1.0, post = 1.0;
  Py_ssize_t name_len = 0;
  const char* name_text = nullptr;
  // The usual call, allreduce_async_(tensor, name=...), binds without the
  // general parser (a keyword in the caller's code is the interned string).
  static PyObject* const name_key = PyUnicode_InternFromString("name");
  const bool tensor_and_name = nargs == 1 && kwnames && PyTuple_GET_SIZE(kwnames) == 1 &&
                               PyTuple_GET_ITEM(kwnames, 0) == name_key;
  if (tensor_and_name) {
    tensor = args[0];
    name = args[1];
  }
  const bool fast =
      (tensor_and_name ||
       params.try_bind(args, nargs, kwnames, &tensor, &op_obj, &name, &pre_obj, &post_obj)) &&
      (!op_obj || (PyLong_CheckExact(op_obj) && (op = PyLong_AsLong(op_obj)) >= 0 &&
                   op <= static_cast<long>(ringcc::ReduceOp::kProduct))) &&
      name && PyUnicode_CheckExact(name) && PyUnicode_GET_LENGTH(name) > 0 &&
      (!pre_obj || scale_of(pre_obj, &pre)) && (!post_obj || scale_of(post_obj, &post)) &&
      (name_text = PyUnicode_AsUTF8AndSize(name, &name_len)) != nullptr;
  if (!fast) {
    PyErr_Clear();
    return PyObject_Vectorcall(general, args, static_cast<size_t>(nargs), kwnames);
  }
  try {
    ringcc::Engine& e = engine();
    return enqueue_in_place(e, tensor, name_text, name_len, writable_host_tensor(tensor, "tensor"),
                            static_cast<int>(op), pre, post);
  } catch (...) {
    set_python_error();
    return nullptr;
  }
}

// _core._allreduce_async_raw(tensor, data_ptr, shape, dtype, op, name,
// prescale, postscale): the named in-place allreduce of memory an adapter
// has described itself (a framework tensor whose address, shape and core
// dtype code it read, having checked that it is contiguous host memory).
// The handle's result is `tensor`, which keeps the memory alive. Spares a
// framework's DLPack export per tensor (torch's costs microseconds).
PyObject* allreduce_async_raw(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 8) {
    PyErr_Format(PyExc_TypeError,
                 "_allreduce_async_raw takes 8 arguments (tensor, data_ptr, shape, dtype, op, "
                 "name, prescale, postscale), got %zd", nargs);
    return nullptr;
  }
  PyObject *tensor = args[0], *shape_obj = args[2], *name = args[5];
  void* ptr = PyLong_AsVoidPtr(args[1]);
  if (!ptr && PyErr_Occurred()) return nullptr;
  const long dtype = PyLong_AsLong(args[3]);
  if (dtype == -1 && PyErr_Occurred()) return nullptr;
  const long op = PyLong_AsLong(args[4]);
  if (op == -1 && PyErr_Occurred()) return nullptr;
  const double pre = PyFloat_AsDouble(args[6]);
  if (pre == -1.0 && PyErr_Occurred()) return nullptr;
  const double post = PyFloat_AsDouble(args[7]);
  if (post == -1.0 && PyErr_Occurred()) return nullptr;
  if (dtype < 0 || dtype >= ringcc::kNumDataTypes) {
    PyErr_Format(PyExc_ValueError, "_allreduce_async_raw: invalid dtype code %ld", dtype);
    return nullptr;
  }
  if (op < 0 || op > static_cast<long>(ringcc::ReduceOp::kProduct)) {
    PyErr_Format(PyExc_ValueError, "_allreduce_async_raw: invalid op code %ld", op);
    return nullptr;
  }
  if (!PyUnicode_Check(name) || PyUnicode_GET_LENGTH(name) == 0) {
    PyErr_SetString(PyExc_TypeError, "_allreduce_async_raw: name must be a non-empty str");
    return nullptr;
  }
  if (!PyTuple_Check(shape_obj)) {
    PyErr_SetString(PyExc_TypeError, "_allreduce_async_raw: shape must be a tuple of ints");
    return nullptr;
  }
  Py_ssize_t name_len = 0;
  const char* name_text = PyUnicode_AsUTF8AndSize(name, &name_len);
  if (!name_text) return nullptr;
  HostTensor in;
  in.ptr = ptr;
  in.dtype = static_cast<ringcc::DataType>(dtype);
  int64_t* shape = in.resize(static_cast<size_t>(PyTuple_GET_SIZE(shape_obj)));
  in.count = 1;
  for (size_t i = 0; i < in.ndim; ++i) {
    const long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape_obj, static_cast<Py_ssize_t>(i)));
    if (d == -1 && PyErr_Occurred()) return nullptr;
    if (d < 0 || (d > 0 && in.count > std::numeric_limits<int64_t>::max() / d)) {
      PyErr_SetString(PyExc_ValueError, "_allreduce_async_raw: invalid shape");
      return nullptr;
    }
    shape[i] = d;
    in.count *= d;
  }
  if (!ptr && in.count > 0) {
    PyErr_SetString(PyExc_ValueError, "_allreduce_async_raw: null data_ptr");
    return nullptr;
  }
  try {
    return enqueue_in_place(engine(), tensor, name_text, name_len, in, static_cast<int>(op), pre, post);
  } catch (...) {
    set_python_error();
    return nullptr;
  }
}

PyMethodDef g_allreduce_async_inplace_def = {
    "allreduce_async_",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(allreduce_async_inplace)),
    METH_FASTCALL | METH_KEYWORDS,
    "allreduce_async_($self, tensor, op=0, *, name=None, prescale_factor=1.0, postscale_factor=1.0)\n"
    "--\n\n"
    "Starts an in-place allreduce of `tensor`; returns a Handle whose result is `tensor`.\n"
    "With a `name`, the background engine matches it by name across ranks (any enqueue\n"
    "order) and fuses it with other ready tensors."};

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
    {"_allreduce_async_raw",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(allreduce_async_raw)), METH_FASTCALL,
     "_allreduce_async_raw(tensor, data_ptr, shape, dtype, op, name, prescale, postscale)\n--\n\n"
     "For adapters: the named in-place allreduce of contiguous host memory described by its\n"
     "address, shape (a tuple) and core dtype code; the Handle's result is `tensor`."},
    {"poll", poll, METH_O,
     "poll(handle)\n--\n\nTrue once the collective behind `handle` has completed."},
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
}

}  // namespace

std::shared_ptr<ringcc::Communicator> global_communicator() {
  std::lock_guard<std::mutex> lock(g_comm_mu);
  if (!g_comm) {
    ringcc::raise(ErrorKind::kNotInitialized,
                  "ringcc is not initialized: call ringcc.init() first");
  }
  return g_comm;
}

void nudge_engine(const std::shared_ptr<ringcc::Work>& waiting) {
  if (g_engine) g_engine->nudge(waiting);
}

void bind_collectives(py::module_& m) {
  bind_handle(m);
  bind_fast_paths(m);

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
             py::gil_scoped_release release;
             return std::make_shared<ringcc::Communicator>(info, bridge);
           }),
           py::arg("rank"), py::arg("size"), py::arg("store"), py::arg("timeout_s") = 0.0,
           "Joins a group of `size` ranks through `store` (set/get/add/check). timeout_s bounds\n"
           "every wait of this communicator (0: RINGCC_TIMEOUT_S).")
      .def("abort", [](CommPtr c, const std::string& reason) { c->abort(reason); },
           py::arg("reason"),
           "Fails any collective blocked on this rank, here and on its peers; the communicator\n"
           "is unusable afterwards. Safe from any thread.")
      .def("report_error", [](CommPtr c, const std::string& message) {
             CollectiveArgs failed;
             failed.kind = CollectiveKind::kLocalError;
             failed.failed_kind = CollectiveKind::kAllreduce;
             failed.local_error = message;
             py::gil_scoped_release release;
             try {
               c->run(failed);
             } catch (const ringcc::Error& e) {
               if (e.kind() != ErrorKind::kInvalidArgument) throw;
             }
           }, py::arg("message"),
           "Takes part in the peers' current collective as a failed participant, so that they\n"
           "raise MismatchError naming this rank and `message` instead of waiting.")
      .def_property_readonly("timeout_s", &ringcc::Communicator::timeout_s)
      .def_property_readonly("rank", &ringcc::Communicator::rank)
      .def_property_readonly("size", &ringcc::Communicator::size)
      .def_property_readonly("local_rank", &ringcc::Communicator::local_rank)
      .def_property_readonly("local_size", &ringcc::Communicator::local_size)
      .def_property_readonly("cross_rank", &ringcc::Communicator::cross_rank)
      .def_property_readonly("cross_size", &ringcc::Communicator::cross_size)
      .def_property_readonly("transport_name", &ringcc::Communicator::transport_name)
      .def("shutdown", [](CommPtr c) {
        py::gil_scoped_release release;
        c->shutdown();
      })
      .def("allreduce", [](CommPtr c, py::object t, py::object out, int op, double pre, double post,
                           bool inplace, bool async) {
        return do_allreduce(*c, t, out, op, pre, post, inplace, async);
      }, py::arg("tensor"), py::arg("out") = py::none(), py::arg("op") = 0,
         py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, py::arg("inplace") = false,
         py::arg("async_op") = false)
      .def("broadcast", [](CommPtr c, py::object t, py::object out, int root, bool inplace, bool async) {
        return do_broadcast(*c, t, out, root, inplace, async);
      }, py::arg("tensor"), py::arg("out") = py::none(), py::arg("root") = 0,
         py::arg("inplace") = false, py::arg("async_op") = false)
      .def("allgather", [](CommPtr c, py::object t, py::object out, bool async) {
        return do_allgather(*c, t, out, async);
      }, py::arg("tensor"), py::arg("out") = py::none(), py::arg("async_op") = false)
      .def("reduce_scatter", [](CommPtr c, py::object t, py::object out, int op, double pre,
                                double post, bool async) {
        return do_reduce_scatter(*c, t, out, op, pre, post, async);
      }, py::arg("tensor"), py::arg("out") = py::none(), py::arg("op") = 0,
         py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, py::arg("async_op") = false)
      .def("alltoall", [](CommPtr c, py::object t, py::object splits, py::object out, bool async) {
        return do_alltoall(*c, t, splits, out, async);
      }, py::arg("tensor"), py::arg("splits") = py::none(), py::arg("out") = py::none(),
         py::arg("async_op") = false)
      .def("barrier", [](CommPtr c, bool async) { return do_barrier(*c, async); },
           py::arg("async_op") = false)
      .def("grouped_allreduce", [](CommPtr c, py::list ts, int op, double pre, double post,
                                   bool inplace, bool async) {
        return do_grouped_allreduce(*c, ts, op, pre, post, inplace, async);
      }, py::arg("tensors"), py::arg("op") = 0, py::arg("prescale") = 1.0,
         py::arg("postscale") = 1.0, py::arg("inplace") = false, py::arg("async_op") = false);

  m.def("init", [](py::object mpi_handle) {
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
        py::gil_scoped_release release;
        info = ringcc::rendezvous_from_mpi(handle);
      }
    } else {
      info = ringcc::rendezvous_from_env();
    }
    std::shared_ptr<ringcc::Communicator> c;
    std::unique_ptr<ringcc::Engine> e;
    {
      py::gil_scoped_release release;
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
    }
    {
      std::lock_guard<std::mutex> lock(g_comm_mu);
      g_comm = c;
    }
    g_engine = std::move(e);
  }, py::arg("mpi_handle") = py::none());
  m.def("mpi_built", [] { return ringcc::mpi_plugin_info().loaded; },
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
  m.def("shutdown", [] {
    if (!g_comm) return;
    std::shared_ptr<ringcc::Communicator> c;
    {
      std::lock_guard<std::mutex> lock(g_comm_mu);
      c.swap(g_comm);
    }
    std::unique_ptr<ringcc::Engine> e = std::move(g_engine);
    py::gil_scoped_release release;
    if (e) e->shutdown();
    e.reset();
    c->shutdown();
  });
  m.def("is_initialized", [] { return static_cast<bool>(g_comm); });
  m.def("global_communicator", [] { return g_comm ? py::cast(g_comm) : py::none(); });
  m.def("rank", [] { return comm().rank(); });
  m.def("size", [] { return comm().size(); });
  m.def("local_rank", [] { return comm().local_rank(); });
  m.def("local_size", [] { return comm().local_size(); });
  m.def("cross_rank", [] { return comm().cross_rank(); });
  m.def("cross_size", [] { return comm().cross_size(); });
  m.def("transport_name", [] { return comm().transport_name(); });
  m.def("fusion_threshold", [] { return comm().fusion_threshold(); });

  m.def("_allreduce", [](py::object t, py::object out, int op, double pre, double post,
                         bool inplace, bool async, const std::string& name) -> py::object {
    if (inplace && !async && name.empty()) {
      // The latency-bound path (small blocking in-place allreduces in
      // loops): no Prepared, no result callback.
      ringcc::Communicator& c = comm();
      CollectiveArgs a;
      try {
        a = in_place_allreduce(writable_host_tensor(t.ptr(), "tensor"), op, pre, post);
      } catch (const ringcc::Error& e) {
        fail_locally(c, CollectiveKind::kAllreduce, e);
      }
      {
        py::gil_scoped_release release;
        c.run(a);
      }
      return t;
    }
    return do_allreduce(comm(), t, out, op, pre, post, inplace, async, name);
  }, py::arg("tensor"), py::arg("out"), py::arg("op"), py::arg("pre"), py::arg("post"),
     py::arg("inplace"), py::arg("async_op"), py::arg("name") = "");
  m.def("_broadcast", [](py::object t, py::object out, int root, bool inplace, bool async,
                         const std::string& name) {
    return do_broadcast(comm(), t, out, root, inplace, async, name);
  }, py::arg("tensor"), py::arg("out"), py::arg("root"), py::arg("inplace"), py::arg("async_op"),
     py::arg("name") = "");
  m.def("_allgather", [](py::object t, py::object out, bool async, const std::string& name) {
    return do_allgather(comm(), t, out, async, name);
  }, py::arg("tensor"), py::arg("out"), py::arg("async_op"), py::arg("name") = "");
  m.def("_reduce_scatter", [](py::object t, py::object out, int op, double pre, double post,
                              bool async, const std::string& name) {
    return do_reduce_scatter(comm(), t, out, op, pre, post, async, name);
  }, py::arg("tensor"), py::arg("out"), py::arg("op"), py::arg("pre"), py::arg("post"),
     py::arg("async_op"), py::arg("name") = "");
  m.def("_alltoall", [](py::object t, py::object splits, py::object out, bool async,
                        const std::string& name) {
    return do_alltoall(comm(), t, splits, out, async, name);
  }, py::arg("tensor"), py::arg("splits"), py::arg("out"), py::arg("async_op"),
     py::arg("name") = "");
  m.def("join", [] {
    std::shared_ptr<ringcc::Work> work = engine().join();
    py::gil_scoped_release release;
    work->wait(-1);
    return work->list()[0].result_count;
  }, "Blocks until every rank has joined; meanwhile this rank takes part in the others'\n"
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
  m.def("_grouped_allreduce", [](py::list ts, int op, double pre, double post, bool inplace,
                                 bool async) {
    return do_grouped_allreduce(comm(), ts, op, pre, post, inplace, async);
  });
}

}  // namespace ringcc_py
