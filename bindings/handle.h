// ringcc._core.Handle: a collective in flight, with wait() and done().
//
// A plain CPython type rather than a pybind11 class: a training loop makes
// and drops one handle per tensor per step, and pybind11's instance
// registry cost about 2,000 instructions a handle, as much as the enqueue.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

#include "bindings/prepared.h"
#include "core/collective/work.h"

namespace ringcc_py {

struct HandleState {
  // Let go of once a wait returned the result (finished).
  std::shared_ptr<ringcc::Work> work;
  // What the result is made of (one per collective of the Work), unless
  // the result is known up front (fixed_result: an in-place call returns
  // its own tensor).
  std::vector<std::unique_ptr<Prepared>> preps;
  bool grouped = false;  // the result is a list, one per Prepared
  bool named = false;    // enqueued to the engine: nudge it before blocking
  bool fixed_result = false;
  bool finished = false;
  pybind11::object result = pybind11::none();
  // A collective of CUDA tensors (device >= 0): the stream it is enqueued
  // on, and a tensor of it. Once it is enqueued, wait() makes the waiting
  // thread's stream for that tensor's library wait for it.
  int device = -1;
  void* stream = nullptr;
  pybind11::object device_like;
  // An out-of-place call's input, kept alive until the collective is done.
  pybind11::object source;
  // What the description of a collective queued without a Prepared points
  // at (CollectiveArgs::shape, ::label), kept until it is done: a moved
  // vector keeps its memory, as does the label's str.
  std::vector<int64_t> shape;
  pybind11::object label;

  bool done() const { return finished || !work || work->done(); }
};

// A new Handle owning state.
pybind11::object make_handle(HandleState state);
// A new Handle with an empty state, filled in through *state (no moves).
pybind11::object new_handle(HandleState** state);

// The state of obj if it is a Handle, else null.
HandleState* handle_state(PyObject* obj);

// The result of an in-place call's handle whose collective finished
// without an error, as a new reference (the handle lets go of its Work);
// null, with no Python error set, for anything that needs wait_handle().
PyObject* finished_result(HandleState& h);

// Handle.wait(timeout): blocks (timeout None: no limit; else seconds) with
// the GIL released; a new reference to the result, or null with the Python
// error set (the collective's error, or TimeoutError).
PyObject* wait_handle(HandleState& h, PyObject* timeout);

// Registers the type as m.Handle.
void bind_handle(pybind11::module_& m);

}  // namespace ringcc_py
