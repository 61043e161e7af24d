// The engine's watch for a deadlock: every rank has a caller blocked on the
// engine (a handle's wait, synchronize, join) and no pending name is
// enqueued on every rank that has not joined, so nothing can run until
// some rank enqueues more, and no rank will: its callers all wait.
//
// Another thread of a blocked process could still enqueue (a hook, a
// thread of the caller's own), so the state counts as a deadlock only
// once it has held, unchanged, for RINGCC_TIMEOUT_S, the bound of every
// other wait of ringcc. Every rank sees the same state in the same cycle
// (negotiation.h); rank 0's clock decides, and its next message
// (kFlagDeadlock) makes every rank fail the pending names in the same
// cycle, if the state still holds there.
#pragma once

#include <string>

#include "core/engine/negotiation.h"
#include "core/engine/response_cache.h"

namespace ringcc {

class DeadlockWatch {
 public:
  // Each cycle, once its ready tensors are known: `stuck` is whether this
  // cycle's state is such a deadlock (deadlocked()). Returns true once it
  // has held for bound_s on this rank's clock.
  bool observe(bool stuck, double bound_s, double now) {
    if (!stuck) {
      since_ = 0;
      return false;
    }
    if (since_ == 0) since_ = now;
    return now - since_ >= bound_s;
  }
  void reset() { since_ = 0; }

 private:
  double since_ = 0;  // stuck since (0: not stuck)
};

// Whether the cycle left every rank stuck: every rank waits on the engine,
// nothing ran or failed, no rank's pending names changed, and some are
// pending. (Anything enqueued on every rank that has not joined would have
// been ready.) The same answer on every rank.
bool deadlocked(const CycleNews& news, const Negotiation& negotiation, bool any_ready);

// The error of a deadlock, the same on every rank: each rank's pending
// names (the first few, and how many more) and why none can run, naming
// the automatic names of unnamed calls as such.
std::string describe_deadlock(const Negotiation& negotiation, const ResponseCache& cache, double bound_s);

}  // namespace ringcc
