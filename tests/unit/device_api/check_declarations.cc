// Compiled (never run) against the real cuda.h, nccl.h and nvrtc.h of the
// nvidia-cuda-runtime, nvidia-nccl and nvidia-cuda-nvrtc wheels by
// tests/unit/test_device_api.py: every constant, struct and function signature
// that ringcc declares itself in core/device/*_api.h must be the library's.
// A difference stops the compilation at the static_assert that names it.
#include <cuda.h>
#include <nccl.h>
#include <nvrtc.h>

#include <cstddef>
#include <type_traits>

#include "core/device/cuda_api.h"
#include "core/device/nccl_api.h"
#include "core/device/nvrtc_api.h"

namespace {

// Real<T>::type: T with each of ringcc's declared types replaced by the
// library's own (through pointers, const and function types), so that a
// ringcc function pointer type can be compared with std::is_same to the
// type of a pointer to the real function.
template <class T>
struct Real {
  using type = T;
};
template <class T>
struct Real<T*> {
  using type = typename Real<T>::type*;
};
template <class T>
struct Real<const T> {
  using type = const typename Real<T>::type;
};
template <class R, class... A>
struct Real<R (*)(A...)> {
  using type = typename Real<R>::type (*)(typename Real<A>::type...);
};

#define RINGCC_MAP(ours, theirs)                                                       \
  template <>                                                                          \
  struct Real<ours> {                                                                  \
    using type = theirs;                                                               \
  };                                                                                   \
  static_assert(sizeof(ours) == sizeof(theirs), #ours ": size differs from " #theirs); \
  static_assert(alignof(ours) == alignof(theirs), #ours ": alignment differs from " #theirs);

RINGCC_MAP(ringcc::cuda::CUresult, ::CUresult)
RINGCC_MAP(ringcc::cuda::CUdevice_attribute, ::CUdevice_attribute)
RINGCC_MAP(ringcc::cuda::CUpointer_attribute, ::CUpointer_attribute)
RINGCC_MAP(ringcc::cuda::CUuuid, ::CUuuid)
RINGCC_MAP(ringcc::cuda::CUipcMemHandle, ::CUipcMemHandle)
RINGCC_MAP(ringcc::cuda::CUipcEventHandle, ::CUipcEventHandle)
RINGCC_MAP(ringcc::nccl::ncclResult_t, ::ncclResult_t)
RINGCC_MAP(ringcc::nccl::ncclDataType_t, ::ncclDataType_t)
RINGCC_MAP(ringcc::nccl::ncclRedOp_t, ::ncclRedOp_t)
RINGCC_MAP(ringcc::nccl::ncclUniqueId, ::ncclUniqueId)
RINGCC_MAP(ringcc::nvrtc::nvrtcResult, ::nvrtcResult)
#undef RINGCC_MAP

// ncclConfig_t: ours is a prefix of the real one (see nccl_api.h).
template <>
struct Real<ringcc::nccl::ncclConfig_t> {
  using type = ::ncclConfig_t;
};
static_assert(sizeof(ringcc::nccl::ncclConfig_t) <= sizeof(::ncclConfig_t), "ncclConfig_t: ours is longer");
#define RINGCC_SAME_OFFSET(field)                                                                 \
  static_assert(offsetof(ringcc::nccl::ncclConfig_t, field) == offsetof(::ncclConfig_t, field) && \
                    sizeof(ringcc::nccl::ncclConfig_t::field) == sizeof(::ncclConfig_t::field),   \
                "ncclConfig_t::" #field ": offset or size differs");
RINGCC_SAME_OFFSET(size)
RINGCC_SAME_OFFSET(magic)
RINGCC_SAME_OFFSET(version)
RINGCC_SAME_OFFSET(blocking)
RINGCC_SAME_OFFSET(cgaClusterSize)
RINGCC_SAME_OFFSET(minCTAs)
RINGCC_SAME_OFFSET(maxCTAs)
RINGCC_SAME_OFFSET(netName)
RINGCC_SAME_OFFSET(splitShare)
#undef RINGCC_SAME_OFFSET
static_assert(ringcc::nccl::kNcclApiMagic == NCCL_API_MAGIC, "NCCL_API_MAGIC differs");
static_assert(ringcc::nccl::kNcclConfigUndefInt == NCCL_CONFIG_UNDEF_INT, "NCCL_CONFIG_UNDEF_INT differs");
static_assert(ringcc::nccl::nccl_version(2, 17, 0) == NCCL_VERSION(2, 17, 0), "NCCL_VERSION differs");
static_assert(ringcc::nccl::nccl_version(2, 8, 4) == NCCL_VERSION(2, 8, 4), "NCCL_VERSION differs");
static_assert(ringcc::nccl::kNcclUniqueIdBytes == NCCL_UNIQUE_ID_BYTES, "NCCL_UNIQUE_ID_BYTES differs");

// Opaque handles: the very same types.
static_assert(std::is_same_v<ringcc::cuda::CUcontext, ::CUcontext>, "CUcontext differs");
static_assert(std::is_same_v<ringcc::cuda::CUmodule, ::CUmodule>, "CUmodule differs");
static_assert(std::is_same_v<ringcc::cuda::CUfunction, ::CUfunction>, "CUfunction differs");
static_assert(std::is_same_v<ringcc::cuda::CUstream, ::CUstream>, "CUstream differs");
static_assert(std::is_same_v<ringcc::cuda::CUevent, ::CUevent>, "CUevent differs");
static_assert(std::is_same_v<ringcc::cuda::CUdevice, ::CUdevice>, "CUdevice differs");
static_assert(std::is_same_v<ringcc::cuda::CUdeviceptr, ::CUdeviceptr>, "CUdeviceptr differs");
static_assert(std::is_same_v<ringcc::cuda::cuuint32_t, ::cuuint32_t>, "cuuint32_t differs");
static_assert(std::is_same_v<ringcc::nccl::ncclComm_t, ::ncclComm_t>, "ncclComm_t differs");
static_assert(std::is_same_v<ringcc::nccl::cudaStream_t, ::cudaStream_t>, "cudaStream_t differs");
static_assert(std::is_same_v<ringcc::nvrtc::nvrtcProgram, ::nvrtcProgram>, "nvrtcProgram differs");
static_assert(std::is_same_v<ringcc::cuda::CUstream, ::cudaStream_t>, "a runtime stream is not a CUstream");

// Constants.
#define RINGCC_SAME_VALUE(name, value)                                           \
  static_assert(static_cast<long long>(value) == static_cast<long long>(::name), \
                #name ": ringcc's value differs from the header's");             \
  static_assert(static_cast<long long>(ringcc::cuda::name) == static_cast<long long>(value), #name);
RINGCC_CUDA_RESULTS(RINGCC_SAME_VALUE)
RINGCC_CUDA_DEVICE_ATTRIBUTES(RINGCC_SAME_VALUE)
RINGCC_CUDA_POINTER_ATTRIBUTES(RINGCC_SAME_VALUE)
RINGCC_CUDA_MEMORY_TYPES(RINGCC_SAME_VALUE)
RINGCC_CUDA_STREAM_FLAGS(RINGCC_SAME_VALUE)
RINGCC_CUDA_EVENT_FLAGS(RINGCC_SAME_VALUE)
RINGCC_CUDA_WAIT_VALUE_FLAGS(RINGCC_SAME_VALUE)
RINGCC_CUDA_WRITE_VALUE_FLAGS(RINGCC_SAME_VALUE)
RINGCC_CUDA_IPC_MEM_FLAGS(RINGCC_SAME_VALUE)
#undef RINGCC_SAME_VALUE
#define RINGCC_SAME_VALUE(name, value)                                           \
  static_assert(static_cast<long long>(value) == static_cast<long long>(::name), \
                #name ": ringcc's value differs from the header's");
RINGCC_NCCL_RESULTS(RINGCC_SAME_VALUE)
RINGCC_NCCL_DATA_TYPES(RINGCC_SAME_VALUE)
RINGCC_NCCL_RED_OPS(RINGCC_SAME_VALUE)
RINGCC_NVRTC_RESULTS(RINGCC_SAME_VALUE)
#undef RINGCC_SAME_VALUE
static_assert(ringcc::cuda::kMemHostAllocPortable == CU_MEMHOSTALLOC_PORTABLE, "CU_MEMHOSTALLOC_PORTABLE");
static_assert(ringcc::cuda::kMemHostAllocDeviceMap == CU_MEMHOSTALLOC_DEVICEMAP, "CU_MEMHOSTALLOC_DEVICEMAP");
static_assert(ringcc::cuda::kMemHostRegisterPortable == CU_MEMHOSTREGISTER_PORTABLE, "CU_MEMHOSTREGISTER_PORTABLE");
static_assert(ringcc::cuda::kMemHostRegisterDeviceMap == CU_MEMHOSTREGISTER_DEVICEMAP, "CU_MEMHOSTREGISTER_DEVICEMAP");
static_assert(ringcc::cuda::kIpcHandleSize == CU_IPC_HANDLE_SIZE, "CU_IPC_HANDLE_SIZE");

// Functions: each pointer type, with the library's types put back, is the
// type of a pointer to the declared function of that name.
#define RINGCC_SAME_SIGNATURE(symbol, result, params)                                                       \
  static_assert(std::is_same_v<Real<decltype(ringcc::cuda::DriverApi::symbol)>::type, decltype(&::symbol)>, \
                #symbol ": ringcc's signature differs from cuda.h's");
RINGCC_CUDA_FUNCTIONS(RINGCC_SAME_SIGNATURE)
#undef RINGCC_SAME_SIGNATURE
#define RINGCC_SAME_SIGNATURE(symbol, required, result, params)                                           \
  static_assert(std::is_same_v<Real<decltype(ringcc::nccl::NcclApi::symbol)>::type, decltype(&::symbol)>, \
                #symbol ": ringcc's signature differs from nccl.h's");
RINGCC_NCCL_FUNCTIONS(RINGCC_SAME_SIGNATURE)
#undef RINGCC_SAME_SIGNATURE
#define RINGCC_SAME_SIGNATURE(symbol, required, result, params)                                             \
  static_assert(std::is_same_v<Real<decltype(ringcc::nvrtc::NvrtcApi::symbol)>::type, decltype(&::symbol)>, \
                #symbol ": ringcc's signature differs from nvrtc.h's");
RINGCC_NVRTC_FUNCTIONS(RINGCC_SAME_SIGNATURE)
#undef RINGCC_SAME_SIGNATURE

}  // namespace
