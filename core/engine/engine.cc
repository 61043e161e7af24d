#include "core/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/thread_name.h"
#include "core/engine/engine_entries.h"

namespace ringcc {

namespace {

// True when `meta` describes the collective `a` of this shape and layout.
bool describes(const TensorMeta& meta, const CollectiveArgs& a, const int64_t* shape, size_t ndim, int64_t layout) {
  return meta.kind == a.kind && meta.dtype == a.dtype && meta.op == a.op && meta.root == a.root &&
         meta.prescale == a.prescale && meta.postscale == a.postscale && meta.memory == a.memory &&
         meta.layout == layout && meta.shape.size() == ndim && std::equal(shape, shape + ndim, meta.shape.begin());
}

}  // namespace

EngineOptions EngineOptions::from_env() {
  EngineOptions o;
  // Horovod's HOROVOD_CYCLE_TIME is in milliseconds too.
  constexpr int64_t kMost = std::numeric_limits<int64_t>::max();
  o.cycle_time_ms = env_double_at_least("RINGCC_CYCLE_TIME_MS", 1.0, 0.0, "HOROVOD_CYCLE_TIME");
  o.fusion_threshold = fusion_threshold_from_env();
  o.stall_check_s = env_double("RINGCC_STALL_CHECK_S", 60.0, "HOROVOD_STALL_CHECK_TIME_SECONDS");
  o.stall_shutdown_s =
      env_double("RINGCC_STALL_SHUTDOWN_S", kDefaultStallShutdownS, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS");
  o.cache_capacity = cache_capacity_from_env();
  o.timeline_path = env_str("RINGCC_TIMELINE", "", "HOROVOD_TIMELINE");
  o.burst_quiet_us = env_int_in("RINGCC_BURST_QUIET_US", kBurstQuietUs, 0, kMost);
  o.follow_up_us = env_int_in("RINGCC_ENGINE_POLL_US", kFollowUpUs, 0, kMost);
  return o;
}

Engine::Engine(std::shared_ptr<Communicator> comm, EngineOptions options)
    : comm_(std::move(comm)),
      opt_(std::move(options)),
      rank_(comm_->rank()),
      size_(comm_->size()),
      cache_(opt_.cache_capacity),
      negotiation_(size_),
      stalls_(opt_.stall_check_s, opt_.stall_shutdown_s) {
  // Room for every bit the cache may hand out (identical on all ranks),
  // none when it is off (capacity 0): the negotiation reads every rank's
  // bits, an empty string each then.
  const size_t bits = cache_.capacity();
  next_bit_hint_.assign(bits, -1);
  idle_by_bit_.resize(bits);
  busy_bits_.assign(bits, 0);
  my_bits_.assign((bits + 7) / 8, '\0');
  local_by_bit_.resize(bits);
  negotiation_.resize_bits(bits);
  stalls_.resize_bits(bits);
  stats_ = EngineStats();
  if (!opt_.timeline_path.empty() && rank_ == 0) timeline_.start(opt_.timeline_path);
  thread_ = std::thread([this] {
    name_this_thread("ringcc-engine");
    loop();
  });
}

Engine::~Engine() {
  UninterruptibleWait quiet;  // a destructor cannot raise the handler's exception
  try {
    shutdown();
  } catch (...) {
  }
}

std::shared_ptr<Work> Engine::enqueue(std::string_view name, CollectiveArgs&& args, const int64_t* shape, size_t ndim,
                                     int64_t layout) {
  // Described and looked up here, on the caller's thread, so that the
  // engine's cycle only splices the entry in. Entries of tensors that ran
  // come back for reuse with what they hold (the name's and the shape's
  // storage, and the Work once its handle let go of it): steady-state
  // training allocates nothing here, and takes the lock once.
  const int64_t stamp = timeline_.active() ? Timeline::now_us() : 0;  // 0: not stamped
  // The negotiation compares shapes by name (`shape` here); the collective
  // runs without the caller's description, which may be gone by then.
  args.shape = nullptr;
  args.ndim = -1;
  args.label = {};
  std::unique_lock<std::mutex> lock(mu_);
  if (!broken_.empty() || stopped_ || shutdown_requested_) {
    const bool broken = !broken_.empty();
    const Error error =
        broken ? Error(broken_kind_, broken_) : Error(ErrorKind::kNotInitialized, "ringcc has been shut down");
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
  auto holds = [&](int b) {  // bit b is this name with this description
    return b >= 0 && static_cast<size_t>(b) < cache_.size() && cache_.name(static_cast<size_t>(b)) == name &&
           describes(*cache_.meta(static_cast<size_t>(b)), a, shape, ndim, layout);
  };
  int bit = -1;
  if (last_enqueued_bit_ >= 0 && holds(next_bit_hint_[static_cast<size_t>(last_enqueued_bit_)])) {
    bit = next_bit_hint_[static_cast<size_t>(last_enqueued_bit_)];
  }
  int name_bit = bit;  // the name's bit, whatever description it was cached with
  if (bit < 0) {
    name_bit = cache_.bit_of(std::string(name));
    if (holds(name_bit)) bit = name_bit;
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
    entry->meta.layout = layout;
  }
  // An allreduce's result is known in size now; its buffers for a fused batch.
  if (a.kind == CollectiveKind::kAllreduce) args.result_count = args.count;
  entry->segment = {a.in, a.out, a.count};
  entry->segmented = !a.segments.empty();
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
  entry->cache_epoch = cache_.epoch();
  entry->busy_bit = bit;
  if (entry->meta.kind == CollectiveKind::kLocalError) {
    // The caller already has its error and may call again under the name
    // at once: that call waits for this one (take_incoming()).
    entry->busy_bit = kNotBusy;
  } else if (bit >= 0) {
    busy_bits_[static_cast<size_t>(bit)] = 1;
  } else {
    busy_names_.insert(entry->name);
  }
  incoming_.push_back(std::move(entry));
  last_enqueue_ = std::chrono::steady_clock::now();
  if (bit >= 0) prefetch_ahead(static_cast<size_t>(bit));
  if (resting_) {  // the first call after the engine found nothing to do
    resting_ = false;
    lock.unlock();
    cv_.notify_all();
  }
  return work;
}

void Engine::prefetch_ahead(size_t bit) {
  // A training step's tensors come in the same order every step, and after
  // its other work their records have left the caches: each would cost
  // enqueue() a handful of misses to memory, one after another (the cached
  // name and description, the entry, its Work and the Work's arguments).
  // The order of the last step names the tensors coming next; their
  // records are asked for here, a level of pointers per tensor ahead, so
  // that each level is in cache by the time the one below is read.
  const int n1 = next_bit_hint_[bit];
  if (n1 < 0) return;
  const int n2 = next_bit_hint_[static_cast<size_t>(n1)];
  const int n3 = n2 < 0 ? -1 : next_bit_hint_[static_cast<size_t>(n2)];
  const size_t known = cache_.size();
  if (n3 >= 0 && static_cast<size_t>(n3) < known) {
    const auto b = static_cast<size_t>(n3);
    __builtin_prefetch(&cache_.name(b));
    if (const LocalEntry* e = idle_by_bit_[b].get()) prefetch_lines(e, sizeof(LocalEntry));
  }
  if (n2 >= 0 && static_cast<size_t>(n2) < known) {
    const auto b = static_cast<size_t>(n2);
    __builtin_prefetch(cache_.name(b).data());
    if (const TensorMeta* m = cache_.meta(b).get()) prefetch_lines(m, sizeof(TensorMeta));
    if (const LocalEntry* e = idle_by_bit_[b].get()) {
      // make_shared puts the count next to the Work: both are touched.
      if (const Work* w = e->work.get()) prefetch_lines(reinterpret_cast<const char*>(w) - 64, sizeof(Work) + 64);
    }
  }
  if (static_cast<size_t>(n1) < known) {
    const auto b = static_cast<size_t>(n1);
    if (const TensorMeta* m = cache_.meta(b).get()) __builtin_prefetch(m->shape.data());
    if (const LocalEntry* e = idle_by_bit_[b].get()) {
      if (Work* w = e->work.get(); w && !w->list().empty()) prefetch_lines(w->list().data(), sizeof(CollectiveArgs));
    }
  }
}

void Engine::nudge(const std::shared_ptr<Work>& waiting) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    nudged_work_ = waiting;
    nudged_generation_ = waiting->generation();
    nudged_ = true;
    nudged_at_ = std::chrono::steady_clock::now();
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
  // A join in progress, or finished with nobody told of its outcome (a
  // wait for it was interrupted, or another thread joined): the same one.
  // (A join in progress, join_work_, is always the unclaimed one.)
  if (unclaimed_join_) return unclaimed_join_;
  if (!broken_.empty()) raise(broken_kind_, broken_);
  if (stopped_) raise(ErrorKind::kNotInitialized, "ringcc has been shut down");
  join_work_ = work;
  unclaimed_join_ = work;
  cv_.notify_all();
  return work;
}

void Engine::join_collected(const std::shared_ptr<Work>& work) {
  std::lock_guard<std::mutex> lock(mu_);
  if (unclaimed_join_ == work) unclaimed_join_.reset();
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
      cv_.wait_until(lock, std::min(deadline, Clock::now() + kInterruptPoll), [&] { return thread_exited_; });
    }
    if (!thread_exited_) {
      lock.unlock();
      comm_->abort(interrupted ? "interrupted by a signal (its handler raised) while shutting down"
                               : detail::concat("shutdown() waited ", comm_->timeout_s(), " s (",
                                                collective_timeout_variable(), ") for the other ranks' engines"));
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
    std::unique_lock<std::mutex> lock(mu_);
    if (stopped_) break;
    pace(lock, &next);
  }
}

void Engine::pace(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point* next) {
  // A caller blocks on a tensor and this rank announced news that the
  // peers' messages of this cycle, perhaps built before they had it too,
  // could not answer: the next cycle, not the next period, tells what is
  // ready. (Nothing else calls for a cycle at once: each is a rendezvous of
  // every rank's engine, and one entered early waits there with a message
  // that is stale when the others arrive.)
  if (sent_news_ && caller_waits() && opt_.cycle_time_ms > 0) {
    *next = std::chrono::steady_clock::now();
    return;
  }
  // Pace the cycles. Once a cycle found nothing to do on any rank, the
  // engine rests: the next cycle comes when this rank's caller enqueues
  // (the first call wakes it) or at the slow period, whichever is first.
  // Each cycle is a rendezvous of every rank's engine; between a training
  // step's rounds (its forward pass, its other work) cycling every period
  // would take the CPUs from that work for nothing, and the round that
  // follows would find a cycle under way. A peer with work it enqueued
  // first waits for ours in the cycle's exchange, as it would for our
  // tensors anyway. A joined rank stands in for the others' collectives
  // without calls of its own: it keeps the period.
  const bool rest = idle_cycles_ >= kIdleCyclesBeforeRest && !join_work_;
  const double ms = rest ? std::max(kIdleCycleMs, opt_.cycle_time_ms) : opt_.cycle_time_ms;
  *next += std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
  const auto now = std::chrono::steady_clock::now();
  if (*next < now) *next = now;
  const auto burst = std::chrono::microseconds(static_cast<int64_t>(kBurstCycles * opt_.cycle_time_ms * 1000));
  if (rest) {
    resting_ = true;
    cv_.wait_until(lock, *next, [&] { return !incoming_.empty() || join_work_ || shutdown_requested_; });
    resting_ = false;
    if (!incoming_.empty()) {
      idle_cycles_ = 0;
      // Woken by the first call of what is likely a burst (a step's
      // tensors one after another): negotiated once the burst ends.
      wait_for_burst_end(lock, std::chrono::steady_clock::now() + burst);
    }
    *next = std::chrono::steady_clock::now();
    nudged_ = false;
    return;
  }
  // A rank blocked in synchronize() gains nothing from more batching:
  // its nudge starts the next cycle at once.
  auto woken = [&] { return shutdown_requested_ || (nudged_ && caller_waits()); };
  // A collective that follows one just finished (a framework's executor
  // running the next op on its result) is often nudged within tens of
  // microseconds: poll for it a short while, yielding the CPU to the
  // threads that produce it, so that its cycle starts without a wake-up
  // through the kernel. Only while follow-ups keep coming that soon (a
  // training step's next round, milliseconds away, gains nothing), and
  // calls that arrive without a nudge end the poll.
  const auto finished_at = std::chrono::steady_clock::now();
  const auto window = std::chrono::microseconds(opt_.follow_up_us);
  if (ran_collectives_ && follow_ups_soon_ && opt_.follow_up_us > 0) {
    const auto until = std::min(*next, finished_at + window);
    while (incoming_.empty() && !woken() && std::chrono::steady_clock::now() < until) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
  }
  bool early = cv_.wait_until(lock, *next, woken);
  if (ran_collectives_) follow_ups_soon_ = early && nudged_ && nudged_at_ - finished_at < window;
  if (!early && !incoming_.empty()) {
    early = wait_for_burst_end(lock, *next + burst);
    if (!early) *next = std::chrono::steady_clock::now();  // the next period counts from the cycle
  }
  if (early) *next = std::chrono::steady_clock::now();  // early: the next period counts from here
  nudged_ = false;
}

bool Engine::wait_for_burst_end(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point cap) {
  // Calls arriving back to back (a loop issuing a model's tensors) are
  // negotiated once the burst ends rather than in every cycle it spans:
  // each cycle is a rendezvous of every rank's engine, and on a host with
  // few CPUs a cycle run beside the burst slows the calls it overlaps. The
  // burst has ended when no call came for RINGCC_BURST_QUIET_US; each
  // look that finds it going on waits twice as long for the next (each
  // look takes a CPU from the calls), up to `cap`. A caller that starts
  // waiting ends it (true then).
  auto woken = [&] { return shutdown_requested_ || (nudged_ && caller_waits()); };
  if (opt_.burst_quiet_us <= 0) return woken();
  const auto quiet = std::chrono::microseconds(opt_.burst_quiet_us);
  auto look = quiet;  // until the next look
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const auto quiet_at = last_enqueue_ + quiet;
    if (quiet_at <= now || now >= cap) return woken();
    if (cv_.wait_until(lock, std::min(cap, std::max(quiet_at, now + look)), woken)) return true;
    look *= 2;
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
  return "join() waited more than " + std::to_string(static_cast<int>(opt_.stall_shutdown_s)) + " s for rank(s) " +
         rank_list(missing) + " to join or to run a named collective (RINGCC_STALL_SHUTDOWN_S)";
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

}  // namespace ringcc
