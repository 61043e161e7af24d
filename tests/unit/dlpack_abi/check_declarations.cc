// Compiled (never run) by tests/unit/test_dlpack_abi.py against DLPack's own
// dlpack.h (as torch's wheel ships it, ATen/dlpack.h): every struct, field
// and constant that the extension declares itself in bindings/dlpack.h
// must have DLPack's size, alignment, offset and value, since the
// extension exchanges these structs with other libraries through capsules.
// A difference stops the compilation at the static_assert that names it.
#include <dlpack/dlpack.h>

#include <cstddef>
#include <type_traits>

#include "bindings/dlpack.h"

namespace ours = ringcc_py::dlpack;

// Whether two field types agree in signedness; DLPack's enum-typed fields
// (DLDeviceType, of an underlying type the compiler picks) hold values
// that fit either, so only their size counts.
template <class A, class B>
constexpr bool same_signedness() {
  if constexpr (std::is_enum<A>::value || std::is_enum<B>::value) {
    return true;
  } else {
    return std::is_signed<A>::value == std::is_signed<B>::value;
  }
}

#define RINGCC_SAME_STRUCT(name)                                                             \
  static_assert(sizeof(ours::name) == sizeof(::name), #name ": size differs from DLPack's"); \
  static_assert(alignof(ours::name) == alignof(::name), #name ": alignment differs from DLPack's");

#define RINGCC_SAME_FIELD(name, field)                                                                                 \
  static_assert(offsetof(ours::name, field) == offsetof(::name, field),                                                \
                #name "::" #field ": offset differs from DLPack's");                                                   \
  static_assert(sizeof(ours::name::field) == sizeof(::name::field), #name "::" #field ": size differs from DLPack's"); \
  static_assert(same_signedness<decltype(ours::name::field), decltype(::name::field)>(),                               \
                #name "::" #field ": signedness differs from DLPack's");

#define RINGCC_SAME_VALUE(name)                                                       \
  static_assert(static_cast<long long>(ours::name) == static_cast<long long>(::name), \
                #name ": value differs from DLPack's");

RINGCC_SAME_STRUCT(DLDevice)
RINGCC_SAME_FIELD(DLDevice, device_type)
RINGCC_SAME_FIELD(DLDevice, device_id)

RINGCC_SAME_STRUCT(DLDataType)
RINGCC_SAME_FIELD(DLDataType, code)
RINGCC_SAME_FIELD(DLDataType, bits)
RINGCC_SAME_FIELD(DLDataType, lanes)

RINGCC_SAME_STRUCT(DLTensor)
RINGCC_SAME_FIELD(DLTensor, data)
RINGCC_SAME_FIELD(DLTensor, device)
RINGCC_SAME_FIELD(DLTensor, ndim)
RINGCC_SAME_FIELD(DLTensor, dtype)
RINGCC_SAME_FIELD(DLTensor, shape)
RINGCC_SAME_FIELD(DLTensor, strides)
RINGCC_SAME_FIELD(DLTensor, byte_offset)
static_assert(std::is_same<decltype(ours::DLTensor::shape), int64_t*>::value &&
                  std::is_same<decltype(::DLTensor::shape), int64_t*>::value &&
                  std::is_same<decltype(ours::DLTensor::strides), int64_t*>::value &&
                  std::is_same<decltype(::DLTensor::strides), int64_t*>::value,
              "DLTensor::shape, strides: not int64_t* in both");

RINGCC_SAME_STRUCT(DLManagedTensor)
RINGCC_SAME_FIELD(DLManagedTensor, dl_tensor)
RINGCC_SAME_FIELD(DLManagedTensor, manager_ctx)
RINGCC_SAME_FIELD(DLManagedTensor, deleter)
static_assert(std::is_same<decltype(ours::DLManagedTensor::deleter), void (*)(ours::DLManagedTensor*)>::value &&
                  std::is_same<decltype(::DLManagedTensor::deleter), void (*)(::DLManagedTensor*)>::value,
              "DLManagedTensor::deleter: not a function of the managed tensor in both");

RINGCC_SAME_VALUE(kDLCPU)
RINGCC_SAME_VALUE(kDLCUDA)
RINGCC_SAME_VALUE(kDLCUDAHost)
RINGCC_SAME_VALUE(kDLCUDAManaged)
RINGCC_SAME_VALUE(kDLInt)
RINGCC_SAME_VALUE(kDLUInt)
RINGCC_SAME_VALUE(kDLFloat)
RINGCC_SAME_VALUE(kDLBfloat)
