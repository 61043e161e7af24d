#include "bindings/handle.h"

#include <new>
#include <string>

#include "bindings/device_arrays.h"
#include "bindings/errors.h"
#include "bindings/fastcall_args.h"
#include "bindings/global_communicator.h"
#include "core/base/error.h"

namespace py = pybind11;

namespace ringcc_py {

namespace {

struct HandleObject {
  PyObject_HEAD HandleState state;
};

PyTypeObject* g_type = nullptr;

// States of handles dropped before their collective completed: the engine
// or the worker may still write into the tensors they keep alive. Swept
// when handles are made; touched only under the GIL; never destroyed (it
// may hold Python objects at interpreter exit).
std::vector<HandleState>& orphans() {
  static auto* list = new std::vector<HandleState>();
  return *list;
}

void sweep_orphans() {
  auto& list = orphans();
  for (size_t i = 0; i < list.size();) {
    if (list[i].work->done()) {
      list[i] = std::move(list.back());
      list.pop_back();
    } else {
      ++i;
    }
  }
}

// Blocks (timeout < 0: no limit) and returns the result; raises the
// collective's error, or TimeoutError. Several threads may wait for one
// handle at once: each keeps the Work alive while it waits without the
// GIL, and the first to get the GIL back collects the result.
py::object wait_for(HandleState& h, double timeout) {
  if (!h.finished) {
    const std::shared_ptr<ringcc::Work> work = h.work;
    bool ok;
    if (work->done()) {
      ok = work->wait(timeout);  // already complete: no need to let go of the GIL
    } else {
      // Under the GIL, which shutdown() holds while it takes the engine.
      const ringcc::EngineWaiter waiter = h.named ? nudge_engine(work) : ringcc::EngineWaiter();
      BlockingCall call;
      ok = work->wait(timeout);
    }
    if (!ok) {
      throw_python(static_cast<int>(ringcc::ErrorKind::kTimeout),
                   "the collective did not complete within the wait's timeout");
    }
  }
  if (!h.finished) {
    h.finished = true;
    // Copy the core's results back into each Prepared.
    auto& list = h.work->list();
    for (size_t i = 0; i < h.preps.size(); ++i) {
      h.preps[i]->args.result_count = list[i].result_count;
      h.preps[i]->args.recv_counts = list[i].recv_counts;
    }
    // Done with it: the engine may reuse it for the next tensor it is given.
    h.work.reset();
    h.source = py::object();
    if (h.fixed_result) {
      // result was set at the start.
    } else if (h.grouped) {
      py::list outs;
      for (auto& p : h.preps) outs.append(p->result(*p));
      h.result = outs;
    } else {
      h.result = h.preps.empty() ? py::none() : h.preps[0]->result(*h.preps[0]);
    }
  }
  if (h.device >= 0) {
    // Enqueued: what the waiting thread queues next on its stream comes after it.
    order_consumer_after(h.device_like, h.device, h.stream);
  }
  return h.result;
}

PyObject* handle_new(PyTypeObject*, PyObject*, PyObject*) {
  PyErr_SetString(PyExc_TypeError, "ringcc.Handle cannot be created directly: the *_async collectives return one");
  return nullptr;
}

// Handles' memory, kept for the next ones: a training loop makes and drops
// one handle per tensor per step. Touched only under the GIL.
constexpr size_t kMaxFreeHandles = 4096;
std::vector<PyObject*>& free_handles() {
  static auto* list = new std::vector<PyObject*>();
  return *list;
}

void handle_dealloc(PyObject* self) {
  auto* h = reinterpret_cast<HandleObject*>(self);
  if (!h->state.done()) orphans().push_back(std::move(h->state));
  h->state.~HandleState();
  PyTypeObject* type = Py_TYPE(self);
  auto& spare = free_handles();
  if (spare.size() < kMaxFreeHandles) {
    spare.push_back(self);
  } else {
    type->tp_free(self);
  }
  Py_DECREF(type);
}

PyObject* handle_wait(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const FastcallParams params("wait", {"timeout"}, 1, 0);
  PyObject* timeout = Py_None;
  if (!params.bind(args, nargs, kwnames, &timeout)) return nullptr;
  return wait_handle(reinterpret_cast<HandleObject*>(self)->state, timeout);
}

PyObject* handle_done(PyObject* self, PyObject*) {
  return PyBool_FromLong(reinterpret_cast<HandleObject*>(self)->state.done());
}

PyObject* handle_repr(PyObject* self) {
  const HandleState& h = reinterpret_cast<HandleObject*>(self)->state;
  return PyUnicode_FromFormat("<ringcc.Handle %s>", h.done() ? "done" : "pending");
}

PyMethodDef g_methods[] = {
    {"wait", method_of(handle_wait), METH_FASTCALL | METH_KEYWORDS,
     "wait(timeout=None)\n--\n\n"
     "Blocks until the collective completes and returns its result; raises its error."},
    {"done", handle_done, METH_NOARGS, "True once the collective has completed (or failed)."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

py::object new_handle(HandleState** state) {
  if (!orphans().empty()) sweep_orphans();
  PyObject* obj;
  auto& spare = free_handles();
  if (!spare.empty()) {
    obj = spare.back();
    spare.pop_back();
    PyObject_Init(obj, g_type);  // a new reference to it, and to its type
  } else {
    obj = g_type->tp_alloc(g_type, 0);
    if (!obj) throw py::error_already_set();
  }
  *state = new (&reinterpret_cast<HandleObject*>(obj)->state) HandleState();
  return py::reinterpret_steal<py::object>(obj);
}

py::object make_handle(HandleState state) {
  HandleState* s = nullptr;
  py::object obj = new_handle(&s);
  *s = std::move(state);
  return obj;
}

HandleState* handle_state(PyObject* obj) {
  return Py_TYPE(obj) == g_type ? &reinterpret_cast<HandleObject*>(obj)->state : nullptr;
}

PyObject* finished_result(HandleState& h) {
  if (!h.fixed_result || !h.preps.empty() || h.device >= 0 || !(h.finished || h.work->succeeded())) {
    return nullptr;
  }
  h.finished = true;
  h.work.reset();  // the engine may reuse it
  h.source = py::object();
  return h.result.inc_ref().ptr();
}

PyObject* wait_handle(HandleState& h, PyObject* timeout) {
  double seconds = -1.0;
  if (timeout != Py_None) {
    seconds = PyFloat_AsDouble(timeout);
    if (seconds == -1.0 && PyErr_Occurred()) return nullptr;
  }
  try {
    return wait_for(h, seconds).release().ptr();
  } catch (...) {
    set_python_error();
    return nullptr;
  }
}

void bind_handle(py::module_& m) {
  PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(handle_dealloc)},
      {Py_tp_new, reinterpret_cast<void*>(handle_new)},
      {Py_tp_repr, reinterpret_cast<void*>(handle_repr)},
      {Py_tp_methods, g_methods},
      {Py_tp_doc, const_cast<char*>("A collective in flight: wait() for its result, done() to poll.")},
      {0, nullptr},
  };
  PyType_Spec spec = {"ringcc.Handle", static_cast<int>(sizeof(HandleObject)), 0, Py_TPFLAGS_DEFAULT, slots};
  PyObject* type = PyType_FromSpec(&spec);
  if (!type) throw py::error_already_set();
  g_type = reinterpret_cast<PyTypeObject*>(type);
  m.attr("Handle") = py::reinterpret_steal<py::object>(type);
  Py_INCREF(type);  // g_type lives as long as the process
}

}  // namespace ringcc_py
