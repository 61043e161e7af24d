// A rendezvous store implemented in Python, for communicators that meet
// through an adapter's store (torch's c10d store, say).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "core/rendezvous/store.h"

namespace ringcc_py {

// The core's Store over `store`, a Python object with set(key, bytes),
// get(key) -> bytes, add(key, int) -> int and check([keys]) -> bool.
std::shared_ptr<ringcc::Store> python_store(pybind11::object store);

}  // namespace ringcc_py
