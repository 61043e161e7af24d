// How a thread waits for a peer (shared-memory phases, transport progress):
// spin, yield the CPU between checks, or sleep in the kernel (futex, poll).
//
// Spinning gives the lowest latency when every waiting rank has a CPU of its
// own; when ranks outnumber CPUs, or other threads (a framework's intra-op
// pool, data loaders) want the CPUs, a spinning waiter holds the very CPU
// the rank it waits for needs. RINGCC_WAIT_POLICY picks:
//   auto   (default) spin while waits stay short and nothing else wants the
//          CPU; when this host runs more ranks than the ranks have CPUs,
//          yield to the peer ranks while little else runs and sleep at once
//          when other threads want the CPUs too; sleep after a short spin
//          while the waiting thread is seen to be preempted (another
//          runnable thread wanted its CPU); shorten the spin while spins
//          keep failing.
//   spin   spin for RINGCC_SPIN_US, then sleep (the idle-machine policy).
//   yield  sched_yield() between checks for RINGCC_SPIN_US, then sleep.
//   block  sleep at once (after a few checks).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ringcc {

enum class WaitMode { kSpin, kYield, kBlock };

const char* wait_mode_name(WaitMode m);

// RINGCC_WAIT_POLICY as read (auto, spin, yield or block); raises on an
// unknown value.
const std::string& wait_policy_setting();

// CPUs in this process's affinity mask (sched_getaffinity), at least 1.
int affinity_cpus();
// The mask itself, bit c of words[c / 64] for CPU c (CPU 0 alone where it
// cannot be read), for the ranks of a host to join theirs.
void affinity_mask(uint64_t* words, size_t n_words);

// Tells the policy how many ranks share this host and how many distinct
// CPUs they may run on together (the union of their affinity masks). Under
// auto, ranks > cpus makes every wait sleep at once. Process-wide: once any
// group of this process was oversubscribed, the host counts as such.
void note_host_sharing(int ranks, int cpus);
bool host_oversubscribed();

// The spin budget (RINGCC_SPIN_US, default 50).
std::chrono::microseconds spin_budget();

// One thread's plan for its waits, adapted from what its earlier waits
// saw. Not shared between threads (each waiting thread keeps its own,
// thread_local).
class WaitPlan {
 public:
  // How to wait this time, and for how long before sleeping.
  WaitMode mode() const { return mode_; }
  std::chrono::microseconds budget() const { return budget_; }
  bool adaptive() const { return adaptive_; }  // RINGCC_WAIT_POLICY=auto

  // Call when a wait ended: whether it ended before the budget ran out
  // (false: it went to sleep), and how long it took (a long one is worth a
  // look at the thread's context switches, a syscall).
  void finished(bool within_budget, double waited_us);

  // The plan of the calling thread, re-read from the settings on first use.
  static WaitPlan& current();

 private:
  WaitPlan();
  void decide();

  WaitMode mode_ = WaitMode::kSpin;
  std::chrono::microseconds budget_{50};
  bool adaptive_ = true;
  int failed_spins_ = 0;    // consecutive waits whose spin ran out
  unsigned waits_ = 0;      // waits not in spin mode, for the periodic look
  int calm_waits_ = 0;      // consecutive long waits with no preemption seen
  bool preempted_ = false;  // recently preempted while waiting
  long last_nivcsw_ = -1;   // the thread's involuntary switches at the last look
  bool crowded_ = false;    // oversubscribed, and threads beyond the ranks want CPUs
  int streak_ = 0;          // consecutive looks that disagreed with crowded_
  std::chrono::steady_clock::time_point next_runnable_look_{};
};

}  // namespace ringcc
