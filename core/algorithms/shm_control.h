// The control block at the start of each rank's shared-memory segment:
// the phase word its peers wait on, and what they read of the rank.
#pragma once

#include <atomic>
#include <cstdint>

namespace ringcc {

struct alignas(64) ShmControl {
  std::atomic<uint32_t> phase;     // last phase this rank arrived at (futex word)
  std::atomic<uint32_t> sleepers;  // peers sleeping on `phase`
  std::atomic<uint32_t> aborted;
  std::atomic<uint32_t> left;  // this rank shut down: it arrives at no later phase
  // The first rank's StoreChooser::choices(), for every rank's next
  // allreduce (written between a collective's first and last phase).
  std::atomic<uint32_t> store_choices;
  // The CPU this rank ran on when it last arrived at a phase (-1: not
  // known), for a waiter to see that it holds the CPU its peer needs.
  std::atomic<int32_t> cpu;
  int32_t pid;
  // A word peers read through process_vm_readv(2) to learn whether this
  // host lets them read our memory directly (cross-memory attach), and its
  // address in our own address space.
  uint64_t probe;
  uint64_t probe_addr;
  // The CPUs this rank may run on (its affinity mask, 1024 CPUs): together
  // the ranks of the host tell whether they outnumber their CPUs.
  uint64_t cpu_mask[16];
  char reason[512];
};

// True when phase a is at or past phase b (wrap-around safe).
inline bool reached(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }

}  // namespace ringcc
