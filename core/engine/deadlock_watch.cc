#include "core/engine/deadlock_watch.h"

#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

#include "core/base/env.h"
#include "core/engine/stall_inspector.h"

namespace ringcc {

namespace {

// Enough to recognise the names; the count tells the rest.
constexpr size_t kNamesPerRank = 4;
constexpr int kRanksListed = 16;
constexpr size_t kAutomaticNamesShown = 3;

// A pending name, the ranks that enqueued it and the ranks it waits for.
struct PendingName {
  const std::string* name;
  std::vector<int> holders;
  std::vector<int> missing;
};

// The names Horovod's API gives calls without one, "<op>.noname.<n>" from
// a count of each process's own (ringcc.torch and ringcc.mxnet do the
// same): ranks that issued different numbers of unnamed calls name the
// same call differently.
bool automatic_name(const std::string& name) { return name.find(".noname.") != std::string::npos; }

std::string why_not(const PendingName& p) {
  if (p.holders.size() == 1) return "enqueued on rank " + std::to_string(p.holders[0]) + " only";
  return "not enqueued on rank(s) " + rank_list(p.missing);
}

// Every pending name, the same list on every rank: table entries in the
// order they appeared, then cached names by bit.
std::vector<PendingName> pending_names(const Negotiation& negotiation, const ResponseCache& cache) {
  const int size = negotiation.size();
  std::vector<std::pair<uint64_t, std::pair<const std::string*, const TableEntry*>>> entries;
  for (const auto& [name, e] : negotiation.table()) entries.push_back({e->seq, {&name, e.get()}});
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<PendingName> out;
  for (const auto& [seq, named] : entries) {
    PendingName p{named.first, {}, negotiation.missing_ranks(*named.second)};
    for (int r = 0; r < size; ++r) {
      if (named.second->submitted[static_cast<size_t>(r)]) p.holders.push_back(r);
    }
    out.push_back(std::move(p));
  }
  for (size_t b = 0; b < cache.size(); ++b) {
    if (!negotiation.pending_anywhere(b) || negotiation.in_table(b)) continue;
    PendingName p{&cache.name(b), {}, negotiation.missing_ranks(b)};
    for (int r = 0; r < size; ++r) {
      if (negotiation.has_bit(r, b)) p.holders.push_back(r);
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

bool deadlocked(const CycleNews& news, const Negotiation& negotiation, bool any_ready) {
  return news.all_waiting && !news.changed && !news.any_new && !any_ready && news.aborts.empty() &&
         news.shut_down.empty() && negotiation.any_pending();
}

std::string describe_deadlock(const Negotiation& negotiation, const ResponseCache& cache, double bound_s) {
  const std::vector<PendingName> names = pending_names(negotiation, cache);
  const std::vector<bool>& joined = negotiation.joined();
  std::ostringstream os;
  os << "deadlock: every rank waits for named collectives that the other ranks will not enqueue (none is "
        "enqueued on every rank that has not joined, and nothing changed for "
     << bound_s << " s, " << collective_timeout_variable() << "):";
  const int size = negotiation.size();
  for (int r = 0; r < size && r < kRanksListed; ++r) {
    os << "\n  rank " << r;
    if (joined[static_cast<size_t>(r)]) {
      os << ": joined (takes part with zeros)";
      continue;
    }
    size_t count = 0;
    for (const PendingName& p : names) {
      if (!std::binary_search(p.holders.begin(), p.holders.end(), r)) continue;
      if (count < kNamesPerRank) os << (count ? ", '" : ": '") << *p.name << "' (" << why_not(p) << ")";
      ++count;
    }
    if (count == 0) os << ": no name pending";
    if (count > kNamesPerRank) os << " and " << count - kNamesPerRank << " more";
  }
  if (size > kRanksListed) os << "\n  ... and " << size - kRanksListed << " more ranks";
  std::vector<const std::string*> automatic;
  for (const PendingName& p : names) {
    if (automatic_name(*p.name)) automatic.push_back(p.name);
  }
  if (!automatic.empty()) {
    os << "\n  ";
    for (size_t i = 0; i < automatic.size() && i < kAutomaticNamesShown; ++i) {
      os << (i ? ", '" : "'") << *automatic[i] << "'";
    }
    if (automatic.size() > kAutomaticNamesShown) os << " and " << automatic.size() - kAutomaticNamesShown << " more";
    os << (automatic.size() == 1 ? " is the automatic name" : " are automatic names")
       << " of unnamed ops (<op>.noname.<n>, counted by each process): ranks issued a different number of "
          "unnamed ops before this point";
  }
  return os.str();
}

}  // namespace ringcc
