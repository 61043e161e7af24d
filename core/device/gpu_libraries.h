// Finding the CUDA driver, NCCL and NVRTC at run time. ringcc links none of
// them: each is opened with dlopen(3) the first time a GPU collective (or a
// query such as ringcc.cuda_info()) needs it, so CPU-only users never load
// any of them. Candidates, in order:
//   1. RINGCC_CUDA_LIB / RINGCC_NCCL_LIB / RINGCC_NVRTC_LIB (a path);
//   2. directories the Python package adds (set_library_dirs): the
//      nvidia-* wheels for CUDA 13 and 12 and torch's bundled copies;
//   3. the CUDA toolkit: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda (lib64);
//   4. the system's search path (the bare soname).
// A candidate that loads but lacks a required symbol (or, for the driver,
// is the toolkit's stub) is passed over, and the reason is kept for the
// error message.
#pragma once

#include <string>
#include <vector>

#include "core/device/cuda_api.h"
#include "core/device/nccl_api.h"
#include "core/device/nvrtc_api.h"

namespace ringcc {
namespace device {

enum class GpuLibrary { kCuda, kNccl, kNvrtc };

struct GpuLibraryInfo {
  bool found = false;              // a candidate loaded and has every required symbol
  std::string path;                // the candidate that loaded
  int version_code = 0;            // driver: 13000 for CUDA 13.0; NCCL: 22809; NVRTC: 13000
  std::string version;             // "13.0", "2.28.9"
  std::string error;               // why nothing (or nothing usable) loaded, one line per candidate
  std::vector<std::string> tried;  // the candidates, in the order tried
  // The library is one of ringcc's test doubles (it exports
  // ringcc_cuda_test_double): nothing it reports is a GPU's.
  bool test_double = false;
};

// What to install, for error messages: "pip install nvidia-nccl-cu13 ...".
const char* install_hint(GpuLibrary which);
const char* library_name(GpuLibrary which);  // "the CUDA driver", "NCCL", "NVRTC"

// Extra candidate paths (full paths to the library files), tried after the
// environment variable and before the toolkit and the system. Setting them
// after a failed search makes the next query search again.
void set_library_dirs(GpuLibrary which, const std::vector<std::string>& paths);
// Every candidate, in the order it is tried.
std::vector<std::string> library_candidates(GpuLibrary which);

// Searches once (again after set_library_dirs changed the candidates while
// nothing was found) and returns what was found.
GpuLibraryInfo library_info(GpuLibrary which);

// The loaded functions, or a raise of Error(kInvalidArgument) that says what
// is missing and what to install. `what` names the user's action ("a CUDA
// tensor", "RINGCC_GPU_BACKEND=nccl").
const cuda::DriverApi& cuda_driver(const std::string& what);
const nccl::NcclApi& nccl_library(const std::string& what);
const nvrtc::NvrtcApi& nvrtc_library(const std::string& what);
bool nccl_available();

// The CUDA driver's state after cuInit: whether it initialised, and why not.
struct CudaDriverState {
  bool initialized = false;
  std::string error;  // e.g. "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"
};
CudaDriverState cuda_driver_state();

// Tries `candidates` for `which` without touching the process-wide choice
// (for diagnostics and tests): the library stays loaded only if found.
GpuLibraryInfo probe_library(GpuLibrary which, const std::vector<std::string>& candidates);

// The NVRTC at `path`, apart from the one ringcc uses (for the tests of the
// kernels, which compile with every NVRTC at hand). Raises when unusable.
nvrtc::NvrtcApi open_nvrtc(const std::string& path);

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a driver result.
std::string cuda_error_text(const cuda::DriverApi& api, cuda::CUresult result);

// Raises Error(kInternal) "<what>: <error text>" unless result is CUDA_SUCCESS.
void cuda_check(const cuda::DriverApi& api, cuda::CUresult result, const char* what);

}  // namespace device
}  // namespace ringcc
