// ringcc's device kernels (core/device/reduce_kernels.cuh), compiled at run
// time with NVRTC for the architecture of the device at hand and cached:
// in memory for the process, and on disk (RINGCC_CACHE_DIR, else
// $XDG_CACHE_HOME/ringcc, else ~/.cache/ringcc; "kernels/<key>.bin") keyed
// by a SHA-256 of the source, the options, the target and NVRTC's version,
// so a new ringcc, NVRTC or GPU never picks up a stale image.
#pragma once

#include <string>
#include <vector>

#include "core/collective/dtype.h"
#include "core/collective/reduce_op.h"
#include "core/device/nvrtc_api.h"

namespace ringcc {
namespace device {

// The kernel source as NVRTC compiles it.
const std::string& kernel_source();

// Entry point names: "ringcc_scale_float32", "ringcc_reduce_bfloat16_max".
std::string scale_kernel_name(DataType dtype);
std::string reduce_kernel_name(DataType dtype, ReduceOp op);  // kAverage: the sum kernel
// Every entry point the source defines.
std::vector<std::string> kernel_entry_points();

struct KernelImage {
  std::string bytes;  // a CUBIN, or PTX text
  bool cubin = false;
  int arch = 0;        // 90 for sm_90 / compute_90
  std::string origin;  // "compiled by NVRTC 13.0", "disk cache <path>", "memory"
};

// The architectures `api` can compile for (nvrtcGetSupportedArchs, or a
// fixed list for NVRTCs without it).
std::vector<int> nvrtc_supported_archs(const nvrtc::NvrtcApi& api);

// Compiles the kernels with `api`: a CUBIN for sm_<arch>, or PTX for
// compute_<arch>. Raises Error(kInternal) with NVRTC's log on failure.
KernelImage compile_kernels(const nvrtc::NvrtcApi& api, int arch, bool cubin);

// The image for a device of compute capability `arch` (major * 10 + minor):
// a CUBIN when NVRTC knows the architecture, else PTX for the newest one
// it knows below it (the driver compiles that for the device). Cached as
// described above; compiles with the process's NVRTC (gpu_libraries.h).
KernelImage kernel_image_for(int arch);

// Where the disk cache lives ("" when no home or cache directory is known).
std::string kernel_cache_dir();

}  // namespace device
}  // namespace ringcc
