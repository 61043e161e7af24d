#include "core/os/cpu_placement.h"

#include <sched.h>

#include <atomic>
#include <chrono>

#include "core/base/env.h"
#include "core/base/log.h"

namespace ringcc {

namespace {
std::atomic<uint64_t> g_moves{0};
}  // namespace

int current_cpu() { return sched_getcpu(); }

bool moves_off_peer_cpu() {
  static const bool moves = env_int("RINGCC_MOVE_OFF_PEER_CPU", 1) != 0;
  return moves;
}

void mark_cpu(uint64_t* words, size_t n_words, int cpu) {
  if (cpu < 0 || static_cast<size_t>(cpu) / 64 >= n_words) return;
  words[cpu / 64] |= uint64_t{1} << (cpu % 64);
}

bool move_off_cpu(const uint64_t* taken, size_t n_words) {
  using Clock = std::chrono::steady_clock;
  thread_local Clock::time_point last_move{};
  const auto now = Clock::now();
  if (now - last_move < std::chrono::milliseconds(1)) return false;
  const int here = current_cpu();
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (here < 0 || sched_getaffinity(0, sizeof(mask), &mask) != 0) return false;
  int target = -1;
  for (int k = 1; k < CPU_SETSIZE && target < 0; ++k) {
    const int c = (here + k) % CPU_SETSIZE;
    const bool marked = static_cast<size_t>(c) / 64 < n_words && ((taken[c / 64] >> (c % 64)) & 1U);
    if (CPU_ISSET(c, &mask) && !marked) target = c;
  }
  if (target < 0) return false;
  last_move = now;
  cpu_set_t there;
  CPU_ZERO(&there);
  CPU_SET(target, &there);
  if (sched_setaffinity(0, sizeof(there), &there) != 0) return false;
  if (sched_setaffinity(0, sizeof(mask), &mask) != 0 && sched_setaffinity(0, sizeof(mask), &mask) != 0) {
    RINGCC_LOG(kWarning, "could not give a thread its CPU affinity back after moving it to CPU ", target);
  }
  g_moves.fetch_add(1, std::memory_order_relaxed);
  return true;
}

uint64_t cpu_moves() { return g_moves.load(std::memory_order_relaxed); }

}  // namespace ringcc
