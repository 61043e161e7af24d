#include "core/rendezvous/job_secret.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/base/sha256.h"
#include "core/os/shm_segment.h"

namespace ringcc {
namespace {

constexpr size_t kMaxFileBytes = 64 * 1024;
constexpr int kFindAttempts = 20;
constexpr char kFilePrefix[] = "ringcc-secret-";
// What a file made by find_or_create names as its job: the job is in the
// file's name there.
constexpr char kNoJob[] = "-";

std::string trim(const std::string& s) {
  const char* space = " \t\r\n";
  const size_t begin = s.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(space) - begin + 1);
}

std::string random_hex(size_t bytes) {
  std::vector<uint8_t> buf(bytes);
  random_bytes(buf.data(), buf.size());
  return to_hex(buf.data(), buf.size());
}

// True when `path` is a directory of this user's that no one else may
// write to: made (mode 0700) if absent; an existing one must be a real
// directory (not a link) owned by us, and its mode is tightened. In a
// sticky directory such as /dev/shm no other user can replace it after.
bool private_directory(const std::string& path, bool make) {
  if (make && ::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return false;
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) return false;
  return (st.st_mode & 077) == 0 || (make && ::chmod(path.c_str(), 0700) == 0);
}

std::string home_directory() {
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') return home;
  const passwd* entry = ::getpwuid(geteuid());
  return entry != nullptr && entry->pw_dir != nullptr ? entry->pw_dir : "";
}

// The places a secret directory may be, best first; `make` creates them.
std::vector<std::string> secret_directory_candidates(bool make) {
  std::vector<std::string> found;
  const std::string shm = "/dev/shm/ringcc-u" + std::to_string(geteuid());
  if (private_directory(shm, make)) found.push_back(shm);
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime != nullptr && runtime[0] == '/' && private_directory(runtime, false)) {
    const std::string dir = std::string(runtime) + "/ringcc";
    if (private_directory(dir, make)) found.push_back(dir);
  }
  const std::string home = home_directory();
  if (!home.empty()) {
    if (make) {
      ::mkdir((home + "/.cache").c_str(), 0700);
      ::mkdir((home + "/.cache/ringcc").c_str(), 0700);
    }
    const std::string dir = home + "/.cache/ringcc/secrets";
    if (private_directory(dir, make)) found.push_back(dir);
  }
  return found;
}

const char* const kHint = "; set RINGCC_SECRET (or RINGCC_SECRET_FILE) to the same secret on every rank instead";

struct FileContents {
  std::string secret;
  std::string job;
  long pid = 0;
  unsigned long long ns = 0;
  dev_t dev = 0;
  ino_t ino = 0;
};

// Reads a secret file. False when it does not exist; raises when it is not
// a private file of this user in the expected format.
bool read_secret_file(const std::string& path, FileContents* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    raise(ErrorKind::kInvalidArgument, "cannot read the job secret file ", path, ": ", std::strerror(errno), kHint);
  }
  struct stat st{};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (!stat_ok || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    ::close(fd);
    raise(ErrorKind::kInvalidArgument, "the job secret file ", path,
          " is not a file that only this user can read: remove it", kHint);
  }
  std::string text(512, '\0');
  const ssize_t n = ::read(fd, &text[0], text.size());
  ::close(fd);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  const size_t newline = text.find('\n');
  char secret[129] = {0};
  char job[129] = {0};
  if (newline == std::string::npos ||
      std::sscanf(text.c_str(), "ringcc-secret %llu %ld %128s", &out->ns, &out->pid, job) != 3 ||
      std::sscanf(text.c_str() + newline + 1, "%128s", secret) != 1 || std::strlen(secret) < 32) {
    raise(ErrorKind::kInvalidArgument, "the job secret file ", path, " is malformed: remove it", kHint);
  }
  out->secret = secret;
  out->job = job;
  out->dev = st.st_dev;
  out->ino = st.st_ino;
  return true;
}

// Writes a new private file at path (which must not exist). False with
// errno EEXIST when it does.
bool write_secret_file(const std::string& path, const std::string& secret, const std::string& job,
                       FileContents* out) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    raise(ErrorKind::kInvalidArgument, "cannot create the job secret file ", path, ": ", std::strerror(errno), kHint);
  }
  const std::string text = "ringcc-secret " + std::to_string(pid_namespace_id()) + " " + std::to_string(getpid()) +
                           " " + job + "\n" + secret + "\n";
  struct stat st{};
  const bool ok = ::fchmod(fd, 0600) == 0 &&
                  ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fstat(fd, &st) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    raise(ErrorKind::kInvalidArgument, "cannot write the job secret file ", path, ": ", std::strerror(err), kHint);
  }
  out->secret = secret;
  out->job = job;
  out->pid = getpid();
  out->ns = pid_namespace_id();
  out->dev = st.st_dev;
  out->ino = st.st_ino;
  return true;
}


void remove_stale_secret_files_in(const std::string& dir) {
  const uint64_t my_ns = pid_namespace_id();
  DIR* listing = my_ns == 0 ? nullptr : ::opendir(dir.c_str());
  if (listing == nullptr) return;
  std::vector<std::string> stale;
  while (dirent* entry = ::readdir(listing)) {
    if (std::strncmp(entry->d_name, kFilePrefix, sizeof(kFilePrefix) - 1) != 0) continue;
    const std::string path = dir + "/" + entry->d_name;
    FileContents found;
    try {
      if (read_secret_file(path, &found) && found.ns == my_ns && !process_alive(static_cast<int>(found.pid))) {
        stale.push_back(path);
      }
    } catch (const Error&) {
      // Half written (a rank killed while writing it) or not ours: left alone.
    }
  }
  ::closedir(listing);
  for (const auto& path : stale) ::unlink(path.c_str());
}

}  // namespace

std::string secret_from_env() {
  const std::string secret = env_str("RINGCC_SECRET", "");
  if (!secret.empty()) return secret;
  const std::string path = env_str("RINGCC_SECRET_FILE", "");
  if (path.empty()) return "";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    raise(ErrorKind::kInvalidArgument, "cannot read RINGCC_SECRET_FILE=", path, ": ", std::strerror(errno));
  }
  struct stat st{};
  if (::fstat(fd, &st) == 0 && (st.st_mode & 077) != 0) {
    RINGCC_LOG(kWarning, "RINGCC_SECRET_FILE=", path,
               " can be read by other users (chmod 600 it, or mount it with mode 0400)");
  }
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxFileBytes) break;
  }
  ::close(fd);
  RINGCC_CHECK(text.size() <= kMaxFileBytes, ErrorKind::kInvalidArgument, "RINGCC_SECRET_FILE=", path,
               " is larger than ", kMaxFileBytes, " bytes: it should hold only the secret");
  text = trim(text);
  RINGCC_CHECK(!text.empty(), ErrorKind::kInvalidArgument, "RINGCC_SECRET_FILE=", path, " is empty");
  return text;
}

bool insecure_allowed() { return env_int("RINGCC_INSECURE", 0) != 0; }

void warn_insecure(const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    RINGCC_LOG(kWarning, "RINGCC_INSECURE=1: ", why,
               ". The rendezvous store is unauthenticated and hands the job secret to whoever "
               "asks: anyone who can reach it can read the job's data and join the job as a "
               "rank. Set RINGCC_SECRET or RINGCC_SECRET_FILE on every rank instead.");
  });
}

void remove_stale_secret_files() {
  for (const auto& dir : secret_directory_candidates(false)) remove_stale_secret_files_in(dir);
}

std::string secret_directory() {
  const std::vector<std::string> found = secret_directory_candidates(true);
  if (found.empty()) {
    raise(ErrorKind::kInvalidArgument,
          "no directory for this job's secret file that only this user can write to: /dev/shm/ringcc-u", geteuid(),
          " belongs to another user or cannot be made, and neither $XDG_RUNTIME_DIR/ringcc nor "
          "~/.cache/ringcc/secrets can be made private",
          kHint);
  }
  return found.front();
}

SecretFile SecretFile::from(const std::string& path, const std::string& secret, dev_t dev, ino_t ino) {
  SecretFile file;
  file.path_ = path;
  file.secret_ = secret;
  file.dev_ = dev;
  file.ino_ = ino;
  return file;
}

SecretFile SecretFile::find_or_create(const std::string& key) {
  const std::string dir = secret_directory();
  remove_stale_secret_files_in(dir);
  const std::string path = dir + "/" + kFilePrefix + key;
  const uint64_t my_ns = pid_namespace_id();
  for (int attempt = 0; attempt < kFindAttempts; ++attempt) {
    FileContents found;
    if (read_secret_file(path, &found)) {
      if (my_ns != 0 && found.ns == my_ns && !process_alive(static_cast<int>(found.pid))) {
        // Left by a job whose ranks were killed: replace it (only if it is
        // still the file just read, not one a rank of ours made since).
        struct stat st{};
        if (::lstat(path.c_str(), &st) == 0 && st.st_dev == found.dev && st.st_ino == found.ino) {
          ::unlink(path.c_str());
        }
        continue;
      }
      // Found, not made: its maker removes it (a rank of another job given
      // the same port must not take it from the job that made it).
      return from("", found.secret, found.dev, found.ino);
    }
    // Written in full under a name of its own, then linked into place, so
    // that a rank that finds the file always finds it complete.
    const std::string scratch = dir + "/" + kFilePrefix + "new-" + random_hex(8);
    FileContents made;
    if (!write_secret_file(scratch, random_hex(32), kNoJob, &made)) continue;
    const int linked = ::link(scratch.c_str(), path.c_str());
    const int err = errno;
    ::unlink(scratch.c_str());
    if (linked == 0) return from(path, made.secret, made.dev, made.ino);
    if (err != EEXIST) {
      raise(ErrorKind::kInvalidArgument, "cannot create the job secret file ", path, ": ", std::strerror(err), kHint);
    }
  }
  raise(ErrorKind::kInvalidArgument, "cannot settle on a job secret file at ", path, " (it keeps changing)", kHint);
}

SecretFile SecretFile::create_unique(const std::string& job) {
  const std::string dir = secret_directory();
  remove_stale_secret_files_in(dir);
  for (int attempt = 0; attempt < kFindAttempts; ++attempt) {
    const std::string path = dir + "/" + kFilePrefix + "job-" + random_hex(16);
    FileContents made;
    if (write_secret_file(path, random_hex(32), job, &made)) return from(path, made.secret, made.dev, made.ino);
  }
  raise(ErrorKind::kInternal, "cannot create a job secret file in ", dir);
}

std::string SecretFile::read(const std::string& path, const std::string& job) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::vector<std::string> ours = secret_directory_candidates(false);
  if (std::find(ours.begin(), ours.end(), dir) == ours.end() ||
      name.compare(0, sizeof(kFilePrefix) - 1, kFilePrefix) != 0 || name.find("..") != std::string::npos) {
    raise(ErrorKind::kInvalidArgument, "rank 0 named '", path,
          "' as the job secret file; it is not in a directory of this user's secret files", kHint);
  }
  FileContents found;
  if (!read_secret_file(path, &found)) {
    raise(ErrorKind::kInvalidArgument, "rank 0's job secret file ", path,
          " does not exist here: are all ranks on one host, as the rendezvous said?", kHint);
  }
  if (found.job != job) {
    raise(ErrorKind::kInvalidArgument, "rank 0 named the job secret file ", path, " of another job (", found.job,
          ", this job is ", job, "): two jobs met through one rendezvous store", kHint);
  }
  return found.secret;
}

SecretFile::SecretFile(SecretFile&& other) noexcept { *this = std::move(other); }

SecretFile& SecretFile::operator=(SecretFile&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::move(other.path_);
    secret_ = std::move(other.secret_);
    dev_ = other.dev_;
    ino_ = other.ino_;
    other.path_.clear();
  }
  return *this;
}

void SecretFile::remove() {
  if (path_.empty()) return;
  struct stat st{};
  if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) {
    ::unlink(path_.c_str());
  }
  path_.clear();
}

}  // namespace ringcc
