#include "core/shm_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace ringcc {

namespace {

uint8_t* map_fd(int fd, size_t size, const std::string& name) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    raise(ErrorKind::kInternal, "mmap of shared memory segment ", name, " (", size,
          " bytes) failed: ", std::strerror(err));
  }
  ::close(fd);
  return static_cast<uint8_t*>(p);
}

}  // namespace

ShmSegment::~ShmSegment() {
  if (data_) munmap(data_, size_);
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    if (data_) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

ShmSegment ShmSegment::create(const std::string& name, size_t size) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    raise(ErrorKind::kInternal, "cannot create shared memory segment ", name, ": ",
          std::strerror(errno));
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int err = errno;
    ::close(fd);
    shm_unlink(name.c_str());
    raise(ErrorKind::kInternal, "cannot size shared memory segment ", name, " to ", size,
          " bytes: ", std::strerror(err), " (is /dev/shm large enough?)");
  }
  ShmSegment seg;
  seg.data_ = map_fd(fd, size, name);
  seg.size_ = size;
  return seg;
}

ShmSegment ShmSegment::open(const std::string& name, size_t size) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    raise(ErrorKind::kInternal, "cannot open shared memory segment ", name, ": ",
          std::strerror(errno));
  }
  ShmSegment seg;
  seg.data_ = map_fd(fd, size, name);
  seg.size_ = size;
  return seg;
}

void ShmSegment::unlink(const std::string& name) { shm_unlink(name.c_str()); }

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int timeout_ms) {
  struct timespec ts;
  ts.tv_sec = timeout_ms / 1000;
  ts.tv_nsec = static_cast<long>(timeout_ms % 1000) * 1000000L;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr,
          0);
}

bool process_alive(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A killed child that its parent has not reaped yet still answers kill():
  // look at its state in /proc.
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return true;  // no /proc: trust kill()
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  if (!close_paren || close_paren[1] == '\0') return true;
  char state = close_paren[2];
  return state != 'Z' && state != 'X';
}

}  // namespace ringcc
