// Meeting the other ranks of the host at a phase: arriving, waiting for
// the peers (spin, yield or sleep as the wait policy says, bounded by the
// deadline, failing at once on a peer that aborted, left or died), and
// aborting or leaving so that waiting peers learn of it.
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>

#include "core/algorithms/shm_collectives.h"
#include "core/algorithms/shm_control.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/os/cpu_placement.h"
#include "core/os/shm_segment.h"
#include "core/os/wait_policy.h"

namespace ringcc {

void ShmCollectives::abort(const std::string& reason) {
  ShmControl* ctl = control(me_);
  if (ctl->aborted.load()) return;
  std::snprintf(ctl->reason, sizeof(ctl->reason), "%s", reason.c_str());
  ctl->aborted.store(1);
  futex_wake_all(&ctl->phase);  // sleepers re-check and see the flag
  // Our own waits sleep on the peers' words: wake them too.
  for (int i = 0; i < size(); ++i) {
    if (i != me_) futex_wake_all(&control(i)->phase);
  }
}

void ShmCollectives::leave() {
  ShmControl* ctl = control(me_);
  ctl->left.store(1);
  futex_wake_all(&ctl->phase);
}

void ShmCollectives::wait_for_peer(int peer, uint32_t phase, Deadline dl, const char* what) {
  ShmControl* ctl = control(peer);
  // A peer that aborted never arrives: its flag is checked before every
  // return, so nobody reads an area its owner gave up on.
  ShmControl* self = control(me_);
  auto arrived = [&] {
    if (self->aborted.load(std::memory_order_relaxed)) {
      raise(ErrorKind::kPeerFailure, "this rank aborted: ", self->reason);
    }
    if (ctl->aborted.load(std::memory_order_acquire)) {
      raise(ErrorKind::kPeerFailure, "rank ", ranks_[static_cast<size_t>(peer)], " aborted: ", ctl->reason);
    }
    if (reached(ctl->phase.load(std::memory_order_acquire), phase)) return true;
    // A rank that left finished every phase it will ever reach: the ones
    // above cannot come.
    if (ctl->left.load(std::memory_order_acquire) && !reached(ctl->phase.load(std::memory_order_acquire), phase)) {
      raise(ErrorKind::kPeerFailure, "rank ", ranks_[static_cast<size_t>(peer)],
            " shut ringcc down (it left the job) while this rank waited for it in ", what);
    }
    return false;
  };
  if (arrived()) return;
  struct Waiting {
    std::atomic<int>& rank;
    ~Waiting() { rank.store(-1, std::memory_order_relaxed); }
  } waiting{waiting_for_};
  waiting_for_.store(ranks_[static_cast<size_t>(peer)], std::memory_order_relaxed);
  const auto waiting_since = Clock::now();
  WaitPlan& plan = WaitPlan::current();
  auto done_waiting = [&](bool within_budget) {
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - waiting_since).count();
    peer_wait_us_ += us;
    plan.finished(within_budget, us);
  };
  // The peer last ran on this CPU: it may be waiting for it behind us
  // (cpu_placement.h). Where the ranks have a CPU each, move off.
  if (plan.adaptive() && !host_oversubscribed() && moves_off_peer_cpu() &&
      ctl->cpu.load(std::memory_order_relaxed) == current_cpu()) {
    uint64_t taken[16] = {};
    for (int i = 0; i < size(); ++i) mark_cpu(taken, 16, control(i)->cpu.load(std::memory_order_relaxed));
    move_off_cpu(taken, 16);
  }
  WaitMode mode = plan.mode();
  auto budget = plan.budget();
  if (bulk_ && mode == WaitMode::kBlock && plan.adaptive() && !host_oversubscribed()) {
    // A preempted thread between the long copies of a large collective:
    // the peer is copying too and arrives soon, a futex wake-up later than
    // a spin would see it.
    mode = WaitMode::kSpin;
    budget = spin_budget();
  }
  const auto spin_until = waiting_since + budget;
  if (mode == WaitMode::kYield) {
    while (Clock::now() < spin_until) {
      sched_yield();
      if (arrived()) return done_waiting(true);
    }
  } else {
    do {
      for (int k = 0; k < 64; ++k) {
        if (arrived()) return done_waiting(true);
      }
    } while (Clock::now() < spin_until);
  }
  for (;;) {
    poll_interrupt();
    ctl->sleepers.fetch_add(1);
    uint32_t seen = ctl->phase.load();
    if (!reached(seen, phase) && !ctl->aborted.load() && !ctl->left.load()) {
      futex_wait(&ctl->phase, seen, 50);
    }
    ctl->sleepers.fetch_sub(1);
    if (arrived()) return done_waiting(false);
    if (!process_alive(ctl->pid)) {
      raise(ErrorKind::kPeerFailure, "rank ", ranks_[static_cast<size_t>(peer)], " (pid ", ctl->pid,
            ") exited or crashed during ", what);
    }
    if (Clock::now() >= dl) {
      raise(ErrorKind::kTimeout, "timed out after ", collective_timeout_seconds(), " s in ", what, " waiting for rank ",
            ranks_[static_cast<size_t>(peer)], " (", collective_timeout_variable(), " sets the limit)");
    }
  }
}

void ShmCollectives::sync(Deadline dl, const char* what) {
  ShmControl* ctl = control(me_);
  ++phase_;
  ctl->cpu.store(current_cpu(), std::memory_order_relaxed);
  ctl->phase.store(phase_);
  if (ctl->sleepers.load()) futex_wake_all(&ctl->phase);
  for (int i = 0; i < size(); ++i) {
    if (i != me_) wait_for_peer(i, phase_, dl, what);
  }
}

}  // namespace ringcc
