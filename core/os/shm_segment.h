// A POSIX shared-memory segment (shm_open + mmap), plus the two primitives
// that same-host transports build on: futex waits on words inside shared
// memory, and a check that a peer process is still alive.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ringcc {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Creates (exclusively) and maps a zero-filled segment of `size` bytes.
  static ShmSegment create(const std::string& name, size_t size);
  // Maps an existing segment created by a peer. Raises Error(kInternal)
  // unless it belongs to this user and holds at least `size` bytes.
  static ShmSegment open(const std::string& name, size_t size);
  // Removes the name; mappings stay valid until unmapped.
  static void unlink(const std::string& name);

  // A name for a segment this process creates: "/ringcc-p<pid>-n<pid
  // namespace>-<tag>". The creator's pid in the name lets a later job
  // remove the segment if the creator was killed before it could
  // (remove_stale_shm_objects).
  static std::string owned_name(const std::string& tag);
  // True when `name` is what owned_name(tag) gives in some process
  // (checked before mapping a name read from the store, which may be
  // anyone's: a segment of another job of this user has another tag).
  static bool is_owned_name(const std::string& name, const std::string& tag);

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Sleeps while *word == expected, for at most timeout_ms (process-shared
// futex). Spurious wake-ups are possible: callers re-check their condition.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int timeout_ms);
// Wakes every waiter sleeping on word.
void futex_wake_all(std::atomic<uint32_t>* word);

// False once the process has exited (also when it is a zombie).
bool process_alive(int pid);

// An identifier of this process's pid namespace (the inode of
// /proc/self/ns/pid); 0 when it cannot be read. Pids are compared only
// within one namespace.
uint64_t pid_namespace_id();

// Removes what ringcc processes of this user left in /dev/shm when they
// were killed (SIGKILL gives them no chance to clean up): segments named by
// owned_name whose creator, in this pid namespace, has exited. Best effort,
// never raises.
void remove_stale_shm_objects();

}  // namespace ringcc
