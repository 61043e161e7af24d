// Where a thread runs, and moving a waiting thread off the CPU that the
// peer it waits for last ran on.
//
// On a host with a CPU for every rank, the scheduler can still leave two
// ranks' threads on one CPU while another CPU idles: a wake-up puts the
// woken thread beside its waker or where it last ran, and a thread that
// ran within the last half millisecond counts as cache-hot, so an idle CPU
// does not pull it over. Two ranks' threads in a collective then take
// turns on one CPU, each phase waiting for the other's time slice: a
// fused 4 MB allreduce of 2 ranks on 2 CPUs took 1.3-2.9 ms so placed
// against 0.5-0.9 ms on a CPU each. A waiter that finds its peer's last
// CPU is its own moves to another CPU of its affinity mask, then takes the
// whole mask back, so that only this one move is forced.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringcc {

// The CPU the calling thread runs on, or -1 where that is not known.
int current_cpu();

// Whether waiting threads move off their peers' CPUs
// (RINGCC_MOVE_OFF_PEER_CPU, 1 by default; 0 leaves placement to the
// scheduler).
bool moves_off_peer_cpu();

// Sets bit `cpu` of `words` (n_words of them); ignores -1 and CPUs past them.
void mark_cpu(uint64_t* words, size_t n_words, int cpu);

// Moves the calling thread to a CPU of its affinity mask that is neither
// the one it runs on nor marked in `taken`, and gives it back its whole
// mask. At most one move per millisecond per thread (a move costs a few
// microseconds; a thread that keeps landing beside a peer is not chased
// around). False when it did not move.
bool move_off_cpu(const uint64_t* taken, size_t n_words);

// How many times move_off_cpu() moved a thread of this process.
uint64_t cpu_moves();

}  // namespace ringcc
