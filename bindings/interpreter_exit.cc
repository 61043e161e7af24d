#include "bindings/interpreter_exit.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "core/base/error.h"

namespace py = pybind11;

namespace ringcc_py {

namespace {

// Every blocking call passes it (taking the GIL back): an open gate costs
// an atomic increment and decrement, and no lock.
struct Gate {
  std::atomic<bool> closed{false};
  std::atomic<int64_t> inside{0};
  std::thread::id closer;        // set before `closed`, read after it
  std::mutex mu;                 // closing, and the wait for `left`
  std::condition_variable left;  // the last thread inside left a closed gate
};

// Never destroyed: threads of the core may pass it while static objects
// are destroyed at exit.
Gate& gate() {
  static auto* g = new Gate();
  return *g;
}

void leave(Gate& g) {
  // Sequentially consistent, as in the constructor and close_gate(): either
  // the closing thread sees this thread inside, or this one sees it closed.
  if (g.inside.fetch_sub(1) == 1 && g.closed.load()) {
    std::lock_guard<std::mutex> lock(g.mu);
    g.left.notify_all();
  }
}

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Where a Python thread whose blocking call returned after the gate closed
// stays: taking the GIL would end it by force (see the header). Never
// destroyed, as the gate.
[[noreturn]] void wait_forever() {
  static auto* mu = new std::mutex();
  static auto* never = new std::condition_variable();
  std::unique_lock<std::mutex> lock(*mu);
  for (;;) never->wait(lock);
}

void close_gate() {
  Gate& g = gate();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.closed.load()) return;
    g.closer = std::this_thread::get_id();
    g.closed.store(true);
  }
  if (g.inside.load() == 0) return;
  // The threads inside may be waiting for the GIL this thread holds.
  PyThreadState* state = PyEval_SaveThread();
  {
    std::unique_lock<std::mutex> lock(g.mu);
    g.left.wait_for(lock, std::chrono::duration<double>(kInterpreterDrainSeconds),
                    [&] { return g.inside.load() == 0; });
  }
  PyEval_RestoreThread(state);
}

}  // namespace

InterpreterEntry::InterpreterEntry() {
  Gate& g = gate();
  g.inside.fetch_add(1);
  if (!g.closed.load() && !interpreter_finalizing()) {
    admitted_ = true;
    return;
  }
  const bool closer = g.closed.load() && g.closer == std::this_thread::get_id();
  // An interpreter that finalizes without having run the gate's hook: only
  // the thread that holds the GIL, the one finalizing.
  const bool finalizing = interpreter_finalizing();
  admitted_ = closer || (!g.closed.load() && !finalizing) || (finalizing && PyGILState_Check());
  if (!admitted_) leave(g);
}

InterpreterEntry::~InterpreterEntry() {
  if (admitted_) leave(gate());
}

GilForCall::GilForCall() {
  if (!entry_.admitted()) {
    ringcc::raise(ringcc::ErrorKind::kNotInitialized,
                  "the Python interpreter is exiting: ringcc no longer calls into Python from this thread");
  }
  gil_.emplace();
}

GilRelease::GilRelease() : state_(PyEval_SaveThread()) {}

GilRelease::~GilRelease() {
  InterpreterEntry entry;
  if (!entry.admitted()) wait_forever();
  PyEval_RestoreThread(state_);
}

void bind_interpreter_exit(py::module_& m) {
  m.def("_close_interpreter_gate", &close_gate,
        "At exit (an atexit hook): from now on threads other than this one do not take the GIL for ringcc.");
  py::module_::import("atexit").attr("register")(m.attr("_close_interpreter_gate"));
}

}  // namespace ringcc_py
