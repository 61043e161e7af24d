#include "core/nccl_library.h"

#include <dlfcn.h>

#include <sstream>

namespace ringcc {

namespace {

std::string version_text(int code) {
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

}  // namespace

NcclLibraryInfo find_nccl(const std::vector<std::string>& candidates) {
  NcclLibraryInfo info;
  std::ostringstream why;
  for (const auto& candidate : candidates) {
    void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = ::dlerror();
      why << candidate << ": " << (err ? err : "cannot be loaded") << "\n";
      continue;
    }
    using GetVersion = int (*)(int*);
    auto get_version = reinterpret_cast<GetVersion>(::dlsym(handle, "ncclGetVersion"));
    int code = 0;
    if (!get_version || get_version(&code) != 0 || code <= 0) {
      why << candidate << ": loaded, but ncclGetVersion is missing or failed\n";
      ::dlclose(handle);
      continue;
    }
    info.found = true;
    info.path = candidate;
    info.version_code = code;
    info.version = version_text(code);
    return info;
  }
  info.error = why.str();
  if (info.error.empty()) info.error = "no candidate to try\n";
  return info;
}

}  // namespace ringcc
