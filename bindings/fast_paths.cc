// The fast and raw entry points (fast_paths.h).
#include "bindings/fast_paths.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include "bindings/arguments.h"
#include "bindings/buffer_view.h"
#include "bindings/errors.h"
#include "bindings/fastcall_args.h"
#include "bindings/handle.h"
#include "bindings/interpreter_exit.h"
#include "bindings/launch.h"
#include "bindings/output_memory.h"
#include "bindings/output_rows.h"
#include "bindings/prepared.h"
#include "bindings/runtime.h"
#include "core/base/error.h"
#include "core/engine/engine.h"

namespace py = pybind11;
using ringcc::CollectiveArgs;
using ringcc::CollectiveKind;
using ringcc::ErrorKind;

namespace ringcc_py {

namespace {

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
// input of an out-of-place call; null for an in-place one). `layout`: see
// TensorMeta::layout.
PyObject* enqueue_named(ringcc::Engine& e, CollectiveArgs&& a, const HostTensor& in, PyObject* result, PyObject* source,
                        const char* name, Py_ssize_t name_len, int64_t layout = 0) {
  route_named_device(a);
  HandleState* h = nullptr;
  py::object handle = new_handle(&h);  // dropped as a done handle if enqueue raises
  note_device(*h, a, result);
  h->work = e.enqueue(std::string_view(name, static_cast<size_t>(name_len)), std::move(a), in.shape(), in.ndim, layout);
  h->named = true;
  h->fixed_result = true;
  h->result = py::reinterpret_borrow<py::object>(result);
  if (source) h->source = py::reinterpret_borrow<py::object>(source);
  return handle.release().ptr();
}

// Enqueues the in-place allreduce `a` of `tensor` by name; a new Handle
// whose result is `tensor` (kept alive until the collective is done).
PyObject* enqueue_in_place(ringcc::Engine& e, PyObject* tensor, const char* name, Py_ssize_t name_len,
                           const HostTensor& in, int op, double pre, double post, int64_t layout = 0) {
  return enqueue_named(e, in_place_allreduce(in, op, pre, post), in, tensor, nullptr, name, name_len, layout);
}

// The arguments of a fast path as the caller gave them (null: not given).
struct FastArgs {
  PyObject* op = nullptr;
  PyObject* root = nullptr;
  PyObject* pre = nullptr;
  PyObject* post = nullptr;
  PyObject* name = nullptr;
  PyObject* out = nullptr;
};

// What a fast path takes from them.
struct FastCall {
  int op = 0;
  int root = 0;
  double pre = 1.0, post = 1.0;
  const char* name = nullptr;
  Py_ssize_t name_len = 0;
};

// An exact int in [0, max], else false.
bool small_int_of(PyObject* o, long max, int* out) {
  if (!PyLong_CheckExact(o)) return false;
  const long v = PyLong_AsLong(o);
  if (v < 0 || v > max) return false;  // -1 with an error set included
  *out = static_cast<int>(v);
  return true;
}

// The one test of whether a fast path takes a call, the tensor aside (each
// tests it as its collective needs): a non-empty exact str name, no `out`
// (or None), and, where given, an op, root and scale factors of the exact
// types the core takes as they are (an int op code, an int root, a float
// or int scale). Any other call, and so every error of its arguments, is
// the general implementation's. May leave a Python error set when false.
bool takes_fast(const FastArgs& given, FastCall* call) {
  if (given.out && given.out != Py_None) return false;
  if (given.op && !small_int_of(given.op, static_cast<long>(ringcc::ReduceOp::kProduct), &call->op)) return false;
  if (given.root && !small_int_of(given.root, std::numeric_limits<int>::max(), &call->root)) return false;
  if (given.pre && !scale_of(given.pre, &call->pre)) return false;
  if (given.post && !scale_of(given.post, &call->post)) return false;
  return given.name && PyUnicode_CheckExact(given.name) && PyUnicode_GET_LENGTH(given.name) > 0 &&
         (call->name = PyUnicode_AsUTF8AndSize(given.name, &call->name_len)) != nullptr;
}

// ringcc.allreduce_async with a name and no `out`, of a plain NumPy array:
// the output is allocated here (NumPy's C API, no Python call) and the
// collective goes to the engine like the in-place one. Everything else
// goes to `general`, the Python implementation.
PyObject* allreduce_async_out_of_place(PyObject* general, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const FastcallParams params("allreduce_async",
                                     {"tensor", "op", "name", "prescale_factor", "postscale_factor", "out"}, 2, 1);
  PyObject* tensor = nullptr;
  FastArgs given;
  FastCall call;
  HostTensor in;
  const bool fast =
      params.try_bind(args, nargs, kwnames, &tensor, &given.op, &given.name, &given.pre, &given.post, &given.out) &&
      takes_fast(given, &call) && plain_numpy(tensor, &in, false);
  if (!fast) {
    PyErr_Clear();
    return PyObject_Vectorcall(general, args, static_cast<size_t>(nargs), kwnames);
  }
  try {
    ringcc::Engine& e = engine();
    py::object result = py::reinterpret_steal<py::object>(
        named_numpy_output(given.name, tensor, static_cast<size_t>(in.count) * ringcc::dtype_size(in.dtype)));
    if (!result) throw py::error_already_set();
    CollectiveArgs a = in_place_allreduce(in, call.op, call.pre, call.post);
    a.out = py::detail::array_proxy(result.ptr())->data;
    return enqueue_named(e, std::move(a), in, result.ptr(), tensor, call.name, call.name_len);
  } catch (...) {
    return fail_named(CollectiveKind::kAllreduce, call.name, call.name_len);
  }
}

// The arguments of a broadcast from `root` of `in` into `out`.
CollectiveArgs broadcast_args(const HostTensor& in, void* out, int root) {
  CollectiveArgs a = tensor_args(CollectiveKind::kBroadcast, in);
  a.root = root;
  a.out = out;
  a.out_count = in.count;
  return a;
}

// ringcc.broadcast_async (inplace false, no `out`) and broadcast_async_
// with a name, of a plain NumPy array and an int root: as above.
template <bool kInPlace>
PyObject* broadcast_async_fast(PyObject* general, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const FastcallParams params(kInPlace ? "broadcast_async_" : "broadcast_async",
                                     {"tensor", "root", "name", "out"}, 2, 1);
  PyObject* tensor = nullptr;
  FastArgs given;
  FastCall call;
  HostTensor in;
  const bool fast = params.try_bind(args, nargs, kwnames, &tensor, &given.root, &given.name, &given.out) &&
                    !(kInPlace && given.out) && takes_fast(given, &call) && plain_numpy(tensor, &in, kInPlace);
  if (!fast) {
    PyErr_Clear();
    return PyObject_Vectorcall(general, args, static_cast<size_t>(nargs), kwnames);
  }
  try {
    ringcc::Engine& e = engine();
    if (kInPlace) {
      return enqueue_named(e, broadcast_args(in, in.ptr, call.root), in, tensor, nullptr, call.name, call.name_len);
    }
    py::object result = py::reinterpret_steal<py::object>(
        named_numpy_output(given.name, tensor, static_cast<size_t>(in.count) * ringcc::dtype_size(in.dtype)));
    if (!result) throw py::error_already_set();
    return enqueue_named(e, broadcast_args(in, py::detail::array_proxy(result.ptr())->data, call.root), in,
                         result.ptr(), tensor, call.name, call.name_len);
  } catch (...) {
    return fail_named(CollectiveKind::kBroadcast, call.name, call.name_len);
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
  PyObject* tensor = nullptr;
  FastArgs given;
  FastCall call;
  // The usual call, allreduce_async_(tensor, name=...), binds without the
  // general parser (a keyword in the caller's code is the interned string).
  static PyObject* const name_key = PyUnicode_InternFromString("name");
  const bool tensor_and_name =
      nargs == 1 && kwnames && PyTuple_GET_SIZE(kwnames) == 1 && PyTuple_GET_ITEM(kwnames, 0) == name_key;
  if (tensor_and_name) {
    tensor = args[0];
    given.name = args[1];
  }
  const bool fast = (tensor_and_name ||
                     params.try_bind(args, nargs, kwnames, &tensor, &given.op, &given.name, &given.pre, &given.post)) &&
                    takes_fast(given, &call);
  if (!fast) {
    PyErr_Clear();
    return PyObject_Vectorcall(general, args, static_cast<size_t>(nargs), kwnames);
  }
  try {
    ringcc::Engine& e = engine();
    return enqueue_in_place(e, tensor, call.name, call.name_len, writable_host_tensor(tensor, "tensor"), call.op,
                            call.pre, call.post);
  } catch (...) {
    return fail_named_in_place(call.name, call.name_len);
  }
}

// Runs `a` over `in` (a plain NumPy array) on this thread, the GIL
// released; returns `result` (the array written: `in`'s own, or `out`),
// or null with the error set.
PyObject* run_blocking(ringcc::Communicator& c, CollectiveArgs a, const HostTensor& in, PyObject* result) {
  try {
    if (c.compares_shapes()) describe_shape(a, in);
    {
      BlockingCall call;
      c.run(a);
    }
  } catch (...) {
    set_python_error();
    return nullptr;
  }
  Py_INCREF(result);
  return result;
}

// ringcc.allreduce_(tensor[, op]) of a plain NumPy array with an int op
// and ringcc.broadcast_(tensor[, root]) with an int root: the blocking
// in-place collective with no Python frame or pybind11 dispatch between
// the caller and the core, for loops of small collectives, whose time is
// mostly the call's own. Everything else (keywords, other ops, roots or
// tensors, and so every argument error) goes to `general`, the Python
// implementation.
template <CollectiveKind kKind>
PyObject* in_place_blocking(PyObject* general, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const long max_second = kKind == CollectiveKind::kAllreduce ? static_cast<long>(ringcc::ReduceOp::kProduct)
                                                              : std::numeric_limits<int>::max();
  int second = 0;  // the op, or the root
  HostTensor in;
  const bool fast = !kwnames && (nargs == 1 || (nargs == 2 && small_int_of(args[1], max_second, &second))) &&
                    plain_numpy(args[0], &in, true);
  if (!fast) {
    PyErr_Clear();
    return PyObject_Vectorcall(general, args, static_cast<size_t>(nargs), kwnames);
  }
  ringcc::Communicator* c = nullptr;
  try {
    c = &comm();
  } catch (...) {
    set_python_error();
    return nullptr;
  }
  CollectiveArgs a = kKind == CollectiveKind::kAllreduce ? in_place_allreduce(in, second, 1.0, 1.0)
                                                         : broadcast_args(in, in.ptr, second);
  return run_blocking(*c, std::move(a), in, args[0]);
}

// ringcc.allgather(tensor, out=array) of plain NumPy arrays of one dtype
// (the input at least 1-d, `out` writable): the blocking allgather into
// `out` with no Python frame or pybind11 dispatch, as allreduce_ above;
// the core checks that `out` holds the gathered rows. Everything else (no
// `out`, other arrays or dtypes, and so every argument error) goes to
// `general`, the Python implementation.
PyObject* allgather_into(PyObject* general, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const FastcallParams params("allgather", {"tensor", "out"}, 1, 1);
  PyObject* tensor = nullptr;
  PyObject* out = nullptr;
  HostTensor in, into;
  const bool fast = params.try_bind(args, nargs, kwnames, &tensor, &out) && out && out != Py_None &&
                    plain_numpy(tensor, &in, false) && in.ndim > 0 && plain_numpy(out, &into, true) &&
                    into.dtype == in.dtype;
  if (!fast) {
    PyErr_Clear();
    return PyObject_Vectorcall(general, args, static_cast<size_t>(nargs), kwnames);
  }
  ringcc::Communicator* c = nullptr;
  try {
    c = &comm();
  } catch (...) {
    set_python_error();
    return nullptr;
  }
  CollectiveArgs a = tensor_args(CollectiveKind::kAllgather, in);
  a.out = into.ptr;
  a.out_count = into.count;
  return run_blocking(*c, std::move(a), in, out);
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

// A raw entry point's address argument (`what`: data_ptr or source_ptr)
// for `count` elements.
void* raw_address(const char* fn, PyObject* ptr_obj, int64_t count, const char* what = "data_ptr") {
  void* ptr = PyLong_AsVoidPtr(ptr_obj);
  if (!ptr && PyErr_Occurred()) throw py::error_already_set();
  if (!ptr && count > 0) throw py::value_error(std::string(fn) + ": null " + what);
  return ptr;
}

// A raw reduction's op code and scale factors, checked in this order.
struct RawReduction {
  int op;
  double pre, post;
};
RawReduction raw_reduction(const char* fn, PyObject* op_obj, PyObject* pre_obj, PyObject* post_obj) {
  const long op = PyLong_AsLong(op_obj);
  if (op == -1 && PyErr_Occurred()) throw py::error_already_set();
  const double pre = scale_factor_of(pre_obj, "prescale_factor");
  const double post = scale_factor_of(post_obj, "postscale_factor");
  if (op < 0 || op > static_cast<long>(ringcc::ReduceOp::kProduct)) {
    throw py::value_error(std::string(fn) + ": invalid op code " + std::to_string(op));
  }
  return {static_cast<int>(op), pre, post};
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
  if (take_output_row(tensor, source, out->shape(), out->ndim, bytes, static_cast<int>(out->dtype), &row, &out->ptr)) {
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
    CollectiveArgs a = broadcast_args(in, in.ptr, static_cast<int>(root));
    a.in = raw_address(kFn, args[7], in.count, "source_ptr");
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
    a = tensor_args(CollectiveKind::kAllgather, in);
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
    const RawReduction r = raw_reduction(kFn, args[5], args[6], args[7]);
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
    CollectiveArgs a = in_place_allreduce(in, r.op, r.pre, r.post);
    if (nargs == 11) a.in = raw_address(kFn, args[10], in.count, "source_ptr");
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
// With one more argument after either form, `layout` (an int): the call's
// digest of the group it belongs to (TensorMeta::layout).
PyObject* allreduce_async_raw(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  static constexpr const char* kFn = "_allreduce_async_raw";
  if (nargs < 8 || nargs > 11) {
    PyErr_Format(PyExc_TypeError,
                 "%s takes 8 to 11 arguments (tensor, data_ptr, shape, dtype, op, "
                 "name, prescale, postscale[, source, source_ptr][, layout]), got %zd",
                 kFn, nargs);
    return nullptr;
  }
  const bool in_place = nargs < 10;
  int64_t layout = 0;
  if (nargs == 9 || nargs == 11) {
    layout = PyLong_AsLongLong(args[nargs - 1]);
    if (layout == -1 && PyErr_Occurred()) return nullptr;
  }
  PyObject *tensor = args[0], *shape_obj = args[2];
  Py_ssize_t name_len = 0;
  const char* name_text = nullptr;
  if (!raw_name(kFn, args[5], &name_text, &name_len)) return nullptr;
  // Past the name, a bad argument fails the call under it on every rank.
  try {
    const RawReduction r = raw_reduction(kFn, args[4], args[6], args[7]);
    HostTensor in;
    if (in_place) {
      in = raw_tensor(kFn, args[1], shape_obj, args[3]);
      return enqueue_in_place(engine(), tensor, name_text, name_len, in, r.op, r.pre, r.post, layout);
    }
    const py::object out = raw_output(kFn, tensor, args[1], shape_obj, args[3], args[8], &in);
    CollectiveArgs a = in_place_allreduce(in, r.op, r.pre, r.post);
    a.in = raw_address(kFn, args[9], in.count, "source_ptr");
    return enqueue_named(engine(), std::move(a), in, out.ptr(), args[8], name_text, name_len, layout);
  } catch (...) {
    return fail_named_in_place(name_text, name_len);
  }
}

PyMethodDef g_allreduce_async_inplace_def = {
    "allreduce_async_", method_of(allreduce_async_inplace),
    METH_FASTCALL | METH_KEYWORDS,
    "allreduce_async_($self, tensor, op=0, *, name=None, prescale_factor=1.0, postscale_factor=1.0)\n"
    "--\n\n"
    "Starts an in-place allreduce of `tensor`; returns a Handle whose result is `tensor`.\n"
    "With a `name`, the background engine matches it by name across ranks (any enqueue\n"
    "order) and fuses it with other ready tensors."};

PyMethodDef g_allreduce_async_def = {
    "allreduce_async", method_of(allreduce_async_out_of_place),
    METH_FASTCALL | METH_KEYWORDS,
    "allreduce_async($self, tensor, op=0, *, name=None, prescale_factor=1.0, postscale_factor=1.0, "
    "out=None)\n--\n\n"
    "Starts an allreduce; returns a Handle. With a `name`, the background engine matches it by\n"
    "name across ranks (any enqueue order) and fuses it with other ready tensors; without one,\n"
    "collectives run in issue order."};

PyMethodDef g_allreduce_inplace_def = {
    "allreduce_", method_of(in_place_blocking<CollectiveKind::kAllreduce>),
    METH_FASTCALL | METH_KEYWORDS,
    "allreduce_($self, tensor, op=0, *, prescale_factor=1.0, postscale_factor=1.0)\n--\n\n"
    "Reduces `tensor` over all ranks in place; returns `tensor`."};

PyMethodDef g_broadcast_inplace_def = {
    "broadcast_", method_of(in_place_blocking<CollectiveKind::kBroadcast>),
    METH_FASTCALL | METH_KEYWORDS,
    "broadcast_($self, tensor, root=0)\n--\n\n"
    "Overwrites `tensor` with root's, in place; returns `tensor`."};

PyMethodDef g_allgather_into_def = {
    "allgather", method_of(allgather_into),
    METH_FASTCALL | METH_KEYWORDS,
    "allgather($self, tensor, *, out=None)\n--\n\n"
    "Concatenates every rank's `tensor` along axis 0 (lengths may differ)."};

PyMethodDef g_broadcast_async_def = {
    "broadcast_async", method_of(broadcast_async_fast<false>),
    METH_FASTCALL | METH_KEYWORDS,
    "broadcast_async($self, tensor, root=0, *, name=None, out=None)\n--\n\n"
    "Starts a broadcast of root's `tensor`; returns a Handle whose result is a new array (or `out`)."};

PyMethodDef g_broadcast_async_inplace_def = {
    "broadcast_async_", method_of(broadcast_async_fast<true>),
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
    {"synchronize", method_of(synchronize),
     METH_FASTCALL | METH_KEYWORDS,
     "synchronize(handle, timeout=None)\n--\n\n"
     "Waits for `handle` and returns its result (raises its error)."},
    {"_allreduce_async_raw", method_of(allreduce_async_raw),
     METH_FASTCALL,
     "_allreduce_async_raw(tensor, data_ptr, shape, dtype, op, name, prescale, postscale)\n--\n\n"
     "For adapters: the named in-place allreduce of contiguous host memory described by its\n"
     "address, shape (a tuple) and core dtype code; the Handle's result is `tensor`."},
    {"_comm_allreduce_async_raw", method_of(comm_allreduce_async_raw),
     METH_FASTCALL,
     "_comm_allreduce_async_raw(comm, tensor, data_ptr, shape, dtype, op, prescale, postscale, label[, "
     "source, source_ptr])\n--\n\n"
     "For adapters: _allreduce_async_raw's allreduce, unnamed, in issue order on `comm`."},
    {"_broadcast_async_raw", method_of(broadcast_async_raw),
     METH_FASTCALL,
     "_broadcast_async_raw(tensor, data_ptr, shape, dtype, root, name[, source, source_ptr])\n--\n\n"
     "For adapters: the named broadcast of contiguous host memory described by its address,\n"
     "shape and core dtype code, in place or from source's memory; the Handle's result is `tensor`."},
    {"_allgather_async_raw", method_of(allgather_async_raw),
     METH_FASTCALL,
     "_allgather_async_raw(tensor, data_ptr, shape, dtype, name, allocate)\n--\n\n"
     "For adapters: the named allgather of contiguous host memory described by its address,\n"
     "shape and core dtype code; allocate(rows) makes the output, the Handle's result."},
    {"poll", poll, METH_O, "poll(handle)\n--\n\nTrue once the collective behind `handle` has completed."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

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
                       : which == "allreduce_"       ? &g_allreduce_inplace_def
                       : which == "broadcast_"       ? &g_broadcast_inplace_def
                       : which == "allgather"        ? &g_allgather_into_def
                       : which == "broadcast_async"  ? &g_broadcast_async_def
                       : which == "broadcast_async_" ? &g_broadcast_async_inplace_def
                                                     : nullptr;
    if (!def) throw py::value_error("no fast path for '" + which + "'");
    PyObject* f = PyCFunction_NewEx(def, general.ptr(), nullptr);
    if (!f) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(f);
  });
}

}  // namespace ringcc_py
