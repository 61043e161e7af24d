// The part of NCCL's C API (libnccl.so.2) that ringcc uses, declared here so
// that ringcc builds without NCCL; the library is opened at run time
// (core/device/gpu_libraries.h). tests/unit/device_api/check_declarations.cc
// checks every declaration against the nccl.h of the nvidia-nccl wheels.
#pragma once

#include <cstddef>

#include "core/device/cuda_api.h"

struct ncclComm;  // nccl.h: typedef struct ncclComm* ncclComm_t

namespace ringcc {
namespace nccl {

using ncclComm_t = ::ncclComm*;
using cudaStream_t = ::CUstream_st*;  // cuda_runtime.h's name for a CUstream

constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct ncclUniqueId {
  char internal[kNcclUniqueIdBytes];
};

#define RINGCC_NCCL_RESULTS(X) \
  X(ncclSuccess, 0)            \
  X(ncclUnhandledCudaError, 1) \
  X(ncclSystemError, 2)        \
  X(ncclInternalError, 3)      \
  X(ncclInvalidArgument, 4)    \
  X(ncclInvalidUsage, 5)       \
  X(ncclRemoteError, 6)        \
  X(ncclInProgress, 7)

#define RINGCC_NCCL_DATA_TYPES(X) \
  X(ncclInt8, 0)                  \
  X(ncclUint8, 1)                 \
  X(ncclInt32, 2)                 \
  X(ncclUint32, 3)                \
  X(ncclInt64, 4)                 \
  X(ncclUint64, 5)                \
  X(ncclFloat16, 6)               \
  X(ncclFloat32, 7)               \
  X(ncclFloat64, 8)               \
  X(ncclBfloat16, 9)

#define RINGCC_NCCL_RED_OPS(X) \
  X(ncclSum, 0)                \
  X(ncclProd, 1)               \
  X(ncclMax, 2)                \
  X(ncclMin, 3)                \
  X(ncclAvg, 4)

#define RINGCC_NCCL_ENUMERATOR(name, value) name = value,
enum ncclResult_t : int { RINGCC_NCCL_RESULTS(RINGCC_NCCL_ENUMERATOR) };
enum ncclDataType_t : int { RINGCC_NCCL_DATA_TYPES(RINGCC_NCCL_ENUMERATOR) };
enum ncclRedOp_t : int { RINGCC_NCCL_RED_OPS(RINGCC_NCCL_ENUMERATOR) };
#undef RINGCC_NCCL_ENUMERATOR

// NCCL_VERSION(X, Y, Z) of nccl.h.
constexpr int nccl_version(int x, int y, int z) {
  return (x <= 2 && y <= 8) ? x * 1000 + y * 100 + z : x * 10000 + y * 100 + z;
}
constexpr unsigned int kNcclApiMagic = 0xcafebeef;    // NCCL_API_MAGIC
constexpr int kNcclConfigUndefInt = -2147483647 - 1;  // NCCL_CONFIG_UNDEF_INT (INT_MIN)

// The first fields of ncclConfig_t, as NCCL 2.17 defined them. NCCL reads
// `size` bytes of the caller's struct and takes its own defaults for the
// fields after them (and for fields newer than `version`), so this prefix
// serves every NCCL from 2.17 on; the header check asserts that the offsets
// still match.
struct ncclConfig_t {
  size_t size = sizeof(ncclConfig_t);
  unsigned int magic = kNcclApiMagic;
  unsigned int version = static_cast<unsigned int>(nccl_version(2, 17, 0));
  int blocking = kNcclConfigUndefInt;
  int cgaClusterSize = kNcclConfigUndefInt;
  int minCTAs = kNcclConfigUndefInt;
  int maxCTAs = kNcclConfigUndefInt;
  const char* netName = nullptr;
  int splitShare = kNcclConfigUndefInt;
};

// (symbol, required, return type, parameters). Optional ones are null in
// NCCL releases older than them (named in the comment).
#define RINGCC_NCCL_FUNCTIONS(X)                                                                                    \
  X(ncclGetVersion, true, ncclResult_t, (int*))                                                                     \
  X(ncclGetErrorString, true, const char*, (ncclResult_t))                                                          \
  X(ncclGetLastError, false, const char*, (ncclComm_t)) /* 2.13 */                                                  \
  X(ncclGetUniqueId, true, ncclResult_t, (ncclUniqueId*))                                                           \
  X(ncclCommInitRank, true, ncclResult_t, (ncclComm_t*, int, ncclUniqueId, int))                                    \
  X(ncclCommInitRankConfig, false, ncclResult_t, (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*)) /* 2.14 */   \
  X(ncclCommFinalize, false, ncclResult_t, (ncclComm_t))                                               /* 2.14 */   \
  X(ncclCommDestroy, true, ncclResult_t, (ncclComm_t))                                                              \
  X(ncclCommAbort, true, ncclResult_t, (ncclComm_t))                                                                \
  X(ncclCommGetAsyncError, true, ncclResult_t, (ncclComm_t, ncclResult_t*))                                         \
  X(ncclCommCount, true, ncclResult_t, (ncclComm_t, int*))                                                          \
  X(ncclCommCuDevice, true, ncclResult_t, (ncclComm_t, int*))                                                       \
  X(ncclCommUserRank, true, ncclResult_t, (ncclComm_t, int*))                                                       \
  X(ncclAllReduce, true, ncclResult_t,                                                                              \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))                            \
  X(ncclBroadcast, true, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t)) \
  X(ncclReduce, true, ncclResult_t,                                                                                 \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t))                       \
  X(ncclAllGather, true, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))      \
  X(ncclReduceScatter, true, ncclResult_t,                                                                          \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))                            \
  X(ncclSend, true, ncclResult_t, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))             \
  X(ncclRecv, true, ncclResult_t, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))                   \
  X(ncclGroupStart, true, ncclResult_t, ())                                                                         \
  X(ncclGroupEnd, true, ncclResult_t, ())

struct NcclApi {
#define RINGCC_NCCL_POINTER(symbol, required, result, params) result(*symbol) params = nullptr;
  RINGCC_NCCL_FUNCTIONS(RINGCC_NCCL_POINTER)
#undef RINGCC_NCCL_POINTER
};

}  // namespace nccl
}  // namespace ringcc
