// The background engine: collectives enqueued by name, in any order on
// each rank, run once every rank has enqueued them.
//
// One thread per process runs cycles (RINGCC_CYCLE_TIME_MS). In each cycle
// the ranks allgather a short message and every rank reaches the same
// decisions without a coordinator (negotiation.h): which tensors are ready
// on every rank, whether their descriptions agree, and in what order to
// run them. Names negotiated before go by one bit of the response cache
// (response_cache.h). Ready allreduces of one dtype, reduction and scaling
// are fused up to RINGCC_FUSION_THRESHOLD. Rank 0 watches for stalls
// (stall_inspector.h: RINGCC_STALL_CHECK_S) and, past
// RINGCC_STALL_SHUTDOWN_S, fails the stalled tensors on every rank; a
// stall in which every rank's caller waits on the engine is a deadlock
// (deadlock_watch.h) and fails after RINGCC_TIMEOUT_S.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/base/error.h"
#include "core/base/timeline.h"
#include "core/collective/work.h"
#include "core/communicator.h"
#include "core/engine/deadlock_watch.h"
#include "core/engine/engine_waiter.h"
#include "core/engine/negotiation.h"
#include "core/engine/response_cache.h"
#include "core/engine/stall_inspector.h"
#include "core/engine/tensor_meta.h"

namespace ringcc {

// The default bound on a named collective (and a join) that some ranks
// enqueued and others did not: like torch's process-group timeout, long
// enough for a rank to checkpoint or evaluate while the others wait.
constexpr double kDefaultStallShutdownS = 600.0;

// A cycle due while calls keep arriving closer than kBurstQuietUs apart
// (RINGCC_BURST_QUIET_US) waits for the burst to end, for at most
// kBurstCycles periods.
constexpr int64_t kBurstQuietUs = 50;
constexpr int kBurstCycles = 4;
// RINGCC_ENGINE_POLL_US: see EngineOptions::follow_up_us.
constexpr int64_t kFollowUpUs = 200;

struct EngineOptions {
  double cycle_time_ms = 1.0;
  int64_t fusion_threshold = 64 << 20;
  double stall_check_s = 60.0;
  double stall_shutdown_s = kDefaultStallShutdownS;  // 0: never fail stalled tensors
  int cache_capacity = 1024;
  std::string timeline_path;
  // A cycle due while calls arrive closer than this apart waits for the
  // burst to end (at most kBurstCycles periods); 0: never waits.
  int64_t burst_quiet_us = kBurstQuietUs;
  // After a cycle that ran collectives, how long the engine thread polls
  // for the next nudge (yielding the CPU) before it sleeps, while the
  // last such nudge came within that time; 0: never.
  int64_t follow_up_us = kFollowUpUs;

  // RINGCC_* settings, with Horovod's names as fallbacks.
  static EngineOptions from_env();
};

struct EngineStats {
  uint64_t cycles = 0;
  uint64_t cached_cycles = 0;        // cycles whose ready tensors all came from the cache
  double negotiation_us = 0;         // mean time to agree, over all cycles
  double cached_negotiation_us = 0;  // mean over the cache-hit cycles
  // The parts of a cache-hit cycle: this rank's own work (building,
  // parsing and deciding) and the message exchange (which also absorbs
  // any wait for slower ranks).
  double cached_decide_us = 0;
  double cached_exchange_us = 0;
  // Of the exchange, the time spent waiting for the other ranks' engines
  // to reach the cycle (measured over shared memory; 0 elsewhere), and what
  // negotiating costs without it: own work plus moving the messages.
  double cached_peer_wait_us = 0;
  double cached_overhead_us = 0;
  uint64_t fused_collectives = 0;
  uint64_t tensors = 0;
};

class Engine {
 public:
  // comm: a communicator for the engine's own use (its order of
  // collectives is the engine's, not the caller's).
  Engine(std::shared_ptr<Communicator> comm, EngineOptions options);
  ~Engine();

  // Queues a named collective; `args` (moved from) carries the buffers
  // (kind, dtype, in/out, counts, op, root, scales, splits), `shape` (ndim
  // values, copied) its full shape. args.kind == kLocalError: this rank
  // could not start the collective args.failed_kind under this name
  // (args.local_error says why); once every rank has submitted the name,
  // it fails on every rank with MismatchError naming this rank and why.
  // `layout`: see TensorMeta::layout.
  std::shared_ptr<Work> enqueue(std::string_view name, CollectiveArgs&& args, const int64_t* shape, size_t ndim,
                                int64_t layout = 0);
  // Queues this rank's join: it completes when every rank has joined; its
  // result_count is the last rank to join (the highest of those that
  // joined in the same cycle), the same on every rank. Until then this
  // rank adds zeros to the others' allreduces, and their other collectives
  // fail with MismatchError (Negotiation::refused_by_join).
  std::shared_ptr<Work> join();
  // The caller of join() has its outcome (a result or an error): the next
  // join() starts a new one. Until then join() returns the same Work, so a
  // wait that a signal interrupted can be taken up again even when the join
  // finished in the meantime (and the peers went on, or shut down).
  void join_collected(const std::shared_ptr<Work>& work);
  // Starts the next cycle now instead of at the cycle time: for a caller
  // that is about to block on `waiting`, a Work this engine returned. The
  // nudge lasts until that Work is done, so a caller whose tensor a cycle
  // already ran starts no further cycle (every cycle is a rendezvous with
  // the other ranks' engines).
  void nudge(const std::shared_ptr<Work>& waiting);
  // Counts the caller as blocked on this engine while the waiter lives.
  EngineWaiter waiter() const { return EngineWaiter(blocked_callers_); }

  void start_timeline(const std::string& path);
  void stop_timeline();
  EngineStats stats() const;

  // Leaves in step with the other ranks; fails what is still queued.
  void shutdown();

 private:
  struct LocalEntry;
  struct ReadyItem;
  struct Batch;

  void loop();
  // Waits until the next cycle is due (under mu_): at the cycle time, at
  // once for a nudge, slowly after a long idle stretch.
  void pace(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point* next);
  // Waits (under `lock`) while calls keep arriving, at most until `cap`;
  // true when a caller started waiting or shutdown was asked for.
  bool wait_for_burst_end(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point cap);
  bool caller_waits();  // under mu_: the last nudge's Work is still pending

  // The steps of a cycle, in order.
  void cycle();
  void take_incoming();
  // behind_failed_: an entry waits there; those whose turn came go to taken_.
  void put_behind_failed(std::unique_ptr<LocalEntry> entry);
  void take_behind_failed();
  // Whether `entry` waits behind a failed call of this rank still pending:
  // one of its name, or (unless it failed too) `<name>` of a grouped call's
  // `<name>.<i>` (a single call failed under a group's name; the retry's
  // group must not meet the peers' old one).
  bool behind_failed_call(const LocalEntry& entry) const;
  // A grouped call's first collective failed here because some rank could
  // not start it (run_ready), and that rank's failed call is no collective
  // of the same group (its layout is neither the group's nor
  // TensorMeta::kGroupFailed): it made the single call and knows nothing of the
  // group's others, which would wait for it until the stall timeout. The
  // others here fail too, now (fail_group_rests) or when they come
  // (ends_in_group_rest), and the peers' tables lose this rank's part in
  // them (withdrawn in the next message).
  void note_group_rest(const std::string& head, const TensorMeta& meta, const TableEntry& e, const std::string& why);
  void fail_group_rests();
  bool ends_in_group_rest(std::unique_ptr<LocalEntry>& entry);
  void drop_failed_calls(const std::vector<std::string>& names);
  std::string build_message();
  struct Exchange {
    std::vector<std::string> messages;  // by rank
    double exchange_us = 0, peer_wait_us = 0;
  };
  void exchange(const std::string& msg, Exchange* out);
  void note_joins(const std::vector<bool>& joined);
  void fail_aborted(const std::vector<std::string>& aborts, const std::vector<bool>& joined);
  void collect_ready(std::vector<ReadyItem>* ready, double now);
  void record_stats(double negotiation_us, const Exchange& exchange, bool any_new, bool cached_ready);
  void note_idle(bool any_ready, bool any_new);
  // Rank 0 calls a deadlock that held for RINGCC_TIMEOUT_S; every rank
  // fails it when it still holds in the cycle that carries the call.
  void watch_deadlock(bool any_ready, double now);
  void fail_deadlocked();
  void run_ready(std::vector<ReadyItem>& ready);
  // Fails a ready tensor that cannot run (MismatchError, `why`) on the
  // ranks that enqueued it, and forgets it on every rank.
  void refuse(const ReadyItem& item, const std::string& why);
  void finish_join();
  void stop_if_shut_down(const std::vector<int>& shut_down);

  // A batch: ready tensors that run as one collective.
  void execute_batch(const Batch& items, int64_t fusion_id);
  void run_single(const ReadyItem& item, const TensorMeta& meta, int64_t t_ready, const std::string& fusion_args);
  void run_fused(const Batch& items, const TensorMeta& meta, int64_t t_ready, const std::string& fusion_args);
  // A joined rank's part in an allreduce it did not enqueue: zeros, and a
  // result thrown away.
  CollectiveArgs joined_args(const TensorMeta& meta);
  // ... and in a collective of device tensors, which it cannot stand in for:
  // a failed call.
  void stand_in_refused(CollectiveKind kind, MemoryKind memory, CollectiveArgs* a) const;
  void finish_batch(const Batch& items, std::exception_ptr error);
  void wake_finished();  // wakes the callers of Works execute_batch() finished

  // Forgets a tensor that ran or failed: its table entry or cache-bit
  // state, and (when this rank enqueued it) its local entry.
  void retire(const ReadyItem& item);
  const std::string& name_of(const ReadyItem& item) const;
  void drop_local(const std::string& name);
  // Under mu_: the entry's name may be enqueued again.
  void release_busy(LocalEntry& entry);
  // Frees the entry's name, then finishes its Work with `error`.
  void finish_local(LocalEntry& entry, std::exception_ptr error);
  void drop_local_bit(size_t bit);  // my pending tensor of a cache bit
  // Hands the entries dropped this cycle to enqueue() for reuse.
  void recycle_retired();
  // enqueue(), under mu_: asks for the records of the tensors that followed
  // `bit` last time, before their calls come.
  void prefetch_ahead(size_t bit);
  LocalEntry* find_local(const std::string& name);
  // Puts a tensor that ran into the response cache (the same decision on
  // every rank), so that its next round is announced by one bit.
  void remember(const std::string& name, const TableEntry& e);
  // Makes room in a full cache: the bit of the least recently used name
  // no rank waits on, its local entry announced in full again; -1 if none.
  int evict();
  void fail_all(const std::string& why, ErrorKind kind);
  // Fails this rank's join (rank 0 gave up on it: RINGCC_STALL_SHUTDOWN_S).
  void fail_join(const std::string& why);
  std::string join_stall_why_ranks(const std::vector<bool>& joined) const;

  std::shared_ptr<Communicator> comm_;
  EngineOptions opt_;
  Timeline timeline_;
  int rank_, size_;

  // Shared with user threads.
  std::mutex mu_;
  std::condition_variable cv_;
  // Enqueued tensors the engine thread has not taken yet, described and
  // looked up in the response cache by the enqueuing thread.
  std::vector<std::unique_ptr<LocalEntry>> incoming_;
  std::vector<std::unique_ptr<LocalEntry>> taken_;  // the engine thread's, swapped with incoming_
  // Entries of tensors that ran, for enqueue() to reuse: a training loop
  // enqueues and retires the same number every step, and reusing them
  // saves an allocation on one thread freed on the other.
  std::vector<std::unique_ptr<LocalEntry>> spare_;
  // ... and those of names in the response cache, by bit: the name's next
  // enqueue() finds its name and description in place.
  std::vector<std::unique_ptr<LocalEntry>> idle_by_bit_;
  std::shared_ptr<Work> join_work_;
  std::shared_ptr<Work> unclaimed_join_;  // the last join, until join_collected()
  // Names enqueued on this rank whose collectives have not completed: by
  // cache bit, and (names enqueued without one) by name. enqueue() refuses
  // a name in flight.
  std::vector<char> busy_bits_;
  std::unordered_set<std::string> busy_names_;
  // Callers blocked on this engine's Works (EngineWaiter).
  std::shared_ptr<std::atomic<int>> blocked_callers_ = std::make_shared<std::atomic<int>>(0);
  bool shutdown_requested_ = false;
  bool thread_exited_ = false;       // the engine thread returned (cv_ tells)
  bool nudged_ = false;              // a nudge came since the engine last woke
  std::chrono::steady_clock::time_point nudged_at_{};  // ... at this time
  std::weak_ptr<Work> nudged_work_;  // what the nudging caller waits on
  uint64_t nudged_generation_ = 0;   // ... and its Work::generation() then
  bool stopped_ = false;
  std::string broken_;
  ErrorKind broken_kind_ = ErrorKind::kPeerFailure;

  // The engine thread's own state; identical on every rank where noted.
  // My pending tensors: those announced in full by name, those announced by
  // their cache bit by bit.
  std::unordered_map<std::string, std::unique_ptr<LocalEntry>> local_;
  std::vector<std::unique_ptr<LocalEntry>> retired_;  // dropped this cycle
  // enqueue()'s guess at the next bit: the bit enqueued after bit b last
  // time (-1: none), and the bit of the last tensor enqueued. Under mu_.
  std::vector<int> next_bit_hint_;
  int last_enqueued_bit_ = -1;
  std::chrono::steady_clock::time_point last_enqueue_{};  // under mu_: the latest call's arrival
  // The response cache (identical): the engine thread changes it under
  // mu_, enqueuing threads look names up under it.
  ResponseCache cache_;
  Negotiation negotiation_;                                // identical
  std::string my_bits_;                                    // bits of my pending cached tensors
  std::vector<std::unique_ptr<LocalEntry>> local_by_bit_;  // my pending tensor of each bit
  StallInspector stalls_;                                  // identical (rank 0 inspects)
  DeadlockWatch deadlock_;                                 // identical (rank 0's clock decides)
  bool calls_deadlock_ = false;                            // rank 0: the next message sets kFlagDeadlock
  MessageBuilder message_;
  CycleNews news_;
  bool joined_ = false;
  bool sent_shutdown_ = false;  // the last message carried this rank's shutdown
  int last_joined_ = -1;        // identical
  std::vector<uint8_t> zeros_;
  std::vector<ReadyItem> ready_;                // cycle(): what is ready, reused
  CollectiveArgs fused_args_;                   // run_fused(): the fused allreduce, reused
  std::vector<std::shared_ptr<Work>> to_wake_;  // finished Works with a waiter to wake
  int idle_cycles_ = 0;
  bool resting_ = false;  // under mu_: pace() waits for a call (see there)
  bool ran_collectives_ = false;  // the last cycle ran some
  bool follow_ups_soon_ = true;   // the last such cycle's follow-up was nudged within follow_up_us
  bool sent_news_ = false;    // the last cycle announced new names or newly set bits
  bool bits_added_ = false;   // a tensor was announced by its bit since the last message
  uint64_t taken_count_ = 0;  // tensors take_incoming() took, for the order of announcements

  mutable std::mutex stats_mu_;
  EngineStats stats_;
  std::thread thread_;

  // The engine thread's, for failed calls. Last: the members above are laid
  // out for the per-tensor path (what the enqueuing threads and the engine
  // thread each touch).
  // Enqueued under the name of this rank's failed call (kLocalError) while
  // it was pending (failed calls too): taken once it is gone, in the order
  // they came.
  std::vector<std::unique_ptr<LocalEntry>> behind_failed_;
  size_t failed_pending_ = 0;  // entries of local_ that are failed calls
  struct GroupRest {
    std::string head;    // the failed first collective's name
    int64_t length = 0;  // the group's: its others are <head>.1 .. <head>.<length - 1>
    std::string why;     // the first's error
    int64_t left = 0;    // others not met yet
  };
  std::vector<GroupRest> group_rests_;
  std::vector<std::string> withdrawn_;  // for the next message
};

}  // namespace ringcc
