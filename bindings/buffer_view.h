// Turning Python objects into raw memory for the core: NumPy arrays (fast
// path), anything with __dlpack__ (torch, jax, cupy...), and the buffer
// protocol. The memory must be C-contiguous and in host memory.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace ringcc_py {

struct BufferView {
  void* ptr = nullptr;
  int64_t count = 0;                // elements
  ringcc::DataType dtype = ringcc::DataType::kFloat32;
  std::vector<int64_t> shape;
  pybind11::object owner;           // keeps the memory alive
  pybind11::object numpy_dtype;     // for outputs the binding allocates

  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  // Elements per row of axis 0 (1 for 0-d and 1-d).
  int64_t row_elems() const;
  size_t bytes() const { return static_cast<size_t>(count) * ringcc::dtype_size(dtype); }
};

// `what` names the argument in error messages ("tensor", "out").
BufferView view_of(pybind11::handle obj, bool writable, const char* what);

// The NumPy dtype for a core dtype (bfloat16 through ml_dtypes).
pybind11::object numpy_dtype_for(ringcc::DataType dtype);

// A new NumPy array of dtype with shape.
pybind11::array new_array(const pybind11::object& numpy_dtype, const std::vector<int64_t>& shape);

}  // namespace ringcc_py
