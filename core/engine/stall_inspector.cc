#include "core/engine/stall_inspector.h"

#include <functional>
#include <sstream>

namespace ringcc {

void StallInspector::resize_bits(size_t cache_capacity) {
  first_seen_.assign(cache_capacity, 0.0);
  last_warned_.assign(cache_capacity, 0.0);
  clocked_.clear();
}

void StallInspector::track_bits(const Negotiation& negotiation, const ResponseCache& cache, double now) {
  // Bits no longer pending anywhere stop their clocks.
  size_t kept = 0;
  for (int bit : clocked_) {
    const auto b = static_cast<size_t>(bit);
    if (first_seen_[b] != 0 && negotiation.pending_anywhere(b)) {
      clocked_[kept++] = bit;
    } else {
      first_seen_[b] = 0;
    }
  }
  clocked_.resize(kept);
  // Pending here and there, not everywhere: the clock starts.
  const std::string& any = negotiation.any_bits();
  const std::string& all = negotiation.all_bits();
  for (size_t k = 0; k < any.size(); ++k) {
    const auto waiting = static_cast<uint8_t>(any[k] & ~all[k]);
    if (!waiting) continue;
    for (int j = 0; j < 8; ++j) {
      const size_t b = k * 8 + static_cast<size_t>(j);
      if (!(waiting & (1 << j)) || b >= cache.size() || negotiation.in_table(b) || first_seen_[b] != 0) continue;
      first_seen_[b] = now;
      clocked_.push_back(static_cast<int>(b));
    }
  }
}

void StallInspector::track_join(bool some_joined, bool all_joined, bool progressed, double now) {
  // A join waits while the ranks that have not joined make no progress:
  // its clock restarts whenever a named collective runs.
  if (!some_joined || all_joined) {
    join_pending_since_ = 0;
    join_abort_sent_ = false;
  } else if (join_pending_since_ == 0 || progressed) {
    join_pending_since_ = now;
    join_last_warned_ = now;
  }
}

std::string StallInspector::inspect(Negotiation& negotiation, const ResponseCache& cache, double now) {
  std::ostringstream report;
  int stalled = 0;
  struct Stall {
    std::string name;
    double age;
    double* last_warned;
    std::function<std::vector<int>()> missing;
  };
  // Rank 0 inspects every cycle, while a training step's tensors wait on
  // the slower ranks by the thousand: only those old enough to be warned
  // of or given up on (below) are listed, so that a cycle copies no names.
  double young = check_s_ > 0 ? check_s_ : 0;  // nothing is done at this age or below
  if (shutdown_s_ > 0) {
    const double giving_up = shutdown_s_ - kindred_window_s();
    if (check_s_ <= 0 || giving_up < young) young = giving_up;
  }
  std::vector<Stall> stalls;
  if (check_s_ > 0 || shutdown_s_ > 0) {
    for (auto& [name, e] : negotiation.table()) {
      TableEntry* entry = e.get();
      if (now - entry->first_seen <= young) continue;
      stalls.push_back({name, now - entry->first_seen, &entry->last_warned,
                        [&negotiation, entry] { return negotiation.missing_ranks(*entry); }});
    }
    for (int bit : clocked_) {
      const auto b = static_cast<size_t>(bit);
      if (first_seen_[b] == 0 || now - first_seen_[b] <= young || !negotiation.pending_anywhere(b)) continue;
      if (last_warned_[b] < first_seen_[b]) last_warned_[b] = first_seen_[b];
      stalls.push_back({cache.name(b), now - first_seen_[b], &last_warned_[b],
                        [&negotiation, b] { return negotiation.missing_ranks(b); }});
    }
  }
  // One mismatch stalls several tensors whose clocks start a little apart
  // (the ranks reach their calls at different times). Giving up on them in
  // different cycles would let a rank that already failed shut down before
  // the others' tensors fail, and they would report its shutdown instead of
  // the stall; so what has stalled almost as long goes with the first.
  double give_up_age = shutdown_s_;
  if (shutdown_s_ > 0) {
    for (const Stall& s : stalls) {
      if (s.age > shutdown_s_) give_up_age = shutdown_s_ - kindred_window_s();
    }
  }
  for (const Stall& s : stalls) {
    if (shutdown_s_ > 0 && s.age > give_up_age) {
      aborts_.push_back(s.name);
    } else if (check_s_ > 0 && s.age > check_s_ && now - *s.last_warned >= check_s_) {
      *s.last_warned = now;
      report << "\n  " << s.name << ": waiting on rank(s) " << rank_list(s.missing()) << " for "
             << static_cast<int>(s.age) << " s";
      ++stalled;
    }
  }
  if (join_pending_since_ > 0 && !join_abort_sent_) {
    const double age = now - join_pending_since_;
    if (shutdown_s_ > 0 && age > shutdown_s_) {
      aborts_.push_back("");  // no name is empty: this is the join
      join_abort_sent_ = true;
    } else if (check_s_ > 0 && age > check_s_ && now - join_last_warned_ >= check_s_) {
      join_last_warned_ = now;
      std::vector<int> missing;
      const std::vector<bool>& joined = negotiation.joined();
      for (size_t r = 0; r < joined.size(); ++r) {
        if (!joined[r]) missing.push_back(static_cast<int>(r));
      }
      report << "\n  join(): waiting on rank(s) " << rank_list(missing) << " for " << static_cast<int>(age) << " s";
      ++stalled;
    }
  }
  if (!stalled) return "";
  return "stall: " + std::to_string(stalled) +
         " tensor(s) were enqueued by some ranks but not by others (RINGCC_STALL_CHECK_S):" + report.str();
}

}  // namespace ringcc
