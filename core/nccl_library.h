// Finding NCCL at run time. ringcc never links NCCL or CUDA at build time:
// it opens libnccl.so.2 with dlopen(3) from a list of candidates (the
// Python package supplies them: RINGCC_NCCL_LIB, the nvidia-nccl-cu12/-cu13
// wheels, torch's copy, then the system's) and asks it for its version.
#pragma once

#include <string>
#include <vector>

namespace ringcc {

struct NcclLibraryInfo {
  bool found = false;
  std::string path;         // the candidate that loaded
  int version_code = 0;     // ncclGetVersion(): e.g. 22809 for 2.28.9
  std::string version;      // "2.28.9"
  std::string error;        // why nothing loaded, one line per candidate
};

// Tries the candidates in order (a path, or a bare soname for the system's
// search path); the first that loads and answers ncclGetVersion wins. The
// library stays loaded for the life of the process.
NcclLibraryInfo find_nccl(const std::vector<std::string>& candidates);

}  // namespace ringcc
