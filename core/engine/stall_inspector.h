// Rank 0's watch over tensors that some ranks enqueued and others did not.
//
// Every rank keeps the same stall clocks (when a cached tensor became
// pending on some rank but not on all; table entries carry their own), so
// that any rank could inspect; rank 0 does. Past RINGCC_STALL_CHECK_S it
// warns, naming the tensors and the ranks they wait on; past
// RINGCC_STALL_SHUTDOWN_S it gives up on them: their names go out in its
// next message (Negotiation) and they fail on every rank. A join waits
// likewise while the ranks that have not joined make no progress.
#pragma once

#include <string>
#include <vector>

#include "core/engine/negotiation.h"
#include "core/engine/response_cache.h"

namespace ringcc {

class StallInspector {
 public:
  StallInspector(double check_s, double shutdown_s) : check_s_(check_s), shutdown_s_(shutdown_s) {}

  // Room for every bit the cache may hand out.
  void resize_bits(size_t cache_capacity);

  // After a cycle's negotiation (before ready tensors run): starts the
  // clock of each cached tensor pending on some rank but not on all, and
  // stops those no longer pending anywhere.
  void track_bits(const Negotiation& negotiation, const ResponseCache& cache, double now);
  // A cached tensor ran, or failed: its clock stops.
  void stop(size_t bit) { first_seen_[bit] = 0; }
  bool stalling(size_t bit) const { return first_seen_[bit] != 0; }

  // Rank 0, every cycle: a join that some ranks made waits while the
  // others make no progress (`progressed`: a named collective ran).
  void track_join(bool some_joined, bool all_joined, bool progressed, double now);

  // Rank 0: warns of what waits longer than the check time (the text of
  // the warning is returned, "" when there is none) and gives up on what
  // waits longer than the shutdown time (aborts()).
  std::string inspect(Negotiation& negotiation, const ResponseCache& cache, double now);
  // The names given up on, for the next message ("" stands for the join).
  const std::vector<std::string>& aborts() const { return aborts_; }
  void clear_aborts() { aborts_.clear(); }

 private:
  // Tensors stalled for longer than the shutdown time less this are given
  // up on together with one past it.
  double kindred_window_s() const {
    const double window = check_s_ > 1.0 ? check_s_ : 1.0;
    return window < shutdown_s_ / 2 ? window : shutdown_s_ / 2;
  }

  double check_s_, shutdown_s_;
  std::vector<double> first_seen_;   // per bit: pending since (0: not pending)
  std::vector<int> clocked_;         // the bits whose first_seen_ may be set
  std::vector<double> last_warned_;  // per bit
  double join_pending_since_ = 0;    // 0: no join pending
  double join_last_warned_ = 0;
  bool join_abort_sent_ = false;
  std::vector<std::string> aborts_;
};

}  // namespace ringcc
