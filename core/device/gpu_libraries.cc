#include "core/device/gpu_libraries.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <sstream>
#include <type_traits>

#include "core/base/error.h"

namespace ringcc {
namespace device {

namespace {

const char* env_name(GpuLibrary which) {
  switch (which) {
    case GpuLibrary::kCuda:
      return "RINGCC_CUDA_LIB";
    case GpuLibrary::kNccl:
      return "RINGCC_NCCL_LIB";
    case GpuLibrary::kNvrtc:
      return "RINGCC_NVRTC_LIB";
  }
  return "";
}

std::vector<std::string> toolkit_and_system(GpuLibrary which) {
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* v = std::getenv(var);
    if (v && *v) roots.push_back(v);
  }
  roots.push_back("/usr/local/cuda");
  std::vector<std::string> out;
  switch (which) {
    case GpuLibrary::kCuda:
      // The driver comes with the kernel module, not the toolkit: the
      // loader's libcuda.so.1 first (also the copy a framework already
      // loaded; a second copy in one process crashes the driver). The
      // toolkit's compat directory holds a newer user-mode driver for older
      // kernel modules (forward compatibility): tried only when the
      // system's does not initialise. Never its stubs/.
      out.push_back("libcuda.so.1");
      out.push_back("/usr/lib/wsl/lib/libcuda.so.1");
      for (const auto& r : roots) out.push_back(r + "/compat/libcuda.so.1");
      break;
    case GpuLibrary::kNccl:
      out.push_back("libnccl.so.2");
      break;
    case GpuLibrary::kNvrtc:
      for (const auto& r : roots) {
        out.push_back(r + "/lib64/libnvrtc.so");
        out.push_back(r + "/lib/libnvrtc.so");
      }
      out.push_back("libnvrtc.so.13");
      out.push_back("libnvrtc.so.12");
      out.push_back("libnvrtc.so");
      break;
  }
  return out;
}

std::string nccl_version_text(int code) {
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9;
  // major * 1000 + minor * 100 + patch before.
  int major, minor, patch;
  if (code >= 10000) {
    major = code / 10000;
    minor = (code % 10000) / 100;
    patch = code % 100;
  } else {
    major = code / 1000;
    minor = (code % 1000) / 100;
    patch = code % 100;
  }
  std::ostringstream os;
  os << major << "." << minor << "." << patch;
  return os.str();
}

std::string cuda_version_text(int code) {
  std::ostringstream os;
  os << code / 1000 << "." << (code % 1000) / 10;
  return os.str();
}

// Resolves every listed symbol of `handle` into `api`; false (and why) when
// a required one is missing.
template <class Api>
bool resolve(void* handle, Api* api, std::string* why);

template <>
bool resolve(void* handle, cuda::DriverApi* api, std::string* why) {
  using namespace cuda;
#define RINGCC_RESOLVE(symbol, result, params)                                         \
  api->symbol = reinterpret_cast<result(*) params>(::dlsym(handle, #symbol));          \
  if (!api->symbol) {                                                                  \
    *why = "loaded, but has no " #symbol " (not a CUDA driver of CUDA 11.7 or newer)"; \
    return false;                                                                      \
  }
  RINGCC_CUDA_FUNCTIONS(RINGCC_RESOLVE)
#undef RINGCC_RESOLVE
  return true;
}

template <>
bool resolve(void* handle, nccl::NcclApi* api, std::string* why) {
  using namespace nccl;
#define RINGCC_RESOLVE(symbol, required, result, params)                      \
  api->symbol = reinterpret_cast<result(*) params>(::dlsym(handle, #symbol)); \
  if (!api->symbol && required) {                                             \
    *why = "loaded, but has no " #symbol " (not NCCL 2.7 or newer)";          \
    return false;                                                             \
  }
  RINGCC_NCCL_FUNCTIONS(RINGCC_RESOLVE)
#undef RINGCC_RESOLVE
  return true;
}

template <>
bool resolve(void* handle, nvrtc::NvrtcApi* api, std::string* why) {
  using namespace nvrtc;
#define RINGCC_RESOLVE(symbol, required, result, params)                      \
  api->symbol = reinterpret_cast<result(*) params>(::dlsym(handle, #symbol)); \
  if (!api->symbol && required) {                                             \
    *why = "loaded, but has no " #symbol;                                     \
    return false;                                                             \
  }
  RINGCC_NVRTC_FUNCTIONS(RINGCC_RESOLVE)
#undef RINGCC_RESOLVE
  return true;
}

// One library: its candidates, what was found and its functions.
template <class Api>
struct Slot {
  std::mutex mu;
  std::vector<std::string> dirs;  // from set_library_dirs
  bool searched = false;
  GpuLibraryInfo info;
  Api api;
  CudaDriverState driver_state;  // kCuda only
};

Slot<cuda::DriverApi>& cuda_slot() {
  static Slot<cuda::DriverApi> s;
  return s;
}
Slot<nccl::NcclApi>& nccl_slot() {
  static Slot<nccl::NcclApi> s;
  return s;
}
Slot<nvrtc::NvrtcApi>& nvrtc_slot() {
  static Slot<nvrtc::NvrtcApi> s;
  return s;
}

std::vector<std::string> candidates_with(GpuLibrary which, const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  const char* explicit_path = std::getenv(env_name(which));
  if (explicit_path && *explicit_path) out.push_back(explicit_path);
  out.insert(out.end(), dirs.begin(), dirs.end());
  for (auto& c : toolkit_and_system(which)) out.push_back(std::move(c));
  return out;
}

// Checks a loaded library answers its version query; fills info.
bool version_of(void* handle, const cuda::DriverApi& api, GpuLibraryInfo* info, std::string* why) {
  (void)handle;
  int v = 0;
  if (api.cuDriverGetVersion(&v) != cuda::CUDA_SUCCESS || v <= 0) {
    *why = "loaded, but cuDriverGetVersion failed";
    return false;
  }
  info->version_code = v;
  info->version = cuda_version_text(v);
  return true;
}
bool version_of(void*, const nccl::NcclApi& api, GpuLibraryInfo* info, std::string* why) {
  int v = 0;
  if (api.ncclGetVersion(&v) != nccl::ncclSuccess || v <= 0) {
    *why = "loaded, but ncclGetVersion is missing or failed";
    return false;
  }
  info->version_code = v;
  info->version = nccl_version_text(v);
  return true;
}
bool version_of(void*, const nvrtc::NvrtcApi& api, GpuLibraryInfo* info, std::string* why) {
  int major = 0, minor = 0;
  if (api.nvrtcVersion(&major, &minor) != nvrtc::NVRTC_SUCCESS || major <= 0) {
    *why = "loaded, but nvrtcVersion failed";
    return false;
  }
  info->version_code = major * 1000 + minor * 10;
  info->version = std::to_string(major) + "." + std::to_string(minor);
  return true;
}

// Tries candidates in order. `accept` may refuse a library that loaded
// (the NVRTC newer than the driver); its text goes into the error.
template <class Api, class Accept>
GpuLibraryInfo search(const std::vector<std::string>& candidates, Api* api, Accept&& accept) {
  GpuLibraryInfo info;
  info.tried = candidates;
  std::ostringstream why;
  for (const auto& candidate : candidates) {
    void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = ::dlerror();
      std::string err = e ? e : "cannot be loaded";
      // dlerror() usually names the file itself.
      if (err.rfind(candidate + ": ", 0) == 0) err = err.substr(candidate.size() + 2);
      why << candidate << ": " << err << "\n";
      continue;
    }
    Api loaded;
    std::string reason;
    GpuLibraryInfo found;
    if (!resolve(handle, &loaded, &reason) || !version_of(handle, loaded, &found, &reason) ||
        !accept(loaded, found, &reason)) {
      why << candidate << ": " << reason << "\n";
      ::dlclose(handle);
      continue;
    }
    *api = loaded;
    found.found = true;
    found.path = candidate;
    found.tried = candidates;
    found.test_double = ::dlsym(handle, "ringcc_cuda_test_double") != nullptr;
    return found;  // the library stays loaded for the life of the process
  }
  info.error = why.str();
  if (info.error.empty()) info.error = "no candidate to try\n";
  return info;
}

auto accept_any = [](const auto&, const GpuLibraryInfo&, std::string*) { return true; };

// The first candidate whose cuInit succeeds; when none does, the first
// that loaded, with its cuInit error.
void search_cuda(Slot<cuda::DriverApi>& s) {
  const std::vector<std::string> candidates = candidates_with(GpuLibrary::kCuda, s.dirs);
  s.searched = true;
  std::ostringstream why;
  bool have_fallback = false;
  for (const auto& candidate : candidates) {
    cuda::DriverApi api;
    GpuLibraryInfo info = search(std::vector<std::string>{candidate}, &api, accept_any);
    if (!info.found) {
      why << info.error;
      continue;
    }
    info.tried = candidates;
    const cuda::CUresult r = api.cuInit(0);
    if (r == cuda::CUDA_SUCCESS) {
      s.api = api;
      s.info = info;
      s.driver_state.initialized = true;
      s.driver_state.error.clear();
      return;
    }
    std::string error = "cuInit: " + cuda_error_text(api, r);
    if (r == cuda::CUDA_ERROR_STUB_LIBRARY) {
      error += ": " + candidate + " is the CUDA toolkit's stub, not a driver";
    }
    why << candidate << ": " << error << "\n";
    if (!have_fallback) {
      have_fallback = true;
      s.api = api;
      s.info = info;
      s.driver_state.error = error;
    }
  }
  if (!have_fallback) {
    s.info = GpuLibraryInfo();
    s.info.tried = candidates;
    s.info.error = why.str().empty() ? "no candidate to try\n" : why.str();
  }
}

template <class Api>
void ensure_searched(Slot<Api>& s, GpuLibrary which) {
  if (s.searched) return;
  if constexpr (std::is_same_v<Api, nvrtc::NvrtcApi>) {
    // An NVRTC newer than the driver makes code the driver cannot load:
    // prefer one whose major version the driver supports.
    int driver_major = 0;
    const GpuLibraryInfo driver = library_info(GpuLibrary::kCuda);
    if (driver.found) driver_major = driver.version_code / 1000;
    auto fits = [driver_major](const nvrtc::NvrtcApi&, const GpuLibraryInfo& found, std::string* why) {
      if (driver_major > 0 && found.version_code / 1000 > driver_major) {
        *why =
            "NVRTC " + found.version + " is newer than the CUDA driver (CUDA " + std::to_string(driver_major) + ".x)";
        return false;
      }
      return true;
    };
    s.info = search(candidates_with(which, s.dirs), &s.api, fits);
  } else {
    s.info = search(candidates_with(which, s.dirs), &s.api, accept_any);
  }
  s.searched = true;
}

template <class Api>
void set_dirs(Slot<Api>& s, const std::vector<std::string>& paths) {
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.dirs == paths) return;
  s.dirs = paths;
  if (s.searched && !s.info.found) s.searched = false;  // search again with the new candidates
}

[[noreturn]] void missing(GpuLibrary which, const GpuLibraryInfo& info, const std::string& what) {
  raise(ErrorKind::kInvalidArgument, what, " needs ", library_name(which),
        ", which was not found: ", install_hint(which), ". Tried:\n", info.error);
}

}  // namespace

const char* install_hint(GpuLibrary which) {
  switch (which) {
    case GpuLibrary::kCuda:
      return "install an NVIDIA driver (it provides libcuda.so.1), or point RINGCC_CUDA_LIB at a "
             "libcuda.so.1";
    case GpuLibrary::kNccl:
      return "pip install nvidia-nccl-cu13 (CUDA 13) or nvidia-nccl-cu12 (CUDA 12), or point "
             "RINGCC_NCCL_LIB at a libnccl.so.2";
    case GpuLibrary::kNvrtc:
      return "pip install nvidia-cuda-nvrtc (CUDA 13) or nvidia-cuda-nvrtc-cu12 (CUDA 12), or "
             "point RINGCC_NVRTC_LIB at a libnvrtc.so";
  }
  return "";
}

const char* library_name(GpuLibrary which) {
  switch (which) {
    case GpuLibrary::kCuda:
      return "the CUDA driver (libcuda.so.1)";
    case GpuLibrary::kNccl:
      return "NCCL (libnccl.so.2)";
    case GpuLibrary::kNvrtc:
      return "NVRTC (libnvrtc.so)";
  }
  return "";
}

void set_library_dirs(GpuLibrary which, const std::vector<std::string>& paths) {
  switch (which) {
    case GpuLibrary::kCuda:
      return set_dirs(cuda_slot(), paths);
    case GpuLibrary::kNccl:
      return set_dirs(nccl_slot(), paths);
    case GpuLibrary::kNvrtc:
      return set_dirs(nvrtc_slot(), paths);
  }
}

std::vector<std::string> library_candidates(GpuLibrary which) {
  switch (which) {
    case GpuLibrary::kCuda: {
      std::lock_guard<std::mutex> lock(cuda_slot().mu);
      return candidates_with(which, cuda_slot().dirs);
    }
    case GpuLibrary::kNccl: {
      std::lock_guard<std::mutex> lock(nccl_slot().mu);
      return candidates_with(which, nccl_slot().dirs);
    }
    case GpuLibrary::kNvrtc: {
      std::lock_guard<std::mutex> lock(nvrtc_slot().mu);
      return candidates_with(which, nvrtc_slot().dirs);
    }
  }
  return {};
}

GpuLibraryInfo library_info(GpuLibrary which) {
  switch (which) {
    case GpuLibrary::kCuda: {
      auto& s = cuda_slot();
      std::lock_guard<std::mutex> lock(s.mu);
      if (!s.searched) search_cuda(s);
      return s.info;
    }
    case GpuLibrary::kNccl: {
      auto& s = nccl_slot();
      std::lock_guard<std::mutex> lock(s.mu);
      ensure_searched(s, which);
      return s.info;
    }
    case GpuLibrary::kNvrtc: {
      auto& s = nvrtc_slot();
      std::lock_guard<std::mutex> lock(s.mu);
      ensure_searched(s, which);
      return s.info;
    }
  }
  return {};
}

CudaDriverState cuda_driver_state() {
  library_info(GpuLibrary::kCuda);
  std::lock_guard<std::mutex> lock(cuda_slot().mu);
  return cuda_slot().driver_state;
}

const cuda::DriverApi& cuda_driver(const std::string& what) {
  const GpuLibraryInfo info = library_info(GpuLibrary::kCuda);
  if (!info.found) missing(GpuLibrary::kCuda, info, what);
  const CudaDriverState state = cuda_driver_state();
  if (!state.initialized) {
    raise(ErrorKind::kInvalidArgument, what, " needs a working CUDA driver, but ", info.path, " (CUDA ", info.version,
          ") failed to initialise: ", state.error);
  }
  return cuda_slot().api;  // written once, before searched was set under the lock
}

const nccl::NcclApi& nccl_library(const std::string& what) {
  const GpuLibraryInfo info = library_info(GpuLibrary::kNccl);
  if (!info.found) missing(GpuLibrary::kNccl, info, what);
  return nccl_slot().api;
}

bool nccl_available() { return library_info(GpuLibrary::kNccl).found; }

const nvrtc::NvrtcApi& nvrtc_library(const std::string& what) {
  const GpuLibraryInfo info = library_info(GpuLibrary::kNvrtc);
  if (!info.found) missing(GpuLibrary::kNvrtc, info, what);
  return nvrtc_slot().api;
}

GpuLibraryInfo probe_library(GpuLibrary which, const std::vector<std::string>& candidates) {
  switch (which) {
    case GpuLibrary::kCuda: {
      cuda::DriverApi api;
      return search(candidates, &api, accept_any);
    }
    case GpuLibrary::kNccl: {
      nccl::NcclApi api;
      return search(candidates, &api, accept_any);
    }
    case GpuLibrary::kNvrtc: {
      nvrtc::NvrtcApi api;
      return search(candidates, &api, accept_any);
    }
  }
  return {};
}

nvrtc::NvrtcApi open_nvrtc(const std::string& path) {
  nvrtc::NvrtcApi api;
  const GpuLibraryInfo info = search(std::vector<std::string>{path}, &api, accept_any);
  if (!info.found) raise(ErrorKind::kInvalidArgument, "no usable NVRTC: ", info.error);
  return api;
}

std::string cuda_error_text(const cuda::DriverApi& api, cuda::CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(result, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(result, &text);
  std::string out = name ? name : "CUDA error " + std::to_string(static_cast<int>(result));
  if (text) out += std::string(" (") + text + ")";
  return out;
}

void cuda_check(const cuda::DriverApi& api, cuda::CUresult result, const char* what) {
  if (result != cuda::CUDA_SUCCESS) raise(ErrorKind::kInternal, what, ": ", cuda_error_text(api, result));
}

}  // namespace device
}  // namespace ringcc
