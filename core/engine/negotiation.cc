#include "core/engine/negotiation.h"

#include <algorithm>
#include <sstream>

#include "core/base/error.h"
#include "core/base/wire.h"

namespace ringcc {

void MessageBuilder::announce(const std::string& name, const TensorMeta& meta) {
  put_string(&announced_, name);
  meta.serialize(&announced_);
  ++count_;
}

void MessageBuilder::announce_failed(const std::string& name, const TensorMeta& meta, CollectiveKind kind,
                                     const std::string& reason) {
  announce(name, meta);
  // What failed and why travel after the description (kept out of
  // TensorMeta, which every pending entry of a training loop holds).
  put_u32(&announced_, static_cast<uint32_t>(kind));
  put_string(&announced_, reason);
}

void MessageBuilder::finish(uint8_t flags, const std::string& bits, const std::vector<std::string>& aborts,
                            std::string* out, const std::vector<std::string>& withdrawn) const {
  out->clear();
  out->push_back(static_cast<char>(flags));
  put_string(out, bits);
  put_u32(out, static_cast<uint32_t>(withdrawn.size()));
  for (const auto& name : withdrawn) put_string(out, name);
  put_u32(out, count_);
  out->append(announced_);
  put_u32(out, static_cast<uint32_t>(aborts.size()));
  for (const auto& name : aborts) put_string(out, name);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  os << "]";
  return os.str();
}

Negotiation::Negotiation(int size) : size_(size), joined_(static_cast<size_t>(size), false) {}

void Negotiation::resize_bits(size_t cache_capacity) {
  const size_t bytes = (cache_capacity + 7) / 8;
  any_bits_.assign(bytes, '\0');
  all_bits_.assign(bytes, '\0');
  bit_in_table_.assign(cache_capacity, 0);
  rank_bits_.assign(static_cast<size_t>(size_), std::string());
}

TableEntry& Negotiation::entry_for(const std::string& name, double now) {
  auto& slot = table_[name];
  if (!slot) {
    slot = std::make_unique<TableEntry>();
    slot->seq = table_seq_++;
    slot->submitted.assign(static_cast<size_t>(size_), 0);
    slot->metas.resize(static_cast<size_t>(size_));
    slot->first_seen = now;
    slot->last_warned = now;
  }
  return *slot;
}

void Negotiation::apply(const std::vector<std::string>& messages, const ResponseCache& cache, double now,
                        CycleNews* news) {
  news->joined.assign(static_cast<size_t>(size_), false);
  news->shut_down.clear();
  news->aborts.clear();
  news->dropped.clear();
  news->any_new = false;
  news->all_waiting = true;
  news->changed = false;
  news->deadlock_called = false;
  const size_t nbytes = any_bits_.size();
  std::fill(any_bits_.begin(), any_bits_.end(), '\0');
  for (int r = 0; r < size_; ++r) {
    const std::string& m = messages[static_cast<size_t>(r)];
    size_t pos = 0;
    if (m.empty()) raise(ErrorKind::kInternal, "empty negotiation message from rank ", r);
    const uint8_t flags = get_u8(m, &pos);
    news->joined[static_cast<size_t>(r)] = flags & kFlagJoined;
    if (flags & kFlagShutdown) news->shut_down.push_back(r);
    news->all_waiting = news->all_waiting && (flags & kFlagWaiting);
    news->changed = news->changed || (flags & kFlagNews);
    if (r == 0 && (flags & kFlagDeadlock)) news->deadlock_called = true;
    std::string& bits = rank_bits_[static_cast<size_t>(r)];
    bits = get_string(m, &pos);
    if (bits.size() != nbytes) {
      raise(ErrorKind::kMismatch, "rank ", r, "'s response cache holds ", bits.size() * 8,
            " names but this rank's holds ", nbytes * 8,
            ": RINGCC_CACHE_CAPACITY (HOROVOD_CACHE_CAPACITY) must be the same on every rank");
    }
    for (size_t k = 0; k < nbytes; ++k) any_bits_[k] |= bits[k];
    const uint32_t n_withdrawn = get_u32(m, &pos);
    for (uint32_t i = 0; i < n_withdrawn; ++i) withdraw(r, get_string(m, &pos), news);
    const uint32_t n_new = get_u32(m, &pos);
    if (n_new) news->any_new = true;
    for (uint32_t i = 0; i < n_new; ++i) {
      std::string name = get_string(m, &pos);
      TensorMeta meta = TensorMeta::parse(m, &pos);
      // A cached name announced in full (its description changed on that
      // rank): from now on its bits count in the table, where the
      // descriptions are compared.
      const int cached = cache.bit_of(name);
      if (cached >= 0) bit_in_table_[static_cast<size_t>(cached)] = 1;
      TableEntry& e = entry_for(name, now);
      if (meta.kind == CollectiveKind::kLocalError) {
        const auto kind = static_cast<CollectiveKind>(get_u32(m, &pos));
        e.failures.push_back({r, kind, get_string(m, &pos)});
      }
      e.submitted[static_cast<size_t>(r)] = 1;
      e.metas[static_cast<size_t>(r)] = std::make_shared<const TensorMeta>(std::move(meta));
    }
    const uint32_t n_abort = get_u32(m, &pos);
    for (uint32_t i = 0; i < n_abort; ++i) news->aborts.push_back(get_string(m, &pos));
  }
  // Bits of names that have a table entry join it.
  for (size_t b = 0; b < bit_in_table_.size(); ++b) {
    if (!bit_in_table_[b]) continue;
    if (!table_.count(cache.name(b))) {
      bit_in_table_[b] = 0;
      continue;
    }
    TableEntry& e = entry_for(cache.name(b), now);
    for (int r = 0; r < size_; ++r) {
      if (rank_bits_[static_cast<size_t>(r)][b / 8] & (1 << (b % 8))) {
        e.submitted[static_cast<size_t>(r)] = 1;
        if (!e.metas[static_cast<size_t>(r)]) e.metas[static_cast<size_t>(r)] = cache.meta(b);
      }
    }
  }
}

size_t Negotiation::find_ready_bits(const ResponseCache& cache) {
  std::fill(all_bits_.begin(), all_bits_.end(), '\0');
  size_t ready = 0;
  for (size_t k = 0; k < any_bits_.size(); ++k) {
    const auto any = static_cast<uint8_t>(any_bits_[k]);
    if (!any) continue;
    uint8_t all = any;
    for (int r = 0; r < size_; ++r) {
      if (!joined_[static_cast<size_t>(r)]) all &= static_cast<uint8_t>(rank_bits_[static_cast<size_t>(r)][k]);
    }
    for (int j = 0; j < 8 && all; ++j) {
      const size_t b = k * 8 + static_cast<size_t>(j);
      if ((all & (1 << j)) && (b >= cache.size() || bit_in_table_[b])) all &= static_cast<uint8_t>(~(1 << j));
    }
    all_bits_[k] = static_cast<char>(all);
    ready += static_cast<size_t>(__builtin_popcount(all));
  }
  return ready;
}

void Negotiation::withdraw(int rank, const std::string& name, CycleNews* news) {
  auto it = table_.find(name);
  if (it == table_.end()) return;
  TableEntry& e = *it->second;
  const auto r = static_cast<size_t>(rank);
  e.submitted[r] = 0;
  e.metas[r].reset();
  // What is left may be the failed calls of a rank that made the same
  // grouped call and failed all of it: they would wait for this rank.
  bool only_failed = true;
  for (size_t k = 0; k < e.submitted.size() && only_failed; ++k) {
    only_failed = !e.submitted[k] || (e.metas[k] && e.metas[k]->kind == CollectiveKind::kLocalError);
  }
  if (!only_failed) return;
  if (!e.failures.empty()) news->dropped.push_back(name);
  table_.erase(it);
}

bool Negotiation::any_pending() const {
  if (!table_.empty()) return true;
  for (char c : any_bits_) {
    if (c) return true;
  }
  return false;
}

void Negotiation::ready_entries(std::vector<std::pair<TableEntry*, const std::string*>>* out) {
  out->clear();
  for (const auto& [name, e] : table_) {
    bool everyone = true;
    for (int r = 0; r < size_ && everyone; ++r) {
      everyone = e->submitted[static_cast<size_t>(r)] || joined_[static_cast<size_t>(r)];
    }
    if (everyone) out->emplace_back(e.get(), &name);
  }
  std::sort(out->begin(), out->end(), [](const auto& x, const auto& y) { return x.first->seq < y.first->seq; });
}

const TensorMeta& Negotiation::first_meta(const TableEntry& e) const {
  for (int r = 0; r < size_; ++r) {
    if (e.submitted[static_cast<size_t>(r)]) return *e.metas[static_cast<size_t>(r)];
  }
  return *e.metas[0];
}

bool Negotiation::agree(const std::string& name, const TableEntry& e, std::string* why) const {
  if (!e.failures.empty()) {
    // A rank could not start the call: it fails everywhere, even where that
    // rank alone submitted it (the others joined).
    const TableEntry::Failure& f = e.failures.front();
    *why = "tensor '" + name + "': " + failed_call_text(f.rank, f.kind, f.reason);
    return false;
  }
  const TensorMeta* first = nullptr;
  bool ok = true;
  for (int r = 0; r < size_ && ok; ++r) {
    if (!e.submitted[static_cast<size_t>(r)]) continue;
    const TensorMeta* m = e.metas[static_cast<size_t>(r)].get();
    if (!first) first = m;
    ok = m == first || compatible(*m, *first);
  }
  if (ok) return true;
  std::vector<TensorMeta> metas;
  std::vector<int> ranks;
  for (int r = 0; r < size_; ++r) {
    if (!e.submitted[static_cast<size_t>(r)]) continue;
    metas.push_back(*e.metas[static_cast<size_t>(r)]);
    ranks.push_back(r);
  }
  *why = describe_disagreement(name, metas, ranks);
  return false;
}

bool Negotiation::refused_by_join(const std::string& name, const TensorMeta& meta, std::string* why) const {
  // A joined rank has zeros to add to a sum, but no rows to gather, no
  // block to scatter or exchange and, as a root, nothing to broadcast: it
  // cannot take part in anything else without giving the others a result
  // they did not ask for.
  if (meta.kind == CollectiveKind::kAllreduce) return false;
  std::vector<int> joined;
  for (int r = 0; r < size_; ++r) {
    if (joined_[static_cast<size_t>(r)]) joined.push_back(r);
  }
  if (joined.empty()) return false;
  std::string what = collective_name(meta.kind);
  if (meta.kind == CollectiveKind::kBroadcast) {
    what += " from root " + std::to_string(meta.root);
    if (meta.root >= 0 && meta.root < size_ && joined_[static_cast<size_t>(meta.root)]) {
      what += " (root " + std::to_string(meta.root) + " has joined and has nothing to send)";
    }
  }
  *why = "tensor '" + name + "': " + what + " cannot run while rank(s) " + rank_list(joined) +
         " have joined (join()): until every rank has joined, only allreduce runs, the joined ranks adding zeros";
  return true;
}

std::vector<int> Negotiation::missing_ranks(const TableEntry& e) const {
  std::vector<int> out;
  for (int r = 0; r < size_; ++r) {
    if (!e.submitted[static_cast<size_t>(r)] && !joined_[static_cast<size_t>(r)]) out.push_back(r);
  }
  return out;
}

std::vector<int> Negotiation::missing_ranks(size_t bit) const {
  std::vector<int> out;
  for (int r = 0; r < size_; ++r) {
    const bool has = rank_bits_[static_cast<size_t>(r)][bit / 8] & (1 << (bit % 8));
    if (!has && !joined_[static_cast<size_t>(r)]) out.push_back(r);
  }
  return out;
}

}  // namespace ringcc
