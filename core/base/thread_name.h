// Names the calling thread ("ringcc-engine", ...), so that `top -H`, gdb and
// /proc/<pid>/task/*/comm tell ringcc's threads from the framework's and
// MPI's. Linux keeps at most 15 characters; longer names are cut.
#pragma once

#include <string>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace ringcc {

inline void name_this_thread(const std::string& name) {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
#else
  (void)name;
#endif
}

}  // namespace ringcc
