#include "bindings/device_arrays.h"

#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "bindings/dlpack.h"
#include "core/base/error.h"
#include "core/device/cuda_device.h"
#include "core/device/gpu_libraries.h"

namespace py = pybind11;
using ringcc::ErrorKind;

namespace ringcc_py {

namespace {

py::module_ gpu_arrays() { return py::module_::import("ringcc.gpu_arrays"); }

using namespace dlpack;  // DLPack's ABI, bindings/dlpack.h

DLDataType dlpack_type(ringcc::DataType dtype) {
  const uint8_t bits = static_cast<uint8_t>(8 * ringcc::dtype_size(dtype));
  switch (dtype) {
    case ringcc::DataType::kFloat16:
    case ringcc::DataType::kFloat32:
    case ringcc::DataType::kFloat64:
      return {kDLFloat, bits, 1};
    case ringcc::DataType::kBFloat16:
      return {kDLBfloat, bits, 1};
    case ringcc::DataType::kUInt8:
      return {kDLUInt, bits, 1};
    default:
      return {kDLInt, bits, 1};
  }
}

// Device memory ringcc allocated for a result, freed when the last owner
// (the Python object or a DLPack consumer) lets go.
struct Allocation {
  int device = 0;
  ringcc::cuda::CUdeviceptr ptr = 0;
  size_t bytes = 0;
  ~Allocation() {
    if (!ptr) return;
    try {
      auto& dev = ringcc::device::CudaDevice::get(device);
      ringcc::device::CudaDevice::Scope scope(dev);
      dev.api().cuMemFree_v2(ptr);
    } catch (...) {
    }
  }
};

struct DeviceArray {
  std::shared_ptr<Allocation> memory;
  std::vector<int64_t> shape;
  ringcc::DataType dtype = ringcc::DataType::kFloat32;
  void* stream = nullptr;  // the stream its contents were written on
};

struct ExportContext {
  std::shared_ptr<Allocation> memory;
  std::vector<int64_t> shape;
  DLManagedTensor tensor{};
};

void delete_export(DLManagedTensor* t) { delete static_cast<ExportContext*>(t->manager_ctx); }

void capsule_destructor(PyObject* capsule) {
  // An unconsumed capsule still owns its tensor.
  if (PyCapsule_IsValid(capsule, kCapsuleName)) {
    auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
    if (t && t->deleter) t->deleter(t);
  }
}

// The consumer's stream waits for what was queued on the producer's.
void order_after(const DeviceArray& a, py::handle stream_arg) {
  if (stream_arg.is_none() || !a.stream) return;
  const auto consumer = reinterpret_cast<void*>(static_cast<uintptr_t>(stream_arg.cast<int64_t>()));
  if (consumer == a.stream) return;
  auto& dev = ringcc::device::CudaDevice::get(a.memory->device);
  const auto& api = dev.api();
  ringcc::device::CudaDevice::Scope scope(dev);
  ringcc::cuda::CUevent event = nullptr;
  dev.check(api.cuEventCreate(&event, ringcc::cuda::CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  api.cuEventRecord(event, static_cast<ringcc::cuda::CUstream>(a.stream));
  api.cuStreamWaitEvent(static_cast<ringcc::cuda::CUstream>(consumer), event, 0);
  api.cuEventDestroy_v2(event);
}

py::object export_capsule(const DeviceArray& a) {
  auto* ctx = new ExportContext;
  ctx->memory = a.memory;
  ctx->shape = a.shape;
  DLTensor& t = ctx->tensor.dl_tensor;
  t.data = reinterpret_cast<void*>(static_cast<uintptr_t>(a.memory->ptr));
  t.device = {2, a.memory->device};
  t.ndim = static_cast<int32_t>(ctx->shape.size());
  t.dtype = dlpack_type(a.dtype);
  t.shape = ctx->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  ctx->tensor.manager_ctx = ctx;
  ctx->tensor.deleter = delete_export;
  PyObject* capsule = PyCapsule_New(&ctx->tensor, kCapsuleName, capsule_destructor);
  if (!capsule) {
    delete ctx;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

}  // namespace

void* consumer_stream(py::handle tensor, int device) {
  const int64_t handle = gpu_arrays().attr("consumer_stream")(tensor, device).cast<int64_t>();
  return reinterpret_cast<void*>(static_cast<uintptr_t>(handle));
}

py::int_ dlpack_stream_number(void* stream) {
  return py::int_(static_cast<int64_t>(reinterpret_cast<uintptr_t>(stream)));
}

void* side_stream_after(int device, void* caller) {
  auto& dev = ringcc::device::CudaDevice::get(device);
  ringcc::cuda::CUstream side = dev.side_stream();
  dev.order_after(side, static_cast<ringcc::cuda::CUstream>(caller));
  return side;
}

void order_consumer_after(py::handle like, int device, void* stream) {
  void* consumer = consumer_stream(like, device);
  if (consumer == stream) return;
  auto& dev = ringcc::device::CudaDevice::get(device);
  dev.order_after(static_cast<ringcc::cuda::CUstream>(consumer), static_cast<ringcc::cuda::CUstream>(stream));
}

void require_cuda_driver(const char* what) {
  // Under the GIL: the first CUDA tensor hands the package's library
  // directories to the core; once the driver loaded, nothing more to check.
  static bool loaded = false;
  if (loaded) return;
  py::module_::import("ringcc.gpu_libraries").attr("configure")();
  ringcc::device::cuda_driver(std::string(what) + " lives on a CUDA device: it");
  loaded = true;
}

py::object new_device_array(py::handle like, const std::vector<int64_t>& shape, ringcc::DataType dtype, int device,
                            void* stream) {
  py::object made = gpu_arrays().attr("empty_like_library")(like, shape, ringcc::dtype_name(dtype), device);
  if (!made.is_none()) return made;
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  auto memory = std::make_shared<Allocation>();
  memory->device = device;
  memory->bytes = static_cast<size_t>(count) * ringcc::dtype_size(dtype);
  {
    auto& dev = ringcc::device::CudaDevice::get(device);
    ringcc::device::CudaDevice::Scope scope(dev);
    dev.check(dev.api().cuMemAlloc_v2(&memory->ptr, std::max<size_t>(memory->bytes, 1)), "cuMemAlloc");
  }
  DeviceArray a;
  a.memory = std::move(memory);
  a.shape = shape;
  a.dtype = dtype;
  a.stream = stream;
  return py::cast(std::move(a));
}

void bind_device_arrays(py::module_& m) {
  py::class_<DeviceArray>(m, "DeviceArray",
                          "A CUDA array ringcc allocated for a result (when the input's library is not\n"
                          "one ringcc allocates with). Exposes DLPack and __cuda_array_interface__.")
      .def_property_readonly("shape", [](const DeviceArray& a) { return py::tuple(py::cast(a.shape)); })
      .def_property_readonly("dtype", [](const DeviceArray& a) { return std::string(ringcc::dtype_name(a.dtype)); })
      .def_property_readonly("device", [](const DeviceArray& a) { return a.memory->device; })
      .def_property_readonly("data_ptr", [](const DeviceArray& a) { return a.memory->ptr; })
      .def("__dlpack_device__",
           [](const DeviceArray& a) { return py::make_tuple(static_cast<int>(dlpack::kDLCUDA), a.memory->device); })
      .def(
          "__dlpack__",
          [](const DeviceArray& a, py::object stream, py::kwargs) {
            order_after(a, stream);
            return export_capsule(a);
          },
          py::arg("stream") = py::none())
      .def_property_readonly("__cuda_array_interface__", [](const DeviceArray& a) {
        static const char* typestr[] = {"<f2", "<V2", "<f4", "<f8", "|i1", "|u1", "<i4", "<i8"};
        py::dict d;
        d["shape"] = py::tuple(py::cast(a.shape));
        d["typestr"] = typestr[static_cast<int>(a.dtype)];
        d["data"] = py::make_tuple(a.memory->ptr, false);
        d["version"] = 3;
        d["strides"] = py::none();
        d["stream"] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(a.stream));
        return d;
      });
}

}  // namespace ringcc_py
