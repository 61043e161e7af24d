#include "core/os/shm_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/base/error.h"

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
    raise(ErrorKind::kInternal, "cannot create shared memory segment ", name, ": ", std::strerror(errno));
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int err = errno;
    ::close(fd);
    shm_unlink(name.c_str());
    raise(ErrorKind::kInternal, "cannot size shared memory segment ", name, " to ", size,
          " bytes: ", std::strerror(err), " (is /dev/shm large enough?)");
  }
  // Reserve the pages now: on a full /dev/shm the first touch of a page
  // would otherwise kill the process with SIGBUS.
  int reserved;
  do {
    reserved = posix_fallocate(fd, 0, static_cast<off_t>(size));
  } while (reserved == EINTR);
  if (reserved != 0 && reserved != EINVAL && reserved != EOPNOTSUPP) {
    struct statvfs fs{};
    const bool known = fstatvfs(fd, &fs) == 0;
    ::close(fd);
    shm_unlink(name.c_str());
    raise(ErrorKind::kInternal, "cannot reserve ", size, " bytes of shared memory for segment ", name, ": ",
          std::strerror(reserved),
          known ? " (/dev/shm has " + std::to_string(static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize) +
                      " bytes free; make it larger, or set RINGCC_TRANSPORT=tcp)"
                : std::string(" (make /dev/shm larger, or set RINGCC_TRANSPORT=tcp)"));
  }
  ShmSegment seg;
  try {
    seg.data_ = map_fd(fd, size, name);
  } catch (...) {
    shm_unlink(name.c_str());
    throw;
  }
  seg.size_ = size;
  return seg;
}

ShmSegment ShmSegment::open(const std::string& name, size_t size) {
  int fd = shm_open(name.c_str(), O_RDWR | O_NOFOLLOW, 0600);
  if (fd < 0) {
    raise(ErrorKind::kInternal, "cannot open shared memory segment ", name, ": ", std::strerror(errno));
  }
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    ::close(fd);
    raise(ErrorKind::kInternal, "shared memory segment ", name, " does not belong to this user: refusing to map it");
  }
  if (static_cast<uint64_t>(st.st_size) < size) {
    ::close(fd);
    raise(ErrorKind::kInternal, "shared memory segment ", name, " holds ", st.st_size, " bytes, expected ", size,
          " (do the ranks' RINGCC_SHM_* settings differ?)");
  }
  ShmSegment seg;
  seg.data_ = map_fd(fd, size, name);
  seg.size_ = size;
  return seg;
}

void ShmSegment::unlink(const std::string& name) { shm_unlink(name.c_str()); }

namespace {

constexpr char kOwnedPrefix[] = "ringcc-p";

// Parses "<pid>-n<ns>-" at the start of text (after kOwnedPrefix); *rest
// points past it.
bool parse_owner(const char* text, long* pid, unsigned long long* ns, const char** rest = nullptr) {
  char* end = nullptr;
  errno = 0;
  *pid = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *pid <= 0 || end[0] != '-' || end[1] != 'n') return false;
  const char* ns_text = end + 2;
  *ns = std::strtoull(ns_text, &end, 10);
  if (rest != nullptr) *rest = end + 1;
  return errno == 0 && end != ns_text && *end == '-';
}

}  // namespace

std::string ShmSegment::owned_name(const std::string& tag) {
  return "/" + std::string(kOwnedPrefix) + std::to_string(getpid()) + "-n" + std::to_string(pid_namespace_id()) + "-" +
         tag;
}

bool ShmSegment::is_owned_name(const std::string& name, const std::string& tag) {
  const std::string prefix = "/" + std::string(kOwnedPrefix);
  if (name.size() > 250 || name.compare(0, prefix.size(), prefix) != 0) return false;
  long pid = 0;
  unsigned long long ns = 0;
  const char* rest = nullptr;
  return parse_owner(name.c_str() + prefix.size(), &pid, &ns, &rest) && tag == rest;
}

uint64_t pid_namespace_id() {
  struct stat st{};
  if (::stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

void remove_stale_shm_objects() {
  const uint64_t my_ns = pid_namespace_id();
  if (my_ns == 0) return;  // cannot tell whose pids we would compare
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return;
  const int dir_fd = ::dirfd(dir);
  while (dirent* entry = ::readdir(dir)) {
    const char* name = entry->d_name;
    long pid = 0;
    unsigned long long ns = 0;
    const bool known = std::strncmp(name, kOwnedPrefix, sizeof(kOwnedPrefix) - 1) == 0 &&
                       parse_owner(name + sizeof(kOwnedPrefix) - 1, &pid, &ns);
    if (!known || ns != my_ns || process_alive(static_cast<int>(pid))) continue;
    struct stat st{};
    if (::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid()) continue;
    ::unlinkat(dir_fd, name, 0);
  }
  ::closedir(dir);
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int timeout_ms) {
  struct timespec ts;
  ts.tv_sec = timeout_ms / 1000;
  ts.tv_nsec = static_cast<long>(timeout_ms % 1000) * 1000000L;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
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
