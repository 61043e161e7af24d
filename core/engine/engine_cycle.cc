// The steps of the engine's cycle: take what callers enqueued, announce
// it, negotiate (negotiation.h), fail what rank 0 gave up on, and run what
// is ready on every rank.
#include <algorithm>
#include <chrono>
#include <string>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/engine/engine.h"
#include "core/engine/engine_entries.h"

namespace ringcc {

void Engine::take_incoming() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    taken_.swap(incoming_);  // both keep their storage for the next cycles
    if (join_work_ && !joined_) joined_ = true;
  }
  if (!behind_failed_.empty()) take_behind_failed();
  for (size_t k = 0; k < taken_.size(); ++k) {
    if (k + kPrefetchAhead < taken_.size()) prefetch_lines(taken_[k + kPrefetchAhead].get(), sizeof(LocalEntry));
    auto& entry = taken_[k];
    const std::string& name = entry->name;
    // A lookup from before an eviction may name a reused bit: redo it (the
    // cache only changes on this thread).
    if (entry->cache_epoch != cache_.epoch()) {
      entry->cache_bit = cache_.bit_of(name, entry->meta);
      entry->cache_epoch = cache_.epoch();
    }
    const int b = entry->cache_bit;
    if (!group_rests_.empty() && ends_in_group_rest(entry)) continue;
    auto pending = b < 0 || failed_pending_ > 0 ? local_.find(name) : local_.end();
    if (failed_pending_ > 0 && behind_failed_call(*entry)) {
      // This rank's call of that name failed (its caller has its error and
      // may call again at once, and fail again): the failure must reach the
      // peers first.
      put_behind_failed(std::move(entry));
      continue;
    }
    const bool duplicate = b >= 0 ? static_cast<bool>(local_by_bit_[static_cast<size_t>(b)]) : pending != local_.end();
    if (!duplicate && entry->meta.kind == CollectiveKind::kLocalError) ++failed_pending_;
    if (duplicate) {
      entry->work->finish(std::make_exception_ptr(
          Error(ErrorKind::kInvalidArgument,
                "a collective named '" + name +
                    "' is already in flight on this rank; names must be unique until they complete")));
      continue;
    }
    entry->taken = taken_count_++;
    if (b >= 0) {
      my_bits_[static_cast<size_t>(b / 8)] |= static_cast<char>(1 << (b % 8));
      bits_added_ = true;
      local_by_bit_[static_cast<size_t>(b)] = std::move(entry);
    } else {
      local_.emplace(name, std::move(entry));
    }
  }
  taken_.clear();
}

// Out of line, as everything about failed calls: take_incoming() runs per
// tensor of every training step.
__attribute__((noinline)) void Engine::put_behind_failed(std::unique_ptr<LocalEntry> entry) {
  behind_failed_.push_back(std::move(entry));
}

__attribute__((noinline)) void Engine::take_behind_failed() {
  // Those whose failed call is gone go first, in the order they came.
  std::vector<std::unique_ptr<LocalEntry>> turn;
  size_t kept = 0;
  for (auto& entry : behind_failed_) {
    if (behind_failed_call(*entry)) {
      behind_failed_[kept++] = std::move(entry);
    } else {
      turn.push_back(std::move(entry));
    }
  }
  behind_failed_.resize(kept);
  taken_.insert(taken_.begin(), std::make_move_iterator(turn.begin()), std::make_move_iterator(turn.end()));
}

namespace {

// `<head>.<i>`, a grouped call's i-th collective (i >= 1) as the adapters
// name them: its head and i; false for any other name.
bool split_member(const std::string& name, std::string* head, int64_t* index) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0 || name.size() - dot - 1 > 18) return false;
  const std::string digits = name.substr(dot + 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  *index = std::stoll(digits);
  if (*index < 1) return false;
  head->assign(name, 0, dot);
  return true;
}

std::string group_rest_why(const std::string& name, const std::string& why) {
  return "tensor '" + name + "': not run, as the first collective of its grouped call failed: " + why;
}

}  // namespace

bool Engine::behind_failed_call(const LocalEntry& entry) const {
  auto failed = [this](const std::string& n) {
    auto it = local_.find(n);
    return it != local_.end() && it->second->meta.kind == CollectiveKind::kLocalError;
  };
  if (failed(entry.name)) return true;
  // A failed call goes out at once: the peers' calls of that name fail now.
  if (entry.meta.kind == CollectiveKind::kLocalError) return false;
  std::string head;
  int64_t index = 0;
  return split_member(entry.name, &head, &index) && failed(head);
}

// The most collectives a grouped call's layout counts (a larger layout is
// a digest, not a length: TensorFlow's packs).
constexpr int64_t kMostGrouped = int64_t{1} << 16;

__attribute__((noinline)) void Engine::note_group_rest(const std::string& head, const TensorMeta& meta,
                                                       const TableEntry& e, const std::string& why) {
  if (meta.kind == CollectiveKind::kLocalError || meta.layout < 2 || meta.layout > kMostGrouped) return;
  // A rank that failed the same grouped call fails its others itself.
  bool single = false;
  for (const TableEntry::Failure& f : e.failures) {
    const TensorMeta* failed = e.metas[static_cast<size_t>(f.rank)].get();
    single = single || !failed || (failed->layout != meta.layout && failed->layout != TensorMeta::kGroupFailed);
  }
  if (!single) return;
  group_rests_.push_back({head, meta.layout, why, meta.layout - 1});
}

__attribute__((noinline)) void Engine::fail_group_rests() {
  // After the cycle's collectives ran: an other that was ready with its
  // first ran or failed by itself.
  for (GroupRest& g : group_rests_) {
    for (int64_t i = 1; i < g.length && g.left > 0; ++i) {
      const std::string name = g.head + "." + std::to_string(i);
      LocalEntry* local = find_local(name);
      if (!local || local->meta.kind == CollectiveKind::kLocalError || local->meta.layout != g.length) continue;
      // The peers' tables hold it when it was announced in full, or by its
      // bit where another rank announced it in full: this rank's part goes.
      if (negotiation_.table().count(name)) withdrawn_.push_back(name);
      finish_local(*local, std::make_exception_ptr(Error(ErrorKind::kMismatch, group_rest_why(name, g.why))));
      drop_local(name);
      --g.left;
    }
  }
  // The others still to come are met in take_incoming(); a record goes when
  // all came, or when a call under the first's name comes (a new group).
  group_rests_.erase(std::remove_if(group_rests_.begin(), group_rests_.end(),
                                    [](const GroupRest& g) { return g.left <= 0; }),
                     group_rests_.end());
}

__attribute__((noinline)) bool Engine::ends_in_group_rest(std::unique_ptr<LocalEntry>& entry) {
  const std::string& name = entry->name;
  std::string head;
  int64_t index = 0;
  const bool member = entry->meta.kind != CollectiveKind::kLocalError && split_member(name, &head, &index);
  for (size_t k = 0; k < group_rests_.size(); ++k) {
    GroupRest& g = group_rests_[k];
    if (name == g.head) {
      group_rests_.erase(group_rests_.begin() + static_cast<std::ptrdiff_t>(k));
      return false;
    }
    if (!member || head != g.head || index >= g.length || entry->meta.layout != g.length) continue;
    finish_local(*entry, std::make_exception_ptr(Error(ErrorKind::kMismatch, group_rest_why(name, g.why))));
    retired_.push_back(std::move(entry));
    if (--g.left <= 0) group_rests_.erase(group_rests_.begin() + static_cast<std::ptrdiff_t>(k));
    return true;
  }
  return false;
}

__attribute__((noinline)) void Engine::drop_failed_calls(const std::vector<std::string>& names) {
  // Failed calls of this rank whose peers withdrew from them: nobody waits
  // on them but the calls enqueued behind them.
  for (const auto& name : names) {
    auto it = local_.find(name);
    if (it == local_.end() || it->second->meta.kind != CollectiveKind::kLocalError) continue;
    finish_local(*it->second, std::make_exception_ptr(Error(ErrorKind::kMismatch,
                                                            "tensor '" + name + "': withdrawn by the other ranks")));
    drop_local(name);
  }
}

std::string Engine::build_message() {
  uint8_t flags = 0;
  if (joined_) flags |= kFlagJoined;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_requested_) flags |= kFlagShutdown;
  }
  sent_shutdown_ = flags & kFlagShutdown;
  if (blocked_callers_->load(std::memory_order_relaxed) > 0) flags |= kFlagWaiting;
  if (calls_deadlock_) flags |= kFlagDeadlock;
  // Cached names: one bit each, every cycle until they run. Others: in
  // full, once, in the order they were enqueued: the table numbers them in
  // the order the messages list them, and the response cache hands out its
  // bits in that order. Later steps then run the tensors in the order the
  // training loop enqueues them, which gives neighbouring views of one
  // buffer as neighbouring segments (one run).
  message_.start();
  std::vector<LocalEntry*> fresh;
  for (auto& [name, entry] : local_) {
    if (!entry->announced) fresh.push_back(entry.get());
  }
  std::sort(fresh.begin(), fresh.end(), [](const LocalEntry* a, const LocalEntry* b) { return a->taken < b->taken; });
  for (LocalEntry* entry : fresh) {
    entry->announced = true;
    if (entry->meta.kind == CollectiveKind::kLocalError) {
      const CollectiveArgs& failed = entry->work->list()[0];
      message_.announce_failed(entry->name, entry->meta, failed.failed_kind, failed.local_error);
    } else {
      message_.announce(entry->name, entry->meta);
    }
  }
  // Steady-state training sets the same bits every step: what is news is
  // a bit set since the last message, not a different set of bits.
  sent_news_ = message_.announced() > 0 || bits_added_ || !withdrawn_.empty();
  bits_added_ = false;
  if (sent_news_) flags |= kFlagNews;
  std::string msg;
  message_.finish(flags, my_bits_, stalls_.aborts(), &msg, withdrawn_);
  stalls_.clear_aborts();
  withdrawn_.clear();
  return msg;
}

void Engine::cycle() {
  const auto start = std::chrono::steady_clock::now();
  take_incoming();
  Exchange exchanged;
  exchange(build_message(), &exchanged);
  const double now = now_s();
  negotiation_.apply(exchanged.messages, cache_, now, &news_);
  note_joins(news_.joined);
  const std::vector<bool>& joined = news_.joined;
  const bool some_joined = std::any_of(joined.begin(), joined.end(), [](bool j) { return j; });
  const bool all_joined = std::all_of(joined.begin(), joined.end(), [](bool j) { return j; });
  fail_aborted(news_.aborts, joined);
  if (!news_.dropped.empty()) drop_failed_calls(news_.dropped);

  std::vector<ReadyItem>& ready = ready_;  // its storage kept from cycle to cycle
  ready.clear();
  collect_ready(&ready, now);
  const double negotiation_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  record_stats(negotiation_us, exchanged, news_.any_new, !ready.empty());
  note_idle(!ready.empty(), news_.any_new);
  watch_deadlock(!ready.empty(), now);
  if (rank_ == 0) stalls_.track_join(some_joined, all_joined, !ready.empty(), now);
  run_ready(ready);
  if (!group_rests_.empty()) fail_group_rests();
  recycle_retired();
  if (rank_ == 0) {
    const std::string stalled = stalls_.inspect(negotiation_, cache_, now_s());
    if (!stalled.empty()) RINGCC_LOG(kWarning, stalled);
  }
  if (all_joined) finish_join();
  stop_if_shut_down(news_.shut_down);
  // Last, so that the woken callers find this thread about to sleep rather
  // than competing with them for a core over its remaining bookkeeping.
  wake_finished();
}

void Engine::exchange(const std::string& msg, Exchange* out) {
  // Everyone's message to everyone.
  std::vector<uint8_t> gathered;
  CollectiveArgs ag;
  ag.kind = CollectiveKind::kAllgather;
  ag.dtype = DataType::kUInt8;
  ag.in = msg.data();
  ag.count = static_cast<int64_t>(msg.size());
  ag.allocate = [&gathered](int64_t n) -> void* {
    gathered.resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
    return gathered.data();
  };
  comm_->take_peer_wait_us();  // counts from here
  const auto sent = std::chrono::steady_clock::now();
  comm_->run(ag);
  const auto received = std::chrono::steady_clock::now();
  out->peer_wait_us = comm_->take_peer_wait_us();
  out->exchange_us = std::chrono::duration<double, std::micro>(received - sent).count();
  out->messages.resize(static_cast<size_t>(size_));
  int64_t off = 0;
  for (int r = 0; r < size_; ++r) {
    const int64_t n = ag.recv_counts[static_cast<size_t>(r)];
    out->messages[static_cast<size_t>(r)].assign(reinterpret_cast<const char*>(gathered.data()) + off,
                                                 static_cast<size_t>(n));
    off += n;
  }
}

void Engine::note_joins(const std::vector<bool>& joined) {
  const std::vector<bool>& before = negotiation_.joined();
  for (int r = 0; r < size_; ++r) {
    if (joined[static_cast<size_t>(r)] && !before[static_cast<size_t>(r)]) last_joined_ = r;
  }
  negotiation_.set_joined(joined);
}

// Stalled tensors rank 0 gave up on: they fail everywhere.
void Engine::fail_aborted(const std::vector<std::string>& aborts, const std::vector<bool>& joined) {
  for (const auto& name : aborts) {
    if (name.empty()) {  // the join
      fail_join(join_stall_why_ranks(joined));
      continue;
    }
    std::vector<int> missing;
    auto& table = negotiation_.table();
    auto it = table.find(name);
    const int bit = cache_.bit_of(name);
    if (it != table.end()) {
      missing = negotiation_.missing_ranks(*it->second);
      table.erase(it);
    } else if (bit >= 0 && negotiation_.pending_anywhere(static_cast<size_t>(bit))) {
      missing = negotiation_.missing_ranks(static_cast<size_t>(bit));
      stalls_.stop(static_cast<size_t>(bit));
    } else {
      continue;
    }
    const std::string why = "tensor '" + name + "' stalled for more than " +
                            std::to_string(static_cast<int>(opt_.stall_shutdown_s)) + " s waiting on rank(s) " +
                            rank_list(missing) + " (RINGCC_STALL_SHUTDOWN_S)";
    if (LocalEntry* local = find_local(name)) {
      finish_local(*local, std::make_exception_ptr(Error(ErrorKind::kTimeout, why)));
      drop_local(name);
    }
  }
}

// Ready on every rank (joined ranks count as ready): first the cache hits
// in the order their names entered the cache, then table entries in the
// order they appeared.
void Engine::collect_ready(std::vector<ReadyItem>* ready, double now) {
  const size_t ready_bits = negotiation_.find_ready_bits(cache_);
  stalls_.track_bits(negotiation_, cache_, now);
  std::vector<std::pair<TableEntry*, const std::string*>> entries;
  negotiation_.ready_entries(&entries);
  ready->reserve(ready_bits + entries.size());
  if (ready_bits) {
    const std::string& all = negotiation_.all_bits();
    for (int bit : cache_.bits_in_order()) {
      const auto b = static_cast<size_t>(bit);
      if (!(all[b / 8] & (1 << (b % 8)))) continue;
      ReadyItem item;
      item.meta = cache_.meta(b).get();
      item.local = local_by_bit_[b].get();
      item.bit = bit;
      ready->push_back(std::move(item));
      if (ready->size() == ready_bits) break;
    }
  }
  for (auto& [e, name] : entries) {
    ReadyItem item;
    item.name = *name;
    item.entry = e;
    item.meta = &negotiation_.first_meta(*e);
    item.local = find_local(item.name);
    ready->push_back(std::move(item));
  }
}

void Engine::watch_deadlock(bool any_ready, double now) {
  const bool stuck = deadlocked(news_, negotiation_, any_ready);
  if (stuck && news_.deadlock_called) {
    fail_deadlocked();
    deadlock_.reset();
    calls_deadlock_ = false;
    return;
  }
  // The bound is read only while stuck: RINGCC_TIMEOUT_S is looked up in
  // the environment.
  const bool due = deadlock_.observe(stuck, stuck ? comm_->timeout_s() : 0.0, now);
  calls_deadlock_ = rank_ == 0 && due;
}

// Every rank, in the same cycle, with the same table: what is pending
// fails, here and on every other rank, and the engine goes on.
void Engine::fail_deadlocked() {
  const std::string why = describe_deadlock(negotiation_, cache_, comm_->timeout_s());
  if (rank_ == 0) RINGCC_LOG(kWarning, why);
  const auto error = std::make_exception_ptr(Error(ErrorKind::kTimeout, why));
  auto& table = negotiation_.table();
  for (const auto& [name, entry] : table) {
    if (LocalEntry* local = find_local(name)) {
      finish_local(*local, error);
      drop_local(name);
    }
  }
  table.clear();
  for (size_t b = 0; b < cache_.size(); ++b) {
    if (!negotiation_.pending_anywhere(b)) continue;
    stalls_.stop(b);
    if (local_by_bit_[b]) {
      finish_local(*local_by_bit_[b], error);
      drop_local_bit(b);
    }
  }
  fail_join(why);
}

void Engine::record_stats(double negotiation_us, const Exchange& exchange, bool any_new, bool cached_ready) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.cycles++;
  stats_.negotiation_us += (negotiation_us - stats_.negotiation_us) / static_cast<double>(stats_.cycles);
  if (any_new || !cached_ready) return;
  stats_.cached_cycles++;
  const double k = static_cast<double>(stats_.cached_cycles);
  stats_.cached_negotiation_us += (negotiation_us - stats_.cached_negotiation_us) / k;
  stats_.cached_exchange_us += (exchange.exchange_us - stats_.cached_exchange_us) / k;
  stats_.cached_decide_us += (negotiation_us - exchange.exchange_us - stats_.cached_decide_us) / k;
  const double waited = std::min(exchange.peer_wait_us, exchange.exchange_us);
  stats_.cached_peer_wait_us += (waited - stats_.cached_peer_wait_us) / k;
  stats_.cached_overhead_us += (negotiation_us - waited - stats_.cached_overhead_us) / k;
}

void Engine::note_idle(bool any_ready, bool any_new) {
  bool any_pending = false;
  for (char c : negotiation_.any_bits()) any_pending = any_pending || c;
  bool mine_pending = false;
  for (char c : my_bits_) mine_pending = mine_pending || c;
  const bool idle =
      !any_ready && negotiation_.table().empty() && local_.empty() && !mine_pending && !any_new && !any_pending;
  idle_cycles_ = idle ? idle_cycles_ + 1 : 0;
  ran_collectives_ = any_ready;
}

// A join completes once every rank has joined.
void Engine::finish_join() {
  std::shared_ptr<Work> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work.swap(join_work_);
  }
  joined_ = false;
  if (work) {
    // The last rank to join (the highest of those that joined in the
    // same cycle).
    work->list()[0].result_count = last_joined_;
    work->finish(nullptr);
  }
  negotiation_.clear_joined();
}

// A rank that shut down takes part in nothing more, so no pending named
// collective (nor a join) can complete: every engine stops in this same
// cycle, failing what is pending, rather than wait for it.
void Engine::stop_if_shut_down(const std::vector<int>& shut_down) {
  if (shut_down.empty()) return;
  if (sent_shutdown_) {
    fail_all("ringcc was shut down before this collective completed", ErrorKind::kNotInitialized);
  } else {
    fail_all("rank(s) " + rank_list(shut_down) +
                 " shut ringcc down, so named collectives cannot complete (call "
                 "ringcc.shutdown() here too, and init() again to go on)",
             ErrorKind::kPeerFailure);
  }
}

}  // namespace ringcc
