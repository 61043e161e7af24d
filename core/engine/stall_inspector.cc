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
  auto consider = [&](const std::string& name, double first_seen, double* last_warned,
                      const std::function<std::vector<int>()>& missing) {
    const double age = now - first_seen;
    if (shutdown_s_ > 0 && age > shutdown_s_) {
      aborts_.push_back(name);
      return;
    }
    if (check_s_ > 0 && age > check_s_ && now - *last_warned >= check_s_) {
      *last_warned = now;
      report << "\n  " << name << ": waiting on rank(s) " << rank_list(missing()) << " for " << static_cast<int>(age)
             << " s";
      ++stalled;
    }
  };
  for (auto& [name, e] : negotiation.table()) {
    TableEntry* entry = e.get();
    consider(name, entry->first_seen, &entry->last_warned, [&] { return negotiation.missing_ranks(*entry); });
  }
  for (int bit : clocked_) {
    const auto b = static_cast<size_t>(bit);
    if (first_seen_[b] == 0 || !negotiation.pending_anywhere(b)) continue;
    if (last_warned_[b] < first_seen_[b]) last_warned_[b] = first_seen_[b];
    consider(cache.name(b), first_seen_[b], &last_warned_[b], [&] { return negotiation.missing_ranks(b); });
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
