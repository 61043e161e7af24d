// CUDA tensors in the bindings: which stream ringcc runs a collective on,
// and device arrays for results the binding allocates. The policy (a
// framework's current stream, ringcc.cuda_stream(), which library allocates
// an output) lives in the Python module ringcc.gpu_arrays, imported only
// when a CUDA tensor shows up.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "core/collective/dtype.h"

namespace ringcc_py {

// The CUstream to enqueue a collective of `tensor` (on CUDA device
// `device`) on: ringcc.cuda_stream()'s, else the producer framework's
// current stream (torch, CuPy), else the legacy default stream (0x1).
void* consumer_stream(pybind11::handle tensor, int device);

// The stream as DLPack's __dlpack__(stream=...) wants it: 1 for the legacy
// default stream, 2 for the per-thread one, else the handle.
pybind11::int_ dlpack_stream_number(void* stream);

// For a collective of CUDA tensors that the background engine runs (a
// named one): the process's side stream for `device`, ordered after the
// work queued on `caller` so far. The engine may run the collective later
// and fused with others; the caller's stream goes on meanwhile.
void* side_stream_after(int device, void* caller);

// A device collective on `stream` has been enqueued: the stream this
// thread uses for `like` (ringcc.cuda_stream()'s, else its library's
// current stream) waits for it. Nothing when that is `stream` itself.
void order_consumer_after(pybind11::handle like, int device, void* stream);

// Raises InvalidArgumentError naming what to install unless the CUDA
// driver loads and initialises (the package's library directories are
// handed to the core first).
void require_cuda_driver(const char* what);

// A new CUDA array of `shape` and `dtype` on `device`, of the same library
// as `like` where ringcc knows how (torch, CuPy), else ringcc's own
// DeviceArray (DLPack and __cuda_array_interface__).
pybind11::object new_device_array(pybind11::handle like, const std::vector<int64_t>& shape, ringcc::DataType dtype,
                                  int device, void* stream);

void bind_device_arrays(pybind11::module_& m);

}  // namespace ringcc_py
