// Arguments from Python as the core takes them, and failed participation
// (arguments.h).
#include "bindings/arguments.h"

#include <limits>

#include "bindings/interpreter_exit.h"
#include "bindings/runtime.h"
#include "core/base/error.h"
#include "core/base/thread_exit.h"

namespace py = pybind11;
using ringcc::CollectiveArgs;
using ringcc::CollectiveKind;
using ringcc::ErrorKind;

namespace ringcc_py {

namespace {

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

}  // namespace

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
void report_failed_call(ringcc::Communicator* c, CollectiveKind kind, const std::string& why, const std::string& name,
                        int64_t layout) {
  if (!name.empty()) {
    if (ringcc::Engine* e = engine_if_initialized()) {
      e->enqueue(name, ringcc::failed_call(kind, why), nullptr, 0, layout);
    }
    return;
  }
  if (c) {
    GilRelease release;
    c->submit(ringcc::failed_call(kind, why));
  }
}

// Called from a catch block: takes part in the call as a failed participant
// (see above), then rethrows the error being handled.
[[noreturn]] void fail_call(ringcc::Communicator* c, CollectiveKind kind, const std::string& name, int64_t layout) {
  try {
    bool take_part = true;
    const std::string why = current_error_text(&take_part);
    if (take_part) report_failed_call(c, kind, why, name, layout);
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

CollectiveArgs tensor_args(CollectiveKind kind, const HostTensor& in) {
  CollectiveArgs a;
  a.kind = kind;
  a.dtype = in.dtype;
  a.in = in.ptr;
  a.count = in.count;
  a.row_elems = in.row_elems();
  a.memory = in.memory;
  a.device = in.device;
  a.stream = in.stream;
  return a;
}

CollectiveArgs in_place_allreduce(const HostTensor& in, int op, double pre, double post) {
  CollectiveArgs a = tensor_args(CollectiveKind::kAllreduce, in);
  a.op = static_cast<ringcc::ReduceOp>(op);
  a.prescale = pre;
  a.postscale = post;
  a.out = in.ptr;
  a.out_count = in.count;
  return a;
}

// The shape of `in` for the ranks to compare; `in` stays alive (unmoved)
// until the collective completes.
void describe_shape(CollectiveArgs& a, const HostTensor& in) {
  a.shape = in.shape();
  a.ndim = static_cast<int32_t>(in.ndim);
}

}  // namespace ringcc_py
