// Unit tests of moving a waiting thread off a peer's CPU
// (core/os/cpu_placement.h): the thread lands on a CPU of its mask that is
// not marked, gets its whole mask back, moves at most once a millisecond,
// and stays put when every other CPU is taken or it has only one.
//
// Exits 0 when every check passes, 1 otherwise.
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/os/cpu_placement.h"
#include "tests/cpp/expect.h"

using namespace ringcc;  // NOLINT(build/namespaces)

namespace {

bool same_mask(const cpu_set_t& a, const cpu_set_t& b) { return CPU_EQUAL(&a, &b); }

void test_mark_cpu() {
  uint64_t words[2] = {};
  mark_cpu(words, 2, 3);
  mark_cpu(words, 2, 64);
  mark_cpu(words, 2, -1);   // not known: nothing
  mark_cpu(words, 2, 500);  // past the words: nothing
  EXPECT(words[0] == (uint64_t{1} << 3));
  EXPECT(words[1] == 1);
}

void test_moves() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  EXPECT(sched_getaffinity(0, sizeof(mask), &mask) == 0);
  const uint64_t moves_before = cpu_moves();
  uint64_t taken[16] = {};
  const int here = current_cpu();
  EXPECT(here >= 0);
  if (CPU_COUNT(&mask) < 2) {
    // Nowhere to go.
    EXPECT(!move_off_cpu(taken, 16));
    EXPECT(cpu_moves() == moves_before);
    std::printf("one CPU: the moves were not tried\n");
    return;
  }
  mark_cpu(taken, 16, here);
  EXPECT(move_off_cpu(taken, 16));
  const int there = current_cpu();
  EXPECT(there != here);
  EXPECT(CPU_ISSET(there, &mask));
  cpu_set_t after;
  CPU_ZERO(&after);
  EXPECT(sched_getaffinity(0, sizeof(after), &after) == 0);
  EXPECT(same_mask(after, mask));  // the whole mask back
  EXPECT(cpu_moves() == moves_before + 1);
  // At most once a millisecond.
  EXPECT(!move_off_cpu(taken, 16));
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  // Every CPU of the mask taken: stays.
  uint64_t all[16] = {};
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) mark_cpu(all, 16, c);
  }
  const int now = current_cpu();
  EXPECT(!move_off_cpu(all, 16));
  EXPECT(current_cpu() == now);
  EXPECT(cpu_moves() == moves_before + 1);
}

}  // namespace

int main() {
  test_mark_cpu();
  test_moves();
  std::printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
