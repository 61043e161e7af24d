// DLPack's ABI (v0.8: the unversioned capsule "dltensor"), the part of it
// that the extension reads (buffer_view.cc) and exports (device_arrays.cc),
// declared here so that the build needs no extra header.
// tests/unit/test_dlpack_abi.py compiles tests/unit/dlpack_abi/check_declarations.cc
// against DLPack's own dlpack.h to check every size, offset and value.
#pragma once

#include <cstdint>

namespace ringcc_py {
namespace dlpack {

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

// DLDevice::device_type.
enum : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };
// DLDataType::code.
enum : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 };

// The name of a capsule that holds a DLManagedTensor (renamed
// "used_dltensor" by the consumer that takes it).
constexpr const char* kCapsuleName = "dltensor";

}  // namespace dlpack
}  // namespace ringcc_py
