// The part of the CUDA driver API (libcuda.so.1) that ringcc uses, declared
// here so that ringcc builds without CUDA: the library is opened with
// dlopen(3) at run time (core/device/gpu_libraries.h). Names and values are
// the driver's own; function pointers carry the versioned symbol names the
// driver exports (cuMemAlloc_v2, ...), which cuda.h reaches through macros.
// tests/unit/device_api/check_declarations.cc compiles these declarations
// against the real cuda.h of the nvidia-cuda-runtime wheels (CUDA 12 and
// 13) and static_asserts that every value, size and signature matches.
//
// The driver API rather than the runtime: libcuda.so.1 comes with every
// driver (no toolkit or runtime wheel needed), kernels compiled by NVRTC
// load through cuModuleLoadData, and a runtime stream (cudaStream_t, what
// frameworks hand out) is the same handle as a driver CUstream.
#pragma once

#include <cstddef>
#include <cstdint>

// Opaque handles: the same incomplete types cuda.h and cuda_runtime.h name.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;

namespace ringcc {
namespace cuda {

using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = ::CUctx_st*;
using CUmodule = ::CUmod_st*;
using CUfunction = ::CUfunc_st*;
using CUstream = ::CUstream_st*;
using CUevent = ::CUevent_st*;
using cuuint32_t = uint32_t;

// Every constant ringcc uses, as (name, value): the enums below are made
// from these lists, and the header check walks them.
#define RINGCC_CUDA_RESULTS(X)               \
  X(CUDA_SUCCESS, 0)                         \
  X(CUDA_ERROR_INVALID_VALUE, 1)             \
  X(CUDA_ERROR_OUT_OF_MEMORY, 2)             \
  X(CUDA_ERROR_NOT_INITIALIZED, 3)           \
  X(CUDA_ERROR_DEINITIALIZED, 4)             \
  X(CUDA_ERROR_STUB_LIBRARY, 34)             \
  X(CUDA_ERROR_NO_DEVICE, 100)               \
  X(CUDA_ERROR_INVALID_DEVICE, 101)          \
  X(CUDA_ERROR_INVALID_IMAGE, 200)           \
  X(CUDA_ERROR_MAP_FAILED, 205)              \
  X(CUDA_ERROR_NO_BINARY_FOR_GPU, 209)       \
  X(CUDA_ERROR_INVALID_PTX, 218)             \
  X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222) \
  X(CUDA_ERROR_INVALID_HANDLE, 400)          \
  X(CUDA_ERROR_NOT_FOUND, 500)               \
  X(CUDA_ERROR_NOT_READY, 600)               \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, 700)         \
  X(CUDA_ERROR_LAUNCH_TIMEOUT, 702)          \
  X(CUDA_ERROR_LAUNCH_FAILED, 719)           \
  X(CUDA_ERROR_NOT_SUPPORTED, 801)           \
  X(CUDA_ERROR_UNKNOWN, 999)

#define RINGCC_CUDA_DEVICE_ATTRIBUTES(X)              \
  X(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 16)     \
  X(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 33)               \
  X(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 34)            \
  X(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 41)       \
  X(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 50)            \
  X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 75) \
  X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 76) \
  X(CU_DEVICE_ATTRIBUTE_MPS_ENABLED, 133)

#define RINGCC_CUDA_POINTER_ATTRIBUTES(X) \
  X(CU_POINTER_ATTRIBUTE_CONTEXT, 1)      \
  X(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 2)  \
  X(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, 9)

#define RINGCC_CUDA_MEMORY_TYPES(X) \
  X(CU_MEMORYTYPE_HOST, 1)          \
  X(CU_MEMORYTYPE_DEVICE, 2)        \
  X(CU_MEMORYTYPE_UNIFIED, 4)

#define RINGCC_CUDA_STREAM_FLAGS(X) \
  X(CU_STREAM_DEFAULT, 0)           \
  X(CU_STREAM_NON_BLOCKING, 1)

#define RINGCC_CUDA_EVENT_FLAGS(X) \
  X(CU_EVENT_DEFAULT, 0)           \
  X(CU_EVENT_BLOCKING_SYNC, 1)     \
  X(CU_EVENT_DISABLE_TIMING, 2)    \
  X(CU_EVENT_INTERPROCESS, 4)

#define RINGCC_CUDA_WAIT_VALUE_FLAGS(X) X(CU_STREAM_WAIT_VALUE_GEQ, 0)
#define RINGCC_CUDA_WRITE_VALUE_FLAGS(X) X(CU_STREAM_WRITE_VALUE_DEFAULT, 0)
#define RINGCC_CUDA_IPC_MEM_FLAGS(X) X(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, 1)

#define RINGCC_CUDA_ENUMERATOR(name, value) name = value,
enum CUresult : int { RINGCC_CUDA_RESULTS(RINGCC_CUDA_ENUMERATOR) };
enum CUdevice_attribute : int { RINGCC_CUDA_DEVICE_ATTRIBUTES(RINGCC_CUDA_ENUMERATOR) };
enum CUpointer_attribute : int { RINGCC_CUDA_POINTER_ATTRIBUTES(RINGCC_CUDA_ENUMERATOR) };
enum CUmemorytype : int { RINGCC_CUDA_MEMORY_TYPES(RINGCC_CUDA_ENUMERATOR) };
enum CUstream_flags : int { RINGCC_CUDA_STREAM_FLAGS(RINGCC_CUDA_ENUMERATOR) };
enum CUevent_flags : int { RINGCC_CUDA_EVENT_FLAGS(RINGCC_CUDA_ENUMERATOR) };
enum CUstreamWaitValue_flags : int { RINGCC_CUDA_WAIT_VALUE_FLAGS(RINGCC_CUDA_ENUMERATOR) };
enum CUstreamWriteValue_flags : int { RINGCC_CUDA_WRITE_VALUE_FLAGS(RINGCC_CUDA_ENUMERATOR) };
enum CUipcMem_flags : int { RINGCC_CUDA_IPC_MEM_FLAGS(RINGCC_CUDA_ENUMERATOR) };
#undef RINGCC_CUDA_ENUMERATOR

// CU_MEMHOSTALLOC_PORTABLE (pinned memory usable from every context) and
// _DEVICEMAP (mapped into the device's address space),
// CU_MEMHOSTREGISTER_PORTABLE / _DEVICEMAP and CU_IPC_HANDLE_SIZE, macros in
// cuda.h.
constexpr unsigned int kMemHostAllocPortable = 0x01;
constexpr unsigned int kMemHostAllocDeviceMap = 0x02;
constexpr unsigned int kMemHostRegisterPortable = 0x01;
constexpr unsigned int kMemHostRegisterDeviceMap = 0x02;
constexpr size_t kIpcHandleSize = 64;
// Special stream handles (also DLPack's stream numbers for CUDA).
inline CUstream cu_stream_legacy() { return reinterpret_cast<CUstream>(uintptr_t{1}); }
inline CUstream cu_stream_per_thread() { return reinterpret_cast<CUstream>(uintptr_t{2}); }

struct CUuuid {
  char bytes[16];
};
struct CUipcMemHandle {
  char reserved[kIpcHandleSize];
};
struct CUipcEventHandle {
  char reserved[kIpcHandleSize];
};

// (symbol, return type, parameters): every driver function ringcc calls.
// All are required: a driver too old to export one is reported as unusable.
#define RINGCC_CUDA_FUNCTIONS(X)                                                                                   \
  X(cuInit, CUresult, (unsigned int))                                                                              \
  X(cuDriverGetVersion, CUresult, (int*))                                                                          \
  X(cuGetErrorName, CUresult, (CUresult, const char**))                                                            \
  X(cuGetErrorString, CUresult, (CUresult, const char**))                                                          \
  X(cuDeviceGetCount, CUresult, (int*))                                                                            \
  X(cuDeviceGet, CUresult, (CUdevice*, int))                                                                       \
  X(cuDeviceGetName, CUresult, (char*, int, CUdevice))                                                             \
  X(cuDeviceGetUuid_v2, CUresult, (CUuuid*, CUdevice))                                                             \
  X(cuDeviceGetAttribute, CUresult, (int*, CUdevice_attribute, CUdevice))                                          \
  X(cuDeviceGetPCIBusId, CUresult, (char*, int, CUdevice))                                                         \
  X(cuDeviceTotalMem_v2, CUresult, (size_t*, CUdevice))                                                            \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext*, CUdevice))                                                    \
  X(cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice))                                                            \
  X(cuCtxGetCurrent, CUresult, (CUcontext*))                                                                       \
  X(cuCtxSetCurrent, CUresult, (CUcontext))                                                                        \
  X(cuCtxGetDevice, CUresult, (CUdevice*))                                                                         \
  X(cuCtxSynchronize, CUresult, ())                                                                                \
  X(cuPointerGetAttribute, CUresult, (void*, CUpointer_attribute, CUdeviceptr))                                    \
  X(cuMemAlloc_v2, CUresult, (CUdeviceptr*, size_t))                                                               \
  X(cuMemFree_v2, CUresult, (CUdeviceptr))                                                                         \
  X(cuMemHostAlloc, CUresult, (void**, size_t, unsigned int))                                                      \
  X(cuMemFreeHost, CUresult, (void*))                                                                              \
  X(cuMemHostRegister_v2, CUresult, (void*, size_t, unsigned int))                                                 \
  X(cuMemHostUnregister, CUresult, (void*))                                                                        \
  X(cuMemHostGetDevicePointer_v2, CUresult, (CUdeviceptr*, void*, unsigned int))                                   \
  X(cuMemcpyAsync, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                                         \
  X(cuMemcpyDtoDAsync_v2, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                                  \
  X(cuMemcpyDtoHAsync_v2, CUresult, (void*, CUdeviceptr, size_t, CUstream))                                        \
  X(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr, const void*, size_t, CUstream))                                  \
  X(cuMemsetD8Async, CUresult, (CUdeviceptr, unsigned char, size_t, CUstream))                                     \
  X(cuMemsetD32Async, CUresult, (CUdeviceptr, unsigned int, size_t, CUstream))                                     \
  X(cuStreamCreate, CUresult, (CUstream*, unsigned int))                                                           \
  X(cuStreamDestroy_v2, CUresult, (CUstream))                                                                      \
  X(cuStreamSynchronize, CUresult, (CUstream))                                                                     \
  X(cuStreamQuery, CUresult, (CUstream))                                                                           \
  X(cuStreamWaitEvent, CUresult, (CUstream, CUevent, unsigned int))                                                \
  X(cuStreamWaitValue32_v2, CUresult, (CUstream, CUdeviceptr, cuuint32_t, unsigned int))                           \
  X(cuStreamWriteValue32_v2, CUresult, (CUstream, CUdeviceptr, cuuint32_t, unsigned int))                          \
  X(cuEventCreate, CUresult, (CUevent*, unsigned int))                                                             \
  X(cuEventDestroy_v2, CUresult, (CUevent))                                                                        \
  X(cuEventRecord, CUresult, (CUevent, CUstream))                                                                  \
  X(cuEventQuery, CUresult, (CUevent))                                                                             \
  X(cuEventSynchronize, CUresult, (CUevent))                                                                       \
  X(cuIpcGetMemHandle, CUresult, (CUipcMemHandle*, CUdeviceptr))                                                   \
  X(cuIpcOpenMemHandle_v2, CUresult, (CUdeviceptr*, CUipcMemHandle, unsigned int))                                 \
  X(cuIpcCloseMemHandle, CUresult, (CUdeviceptr))                                                                  \
  X(cuIpcGetEventHandle, CUresult, (CUipcEventHandle*, CUevent))                                                   \
  X(cuIpcOpenEventHandle, CUresult, (CUevent*, CUipcEventHandle))                                                  \
  X(cuModuleLoadData, CUresult, (CUmodule*, const void*))                                                          \
  X(cuModuleUnload, CUresult, (CUmodule))                                                                          \
  X(cuModuleGetFunction, CUresult, (CUfunction*, CUmodule, const char*))                                           \
  X(cuLaunchKernel, CUresult,                                                                                      \
    (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, \
     CUstream, void**, void**))

// The loaded functions, named by their symbols.
struct DriverApi {
#define RINGCC_CUDA_POINTER(symbol, result, params) result(*symbol) params = nullptr;
  RINGCC_CUDA_FUNCTIONS(RINGCC_CUDA_POINTER)
#undef RINGCC_CUDA_POINTER
};

}  // namespace cuda
}  // namespace ringcc
