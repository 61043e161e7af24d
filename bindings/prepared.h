// One collective prepared from Python arguments: the core's arguments, what
// must stay alive until it completes, and how to turn it into the Python
// result.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "core/collective/collective_args.h"

namespace ringcc_py {

struct Prepared {
  ringcc::CollectiveArgs args;
  std::vector<int64_t> shape;  // the input's full shape
  std::vector<pybind11::object> keep;
  pybind11::object out;  // the output array (set late for allgather/alltoall)
  // A CUDA collective: its input tensor, whose library's current stream a
  // wait orders after the collective (bindings/device_arrays.h).
  pybind11::object device_like;
  std::function<pybind11::object(Prepared&)> result;
};

}  // namespace ringcc_py
