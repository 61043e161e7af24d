#include "core/base/interrupt.h"

#include <algorithm>
#include <atomic>

#include "core/base/error.h"

namespace ringcc {

namespace {

std::atomic<InterruptHook> g_hook{nullptr};

thread_local bool t_interruptible = false;
// When the hook was last asked; a wait that just started asks after one
// poll period, so short waits never pay for it.
thread_local std::chrono::steady_clock::time_point t_next_poll{};

}  // namespace

void set_interrupt_hook(InterruptHook hook) { g_hook.store(hook); }

InterruptibleWait::InterruptibleWait(bool enable) : previous_(t_interruptible) {
  if (enable && !t_interruptible) {
    t_interruptible = true;
    t_next_poll = std::chrono::steady_clock::time_point{};
  }
}

InterruptibleWait::~InterruptibleWait() { t_interruptible = previous_; }

UninterruptibleWait::UninterruptibleWait() : previous_(t_interruptible) { t_interruptible = false; }

UninterruptibleWait::~UninterruptibleWait() {
  t_interruptible = previous_;
  t_next_poll = std::chrono::steady_clock::time_point{};
}

bool interruptible() { return t_interruptible; }

void poll_interrupt() {
  if (!t_interruptible) return;
  const auto now = std::chrono::steady_clock::now();
  if (t_next_poll == std::chrono::steady_clock::time_point{}) {
    t_next_poll = now + kInterruptPoll;
    return;
  }
  if (now < t_next_poll) return;
  t_next_poll = now + kInterruptPoll;
  InterruptHook hook = g_hook.load();
  if (hook && hook()) {
    t_next_poll = std::chrono::steady_clock::time_point{};
    raise(ErrorKind::kInterrupted, "interrupted by a signal");
  }
}

int interrupt_slice_ms(int ms) {
  if (!t_interruptible) return ms;
  return std::max(1, std::min(ms, static_cast<int>(kInterruptPoll.count())));
}

}  // namespace ringcc
