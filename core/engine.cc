#include "core/engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include "core/env.h"
#include "core/error.h"
#include "core/interrupt.h"
#include "core/log.h"

namespace ringcc {

namespace {

constexpr uint8_t kFlagJoined = 1;
constexpr uint8_t kFlagShutdown = 2;
constexpr int kIdleCyclesBeforeBackoff = 200;
constexpr double kIdleCycleMs = 10.0;
// Local entries kept for reuse (about 200 bytes each).
constexpr size_t kMaxSpareEntries = 4096;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// True when `meta` describes the collective `a` of this shape.
bool describes(const TensorMeta& meta, const CollectiveArgs& a, const int64_t* shape, size_t ndim) {
  return meta.kind == a.kind && meta.dtype == a.dtype && meta.op == a.op && meta.root == a.root &&
         meta.prescale == a.prescale && meta.postscale == a.postscale && meta.memory == a.memory &&
         meta.shape.size() == ndim && std::equal(shape, shape + ndim, meta.shape.begin());
}

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  os << "]";
  return os.str();
}

const char* phase_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce: return "ALLREDUCE";
    case CollectiveKind::kAllgather: return "ALLGATHER";
    case CollectiveKind::kBroadcast: return "BROADCAST";
    case CollectiveKind::kReduceScatter: return "REDUCESCATTER";
    case CollectiveKind::kAlltoall: return "ALLTOALL";
    default: return "COLLECTIVE";
  }
}

}  // namespace

EngineOptions EngineOptions::from_env() {
  EngineOptions o;
  // Horovod's HOROVOD_CYCLE_TIME is in milliseconds too.
  o.cycle_time_ms = env_double("RINGCC_CYCLE_TIME_MS", 1.0, "HOROVOD_CYCLE_TIME");
  o.fusion_threshold = env_int("RINGCC_FUSION_THRESHOLD", 64 << 20, "HOROVOD_FUSION_THRESHOLD");
  o.stall_check_s = env_double("RINGCC_STALL_CHECK_S", 60.0, "HOROVOD_STALL_CHECK_TIME_SECONDS");
  o.stall_shutdown_s = env_double("RINGCC_STALL_SHUTDOWN_S", kDefaultStallShutdownS,
                                  "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS");
  o.cache_capacity = static_cast<int>(env_int("RINGCC_CACHE_CAPACITY", 1024, "HOROVOD_CACHE_CAPACITY"));
  o.timeline_path = env_str("RINGCC_TIMELINE", "", "HOROVOD_TIMELINE");
  if (o.cycle_time_ms < 0) o.cycle_time_ms = 0;
  return o;
}

// A tensor this rank enqueued and that has not run yet.
struct Engine::LocalEntry {
  std::string name;
  std::shared_ptr<Work> work;
  TensorMeta meta;
  int cache_bit = -1;      // announced through the cache
  uint64_t cache_epoch = 0;  // cache_epoch_ when cache_bit was looked up
  bool announced = false;  // announced in full
  uint64_t taken = 0;      // when the engine took it (take_incoming's count)
  // What marks its name in flight (under mu_): busy_bits_[busy_bit], or
  // its name in busy_names_ when -1. A failed call (kLocalError) marks
  // nothing: its caller already has its error and may call the name again
  // at once; that call waits behind it (see take_incoming()).
  bool marks_busy = false;
  int busy_bit = -1;
  int64_t negotiating_us = 0;  // enqueued (0: no timeline recorded then)
  // An allreduce's buffers, as its Work holds them: a fused batch gathers
  // these without reaching into each Work.
  BufferSegment segment;
};

// A tensor that is ready on every rank, about to run (same on all ranks).
struct Engine::ReadyItem {
  std::string name;                  // table entries only: see name_of()
  const TensorMeta* meta = nullptr;  // the agreed description
  LocalEntry* local = nullptr;       // null: this rank joined and sends zeros
  int bit = -1;                      // >= 0: ready through the cache bit alone
  TableEntry* entry = nullptr;       // otherwise: its table entry
};

// Ready items that run as one collective: a stretch of the cycle's list.
struct Engine::Batch {
  const ReadyItem* first;
  size_t n;
  const ReadyItem* begin() const { return first; }
  const ReadyItem* end() const { return first + n; }
  size_t size() const { return n; }
  const ReadyItem& operator[](size_t k) const { return first[k]; }
};

// A tensor some rank enqueued and that has not run yet (same on all ranks).
struct Engine::TableEntry {
  uint64_t seq = 0;
  std::vector<char> submitted;
  std::vector<std::shared_ptr<const TensorMeta>> metas;
  double first_seen = 0;
  double last_warned = 0;
  // Ranks whose call of the name failed (their meta's kind is kLocalError):
  // the collective they could not start, and why.
  struct Failure {
    int rank;
    CollectiveKind kind;
    std::string reason;
  };
  std::vector<Failure> failures;
};

Engine::Engine(std::shared_ptr<Communicator> comm, EngineOptions options)
    : comm_(std::move(comm)), opt_(std::move(options)), rank_(comm_->rank()), size_(comm_->size()) {
  was_joined_.assign(static_cast<size_t>(size_), false);
  next_bit_hint_.assign(static_cast<size_t>(std::max(opt_.cache_capacity, 0)), -1);
  idle_by_bit_.resize(static_cast<size_t>(std::max(opt_.cache_capacity, 0)));
  busy_bits_.assign(static_cast<size_t>(std::max(opt_.cache_capacity, 0)), 0);
  stats_ = EngineStats();
  if (!opt_.timeline_path.empty() && rank_ == 0) timeline_.start(opt_.timeline_path);
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  UninterruptibleWait quiet;  // a destructor cannot raise the handler's exception
  try {
    shutdown();
  } catch (...) {
  }
}

std::shared_ptr<Work> Engine::enqueue(std::string_view name, CollectiveArgs&& args, const int64_t* shape,
                                      size_t ndim) {
  // Described and looked up here, on the caller's thread, so that the
  // engine's cycle only splices the entry in. Entries of tensors that ran
  // come back for reuse with what they hold (the name's and the shape's
  // storage, and the Work once its handle let go of it): steady-state
  // training allocates nothing here, and takes the lock once.
  const int64_t stamp = timeline_.active() ? Timeline::now_us() : 0;  // 0: not stamped
  std::unique_lock<std::mutex> lock(mu_);
  if (!broken_.empty() || stopped_ || shutdown_requested_) {
    const bool broken = !broken_.empty();
    const Error error = broken ? Error(broken_kind_, broken_)
                               : Error(ErrorKind::kNotInitialized, "ringcc has been shut down");
    lock.unlock();
    std::vector<CollectiveArgs> list;
    list.push_back(std::move(args));
    auto work = std::make_shared<Work>(std::move(list), false);
    work->finish(std::make_exception_ptr(error));
    return work;
  }
  // The response cache's bit for this name and description, if it has
  // one. The engine thread changes the cache under mu_ too. A training loop
  // enqueues its tensors in the same order every step: the bit that came
  // after the previous tensor's last time is checked first, which spares
  // the hash lookup.
  const CollectiveArgs& a = args;
  const bool marks_busy = a.kind != CollectiveKind::kLocalError;  // see LocalEntry::marks_busy
  auto holds = [&](int b) {  // bit b is this name with this description
    return b >= 0 && static_cast<size_t>(b) < cache_names_.size() &&
           cache_names_[static_cast<size_t>(b)] == name &&
           describes(*cache_metas_[static_cast<size_t>(b)], a, shape, ndim);
  };
  int bit = -1;
  if (last_enqueued_bit_ >= 0 && holds(next_bit_hint_[static_cast<size_t>(last_enqueued_bit_)])) {
    bit = next_bit_hint_[static_cast<size_t>(last_enqueued_bit_)];
  }
  int name_bit = bit;  // the name's bit, whatever description it was cached with
  if (bit < 0) {
    auto cached = cache_index_.find(std::string(name));
    if (cached != cache_index_.end()) {
      name_bit = cached->second;
      if (holds(cached->second)) bit = cached->second;
    }
  }
  // A name may be enqueued again once its previous collective completed.
  // Checked here, on the caller's thread, so that the answer depends only
  // on what the caller could know (as Horovod's enqueue does).
  bool busy = name_bit >= 0 && busy_bits_[static_cast<size_t>(name_bit)];
  if (!busy && !busy_names_.empty()) busy = busy_names_.count(std::string(name)) > 0;
  if (busy) {
    lock.unlock();
    raise(ErrorKind::kInvalidArgument, "a collective named '", name,
          "' is already in flight on this rank; names must be unique until they complete");
  }
  if (last_enqueued_bit_ >= 0 && bit >= 0) next_bit_hint_[static_cast<size_t>(last_enqueued_bit_)] = bit;
  last_enqueued_bit_ = bit;
  // The entry the name had the last time it ran, with its name and
  // description in place; else a spare one, described here.
  std::unique_ptr<LocalEntry> entry;
  if (bit >= 0 && idle_by_bit_[static_cast<size_t>(bit)]) {
    entry = std::move(idle_by_bit_[static_cast<size_t>(bit)]);
  } else {
    if (!spare_.empty()) {
      entry = std::move(spare_.back());
      spare_.pop_back();
    } else {
      entry = std::make_unique<LocalEntry>();
    }
    if (std::string_view(entry->name) != name) entry->name.assign(name.data(), name.size());
    entry->meta.kind = a.kind;
    entry->meta.dtype = a.dtype;
    entry->meta.op = a.op;
    entry->meta.root = a.root;
    entry->meta.prescale = a.prescale;
    entry->meta.postscale = a.postscale;
    entry->meta.shape.assign(shape, shape + ndim);
    entry->meta.memory = a.memory;
  }
  // An allreduce's result is known in size now; its buffers for a fused batch.
  if (a.kind == CollectiveKind::kAllreduce) args.result_count = args.count;
  entry->segment = {a.in, a.out, a.count};
  std::shared_ptr<Work> work;
  if (Work::reusable(entry->work)) {
    work = std::move(entry->work);
    work->reset(std::move(args));
  } else {
    std::vector<CollectiveArgs> list;
    list.push_back(std::move(args));
    work = std::make_shared<Work>(std::move(list), false);
  }
  entry->work = work;
  entry->announced = false;
  entry->negotiating_us = stamp;
  entry->cache_bit = bit;
  entry->cache_epoch = cache_epoch_;
  entry->marks_busy = marks_busy;
  entry->busy_bit = marks_busy ? bit : -1;
  if (marks_busy && bit >= 0) {
    busy_bits_[static_cast<size_t>(bit)] = 1;
  } else if (marks_busy) {
    busy_names_.insert(entry->name);
  }
  incoming_.push_back(std::move(entry));
  return work;
}

void Engine::release_busy(LocalEntry& entry) {
  if (!entry.marks_busy) return;
  if (entry.busy_bit >= 0) {
    busy_bits_[static_cast<size_t>(entry.busy_bit)] = 0;
  } else {
    busy_names_.erase(entry.name);
  }
}

void Engine::finish_local(LocalEntry& entry, std::exception_ptr error) {
  // The name is free again before the caller can see the collective done.
  {
    std::lock_guard<std::mutex> lock(mu_);
    release_busy(entry);
  }
  entry.work->finish(error);
}

int Engine::cached_bit(const std::string& name, const TensorMeta& meta) const {
  auto cached = cache_index_.find(name);
  if (cached == cache_index_.end()) return -1;
  return *cache_metas_[static_cast<size_t>(cached->second)] == meta ? cached->second : -1;
}

void Engine::nudge(const std::shared_ptr<Work>& waiting) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    nudged_work_ = waiting;
    nudged_generation_ = waiting->generation();
    nudged_ = true;
  }
  cv_.notify_all();
}

bool Engine::caller_waits() {
  // The caller's tensor may have run since: it saw its Work pending, but
  // the engine finished it before the nudge came (or the caller let go of
  // it, and enqueue() may have reused it since).
  auto waiting = nudged_work_.lock();
  return waiting && !waiting->done() && waiting->generation() == nudged_generation_;
}

std::shared_ptr<Work> Engine::join() {
  auto work = std::make_shared<Work>(std::vector<CollectiveArgs>(1), false);
  std::unique_lock<std::mutex> lock(mu_);
  // A join already in progress (a wait for it was interrupted, or another
  // thread joined): wait for the same one.
  if (join_work_) return join_work_;
  if (!broken_.empty()) raise(broken_kind_, broken_);
  if (stopped_) raise(ErrorKind::kNotInitialized, "ringcc has been shut down");
  join_work_ = work;
  cv_.notify_all();
  return work;
}

void Engine::start_timeline(const std::string& path) {
  if (rank_ == 0) timeline_.start(path);
}

void Engine::stop_timeline() { timeline_.stop(); }

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void Engine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_requested_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  // Every engine stops in the first cycle that carries a rank's shutdown,
  // so this waits one cycle (bounded by the communicator's timeout). Past
  // that, or on an interrupt, the engine's links are aborted: the cycle
  // fails at once here and on the peers.
  const Deadline deadline = deadline_after(comm_->timeout_s());
  std::exception_ptr interrupted;
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (!thread_exited_ && Clock::now() < deadline) {
      if (interruptible()) {
        lock.unlock();
        try {
          poll_interrupt();
        } catch (const Error&) {
          interrupted = std::current_exception();
        }
        lock.lock();
        if (interrupted) break;
      }
      cv_.wait_until(lock, std::min(deadline, Clock::now() + kInterruptPoll),
                     [&] { return thread_exited_; });
    }
    if (!thread_exited_) {
      lock.unlock();
      comm_->abort(interrupted ? "interrupted by a signal (its handler raised) while shutting down"
                               : detail::concat("shutdown() waited ", comm_->timeout_s(),
                                                " s (RINGCC_TIMEOUT_S) for the other ranks' engines"));
    }
  }
  thread_.join();
  timeline_.stop();
  if (interrupted) std::rethrow_exception(interrupted);
}

void Engine::loop() {
  struct Exit {  // tells shutdown() however the loop ends
    Engine* engine;
    ~Exit() {
      {
        std::lock_guard<std::mutex> lock(engine->mu_);
        engine->thread_exited_ = true;
      }
      engine->cv_.notify_all();
    }
  } exit_notice{this};
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    try {
      cycle();
    } catch (const Error& e) {
      fail_all(e.what(), e.kind());
      break;
    } catch (const std::exception& e) {
      fail_all(e.what(), ErrorKind::kInternal);
      break;
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stopped_) break;
      // A caller blocks on a tensor and this rank announced news
      // that the peers' messages of this cycle, perhaps built before they
      // had it too, could not answer: the next cycle, not the next period,
      // tells what is ready. (Nothing else calls for a cycle at once: each
      // is a rendezvous of every rank's engine, and one entered early waits
      // there with a message that is stale when the others arrive.)
      if (sent_news_ && caller_waits() && opt_.cycle_time_ms > 0) {
        next = std::chrono::steady_clock::now();
        continue;
      }
      // Pace the cycles; after a long idle stretch, cycle slowly until
      // this rank has work again (a peer's work wakes us at our next
      // cycle at the latest).
      const double ms = idle_cycles_ > kIdleCyclesBeforeBackoff
                            ? std::max(kIdleCycleMs, opt_.cycle_time_ms)
                            : opt_.cycle_time_ms;
      next += std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
      const auto now = std::chrono::steady_clock::now();
      if (next < now) next = now;
      if (idle_cycles_ > kIdleCyclesBeforeBackoff) {
        cv_.wait_until(lock, next, [&] { return !incoming_.empty() || join_work_ || shutdown_requested_; });
        if (!incoming_.empty()) idle_cycles_ = 0;
        next = std::chrono::steady_clock::now();
      } else {
        // A rank blocked in synchronize() gains nothing from more batching:
        // its nudge starts the next cycle at once.
        if (cv_.wait_until(lock, next, [&] { return shutdown_requested_ || (nudged_ && caller_waits()); })) {
          next = std::chrono::steady_clock::now();  // early: the next period counts from here
        }
        nudged_ = false;
      }
    }
  }
}

void Engine::fail_all(const std::string& why, ErrorKind kind) {
  std::vector<std::unique_ptr<LocalEntry>> incoming;
  std::shared_ptr<Work> join_work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty() && kind != ErrorKind::kNotInitialized) {
      broken_ = why;
      // Ranks that cannot agree on the engine's settings stay a mismatch;
      // anything else that stops the engine is a failure of the job.
      broken_kind_ = kind == ErrorKind::kMismatch ? kind : ErrorKind::kPeerFailure;
    }
    stopped_ = true;
    incoming.swap(incoming_);
    join_work.swap(join_work_);
    std::fill(busy_bits_.begin(), busy_bits_.end(), 0);
    busy_names_.clear();
  }
  wake_finished();  // callers of Works that finished before the failure
  auto error = std::make_exception_ptr(Error(kind, why));
  for (auto& entry : local_) entry.second->work->finish(error);
  local_.clear();
  failed_pending_ = 0;
  for (auto& entry : local_by_bit_) {
    if (entry) entry->work->finish(error);
    entry.reset();
  }
  std::fill(my_bits_.begin(), my_bits_.end(), '\0');
  for (auto& entry : incoming) entry->work->finish(error);
  for (auto& entry : behind_failed_) entry->work->finish(error);
  behind_failed_.clear();
  if (join_work) join_work->finish(error);
}

std::string Engine::join_stall_why_ranks(const std::vector<bool>& joined) const {
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (!joined[static_cast<size_t>(r)]) missing.push_back(r);
  }
  return "join() waited more than " + std::to_string(static_cast<int>(opt_.stall_shutdown_s)) +
         " s for rank(s) " + rank_list(missing) +
         " to join or to run a named collective (RINGCC_STALL_SHUTDOWN_S)";
}

void Engine::fail_join(const std::string& why) {
  std::shared_ptr<Work> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work.swap(join_work_);
  }
  joined_ = false;
  if (work) work->finish(std::make_exception_ptr(Error(ErrorKind::kTimeout, why)));
}

void Engine::take_incoming() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    taken_.swap(incoming_);  // both keep their storage for the next cycles
    if (join_work_ && !joined_) joined_ = true;
  }
  if (!behind_failed_.empty()) take_behind_failed();
  for (auto& entry : taken_) {
    const std::string& name = entry->name;
    // A lookup from before an eviction may name a reused bit: redo it (the
    // cache only changes on this thread).
    if (entry->cache_epoch != cache_epoch_) {
      entry->cache_bit = cached_bit(name, entry->meta);
      entry->cache_epoch = cache_epoch_;
    }
    const int b = entry->cache_bit;
    auto pending = b < 0 || failed_pending_ > 0 ? local_.find(name) : local_.end();
    if (pending != local_.end() && pending->second->meta.kind == CollectiveKind::kLocalError) {
      // This rank's call of that name failed (its caller has its error and
      // may call again at once, and fail again): the failure must reach the
      // peers first.
      put_behind_failed(std::move(entry));
      continue;
    }
    const bool duplicate = b >= 0 ? static_cast<bool>(local_by_bit_[static_cast<size_t>(b)])
                                  : pending != local_.end();
    if (!duplicate && entry->meta.kind == CollectiveKind::kLocalError) ++failed_pending_;
    if (duplicate) {
      entry->work->finish(std::make_exception_ptr(Error(
          ErrorKind::kInvalidArgument, "a collective named '" + name +
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
    if (local_.count(entry->name)) {
      behind_failed_[kept++] = std::move(entry);
    } else {
      turn.push_back(std::move(entry));
    }
  }
  behind_failed_.resize(kept);
  taken_.insert(taken_.begin(), std::make_move_iterator(turn.begin()),
                std::make_move_iterator(turn.end()));
}

std::string Engine::build_message() {
  std::string msg;
  uint8_t flags = 0;
  if (joined_) flags |= kFlagJoined;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_requested_) flags |= kFlagShutdown;
  }
  sent_shutdown_ = flags & kFlagShutdown;
  msg.push_back(static_cast<char>(flags));
  // Cached names: one bit each, every cycle until they run. Others: in
  // full, once, in the order they were enqueued: the table numbers them in
  // the order the messages list them, and the response cache hands out its
  // bits in that order. Later steps then run the tensors in the order the
  // training loop enqueues them, which gives neighbouring views of one
  // buffer as neighbouring segments (one run).
  std::string announced;
  std::vector<LocalEntry*> fresh;
  for (auto& [name, entry] : local_) {
    if (!entry->announced) fresh.push_back(entry.get());
  }
  std::sort(fresh.begin(), fresh.end(),
            [](const LocalEntry* a, const LocalEntry* b) { return a->taken < b->taken; });
  for (LocalEntry* entry : fresh) {
    entry->announced = true;
    put_string(&announced, entry->name);
    entry->meta.serialize(&announced);
    if (entry->meta.kind == CollectiveKind::kLocalError) {
      // What failed and why travel after the description (kept out of
      // TensorMeta, which every pending entry of a training loop holds).
      const CollectiveArgs& failed = entry->work->list()[0];
      put_u32(&announced, static_cast<uint32_t>(failed.failed_kind));
      put_string(&announced, failed.local_error);
    }
  }
  const auto count = static_cast<uint32_t>(fresh.size());
  // Steady-state training sets the same bits every step: what is news is
  // a bit set since the last message, not a different set of bits.
  sent_news_ = count > 0 || bits_added_;
  bits_added_ = false;
  put_string(&msg, my_bits_);
  put_u32(&msg, count);
  msg.append(announced);
  put_u32(&msg, static_cast<uint32_t>(pending_aborts_.size()));
  for (const auto& name : pending_aborts_) put_string(&msg, name);
  pending_aborts_.clear();
  return msg;
}

void Engine::apply_messages(const std::vector<std::string>& messages, std::vector<bool>* joined,
                            std::vector<std::string>* aborts, std::vector<int>* shut_down,
                            bool* any_new) {
  const double now = now_s();
  shut_down->clear();
  *any_new = false;
  auto entry_for = [&](const std::string& name) -> TableEntry& {
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
  };
  const size_t nbytes = my_bits_.size();
  std::fill(any_bits_.begin(), any_bits_.end(), '\0');
  for (int r = 0; r < size_; ++r) {
    const std::string& m = messages[static_cast<size_t>(r)];
    size_t pos = 0;
    if (m.empty()) raise(ErrorKind::kInternal, "empty negotiation message from rank ", r);
    const auto flags = static_cast<uint8_t>(m[pos++]);
    (*joined)[static_cast<size_t>(r)] = flags & kFlagJoined;
    if (flags & kFlagShutdown) shut_down->push_back(r);
    std::string& bits = rank_bits_[static_cast<size_t>(r)];
    bits = get_string(m, &pos);
    if (bits.size() != nbytes) {
      raise(ErrorKind::kMismatch, "rank ", r, "'s response cache holds ", bits.size() * 8,
            " names but this rank's holds ", nbytes * 8,
            ": RINGCC_CACHE_CAPACITY (HOROVOD_CACHE_CAPACITY) must be the same on every rank");
    }
    for (size_t k = 0; k < nbytes; ++k) any_bits_[k] |= bits[k];
    const uint32_t n_new = get_u32(m, &pos);
    if (n_new) *any_new = true;
    for (uint32_t i = 0; i < n_new; ++i) {
      std::string name = get_string(m, &pos);
      TensorMeta meta = TensorMeta::parse(m, &pos);
      // A cached name announced in full (its description changed on that
      // rank): from now on its bits count in the table, where the
      // descriptions are compared.
      auto cached = cache_index_.find(name);
      if (cached != cache_index_.end()) bit_in_table_[static_cast<size_t>(cached->second)] = 1;
      TableEntry& e = entry_for(name);
      if (meta.kind == CollectiveKind::kLocalError) {
        const auto kind = static_cast<CollectiveKind>(get_u32(m, &pos));
        e.failures.push_back({r, kind, get_string(m, &pos)});
      }
      e.submitted[static_cast<size_t>(r)] = 1;
      e.metas[static_cast<size_t>(r)] = std::make_shared<const TensorMeta>(std::move(meta));
    }
    const uint32_t n_abort = get_u32(m, &pos);
    for (uint32_t i = 0; i < n_abort; ++i) aborts->push_back(get_string(m, &pos));
  }
  // Bits of names that have a table entry join it.
  for (size_t b = 0; b < bit_in_table_.size(); ++b) {
    if (!bit_in_table_[b]) continue;
    if (!table_.count(cache_names_[b])) {
      bit_in_table_[b] = 0;
      continue;
    }
    TableEntry& e = entry_for(cache_names_[b]);
    for (int r = 0; r < size_; ++r) {
      if (rank_bits_[static_cast<size_t>(r)][b / 8] & (1 << (b % 8))) {
        e.submitted[static_cast<size_t>(r)] = 1;
        if (!e.metas[static_cast<size_t>(r)]) e.metas[static_cast<size_t>(r)] = cache_metas_[b];
      }
    }
  }
}

std::vector<int> Engine::missing_ranks(const TableEntry& e) const {
  std::vector<int> out;
  for (int r = 0; r < size_; ++r) {
    if (!e.submitted[static_cast<size_t>(r)] && !was_joined_[static_cast<size_t>(r)]) out.push_back(r);
  }
  return out;
}

std::vector<int> Engine::missing_ranks(size_t bit) const {
  std::vector<int> out;
  for (int r = 0; r < size_; ++r) {
    const bool has = rank_bits_[static_cast<size_t>(r)][bit / 8] & (1 << (bit % 8));
    if (!has && !was_joined_[static_cast<size_t>(r)]) out.push_back(r);
  }
  return out;
}

Engine::LocalEntry* Engine::find_local(const std::string& name) {
  auto local = local_.find(name);
  if (local != local_.end()) return local->second.get();
  auto cached = cache_index_.find(name);
  if (cached == cache_index_.end()) return nullptr;
  return local_by_bit_[static_cast<size_t>(cached->second)].get();
}

void Engine::drop_local(const std::string& name) {
  auto local = local_.find(name);
  if (local != local_.end()) {
    if (local->second->meta.kind == CollectiveKind::kLocalError) --failed_pending_;
    retired_.push_back(std::move(local->second));
    local_.erase(local);
    return;
  }
  auto cached = cache_index_.find(name);
  if (cached != cache_index_.end()) drop_local_bit(static_cast<size_t>(cached->second));
}

void Engine::drop_local_bit(size_t b) {
  my_bits_[b / 8] &= static_cast<char>(~(1 << (b % 8)));
  if (local_by_bit_[b]) retired_.push_back(std::move(local_by_bit_[b]));
}

void Engine::recycle_retired() {
  if (retired_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& entry : retired_) {
      // A name in the response cache gets its own entry back next time.
      int bit = entry->cache_bit;
      if (bit < 0 || entry->cache_epoch != cache_epoch_) bit = cached_bit(entry->name, entry->meta);
      if (bit >= 0 && !idle_by_bit_[static_cast<size_t>(bit)]) {
        idle_by_bit_[static_cast<size_t>(bit)] = std::move(entry);
      } else if (spare_.size() < kMaxSpareEntries) {
        spare_.push_back(std::move(entry));
      }
    }
  }
  retired_.clear();  // past the cap: freed here
}

void Engine::cycle() {
  const auto start = std::chrono::steady_clock::now();
  // Room for every bit the cache may hand out (identical on all ranks).
  const size_t cap = static_cast<size_t>(std::max(opt_.cache_capacity, 0));
  if (my_bits_.size() != (cap + 7) / 8) {
    my_bits_.assign((cap + 7) / 8, '\0');
    any_bits_.assign((cap + 7) / 8, '\0');
    local_by_bit_.clear();
    local_by_bit_.resize(cap);
    bit_in_table_.assign(cap, 0);
    bit_first_seen_.assign(cap, 0.0);
    stall_bits_.clear();
    rank_bits_.assign(static_cast<size_t>(size_), std::string());
  }
  take_incoming();
  const std::string msg = build_message();

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
  const double peer_wait_us = comm_->take_peer_wait_us();
  std::vector<std::string> messages(static_cast<size_t>(size_));
  int64_t off = 0;
  for (int r = 0; r < size_; ++r) {
    const int64_t n = ag.recv_counts[static_cast<size_t>(r)];
    messages[static_cast<size_t>(r)].assign(reinterpret_cast<const char*>(gathered.data()) + off,
                                            static_cast<size_t>(n));
    off += n;
  }

  std::vector<bool> joined(static_cast<size_t>(size_), false);
  std::vector<std::string> aborts;
  std::vector<int> shut_down;
  bool any_new = false;
  apply_messages(messages, &joined, &aborts, &shut_down, &any_new);
  for (int r = 0; r < size_; ++r) {
    if (joined[static_cast<size_t>(r)] && !was_joined_[static_cast<size_t>(r)]) last_joined_ = r;
  }
  was_joined_ = joined;
  const bool some_joined = std::any_of(joined.begin(), joined.end(), [](bool j) { return j; });
  const bool all_joined = std::all_of(joined.begin(), joined.end(), [](bool j) { return j; });

  // Stalled tensors rank 0 gave up on: fail them everywhere.
  for (const auto& name : aborts) {
    if (name.empty()) {  // the join
      fail_join(join_stall_why_ranks(joined));
      continue;
    }
    std::vector<int> missing;
    auto it = table_.find(name);
    auto cached = cache_index_.find(name);
    if (it != table_.end()) {
      missing = missing_ranks(*it->second);
      table_.erase(it);
    } else if (cached != cache_index_.end() &&
               (any_bits_[static_cast<size_t>(cached->second / 8)] & (1 << (cached->second % 8)))) {
      missing = missing_ranks(static_cast<size_t>(cached->second));
      bit_first_seen_[static_cast<size_t>(cached->second)] = 0;
    } else {
      continue;
    }
    const std::string why = "tensor '" + name + "' stalled for more than " +
                            std::to_string(static_cast<int>(opt_.stall_shutdown_s)) +
                            " s waiting on rank(s) " + rank_list(missing) +
                            " (RINGCC_STALL_SHUTDOWN_S)";
    if (LocalEntry* local = find_local(name)) {
      finish_local(*local, std::make_exception_ptr(Error(ErrorKind::kTimeout, why)));
      drop_local(name);
    }
  }

  // Ready on every rank (joined ranks count as ready): first the cache
  // hits in the order their names entered the cache, then table entries in
  // the order they appeared.
  const double now = now_s();
  all_bits_.assign(my_bits_.size(), '\0');
  size_t ready_bits = 0;
  // Bits no longer pending anywhere stop their stall clocks.
  size_t kept = 0;
  for (int bit : stall_bits_) {
    const auto b = static_cast<size_t>(bit);
    if (bit_first_seen_[b] != 0 && (any_bits_[b / 8] & (1 << (b % 8)))) {
      stall_bits_[kept++] = bit;
    } else {
      bit_first_seen_[b] = 0;
    }
  }
  stall_bits_.resize(kept);
  for (size_t k = 0; k < my_bits_.size(); ++k) {
    const auto any = static_cast<uint8_t>(any_bits_[k]);
    if (!any) continue;
    uint8_t all = any;
    for (int r = 0; r < size_; ++r) {
      if (!was_joined_[static_cast<size_t>(r)]) all &= static_cast<uint8_t>(rank_bits_[static_cast<size_t>(r)][k]);
    }
    for (int j = 0; j < 8; ++j) {
      if (!(any & (1 << j))) continue;
      const size_t b = k * 8 + static_cast<size_t>(j);
      if (b >= cache_names_.size() || bit_in_table_[b]) {
        all &= static_cast<uint8_t>(~(1 << j));
      } else if (!(all & (1 << j)) && bit_first_seen_[b] == 0) {
        bit_first_seen_[b] = now;  // pending here and there, not everywhere
        stall_bits_.push_back(static_cast<int>(b));
      }
    }
    all_bits_[k] = static_cast<char>(all);
    ready_bits += static_cast<size_t>(__builtin_popcount(all));
  }
  std::vector<ReadyItem> ready;
  ready.reserve(ready_bits + table_.size());
  if (ready_bits) {
    if (bits_reordered_) {
      bits_in_order_.resize(cache_names_.size());
      for (size_t b = 0; b < bits_in_order_.size(); ++b) bits_in_order_[b] = static_cast<int>(b);
      std::sort(bits_in_order_.begin(), bits_in_order_.end(), [this](int x, int y) {
        return cache_entered_[static_cast<size_t>(x)] < cache_entered_[static_cast<size_t>(y)];
      });
      bits_reordered_ = false;
    }
    for (int bit : bits_in_order_) {
      const auto b = static_cast<size_t>(bit);
      if (!(all_bits_[b / 8] & (1 << (b % 8)))) continue;
      ReadyItem item;
      item.meta = cache_metas_[b].get();
      item.local = local_by_bit_[b].get();
      item.bit = bit;
      ready.push_back(std::move(item));
      if (ready.size() == ready_bits) break;
    }
  }
  std::vector<std::pair<uint64_t, TableEntry*>> ready_entries;
  std::unordered_map<TableEntry*, const std::string*> entry_names;
  for (const auto& [name, e] : table_) {
    bool everyone = true;
    for (int r = 0; r < size_ && everyone; ++r) {
      everyone = e->submitted[static_cast<size_t>(r)] || was_joined_[static_cast<size_t>(r)];
    }
    if (everyone) {
      ready_entries.emplace_back(e->seq, e.get());
      entry_names[e.get()] = &name;
    }
  }
  std::sort(ready_entries.begin(), ready_entries.end());
  for (auto& [seq, e] : ready_entries) {
    ReadyItem item;
    item.name = *entry_names[e];
    item.entry = e;
    item.meta = &first_meta(*e);
    item.local = find_local(item.name);
    ready.push_back(std::move(item));
  }

  const double negotiation_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.cycles++;
    stats_.negotiation_us += (negotiation_us - stats_.negotiation_us) / static_cast<double>(stats_.cycles);
    if (!any_new && !ready.empty()) {
      stats_.cached_cycles++;
      const double k = static_cast<double>(stats_.cached_cycles);
      stats_.cached_negotiation_us += (negotiation_us - stats_.cached_negotiation_us) / k;
      const double exchange_us = std::chrono::duration<double, std::micro>(received - sent).count();
      stats_.cached_exchange_us += (exchange_us - stats_.cached_exchange_us) / k;
      stats_.cached_decide_us += (negotiation_us - exchange_us - stats_.cached_decide_us) / k;
      const double waited = std::min(peer_wait_us, exchange_us);
      stats_.cached_peer_wait_us += (waited - stats_.cached_peer_wait_us) / k;
      stats_.cached_overhead_us += (negotiation_us - waited - stats_.cached_overhead_us) / k;
    }
  }

  bool any_pending = false;
  for (char c : any_bits_) any_pending = any_pending || c;
  bool mine_pending = false;
  for (char c : my_bits_) mine_pending = mine_pending || c;
  const bool idle = ready.empty() && table_.empty() && local_.empty() && !mine_pending && !any_new &&
                    !any_pending;
  idle_cycles_ = idle ? idle_cycles_ + 1 : 0;

  if (rank_ == 0) {
    // A join waits while the ranks that have not joined make no progress:
    // its stall clock restarts whenever a named collective runs.
    if (!some_joined || all_joined) {
      join_pending_since_ = 0;
      join_abort_sent_ = false;
    } else if (join_pending_since_ == 0 || !ready.empty()) {
      join_pending_since_ = now;
      join_last_warned_ = now;
    }
  }
  run_ready(ready);
  recycle_retired();
  if (rank_ == 0) inspect_stalls();

  // Join completes once every rank has joined.
  if (all_joined) {
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
    std::fill(was_joined_.begin(), was_joined_.end(), false);
  }

  // A rank that shut down takes part in nothing more, so no pending named
  // collective (nor a join) can complete: every engine stops in this same
  // cycle, failing what is pending, rather than wait for it.
  if (!shut_down.empty()) {
    if (sent_shutdown_) {
      fail_all("ringcc was shut down before this collective completed", ErrorKind::kNotInitialized);
    } else {
      fail_all("rank(s) " + rank_list(shut_down) +
                   " shut ringcc down, so named collectives cannot complete (call "
                   "ringcc.shutdown() here too, and init() again to go on)",
               ErrorKind::kPeerFailure);
    }
  }
  // Last, so that the woken callers find this thread about to sleep rather
  // than competing with them for a core over its remaining bookkeeping.
  wake_finished();
}

const TensorMeta& Engine::first_meta(const TableEntry& e) const {
  for (int r = 0; r < size_; ++r) {
    if (e.submitted[static_cast<size_t>(r)]) return *e.metas[static_cast<size_t>(r)];
  }
  return *e.metas[0];
}

bool Engine::agree(const std::string& name, const TableEntry& e, std::string* why) const {
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

// Puts a tensor that ran into the response cache (the same decision on
// every rank), so that its next round is announced by one bit.
void Engine::remember(const std::string& name, const TableEntry& e) {
  const uint64_t stamp = ++cache_clock_;
  auto known = cache_index_.find(name);
  if (known != cache_index_.end()) {
    cache_used_[static_cast<size_t>(known->second)] = stamp;
    return;
  }
  if (opt_.cache_capacity <= 0) return;
  std::shared_ptr<const TensorMeta> meta;
  for (int r = 0; r < size_ && !meta; ++r) {
    if (e.submitted[static_cast<size_t>(r)]) meta = e.metas[static_cast<size_t>(r)];
  }
  size_t bit = cache_names_.size();
  if (static_cast<int>(bit) >= opt_.cache_capacity) {
    // Full: evict the least recently used name that no rank is waiting on
    // (the same choice on every rank, as the inputs are the same).
    bool found = false;
    for (size_t b = 0; b < cache_names_.size(); ++b) {
      if (table_.count(cache_names_[b]) || bit_in_table_[b]) continue;
      if (any_bits_[b / 8] & (1 << (b % 8))) continue;  // pending on some rank
      if (!found || cache_used_[b] < cache_used_[bit]) {
        bit = b;
        found = true;
      }
    }
    if (!found) return;
    // A local tensor still announced through the evicted bit is announced
    // in full from the next cycle on.
    if (local_by_bit_[bit]) {
      std::unique_ptr<LocalEntry> entry = std::move(local_by_bit_[bit]);
      entry->cache_bit = -1;
      entry->announced = false;
      my_bits_[bit / 8] &= static_cast<char>(~(1 << (bit % 8)));
      local_.emplace(cache_names_[bit], std::move(entry));
    }
    bit_first_seen_[bit] = 0;
    std::lock_guard<std::mutex> lock(mu_);  // enqueue() looks names up under it
    if (busy_bits_[bit]) {
      // An enqueued tensor not yet announced holds the evicted bit: it
      // stays in flight under its name.
      busy_bits_[bit] = 0;
      busy_names_.insert(cache_names_[bit]);
      for (auto& entry : incoming_) {
        if (entry->busy_bit == static_cast<int>(bit)) entry->busy_bit = -1;
      }
      for (auto& [entry_name, entry] : local_) {
        if (entry->busy_bit == static_cast<int>(bit)) entry->busy_bit = -1;
      }
    }
    if (idle_by_bit_[bit] && spare_.size() < kMaxSpareEntries) {
      spare_.push_back(std::move(idle_by_bit_[bit]));
    }
    idle_by_bit_[bit].reset();
    ++cache_epoch_;
    cache_index_.erase(cache_names_[bit]);
    cache_names_[bit] = name;
    cache_metas_[bit] = meta;
    cache_used_[bit] = stamp;
    cache_entered_[bit] = stamp;
    cache_index_[name] = static_cast<int>(bit);
  } else {
    std::lock_guard<std::mutex> lock(mu_);  // enqueue() looks names up under it
    cache_names_.push_back(name);
    cache_metas_.push_back(meta);
    cache_used_.push_back(stamp);
    cache_entered_.push_back(stamp);
    cache_index_[name] = static_cast<int>(bit);
  }
  bits_reordered_ = true;
}

void Engine::run_ready(std::vector<ReadyItem>& ready) {
  size_t i = 0;
  int64_t fusion_id = 0;
  while (i < ready.size()) {
    ReadyItem& head = ready[i];
    if (head.entry) {
      std::string why;
      if (!agree(head.name, *head.entry, &why)) {
        if (head.local) {
          finish_local(*head.local, std::make_exception_ptr(Error(ErrorKind::kMismatch, why)));
          drop_local(head.name);
        }
        table_.erase(head.name);
        ++i;
        continue;
      }
      remember(head.name, *head.entry);
    } else {
      cache_used_[static_cast<size_t>(head.bit)] = ++cache_clock_;
    }
    const TensorMeta& meta = *head.meta;
    // Fuse the following ready allreduces of the same kind.
    size_t j = i + 1;
    if (meta.kind == CollectiveKind::kAllreduce) {
      int64_t bytes = meta.elements() * static_cast<int64_t>(dtype_size(meta.dtype));
      while (j < ready.size()) {
        const ReadyItem& next = ready[j];
        const TensorMeta& m = *next.meta;
        const int64_t b = m.elements() * static_cast<int64_t>(dtype_size(m.dtype));
        std::string ignored;
        if (m.kind != meta.kind || m.dtype != meta.dtype || m.op != meta.op ||
            m.prescale != meta.prescale || m.postscale != meta.postscale || m.memory != meta.memory ||
            bytes + b > opt_.fusion_threshold ||
            (next.entry && !agree(next.name, *next.entry, &ignored))) {
          break;
        }
        if (next.entry) {
          remember(next.name, *next.entry);
        } else {
          cache_used_[static_cast<size_t>(next.bit)] = ++cache_clock_;
        }
        bytes += b;
        ++j;
      }
    }
    const Batch batch{ready.data() + i, j - i};
    // Callers of a batch that more batches follow wake at once; those of
    // the cycle's last batch once the cycle's bookkeeping is done.
    wake_finished();
    execute_batch(batch, ++fusion_id);
    i = j;
  }
}

void Engine::wake_finished() {
  for (const auto& work : to_wake_) work->wake();
  to_wake_.clear();
}

const std::string& Engine::name_of(const ReadyItem& item) const {
  // A bit that is pending on some rank is never evicted, so its name stays
  // for the whole cycle.
  return item.bit >= 0 ? cache_names_[static_cast<size_t>(item.bit)] : item.name;
}

void Engine::retire(const ReadyItem& item) {
  if (item.entry) {
    table_.erase(item.name);
    if (item.local) drop_local(item.name);
    return;
  }
  // Ready through its bit: no name to look up.
  const auto b = static_cast<size_t>(item.bit);
  bit_first_seen_[b] = 0;
  if (item.local) drop_local_bit(b);
}

void Engine::execute_batch(const Batch& items, int64_t fusion_id) {
  // Buffers: ours if we enqueued the tensor, zeros if we joined.
  const TensorMeta meta = *items[0].meta;
  const size_t es = dtype_size(meta.dtype);
  const int64_t t_ready = Timeline::now_us();
  if (timeline_.active()) {
    for (const auto& item : items) {
      const int64_t since = item.local ? item.local->negotiating_us : 0;
      if (since > 0) timeline_.phase(name_of(item), "NEGOTIATING", since, t_ready);
    }
  }

  std::exception_ptr error;
  const std::string fusion_args = timeline_.active()
                                      ? "\"fusion\": " + std::to_string(fusion_id) +
                                            ", \"tensors\": " + std::to_string(items.size())
                                      : std::string();
  try {
    if (items.size() == 1) {
      LocalEntry* local = items[0].local;
      CollectiveArgs a;
      if (local) {
        a = local->work->list()[0];
      } else if (meta.memory != MemoryKind::kHost) {
        stand_in_refused(meta.kind, meta.memory, &a);
      } else {
        // A joined rank takes part with zeros and throws the result away.
        a.kind = meta.kind;
        a.dtype = meta.dtype;
        a.op = meta.op;
        a.root = meta.root;
        a.prescale = meta.prescale;
        a.postscale = meta.postscale;
        a.row_elems = std::max<int64_t>(1, meta.row_elems());
        a.count = meta.kind == CollectiveKind::kAllgather || meta.kind == CollectiveKind::kAlltoall
                      ? 0 : meta.elements();
        const size_t bytes = static_cast<size_t>(std::max<int64_t>(meta.elements(), 0)) * es;
        if (zeros_.size() < bytes) zeros_.resize(bytes);
        std::memset(zeros_.data(), 0, bytes);
        a.in = zeros_.data();
        a.out = zeros_.data();
        a.out_count = -1;
        if (meta.kind == CollectiveKind::kAllreduce || meta.kind == CollectiveKind::kBroadcast) {
          a.out_count = a.count;
        } else if (meta.kind == CollectiveKind::kReduceScatter) {
          a.out_count = block_rows(a.count / a.row_elems, size_, rank_) * a.row_elems;
        }
        a.send_counts.assign(static_cast<size_t>(size_), 0);
        auto scratch = std::make_shared<std::vector<uint8_t>>();
        a.allocate = [scratch, es](int64_t n) -> void* {
          scratch->resize(static_cast<size_t>(std::max<int64_t>(n, 1)) * es);
          return scratch->data();
        };
      }
      comm_->run(a);
      if (local) {
        CollectiveArgs& mine = local->work->list()[0];
        mine.result_count = a.result_count;
        mine.recv_counts = a.recv_counts;
        mine.out = a.out;
      }
      if (timeline_.active() && local) {
        timeline_.phase(name_of(items[0]), phase_name(meta.kind), t_ready, Timeline::now_us(), fusion_args);
      }
    } else {
      // Built in place of the last batch's list (kept for its storage).
      CollectiveArgs& a = fused_args_;
      // Device buffers are fused on the device (the GPU backend takes the
      // segments), on the device and stream of this rank's tensors (a
      // named device collective runs on the process's side stream).
      const LocalEntry* first_local = nullptr;
      bool all_local = true;
      for (const auto& item : items) {
        if (item.local && !first_local) first_local = item.local;
        all_local = all_local && item.local;
      }
      a.memory = meta.memory;
      a.device = first_local ? first_local->work->list()[0].device : -1;
      a.stream = first_local ? first_local->work->list()[0].stream : nullptr;
      a.local_error.clear();
      a.kind = CollectiveKind::kAllreduce;
      a.dtype = meta.dtype;
      a.op = meta.op;
      a.prescale = meta.prescale;
      a.postscale = meta.postscale;
      a.in = nullptr;
      a.out = nullptr;
      a.segments.clear();
      int64_t total = 0;
      for (const auto& item : items) {
        // Ours, as enqueue() noted it; a joined rank's: no input (zeros), no output.
        const BufferSegment seg = item.local ? item.local->segment
                                             : BufferSegment{nullptr, nullptr, item.meta->elements()};
        total += seg.count;
        a.segments.push_back(seg);
      }
      a.count = total;
      a.out_count = total;
      const size_t bytes = static_cast<size_t>(total) * es;
      const std::string args =
          timeline_.active() ? fusion_args + ", \"bytes\": " + std::to_string(bytes) : std::string();
      coalesce_segments(a);
      if (meta.memory != MemoryKind::kHost && !all_local) {
        CollectiveArgs refused;
        stand_in_refused(CollectiveKind::kAllreduce, meta.memory, &refused);
        comm_->run(refused);
      } else if (comm_->gathers_segments() || a.segments.empty() || meta.memory != MemoryKind::kHost) {
        // Shared memory reads the tensors in place and writes the results
        // back in place; tensors that lie one after another in memory run
        // as one buffer on any transport. No fusion buffer, no extra copies.
        comm_->run(a);
        if (timeline_.active()) {
          const int64_t t_done = Timeline::now_us();
          for (const auto& item : items) {
            if (item.local) timeline_.phase(name_of(item), "ALLREDUCE", t_ready, t_done, args);
          }
        }
      } else {
        fusion_.pack(a.segments, es);
        const int64_t t_packed = Timeline::now_us();
        CollectiveArgs fused = fusion_.allreduce(total, meta.dtype, meta.op, meta.prescale, meta.postscale);
        comm_->run(fused);
        const int64_t t_reduced = Timeline::now_us();
        fusion_.unpack(a.segments, es);
        const int64_t t_done = Timeline::now_us();
        if (timeline_.active()) {
          for (const auto& item : items) {
            if (!item.local) continue;
            timeline_.phase(name_of(item), "MEMCPY_IN_FUSION_BUFFER", t_ready, t_packed, args);
            timeline_.phase(name_of(item), "ALLREDUCE", t_packed, t_reduced, args);
            timeline_.phase(name_of(item), "MEMCPY_OUT_FUSION_BUFFER", t_reduced, t_done, args);
          }
        }
      }
      std::lock_guard<std::mutex> lock(stats_mu_);
      stats_.fused_collectives++;
    }
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.tensors += items.size();
  }
  // Every Work is marked done before any waiter wakes (wake_finished()): a
  // caller that waits on the batch's tensors one after another (as
  // training loops do) blocks once, not once per tensor as it catches up
  // with the engine finishing them. The entries come back for reuse before
  // the wake too, for the woken caller's next enqueue().
  {
    std::lock_guard<std::mutex> lock(mu_);  // the names are free before anyone sees them done
    for (const auto& item : items) {
      if (item.local) release_busy(*item.local);
    }
  }
  for (const auto& item : items) {
    if (item.local) item.local->work->publish_done(error);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (const auto& item : items) {
    if (item.local && item.local->work->waited_on()) to_wake_.push_back(item.local->work);
  }
  for (const auto& item : items) retire(item);
  recycle_retired();
  // Only a broken communicator stops the engine; a bad argument on one
  // tensor failed that tensor alone.
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kPeerFailure || e.kind() == ErrorKind::kTimeout ||
          e.kind() == ErrorKind::kInternal) {
        throw;
      }
    }
  }
}

void Engine::stand_in_refused(CollectiveKind kind, MemoryKind memory, CollectiveArgs* a) const {
  // A joined rank has no device buffers to stand in with: it takes part
  // as a failed participant, so that the others raise MismatchError.
  a->kind = CollectiveKind::kLocalError;
  a->failed_kind = kind;
  a->local_error = "rank " + std::to_string(rank_) + " has joined (join()) and cannot stand in with zeros for a " +
                   "collective of tensors in " + memory_kind_name(memory) + " (join() covers host tensors only)";
  a->send_counts.assign(static_cast<size_t>(size_), 0);
}

void Engine::inspect_stalls() {
  const double now = now_s();
  std::ostringstream report;
  int stalled = 0;
  auto consider = [&](const std::string& name, double first_seen, double* last_warned,
                      const std::function<std::vector<int>()>& missing) {
    const double age = now - first_seen;
    if (opt_.stall_shutdown_s > 0 && age > opt_.stall_shutdown_s) {
      pending_aborts_.push_back(name);
      return;
    }
    if (opt_.stall_check_s > 0 && age > opt_.stall_check_s && now - *last_warned >= opt_.stall_check_s) {
      *last_warned = now;
      report << "\n  " << name << ": waiting on rank(s) " << rank_list(missing()) << " for "
             << static_cast<int>(age) << " s";
      ++stalled;
    }
  };
  for (auto& [name, e] : table_) {
    TableEntry* entry = e.get();
    consider(name, entry->first_seen, &entry->last_warned, [&] { return missing_ranks(*entry); });
  }
  if (bit_last_warned_.size() != bit_first_seen_.size()) bit_last_warned_.assign(bit_first_seen_.size(), 0);
  for (int bit : stall_bits_) {
    const auto b = static_cast<size_t>(bit);
    if (bit_first_seen_[b] == 0) continue;
    if (!(any_bits_[b / 8] & (1 << (b % 8)))) continue;
    if (bit_last_warned_[b] < bit_first_seen_[b]) bit_last_warned_[b] = bit_first_seen_[b];
    consider(cache_names_[b], bit_first_seen_[b], &bit_last_warned_[b], [&] { return missing_ranks(b); });
  }
  if (join_pending_since_ > 0 && !join_abort_sent_) {
    const double age = now - join_pending_since_;
    if (opt_.stall_shutdown_s > 0 && age > opt_.stall_shutdown_s) {
      pending_aborts_.push_back("");  // no name is empty: this is the join
      join_abort_sent_ = true;
    } else if (opt_.stall_check_s > 0 && age > opt_.stall_check_s &&
               now - join_last_warned_ >= opt_.stall_check_s) {
      join_last_warned_ = now;
      std::vector<int> missing;
      for (int r = 0; r < size_; ++r) {
        if (!was_joined_[static_cast<size_t>(r)]) missing.push_back(r);
      }
      report << "\n  join(): waiting on rank(s) " << rank_list(missing) << " for "
             << static_cast<int>(age) << " s";
      ++stalled;
    }
  }
  if (stalled) {
    RINGCC_LOG(kWarning, "stall: ", stalled,
               " tensor(s) were enqueued by some ranks but not by others (RINGCC_STALL_CHECK_S):",
               report.str());
  }
}

}  // namespace ringcc
