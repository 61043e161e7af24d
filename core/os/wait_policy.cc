#include "core/os/wait_policy.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/base/env.h"
#include "core/base/error.h"

namespace ringcc {

namespace {

std::atomic<bool> g_oversubscribed{false};
std::atomic<int> g_host_ranks{0};  // the most ranks seen sharing this host

// Involuntary context switches of the calling thread: another runnable
// thread took its CPU (a preemption, or a sched_yield() that handed the
// CPU over).
long thread_involuntary_switches() {
  rusage ru{};
  if (getrusage(RUSAGE_THREAD, &ru) != 0) return -1;
  return ru.ru_nivcsw;
}

// A wait this long is worth a look at the context switches: short waits
// (an idle machine's small messages) stay free of the syscall.
constexpr double kLookAfterUs = 20.0;
// Spins that run out this many times in a row halve the budget (down to
// an eighth): a peer that keeps arriving late is not caught by spinning.
constexpr int kFailsPerHalving = 4;
// Long waits without a preemption before a preempted thread spins again.
constexpr int kCalmWaitsToSpin = 16;
// Under contention a waiter spins this fraction of RINGCC_SPIN_US before it
// sleeps: a peer already running arrives within a few microseconds.
constexpr int kContendedSpinDivisor = 8;

// Threads runnable on the machine now (the fourth field of /proc/loadavg,
// "running/total"); -1 when it cannot be read.
int runnable_threads() {
  FILE* f = std::fopen("/proc/loadavg", "re");
  if (!f) return -1;
  double a, b, c;
  int running = -1, total = 0;
  if (std::fscanf(f, "%lf %lf %lf %d/%d", &a, &b, &c, &running, &total) != 5) running = -1;
  std::fclose(f);
  return running;
}

// How often an oversubscribed waiter looks at what else runs.
constexpr auto kRunnableLookEvery = std::chrono::milliseconds(5);
// Consecutive looks that must agree before an oversubscribed waiter changes
// between yielding and sleeping.
constexpr int kLooksToChange = 3;

}  // namespace

const char* wait_mode_name(WaitMode m) {
  switch (m) {
    case WaitMode::kSpin:
      return "spin";
    case WaitMode::kYield:
      return "yield";
    case WaitMode::kBlock:
      return "block";
  }
  return "?";
}

const std::string& wait_policy_setting() {
  static const std::string setting = [] {
    std::string v = env_str("RINGCC_WAIT_POLICY", "auto");
    if (v.empty()) v = "auto";
    if (v != "auto" && v != "spin" && v != "yield" && v != "block") {
      raise(ErrorKind::kInvalidArgument, "RINGCC_WAIT_POLICY must be auto, spin, yield or block, not '", v, "'");
    }
    return v;
  }();
  return setting;
}

void affinity_mask(uint64_t* words, size_t n_words) {
  std::memset(words, 0, n_words * sizeof(uint64_t));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    words[0] = 1;
    return;
  }
  for (size_t c = 0; c < std::min<size_t>(CPU_SETSIZE, n_words * 64); ++c) {
    if (CPU_ISSET(c, &set)) words[c / 64] |= uint64_t{1} << (c % 64);
  }
}

int affinity_cpus() {
  uint64_t words[CPU_SETSIZE / 64];
  affinity_mask(words, CPU_SETSIZE / 64);
  int cpus = 0;
  for (const uint64_t w : words) cpus += __builtin_popcountll(w);
  return std::max(1, cpus);
}

void note_host_sharing(int ranks, int cpus) {
  if (ranks >= 1 && cpus >= 1 && ranks > cpus) g_oversubscribed.store(true);
  int seen = g_host_ranks.load();
  while (ranks > seen && !g_host_ranks.compare_exchange_weak(seen, ranks)) {
  }
}

bool host_oversubscribed() { return g_oversubscribed.load(std::memory_order_relaxed); }

std::chrono::microseconds spin_budget() {
  static const auto budget = std::chrono::microseconds(std::max<int64_t>(env_int("RINGCC_SPIN_US", 50), 0));
  return budget;
}

WaitPlan::WaitPlan() {
  const std::string& s = wait_policy_setting();
  adaptive_ = s == "auto";
  if (s == "yield") mode_ = WaitMode::kYield;
  if (s == "block") mode_ = WaitMode::kBlock;
  decide();
}

WaitPlan& WaitPlan::current() {
  thread_local WaitPlan plan;
  return plan;
}

void WaitPlan::decide() {
  const auto full = spin_budget();
  if (!adaptive_) {
    budget_ = mode_ == WaitMode::kBlock ? std::chrono::microseconds(0) : full;
    return;
  }
  if (host_oversubscribed()) {
    // Ranks outnumber their CPUs. When little else runs, the runnable
    // threads are the job's own ranks: sched_yield() hands the CPU to the
    // rank being waited for at once, far sooner than a futex wake-up (4
    // ranks on 2 idle cores: 8 B allreduce 6.7 us yielding, 26 us
    // sleeping, 110 us spinning). When other threads want the CPUs too (a
    // compiler, a framework's pools), a yield may give a whole time slice
    // to one of them: sleep at once instead. The count of runnable threads
    // decides, looked at every few milliseconds (a yielding thread is
    // switched out involuntarily, so preemption says nothing here).
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_runnable_look_) {
      next_runnable_look_ = now + kRunnableLookEvery;
      // Yielding ranks count as runnable, sleeping ones do not. While this
      // thread yields, more runnable threads than the ranks (this one among
      // them) and one more (a rank's engine thread at its cycle) means
      // others. While it sleeps, the count no longer holds this thread but
      // may hold every other rank, still yielding (each rank decides for
      // itself): it leaves sleep once the count is no more than the ranks.
      // Its yielding peers alone would keep the count above the CPUs, so a
      // limit of the CPUs would leave it asleep for good, and every
      // collective would wait for its futex wake-ups (13 us instead of 6.5
      // at 8 B, 4 ranks on 2 cores).
      const int ranks = g_host_ranks.load(std::memory_order_relaxed);
      const int running = runnable_threads();
      const int limit = crowded_ ? ranks : ranks + 2;
      // One look is a moment: the job's own engine threads at their
      // periodic cycle, a monitoring agent, a kernel worker show up now
      // and then. Load that takes CPUs away persists: the mode changes
      // when consecutive looks agree.
      const bool crowded_now = running < 0 || running > limit;
      streak_ = crowded_now == crowded_ ? 0 : streak_ + 1;
      if (streak_ >= kLooksToChange) {
        crowded_ = crowded_now;
        streak_ = 0;
      }
    }
    mode_ = crowded_ ? WaitMode::kBlock : WaitMode::kYield;
    budget_ = crowded_ ? std::chrono::microseconds(0) : full;
    return;
  }
  if (preempted_) {
    // Others want the CPUs: a waiter sleeps, so that its CPU goes to
    // whoever it waits for (or their compute threads). Yielding does not
    // serve: sched_yield() hands the CPU to any runnable thread for a
    // whole time slice, a compiler's or a matrix product's as well as the
    // peer rank's. A preempted thread spins briefly first.
    mode_ = WaitMode::kBlock;
    budget_ = full / kContendedSpinDivisor;
    return;
  }
  mode_ = WaitMode::kSpin;
  budget_ = full / (1 << std::min(failed_spins_ / kFailsPerHalving, 3));
}

void WaitPlan::finished(bool within_budget, double waited_us) {
  if (!adaptive_) return;
  failed_spins_ = within_budget ? 0 : std::min(failed_spins_ + 1, 64);
  // A thread that does not spin looks now and then even when its waits
  // are short: that is how it learns that nothing else wants the CPU.
  const bool periodic_look = mode_ != WaitMode::kSpin && (++waits_ & 7) == 0;
  // A spin that ran out may have lost its CPU: look at once. A waiter
  // that yields or sleeps outlasts its budget on most waits across a
  // network, where the look (a getrusage() call, 0.4 us) would cost a few
  // percent of a small collective: it looks after long waits and now and
  // then.
  const bool spin_failed = !within_budget && mode_ == WaitMode::kSpin;
  if (waited_us >= kLookAfterUs || spin_failed || periodic_look) {
    const long now = thread_involuntary_switches();
    if (now >= 0 && last_nivcsw_ >= 0) {
      if (now > last_nivcsw_) {
        preempted_ = true;
        calm_waits_ = 0;
      } else if (++calm_waits_ >= kCalmWaitsToSpin) {
        preempted_ = false;
        calm_waits_ = 0;
      }
    }
    last_nivcsw_ = now;
  }
  decide();
}

}  // namespace ringcc
