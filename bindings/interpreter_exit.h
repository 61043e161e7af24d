// Taking the GIL on threads that may outlive the interpreter.
//
// While the interpreter finalizes, CPython ends every other thread that
// tries to take the GIL with pthread_exit(), which unwinds the thread's
// C++ frames by force; the process aborts ("terminate called without an
// active exception") when that unwinding reaches a destructor or a
// noexcept function, such as the one that takes the GIL back at the end of
// a pybind11::gil_scoped_release. ringcc takes the GIL on such threads in
// two ways: threads of the core (a communicator's worker, the engine) call
// a Python rendezvous store or output allocator, and Python threads
// (torch's completer, users' daemon threads) take the GIL back when a
// blocking call of the core returns.
//
// Both go through a gate that the module closes in an atexit hook: that
// runs before finalization begins, and after ringcc's own exit hooks
// (registered later, they run earlier), which shut down what they can.
// Closing waits, with the GIL released and for at most
// kInterpreterDrainSeconds, for the threads inside to leave. From then on
// only the thread that closed it (the one that finalizes) enters; a call
// into Python from another thread raises Error(kNotInitialized), a Python
// object held by the core is let go of without touching it, and a Python
// thread whose blocking call returns waits forever (the process's exit
// ends it) instead of taking the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>

namespace ringcc_py {

// The bound on closing's wait for threads inside the gate: calls of a
// Python store (one request each) and takings of the GIL are short; one
// stuck on a dead store's connection must not hold up the exit for long.
constexpr double kInterpreterDrainSeconds = 10.0;

// A pass through the gate for the calling thread, held while it may take
// the GIL: admitted() says whether it may.
class InterpreterEntry {
 public:
  InterpreterEntry();
  ~InterpreterEntry();
  InterpreterEntry(const InterpreterEntry&) = delete;
  InterpreterEntry& operator=(const InterpreterEntry&) = delete;

  bool admitted() const { return admitted_; }

 private:
  bool admitted_ = false;
};

// The GIL for a call into Python from any thread (pybind11's
// gil_scoped_acquire behind the gate); raises Error(kNotInitialized) once
// the interpreter is exiting.
class GilForCall {
 public:
  GilForCall();
  GilForCall(const GilForCall&) = delete;
  GilForCall& operator=(const GilForCall&) = delete;

 private:
  InterpreterEntry entry_;  // left after the GIL is released
  std::optional<pybind11::gil_scoped_acquire> gil_;
};

// Releases the GIL of a Python thread for a call of the core, as
// pybind11::gil_scoped_release does, and takes it back behind the gate:
// once the interpreter is exiting, the thread waits forever instead.
class GilRelease {
 public:
  GilRelease();
  ~GilRelease();
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* state_;
};

// Defines m._close_interpreter_gate and registers it as an atexit hook.
void bind_interpreter_exit(pybind11::module_& m);

}  // namespace ringcc_py
