#include "bindings/errors.h"

#include <pythread.h>

#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/thread_exit.h"

namespace py = pybind11;

namespace ringcc_py {

namespace {

PyObject* g_classes[8] = {};

// The exception a signal handler raised in an interrupted wait, raised in
// place of the core's kInterrupted error. Touched under the GIL.
PyObject* g_pending_type = nullptr;
PyObject* g_pending_value = nullptr;
PyObject* g_pending_traceback = nullptr;
unsigned long g_main_thread = 0;

// True while run_signal_handlers() runs the handlers (main thread only): a
// handler must not start another blocking call of the core, whose waits
// would wait for the very call it interrupted.
bool g_in_signal_handler = false;

bool run_signal_handlers() {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return false;
  InterpreterEntry entry;
  if (!entry.admitted()) return false;
  PyGILState_STATE gil = PyGILState_Ensure();
  bool stop = false;
  g_in_signal_handler = true;
  const int raised = PyErr_CheckSignals();
  g_in_signal_handler = false;
  if (raised != 0) {
    Py_XDECREF(g_pending_type);
    Py_XDECREF(g_pending_value);
    Py_XDECREF(g_pending_traceback);
    PyErr_Fetch(&g_pending_type, &g_pending_value, &g_pending_traceback);
    stop = true;
  }
  PyGILState_Release(gil);
  return stop;
}

// Sets the Python error for an interrupted wait: the handler's exception.
void set_interrupted() {
  if (g_pending_type) {
    PyErr_Restore(g_pending_type, g_pending_value, g_pending_traceback);
    g_pending_type = g_pending_value = g_pending_traceback = nullptr;
  } else {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
  }
}

// Sets the Python error for a core error.
void set_core_error(const ringcc::Error& e) {
  if (e.kind() == ringcc::ErrorKind::kInterrupted) return set_interrupted();
  PyObject* cls = g_classes[static_cast<int>(e.kind())];
  PyErr_SetString(cls ? cls : PyExc_RuntimeError, e.what());
}

PyObject* make_class(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  std::string qualified = std::string("ringcc.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!cls) throw py::error_already_set();
  m.attr(name) = py::handle(cls);
  return cls;
}

}  // namespace

const char* python_class_name(ringcc::ErrorKind kind) {
  using ringcc::ErrorKind;
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "ringcc.InvalidArgumentError";
    case ErrorKind::kUnsupportedType:
      return "ringcc.UnsupportedTypeError";
    case ErrorKind::kMismatch:
      return "ringcc.MismatchError";
    case ErrorKind::kPeerFailure:
      return "ringcc.PeerFailureError";
    case ErrorKind::kTimeout:
      return "ringcc.TimeoutError";
    case ErrorKind::kNotInitialized:
      return "ringcc.NotInitializedError";
    case ErrorKind::kInternal:
      return "ringcc.InternalError";
    case ErrorKind::kInterrupted:
      return "KeyboardInterrupt";
  }
  return "ringcc.RingccError";
}

void throw_python(int kind, const std::string& message) {
  PyObject* cls = g_classes[kind] ? g_classes[kind] : PyExc_RuntimeError;
  PyErr_SetString(cls, message.c_str());
  throw py::error_already_set();
}

void set_python_error() {
  try {
    throw;
  } catch (const ringcc::ThreadExit&) {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const ringcc::Error& e) {
    set_core_error(e);
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception in ringcc");
  }
}

void bind_errors(py::module_& m) {
  using ringcc::ErrorKind;
  PyObject* base = make_class(m, "RingccError", PyExc_Exception, "Base class of every error ringcc raises.");
  auto with = [&](PyObject* builtin) { return PyTuple_Pack(2, base, builtin); };
  g_classes[static_cast<int>(ErrorKind::kNotInitialized)] =
      make_class(m, "NotInitializedError", with(PyExc_RuntimeError),
                 "A collective was called before ringcc.init() or after ringcc.shutdown().");
  g_classes[static_cast<int>(ErrorKind::kInvalidArgument)] =
      make_class(m, "InvalidArgumentError", with(PyExc_ValueError),
                 "An argument is unusable: non-contiguous memory, read-only or mis-sized output, bad root.");
  g_classes[static_cast<int>(ErrorKind::kUnsupportedType)] =
      make_class(m, "UnsupportedTypeError", with(PyExc_TypeError), "A dtype or object type ringcc cannot communicate.");
  g_classes[static_cast<int>(ErrorKind::kMismatch)] =
      make_class(m, "MismatchError", with(PyExc_ValueError),
                 "Ranks disagree on the collective, dtype, size or root. Raised on every rank.");
  g_classes[static_cast<int>(ErrorKind::kPeerFailure)] =
      make_class(m, "PeerFailureError", with(PyExc_RuntimeError),
                 "A peer died, closed its connection or aborted; the communicator is unusable.");
  g_classes[static_cast<int>(ErrorKind::kTimeout)] =
      make_class(m, "TimeoutError", with(PyExc_TimeoutError), "A bounded wait ran out (RINGCC_TIMEOUT_S).");
  g_classes[static_cast<int>(ErrorKind::kInternal)] =
      make_class(m, "InternalError", with(PyExc_RuntimeError), "A system call failed inside ringcc.");

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ringcc::Error& e) {
      set_core_error(e);
    }
  });
}

bool on_main_thread() { return g_main_thread != 0 && PyThread_get_thread_ident() == g_main_thread; }

void install_interrupt_hook() {
  py::object main = py::module_::import("threading").attr("main_thread")();
  g_main_thread = py::cast<unsigned long>(main.attr("ident"));
  ringcc::set_interrupt_hook(run_signal_handlers);
}

void check_not_in_signal_handler() {
  if (g_in_signal_handler && on_main_thread()) {
    ringcc::raise(ringcc::ErrorKind::kInvalidArgument,
                  "a signal handler that interrupted a ringcc call cannot make another blocking "
                  "ringcc call (it would wait for the one it interrupted); raise an exception from "
                  "the handler instead, and ringcc aborts what was interrupted");
  }
}

BlockingCall::BlockingCall() : interruptible_(on_main_thread()) { check_not_in_signal_handler(); }

}  // namespace ringcc_py
