// The part of NVRTC's C API (libnvrtc.so.12 / .13) that ringcc uses to
// compile its device reductions at run time, declared here so that ringcc
// builds without CUDA; the library is opened at run time
// (core/device/gpu_libraries.h). tests/unit/device_api/check_declarations.cc
// checks every declaration against the nvrtc.h of the nvidia-cuda-nvrtc
// wheels.
#pragma once

#include <cstddef>

struct _nvrtcProgram;  // nvrtc.h: typedef struct _nvrtcProgram* nvrtcProgram

namespace ringcc {
namespace nvrtc {

using nvrtcProgram = ::_nvrtcProgram*;

#define RINGCC_NVRTC_RESULTS(X)              \
  X(NVRTC_SUCCESS, 0)                        \
  X(NVRTC_ERROR_OUT_OF_MEMORY, 1)            \
  X(NVRTC_ERROR_PROGRAM_CREATION_FAILURE, 2) \
  X(NVRTC_ERROR_INVALID_INPUT, 3)            \
  X(NVRTC_ERROR_INVALID_PROGRAM, 4)          \
  X(NVRTC_ERROR_INVALID_OPTION, 5)           \
  X(NVRTC_ERROR_COMPILATION, 6)

#define RINGCC_NVRTC_ENUMERATOR(name, value) name = value,
enum nvrtcResult : int { RINGCC_NVRTC_RESULTS(RINGCC_NVRTC_ENUMERATOR) };
#undef RINGCC_NVRTC_ENUMERATOR

// (symbol, required, return type, parameters). nvrtcGetCUBIN* came with
// CUDA 11.1, nvrtcGetSupportedArchs with 11.2: without them ringcc asks for
// PTX of the newest architecture it knows NVRTC takes.
#define RINGCC_NVRTC_FUNCTIONS(X)                                                           \
  X(nvrtcGetErrorString, true, const char*, (nvrtcResult))                                  \
  X(nvrtcVersion, true, nvrtcResult, (int*, int*))                                          \
  X(nvrtcGetNumSupportedArchs, false, nvrtcResult, (int*))                                  \
  X(nvrtcGetSupportedArchs, false, nvrtcResult, (int*))                                     \
  X(nvrtcCreateProgram, true, nvrtcResult,                                                  \
    (nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*)) \
  X(nvrtcDestroyProgram, true, nvrtcResult, (nvrtcProgram*))                                \
  X(nvrtcCompileProgram, true, nvrtcResult, (nvrtcProgram, int, const char* const*))        \
  X(nvrtcGetPTXSize, true, nvrtcResult, (nvrtcProgram, size_t*))                            \
  X(nvrtcGetPTX, true, nvrtcResult, (nvrtcProgram, char*))                                  \
  X(nvrtcGetCUBINSize, false, nvrtcResult, (nvrtcProgram, size_t*))                         \
  X(nvrtcGetCUBIN, false, nvrtcResult, (nvrtcProgram, char*))                               \
  X(nvrtcGetProgramLogSize, true, nvrtcResult, (nvrtcProgram, size_t*))                     \
  X(nvrtcGetProgramLog, true, nvrtcResult, (nvrtcProgram, char*))

struct NvrtcApi {
#define RINGCC_NVRTC_POINTER(symbol, required, result, params) result(*symbol) params = nullptr;
  RINGCC_NVRTC_FUNCTIONS(RINGCC_NVRTC_POINTER)
#undef RINGCC_NVRTC_POINTER
};

}  // namespace nvrtc
}  // namespace ringcc
