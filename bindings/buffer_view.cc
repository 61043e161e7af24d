#include "bindings/buffer_view.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

#include "bindings/device_arrays.h"
#include "bindings/dlpack.h"
#include "core/base/error.h"

namespace py = pybind11;
using ringcc::DataType;
using ringcc::ErrorKind;

namespace ringcc_py {

namespace {

constexpr const char* kSupported = "float16, bfloat16, float32, float64, int8, uint8, int32, int64";

[[noreturn]] void unsupported(const char* what, const std::string& type) {
  ringcc::raise(ErrorKind::kUnsupportedType, what, " has dtype ", type,
                ", which ringcc does not support (supported: ", kSupported, ")");
}

// '=' and '|' are native; of '<' and '>' the one that is not.
constexpr char kForeignByteOrder = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? '>' : '<';

DataType dtype_from_numpy(const py::dtype& dt, const char* what) {
  if (dt.byteorder() == kForeignByteOrder) {
    ringcc::raise(ErrorKind::kInvalidArgument, what, " has dtype ", std::string(py::str(dt)),
                  ", which is not in this machine's byte order; pass x.astype(x.dtype.newbyteorder('='))");
  }
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f') {
    if (size == 2) return DataType::kFloat16;
    if (size == 4) return DataType::kFloat32;
    if (size == 8) return DataType::kFloat64;
  } else if (kind == 'i') {
    if (size == 1) return DataType::kInt8;
    if (size == 4) return DataType::kInt32;
    if (size == 8) return DataType::kInt64;
  } else if (kind == 'u') {
    if (size == 1) return DataType::kUInt8;
  } else if (size == 2) {
    std::string name = py::str(dt.attr("name"));
    if (name == "bfloat16") return DataType::kBFloat16;
  }
  unsupported(what, py::str(dt.attr("name")));
}

using namespace dlpack;  // DLPack's ABI, bindings/dlpack.h

// DLPack's type codes by name: 0 int, 1 uint, 2 float, 3 opaque handle,
// 4 bfloat, 5 complex, 6 bool.
std::string dlpack_type_name(DLDataType t) {
  static const char* const kCodes[] = {"int", "uint", "float", "handle", "bfloat", "complex", "bool"};
  if (t.code >= 7) return "DLPack type code " + std::to_string(t.code) + " (" + std::to_string(t.bits) + " bits)";
  std::string name = kCodes[t.code];
  if (t.code != 6) name += std::to_string(t.bits);
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

DataType dtype_from_dlpack(DLDataType t, const char* what) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 16) return DataType::kFloat16;
    if (t.code == kDLFloat && t.bits == 32) return DataType::kFloat32;
    if (t.code == kDLFloat && t.bits == 64) return DataType::kFloat64;
    if (t.code == kDLBfloat && t.bits == 16) return DataType::kBFloat16;
    if (t.code == kDLInt && t.bits == 8) return DataType::kInt8;
    if (t.code == kDLInt && t.bits == 32) return DataType::kInt32;
    if (t.code == kDLInt && t.bits == 64) return DataType::kInt64;
    if (t.code == kDLUInt && t.bits == 8) return DataType::kUInt8;
  }
  unsupported(what, dlpack_type_name(t));
}

BufferView from_numpy(py::handle obj, bool writable, const char* what) {
  auto arr = py::reinterpret_borrow<py::array>(obj);
  BufferView v;
  v.dtype = dtype_from_numpy(arr.dtype(), what);
  if (!(arr.flags() & py::array::c_style)) {
    ringcc::raise(ErrorKind::kInvalidArgument, what,
                  " is not C-contiguous; pass np.ascontiguousarray(...) or a contiguous copy");
  }
  if (writable && !arr.writeable()) {
    ringcc::raise(ErrorKind::kInvalidArgument, what, " is read-only but must be written to");
  }
  v.ptr = const_cast<void*>(arr.data());
  v.count = static_cast<int64_t>(arr.size());
  v.shape.assign(arr.shape(), arr.shape() + arr.ndim());
  v.owner = py::reinterpret_borrow<py::object>(obj);
  v.numpy_dtype = arr.dtype();
  return v;
}

// A framework's own export for objects of `type`, cheaper than its DLPack
// protocol methods (ringcc.gpu_arrays.fast_exporter), or None. Looked up
// once per type; the types stay referenced (they are few).
py::handle fast_exporter(PyTypeObject* type) {
  static auto* cache = new std::unordered_map<PyTypeObject*, PyObject*>();
  auto it = cache->find(type);
  if (it != cache->end()) return it->second;
  py::object exporter =
      py::module_::import("ringcc.gpu_arrays").attr("fast_exporter")(py::handle(reinterpret_cast<PyObject*>(type)));
  Py_INCREF(reinterpret_cast<PyObject*>(type));
  PyObject* held = exporter.release().ptr();
  cache->emplace(type, held);
  return held;
}

BufferView from_dlpack(py::handle obj, const char* what) {
  // A producer on a CUDA device is asked for its tensor on the stream ringcc
  // will use (DLPack's stream argument), so that it orders its pending work
  // before ringcc's; anything else is exported as before. A framework that
  // ringcc knows (torch) exports directly: its tensor, and the stream it
  // is current on, with nothing to order.
  void* stream = nullptr;
  py::object capsule;
  py::handle exporter = fast_exporter(Py_TYPE(obj.ptr()));
  if (!exporter.is_none()) {
    py::object exported = py::reinterpret_borrow<py::object>(exporter)(obj);
    if (!exported.is_none()) {
      auto pair = py::reinterpret_borrow<py::tuple>(exported);
      capsule = pair[0];
      if (!pair[1].is_none()) stream = reinterpret_cast<void*>(static_cast<uintptr_t>(pair[1].cast<int64_t>()));
    }
  }
  const bool fast = static_cast<bool>(capsule);
  int32_t device_type = kDLCPU, device_id = 0;
  if (!fast && py::hasattr(obj, "__dlpack_device__")) {
    py::tuple where = obj.attr("__dlpack_device__")();
    device_type = where[0].cast<int32_t>();
    device_id = where[1].cast<int32_t>();
  }
  const bool cuda = device_type == kDLCUDA || (fast && stream);
  if (fast) {
    // exported above
  } else if (cuda) {
    stream = consumer_stream(obj, device_id);
    capsule = obj.attr("__dlpack__")(py::arg("stream") = dlpack_stream_number(stream));
  } else {
    capsule = obj.attr("__dlpack__")();
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  if (!managed) throw py::error_already_set();
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type == kDLCUDAManaged) {
    ringcc::raise(ErrorKind::kInvalidArgument, what,
                  " is in CUDA managed memory, which ringcc does "
                  "not move; use device memory (or host memory)");
  }
  if (t.device.device_type == kDLCUDA && !cuda) {
    // A producer without __dlpack_device__: its default stream, the legacy one.
    stream = consumer_stream(obj, t.device.device_id);
  }
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost && t.device.device_type != kDLCUDA) {
    ringcc::raise(ErrorKind::kInvalidArgument, what, " lives on a device (DLPack device type ", t.device.device_type,
                  ") that ringcc does not move; copy it to the CPU (or a CUDA device) first");
  }
  BufferView v;
  v.dtype = dtype_from_dlpack(t.dtype, what);
  v.shape.assign(t.shape, t.shape + t.ndim);
  v.count = 1;
  for (int64_t d : v.shape) v.count *= d;
  if (t.strides && v.count > 1) {
    int64_t expect = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expect) {
        ringcc::raise(ErrorKind::kInvalidArgument, what,
                      " is not C-contiguous; call .contiguous() (or make a contiguous copy) first");
      }
      expect *= t.shape[i];
    }
  }
  v.ptr = static_cast<uint8_t*>(t.data) + t.byte_offset;
  v.owner = capsule;           // the producer frees the memory reference when this dies
  v.numpy_dtype = py::none();  // found only if an output must be allocated
  if (t.device.device_type == kDLCUDA) {
    v.memory = ringcc::MemoryKind::kCuda;
    v.device = t.device.device_id;
    v.stream = stream;
    require_cuda_driver(what);
  }
  return v;
}

BufferView from_buffer(py::handle obj, bool writable, const char* what) {
  py::buffer buf = py::reinterpret_borrow<py::buffer>(obj);
  py::buffer_info info;
  try {
    info = buf.request(writable);
  } catch (py::error_already_set&) {
    ringcc::raise(ErrorKind::kInvalidArgument, what,
                  writable ? " is not a writable buffer" : " is not a readable buffer");
  }
  BufferView v;
  v.dtype = dtype_from_numpy(py::dtype(info), what);
  int64_t expect = info.itemsize;
  for (py::ssize_t i = info.ndim - 1; i >= 0; --i) {
    if (info.shape[static_cast<size_t>(i)] != 1 && info.strides[static_cast<size_t>(i)] != expect) {
      ringcc::raise(ErrorKind::kInvalidArgument, what, " is not C-contiguous; pass a contiguous copy");
    }
    expect *= info.shape[static_cast<size_t>(i)];
  }
  v.ptr = info.ptr;  // the object's own memory: in-place calls write back
  v.count = static_cast<int64_t>(info.size);
  v.shape.assign(info.shape.begin(), info.shape.end());
  v.owner = py::reinterpret_borrow<py::object>(obj);
  v.numpy_dtype = py::dtype(info);
  return v;
}

}  // namespace

int64_t* HostTensor::resize(size_t n) {
  ndim = n;
  if (n <= kInlineDims) return dims;
  more_dims.resize(n);
  return more_dims.data();
}

int64_t HostTensor::row_elems() const {
  int64_t n = 1;
  for (size_t i = 1; i < ndim; ++i) n *= shape()[i];
  return n;
}

bool writable_numpy(PyObject* obj, HostTensor* t) { return plain_numpy(obj, t, true); }

bool plain_numpy(PyObject* obj, HostTensor* t, bool writable) {
  auto& api = py::detail::npy_api::get();
  if (Py_TYPE(obj) != api.PyArray_Type_) return false;
  const auto* a = py::detail::array_proxy(obj);
  constexpr int kCContiguous = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_;
  const int need = kCContiguous | (writable ? py::detail::npy_api::NPY_ARRAY_WRITEABLE_ : 0);
  if ((a->flags & need) != need) return false;
  const auto* d = py::detail::array_descriptor_proxy(a->descr);
  if (d->byteorder == kForeignByteOrder) return false;
  constexpr int kNpyHalf = 23;  // NumPy's NPY_HALF (not in pybind11's list)
  static_assert(sizeof(int) == 4 && sizeof(long long) == 8, "unexpected C integer sizes");
  switch (d->type_num) {
    case kNpyHalf:
      t->dtype = DataType::kFloat16;
      break;
    case py::detail::npy_api::NPY_FLOAT_:
      t->dtype = DataType::kFloat32;
      break;
    case py::detail::npy_api::NPY_DOUBLE_:
      t->dtype = DataType::kFloat64;
      break;
    case py::detail::npy_api::NPY_BYTE_:
      t->dtype = DataType::kInt8;
      break;
    case py::detail::npy_api::NPY_UBYTE_:
      t->dtype = DataType::kUInt8;
      break;
    case py::detail::npy_api::NPY_INT_:
      t->dtype = DataType::kInt32;
      break;
    case py::detail::npy_api::NPY_LONG_:
      if (sizeof(long) != 8) return false;
      t->dtype = DataType::kInt64;
      break;
    case py::detail::npy_api::NPY_LONGLONG_:
      t->dtype = DataType::kInt64;
      break;
    default:
      return false;
  }
  int64_t* shape = t->resize(static_cast<size_t>(a->nd));
  t->count = 1;
  for (int i = 0; i < a->nd; ++i) {
    shape[i] = static_cast<int64_t>(a->dimensions[i]);
    t->count *= shape[i];
  }
  t->ptr = a->data;
  return true;
}

PyObject* new_numpy_like(PyObject* obj) {
  auto& api = py::detail::npy_api::get();
  const auto* a = py::detail::array_proxy(obj);
  Py_INCREF(a->descr);  // PyArray_NewFromDescr takes a reference to it
  return api.PyArray_NewFromDescr_(api.PyArray_Type_, a->descr, a->nd, a->dimensions, nullptr, nullptr, 0, nullptr);
}

HostTensor writable_host_tensor(PyObject* obj, const char* what) {
  HostTensor t;
  if (writable_numpy(obj, &t)) return t;
  const BufferView v = view_of(obj, true, what);
  t.ptr = v.ptr;
  t.dtype = v.dtype;
  t.count = v.count;
  t.memory = v.memory;
  t.device = v.device;
  t.stream = v.stream;
  std::copy(v.shape.begin(), v.shape.end(), t.resize(v.shape.size()));
  return t;
}

void require_host(const BufferView& v, const char* what) {
  if (v.memory != ringcc::MemoryKind::kHost) {
    ringcc::raise(ErrorKind::kInvalidArgument, what, " is on CUDA device ", v.device,
                  "; this function takes host memory only");
  }
}

int64_t BufferView::row_elems() const {
  if (shape.size() <= 1) return 1;
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

namespace {

// The framework adapter that takes what the framework-free functions do
// not, by the module of the tensor's type ("" when none fits).
std::string adapter_hint(py::handle obj) {
  const std::string module = py::str(py::type::of(obj).attr("__module__"));
  if (module.rfind("torch", 0) == 0) {
    return "; ringcc.torch (import ringcc.torch as hvd, or torch.distributed's backend \"ring\") takes "
           "complex, bool and int16 tensors too";
  }
  if (module.rfind("tensorflow", 0) == 0) return "; ringcc.tensorflow takes TensorFlow's other dtypes too";
  return "";
}

BufferView view_of_dlpack(py::handle obj, const char* what) {
  try {
    return from_dlpack(obj, what);
  } catch (const ringcc::Error& e) {
    // Named as the framework names it ("torch.complex64"), not by DLPack's code.
    if (e.kind() != ErrorKind::kUnsupportedType || !py::hasattr(obj, "dtype")) throw;
    ringcc::raise(ErrorKind::kUnsupportedType, what, " has dtype ", std::string(py::str(obj.attr("dtype"))),
                  ", which ringcc's framework-free functions do not move (supported: ", kSupported, ")",
                  adapter_hint(obj));
  } catch (py::error_already_set& e) {
    // torch refuses to export a tensor that requires grad with a bare
    // BufferError: say what to do instead.
    if (!e.matches(PyExc_BufferError) || !py::hasattr(obj, "requires_grad") ||
        !py::bool_(obj.attr("requires_grad"))) {
      throw;
    }
    ringcc::raise(ErrorKind::kInvalidArgument, what,
                  " requires grad, and ringcc's framework-free functions record no gradient: pass "
                  "t.detach() (the same memory; an in-place call still updates t), or use "
                  "ringcc.torch's allreduce, which is differentiable");
  }
}

}  // namespace

BufferView view_of(py::handle obj, bool writable, const char* what) {
  if (py::isinstance<py::array>(obj)) return from_numpy(obj, writable, what);
  if (py::hasattr(obj, "__dlpack__")) {
    BufferView v = view_of_dlpack(obj, what);
    v.origin = py::reinterpret_borrow<py::object>(obj);
    return v;
  }
  if (PyObject_CheckBuffer(obj.ptr())) return from_buffer(obj, writable, what);
  ringcc::raise(ErrorKind::kUnsupportedType, what, " of type ",
                std::string(py::str(py::type::of(obj).attr("__name__"))),
                " exposes neither DLPack nor the buffer protocol");
}

py::object numpy_dtype_for(DataType dtype) {
  if (dtype == DataType::kBFloat16) {
    return py::module_::import("ml_dtypes").attr("bfloat16");
  }
  return py::dtype(ringcc::dtype_name(dtype));
}

py::array new_array(const py::object& numpy_dtype, const std::vector<int64_t>& shape) {
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  return py::array(py::dtype::from_args(numpy_dtype), dims);
}

}  // namespace ringcc_py
