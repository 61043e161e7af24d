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
  // Maps an existing segment created by a peer.
  static ShmSegment open(const std::string& name, size_t size);
  // Removes the name; mappings stay valid until unmapped.
  static void unlink(const std::string& name);

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

}  // namespace ringcc
