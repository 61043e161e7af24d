#include "core/device/kernel_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/base/sha256.h"
#include "core/device/gpu_libraries.h"
#include "core/device/reduce_kernels_source.h"  // generated from reduce_kernels.cuh

namespace ringcc {
namespace device {

namespace {

const char* const kOps[] = {"sum", "min", "max", "product"};

const char* op_suffix(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return "sum";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProduct:
      return "product";
  }
  raise(ErrorKind::kInvalidArgument, "invalid reduce op value ", static_cast<int>(op));
}

std::string nvrtc_text(const nvrtc::NvrtcApi& api, nvrtc::nvrtcResult r) {
  const char* s = api.nvrtcGetErrorString ? api.nvrtcGetErrorString(r) : nullptr;
  return s ? s : "NVRTC error " + std::to_string(static_cast<int>(r));
}

void nvrtc_check(const nvrtc::NvrtcApi& api, nvrtc::nvrtcResult r, const char* what) {
  if (r != nvrtc::NVRTC_SUCCESS) raise(ErrorKind::kInternal, what, ": ", nvrtc_text(api, r));
}

std::vector<std::string> options_for(int arch, bool cubin) {
  return {
      (cubin ? "--gpu-architecture=sm_" : "--gpu-architecture=compute_") + std::to_string(arch),
      // The host's rounding, step by step: no fused multiply-add, no
      // flushing of subnormals, IEEE division.
      "--fmad=false",
      "--ftz=false",
      "--prec-div=true",
      "--std=c++17",
  };
}

bool make_dirs(const std::string& path) {
  std::string partial;
  std::stringstream ss(path);
  std::string piece;
  if (!path.empty() && path[0] == '/') partial = "/";
  while (std::getline(ss, piece, '/')) {
    if (piece.empty()) continue;
    partial += piece + "/";
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return true;
}

std::string cache_key(const nvrtc::NvrtcApi& api, int arch, bool cubin) {
  int major = 0, minor = 0;
  api.nvrtcVersion(&major, &minor);
  std::string material = kernel_source();
  material += '\0';
  for (const auto& o : options_for(arch, cubin)) material += o + '\n';
  material += "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
  const Digest d = sha256(material.data(), material.size());
  return to_hex(d.data(), d.size()) + (cubin ? ".cubin" : ".ptx");
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return !out->empty();
}

// Written to a temporary name and renamed, so that ranks compiling at the
// same time never read half a file.
void write_file(const std::string& dir, const std::string& name, const std::string& bytes) {
  if (!make_dirs(dir)) return;
  const std::string tmp = dir + "/." + name + "." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      ::unlink(tmp.c_str());
      return;
    }
  }
  if (::rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0) ::unlink(tmp.c_str());
}

}  // namespace

const std::string& kernel_source() {
  static const std::string source(kReduceKernelsSource);
  return source;
}

std::string scale_kernel_name(DataType dtype) { return std::string("ringcc_scale_") + dtype_name(dtype); }

std::string reduce_kernel_name(DataType dtype, ReduceOp op) {
  return std::string("ringcc_reduce_") + dtype_name(dtype) + "_" + op_suffix(op);
}

std::vector<std::string> kernel_entry_points() {
  std::vector<std::string> out;
  for (int d = 0; d < kNumDataTypes; ++d) {
    const auto dtype = static_cast<DataType>(d);
    out.push_back(scale_kernel_name(dtype));
    for (const char* op : kOps) out.push_back(std::string("ringcc_reduce_") + dtype_name(dtype) + "_" + op);
  }
  out.push_back("ringcc_timestamp");
  return out;
}

std::vector<int> nvrtc_supported_archs(const nvrtc::NvrtcApi& api) {
  int n = 0;
  if (api.nvrtcGetNumSupportedArchs && api.nvrtcGetSupportedArchs &&
      api.nvrtcGetNumSupportedArchs(&n) == nvrtc::NVRTC_SUCCESS && n > 0) {
    std::vector<int> archs(static_cast<size_t>(n));
    if (api.nvrtcGetSupportedArchs(archs.data()) == nvrtc::NVRTC_SUCCESS) {
      std::sort(archs.begin(), archs.end());
      return archs;
    }
  }
  return {52, 60, 61, 70, 75, 80};  // every NVRTC of CUDA 11.0 and 11.1 takes these
}

KernelImage compile_kernels(const nvrtc::NvrtcApi& api, int arch, bool cubin) {
  if (cubin && !(api.nvrtcGetCUBINSize && api.nvrtcGetCUBIN)) {
    raise(ErrorKind::kInternal, "this NVRTC cannot produce a CUBIN (CUDA 11.1 or newer is needed)");
  }
  nvrtc::nvrtcProgram prog = nullptr;
  nvrtc_check(api,
              api.nvrtcCreateProgram(&prog, kernel_source().c_str(), "ringcc_reduce_kernels.cu", 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  struct Destroy {
    const nvrtc::NvrtcApi& api;
    nvrtc::nvrtcProgram* prog;
    ~Destroy() { api.nvrtcDestroyProgram(prog); }
  } destroy{api, &prog};
  const std::vector<std::string> options = options_for(arch, cubin);
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  const nvrtc::nvrtcResult r = api.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  if (r != nvrtc::NVRTC_SUCCESS) {
    size_t log_size = 0;
    std::string log;
    if (api.nvrtcGetProgramLogSize(prog, &log_size) == nvrtc::NVRTC_SUCCESS && log_size > 1) {
      log.resize(log_size);
      api.nvrtcGetProgramLog(prog, &log[0]);
      log.resize(log_size - 1);
    }
    raise(ErrorKind::kInternal, "NVRTC could not compile ringcc's kernels for ", cubin ? "sm_" : "compute_", arch, ": ",
          nvrtc_text(api, r), "\n", log);
  }
  KernelImage image;
  image.arch = arch;
  image.cubin = cubin;
  size_t size = 0;
  if (cubin) {
    nvrtc_check(api, api.nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
    image.bytes.resize(size);
    nvrtc_check(api, api.nvrtcGetCUBIN(prog, &image.bytes[0]), "nvrtcGetCUBIN");
  } else {
    nvrtc_check(api, api.nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize");
    image.bytes.resize(size);
    nvrtc_check(api, api.nvrtcGetPTX(prog, &image.bytes[0]), "nvrtcGetPTX");
  }
  int major = 0, minor = 0;
  api.nvrtcVersion(&major, &minor);
  image.origin = "compiled by NVRTC " + std::to_string(major) + "." + std::to_string(minor);
  return image;
}

std::string kernel_cache_dir() {
  const char* own = std::getenv("RINGCC_CACHE_DIR");
  if (own && *own) return std::string(own) + "/kernels";
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/ringcc/kernels";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.cache/ringcc/kernels";
  return "";
}

KernelImage kernel_image_for(int arch) {
  static std::mutex mu;
  static std::map<int, KernelImage> images;
  std::lock_guard<std::mutex> lock(mu);
  auto it = images.find(arch);
  if (it != images.end()) return it->second;

  const nvrtc::NvrtcApi& api = nvrtc_library("compiling ringcc's device kernels");
  const std::vector<int> supported = nvrtc_supported_archs(api);
  bool cubin = std::find(supported.begin(), supported.end(), arch) != supported.end() && api.nvrtcGetCUBIN != nullptr;
  int target = arch;
  if (!cubin) {
    // PTX for the newest architecture NVRTC knows that the device runs.
    target = 0;
    for (int a : supported) {
      if (a <= arch) target = a;
    }
    if (target == 0) {
      raise(ErrorKind::kInvalidArgument, "NVRTC ", library_info(GpuLibrary::kNvrtc).version,
            " cannot compile for this GPU (sm_", arch, "); it supports sm_", supported.front(), " and newer");
    }
  }
  const std::string dir = kernel_cache_dir();
  const std::string name = cache_key(api, target, cubin);
  KernelImage image;
  // Ranks that start together compile once: the others wait for the file.
  const int lock_fd =
      dir.empty() || !make_dirs(dir) ? -1 : ::open((dir + "/." + name + ".lock").c_str(), O_RDWR | O_CREAT, 0600);
  if (lock_fd >= 0) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0 && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  struct Unlock {
    int fd;
    ~Unlock() {
      if (fd >= 0) ::close(fd);  // releases the lock
    }
  } unlock{lock_fd};
  if (!dir.empty() && read_file(dir + "/" + name, &image.bytes)) {
    image.cubin = cubin;
    image.arch = target;
    image.origin = "disk cache " + dir + "/" + name;
  } else {
    image = compile_kernels(api, target, cubin);
    if (!dir.empty()) write_file(dir, name, image.bytes);
  }
  RINGCC_LOG(kDebug, "device kernels for sm_", arch, ": ", image.cubin ? "CUBIN" : "PTX", " for ",
             image.cubin ? "sm_" : "compute_", image.arch, ", ", image.origin);
  images[arch] = image;
  return image;
}

}  // namespace device
}  // namespace ringcc
