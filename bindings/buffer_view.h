// Turning Python objects into raw memory for the core: NumPy arrays (fast
// path), anything with __dlpack__ (torch, jax, cupy...), and the buffer
// protocol. The memory must be C-contiguous, in host memory or (through
// DLPack) on a CUDA device.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "core/collective/collective_args.h"
#include "core/collective/dtype.h"

namespace ringcc_py {

struct BufferView {
  void* ptr = nullptr;
  int64_t count = 0;  // elements
  ringcc::DataType dtype = ringcc::DataType::kFloat32;
  std::vector<int64_t> shape;
  pybind11::object owner;        // keeps the memory alive
  pybind11::object origin;       // the object the view was made of
  pybind11::object numpy_dtype;  // for outputs the binding allocates
  // kCuda: a DLPack tensor on CUDA device `device`, exported for use on
  // `stream` (the stream ringcc enqueues on, bindings/device_arrays.h).
  ringcc::MemoryKind memory = ringcc::MemoryKind::kHost;
  int device = -1;
  void* stream = nullptr;

  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  // Elements per row of axis 0 (1 for 0-d and 1-d).
  int64_t row_elems() const;
  size_t bytes() const { return static_cast<size_t>(count) * ringcc::dtype_size(dtype); }
};

// `what` names the argument in error messages ("tensor", "out").
BufferView view_of(pybind11::handle obj, bool writable, const char* what);

// Contiguous memory described without allocating, for the per-tensor fast
// paths: the shape lives inline up to kInlineDims dimensions. Host memory,
// unless a DLPack producer said CUDA (memory, device, stream as in
// BufferView).
struct HostTensor {
  static constexpr size_t kInlineDims = 8;
  void* ptr = nullptr;
  ringcc::DataType dtype = ringcc::DataType::kFloat32;
  int64_t count = 1;
  size_t ndim = 0;
  int64_t dims[kInlineDims] = {};
  std::vector<int64_t> more_dims;  // used instead of dims past kInlineDims
  ringcc::MemoryKind memory = ringcc::MemoryKind::kHost;
  int device = -1;
  void* stream = nullptr;

  const int64_t* shape() const { return ndim <= kInlineDims ? dims : more_dims.data(); }
  int64_t* resize(size_t n);  // room for n dimensions, returned to be filled in
  int64_t row_elems() const;  // elements per row of axis 0 (1 for 0-d and 1-d)
};

// Fills *t from a NumPy array (exactly numpy.ndarray, not a subclass) that
// is writable, C-contiguous, in native byte order and of a core dtype other
// than bfloat16. False for anything else, which view_of() then judges.
bool writable_numpy(PyObject* obj, HostTensor* t);
// The same, writable or not as asked.
bool plain_numpy(PyObject* obj, HostTensor* t, bool writable);

// A new C-contiguous NumPy array of the dtype and shape of `obj`, one that
// plain_numpy() took (a new reference; null with the Python error set).
PyObject* new_numpy_like(PyObject* obj);

// `obj` as writable contiguous memory: writable_numpy(), or view_of()'s
// checks and errors for everything else (a CUDA tensor keeps its memory
// kind, device and stream). The memory stays `obj`'s: the caller keeps obj
// alive while it is used.
HostTensor writable_host_tensor(PyObject* obj, const char* what);

// Raises InvalidArgumentError unless v is in host memory.
void require_host(const BufferView& v, const char* what);

// The NumPy dtype for a core dtype (bfloat16 through ml_dtypes).
pybind11::object numpy_dtype_for(ringcc::DataType dtype);

// A new NumPy array of dtype with shape.
pybind11::array new_array(const pybind11::object& numpy_dtype, const std::vector<int64_t>& shape);

}  // namespace ringcc_py
