// Interrupting blocking waits. A wait made on behalf of a caller that can
// take signals (in the Python bindings: the interpreter's main thread) asks
// a hook, registered by the bindings, whether it should stop: the hook runs
// pending signal handlers, and when one raised, the wait throws
// Error(kInterrupted) so the caller can re-raise the handler's exception.
// The core knows nothing of the framework: it only calls the hook, and only
// on threads that entered an InterruptibleWait (never on its own threads).
#pragma once

#include <chrono>

namespace ringcc {

// Returns true when the wait should stop (the hook keeps the reason, e.g.
// the Python exception a signal handler raised). Called without any lock
// of the core held.
using InterruptHook = bool (*)();

void set_interrupt_hook(InterruptHook hook);

// How often an interruptible wait asks the hook, and so the longest a wait
// sleeps without asking.
constexpr std::chrono::milliseconds kInterruptPoll{50};

// While alive, the waits of this thread ask the hook (at most every
// kInterruptPoll). Nests.
class InterruptibleWait {
 public:
  explicit InterruptibleWait(bool enable = true);
  ~InterruptibleWait();
  InterruptibleWait(const InterruptibleWait&) = delete;
  InterruptibleWait& operator=(const InterruptibleWait&) = delete;

 private:
  bool previous_;
};

// While alive, the waits of this thread do not ask the hook (for clean-up
// that must finish after an interruption).
class UninterruptibleWait {
 public:
  UninterruptibleWait();
  ~UninterruptibleWait();
  UninterruptibleWait(const UninterruptibleWait&) = delete;
  UninterruptibleWait& operator=(const UninterruptibleWait&) = delete;

 private:
  bool previous_;
};

// True when this thread's waits ask the hook.
bool interruptible();

// Called by wait loops before they sleep: on an interruptible thread, asks
// the hook once kInterruptPoll has passed since the last time; throws
// Error(kInterrupted) when it says stop. Cheap otherwise.
void poll_interrupt();

// The longest an interruptible thread may sleep in one go: `ms`, capped at
// kInterruptPoll when this thread's waits ask the hook.
int interrupt_slice_ms(int ms);

}  // namespace ringcc
