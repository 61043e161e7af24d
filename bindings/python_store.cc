// The Python store (python_store.h).
#include "bindings/python_store.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "bindings/interpreter_exit.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"

namespace py = pybind11;
using ringcc::ErrorKind;

namespace ringcc_py {

namespace {

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

}  // namespace

std::shared_ptr<ringcc::Store> python_store(py::object store) {
  return std::make_shared<PythonStore>(std::move(store));
}

}  // namespace ringcc_py
