// Copies between this process's memory and another process's of the same
// user, with no shared mapping: cross-memory attach (process_vm_readv(2)
// and process_vm_writev(2)). The kernel allows both under the same check
// (the caller may ptrace the other process), so a peer one can read is a
// peer one can write.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ringcc {

// Copies `bytes` at `remote_addr` in process `pid` into `dst`. False when
// the kernel refuses or stops (errno says why: ESRCH, the process is gone).
bool read_process_memory(pid_t pid, void* dst, uint64_t remote_addr, size_t bytes);

// Copies `bytes` at `src` to `remote_addr` in process `pid`. False as above.
bool write_process_memory(pid_t pid, uint64_t remote_addr, const void* src, size_t bytes);

}  // namespace ringcc
