#include "core/os/process_memory.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

namespace ringcc {

namespace {

enum class Direction { kRead, kWrite };

bool copy_with_process(Direction dir, pid_t pid, uint8_t* local_base, uint64_t remote_addr, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    // At most 1 GiB per call: the kernel may stop short anyway.
    const size_t want = std::min<size_t>(bytes - done, size_t{1} << 30);
    iovec local{local_base + done, want};
    iovec remote{reinterpret_cast<void*>(remote_addr + done), want};
    const ssize_t got = dir == Direction::kRead ? ::process_vm_readv(pid, &local, 1, &remote, 1, 0)
                                                : ::process_vm_writev(pid, &local, 1, &remote, 1, 0);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      if (got == 0) errno = EFAULT;  // no progress: a range the other process does not map
      return false;
    }
    done += static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

bool read_process_memory(pid_t pid, void* dst, uint64_t remote_addr, size_t bytes) {
  return copy_with_process(Direction::kRead, pid, static_cast<uint8_t*>(dst), remote_addr, bytes);
}

bool write_process_memory(pid_t pid, uint64_t remote_addr, const void* src, size_t bytes) {
  // process_vm_writev only reads the local iovec's bytes.
  return copy_with_process(Direction::kWrite, pid, const_cast<uint8_t*>(static_cast<const uint8_t*>(src)),
                           remote_addr, bytes);
}

}  // namespace ringcc
