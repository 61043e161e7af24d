#include "core/transport/transport.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/os/wait_policy.h"

namespace ringcc {

namespace {

std::string pending_peers(const std::vector<Request*>& pending) {
  std::string out;
  for (const Request* r : pending) {
    if (!out.empty()) out += ", ";
    out += std::to_string(r->peer());
  }
  return out;
}

[[noreturn]] void raise_timeout(const std::vector<Request*>& pending, const char* what) {
  raise(ErrorKind::kTimeout, "timed out in ", what, " waiting for rank(s) ", pending_peers(pending),
        " (RINGCC_COLLECTIVE_TIMEOUT_S sets the limit of a collective, RINGCC_TIMEOUT_S of joining the job)");
}

// Progresses `all`; returns true when `done` says the wait is over.
template <typename Done>
void drive(std::vector<Request*> all, Deadline deadline, const char* what, Done done) {
  // How long to poll before blocking, and whether to give the CPU away
  // between polls (wait_policy.h).
  WaitPlan& plan = WaitPlan::current();
  const auto started = Clock::now();
  bool within_budget = true;
  auto finish = [&] {
    plan.finished(within_budget, std::chrono::duration<double, std::micro>(Clock::now() - started).count());
  };
  const bool yielding = plan.mode() == WaitMode::kYield;
  auto spin_until = started + plan.budget();
  // Blocking waiters skip the rounds of sched_yield() too.
  const int yield_rounds = plan.mode() == WaitMode::kBlock ? 0 : 16;
  int idle_rounds = 0;
  std::vector<pollfd> fds;
  for (;;) {
    bool advanced = false;
    for (size_t i = 0; i < all.size();) {
      if (all[i]->progress()) {
        all.erase(all.begin() + static_cast<std::ptrdiff_t>(i));
        advanced = true;
      } else {
        ++i;
      }
    }
    if (done(all)) return finish();
    if (advanced) {
      spin_until = Clock::now() + plan.budget();
      idle_rounds = 0;
      continue;
    }
    auto now = Clock::now();
    if (now >= deadline) raise_timeout(all, what);
    if (now < spin_until) {
      if (yielding) sched_yield();
      continue;
    }
    within_budget = false;
    if (++idle_rounds < yield_rounds) {
      sched_yield();
      continue;
    }
    // Sleep until any pending request can move: on all their descriptors
    // at once when they have some, else on the first one in short slices
    // so the others are polled too.
    poll_interrupt();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    fds.clear();
    bool pollable = true;
    for (Request* r : all) pollable = pollable && r->add_pollfds(&fds);
    if (pollable && !fds.empty()) {
      ::poll(fds.data(), fds.size(),
             interrupt_slice_ms(static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(100, left)))));
      continue;
    }
    int slice = all.size() > 1 ? 1 : 100;
    all.front()->block(interrupt_slice_ms(static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(slice, left)))));
  }
}

}  // namespace

void wait_all(const std::vector<Request*>& requests, Deadline deadline, const char* what) {
  drive(requests, deadline, what, [](const std::vector<Request*>& left) { return left.empty(); });
}

void wait_one(Request* target, const std::vector<Request*>& others, Deadline deadline, const char* what) {
  std::vector<Request*> all{target};
  all.insert(all.end(), others.begin(), others.end());
  drive(all, deadline, what, [target](const std::vector<Request*>& left) {
    return std::find(left.begin(), left.end(), target) == left.end();
  });
}

size_t ring_chunk_bytes_from_env() {
  return static_cast<size_t>(std::max<int64_t>(env_int("RINGCC_CHUNK_BYTES", 1 << 20), 4096));
}

size_t ring_chunk_bytes() {
  static const size_t bytes = ring_chunk_bytes_from_env();
  return bytes;
}

uint64_t one_way_bytes_from_env() {
  return static_cast<uint64_t>(std::max<int64_t>(env_int("RINGCC_TCP_ONE_WAY_BYTES", 8 << 20), 0));
}

uint64_t one_way_bytes() {
  static const uint64_t bytes = one_way_bytes_from_env();
  return bytes;
}

Transport* one_way_for(Transport* t, uint64_t bytes) { return bytes < one_way_bytes() ? t->one_way() : t; }

}  // namespace ringcc
