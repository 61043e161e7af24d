// The background engine: collectives enqueued by name, in any order on
// each rank, run once every rank has enqueued them.
//
// One thread per process runs cycles (RINGCC_CYCLE_TIME_MS). In each cycle
// the ranks allgather a short message: the tensors they enqueued since the
// last cycle (name and description), and a bit per tensor of the response
// cache (names negotiated before) that is ready again. Every rank then
// holds the same table and reaches the same decisions without a
// coordinator: which tensors are ready on every rank, whether their
// descriptions agree, and in what order to run them. Ready allreduces of
// one dtype, reduction and scaling are fused up to RINGCC_FUSION_THRESHOLD.
// Rank 0 watches for stalls (RINGCC_STALL_CHECK_S) and, past
// RINGCC_STALL_SHUTDOWN_S, fails the stalled tensors on every rank.
#pragma once

#include <atomic>
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

#include "core/communicator.h"
#include "core/error.h"
#include "core/fusion_buffer.h"
#include "core/tensor_request.h"
#include "core/timeline.h"
#include "core/work.h"

namespace ringcc {

// The default bound on a named collective (and a join) that some ranks
// enqueued and others did not: like torch's process-group timeout, long
// enough for a rank to checkpoint or evaluate while the others wait.
constexpr double kDefaultStallShutdownS = 600.0;

struct EngineOptions {
  double cycle_time_ms = 1.0;
  int64_t fusion_threshold = 64 << 20;
  double stall_check_s = 60.0;
  double stall_shutdown_s = kDefaultStallShutdownS;  // 0: never fail stalled tensors
  int cache_capacity = 1024;
  std::string timeline_path;

  // RINGCC_* settings, with Horovod's names as fallbacks.
  static EngineOptions from_env();
};

struct EngineStats {
  uint64_t cycles = 0;
  uint64_t cached_cycles = 0;       // cycles whose ready tensors all came from the cache
  double negotiation_us = 0;        // mean time to agree, over all cycles
  double cached_negotiation_us = 0; // mean over the cache-hit cycles
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
  std::shared_ptr<Work> enqueue(std::string_view name, CollectiveArgs&& args, const int64_t* shape,
                                size_t ndim);
  // Queues this rank's join: it completes when every rank has joined; its
  // result_count is the last rank to join.
  std::shared_ptr<Work> join();
  // Starts the next cycle now instead of at the cycle time: for a caller
  // that is about to block on `waiting`, a Work this engine returned. The
  // nudge lasts until that Work is done, so a caller whose tensor a cycle
  // already ran starts no further cycle (every cycle is a rendezvous with
  // the other ranks' engines).
  void nudge(const std::shared_ptr<Work>& waiting);

  void start_timeline(const std::string& path);
  void stop_timeline();
  EngineStats stats() const;

  // Leaves in step with the other ranks; fails what is still queued.
  void shutdown();

 private:
  struct LocalEntry;
  struct TableEntry;

  void loop();
  bool caller_waits();  // under mu_: the last nudge's Work is still pending
  void cycle();
  void take_incoming();
  // behind_failed_: an entry waits there; those whose turn came go to taken_.
  void put_behind_failed(std::unique_ptr<LocalEntry> entry);
  void take_behind_failed();
  std::string build_message();
  void apply_messages(const std::vector<std::string>& messages, std::vector<bool>* joined,
                      std::vector<std::string>* aborts, std::vector<int>* shut_down,
                      bool* any_new);
  struct ReadyItem;
  void run_ready(std::vector<ReadyItem>& ready);
  struct Batch;
  void execute_batch(const Batch& items, int64_t fusion_id);
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
  LocalEntry* find_local(const std::string& name);
  // The cache bit of name if it is cached with exactly this description.
  int cached_bit(const std::string& name, const TensorMeta& meta) const;
  // A joined rank's part in a collective of device tensors: a failed call.
  void stand_in_refused(CollectiveKind kind, MemoryKind memory, CollectiveArgs* a) const;
  void inspect_stalls();
  // The first submitted description of e; "" in *why when all agree.
  const TensorMeta& first_meta(const TableEntry& e) const;
  bool agree(const std::string& name, const TableEntry& e, std::string* why) const;
  void remember(const std::string& name, const TableEntry& e);
  void fail_all(const std::string& why, ErrorKind kind);
  // Fails this rank's join (rank 0 gave up on it: RINGCC_STALL_SHUTDOWN_S).
  void fail_join(const std::string& why);
  std::string join_stall_why_ranks(const std::vector<bool>& joined) const;
  std::vector<int> missing_ranks(const TableEntry& e) const;
  std::vector<int> missing_ranks(size_t bit) const;

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
  // Names enqueued on this rank whose collectives have not completed: by
  // cache bit, and (names enqueued without one) by name. enqueue() refuses
  // a name in flight.
  std::vector<char> busy_bits_;
  std::unordered_set<std::string> busy_names_;
  bool shutdown_requested_ = false;
  bool thread_exited_ = false;  // the engine thread returned (cv_ tells)
  bool nudged_ = false;               // a nudge came since the engine last woke
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
  // The engine thread changes the cache under mu_; enqueuing threads look
  // names up under it. cache_epoch_ counts evictions: a lookup made before
  // one is repeated.
  uint64_t cache_epoch_ = 0;
  // enqueue()'s guess at the next bit: the bit enqueued after bit b last
  // time (-1: none), and the bit of the last tensor enqueued. Under mu_.
  std::vector<int> next_bit_hint_;
  int last_enqueued_bit_ = -1;
  std::vector<std::string> cache_names_;                 // identical
  std::vector<std::shared_ptr<const TensorMeta>> cache_metas_;  // identical
  std::unordered_map<std::string, int> cache_index_;     // identical
  std::vector<uint64_t> cache_used_;                     // identical: last use, for LRU
  // Ready cache hits run in the order their names entered the cache, which
  // is the order a training loop enqueues them (see build_message()),
  // whichever bits eviction handed them: the bits in that order, rebuilt
  // when the cache changes.
  std::vector<uint64_t> cache_entered_;                  // identical
  std::vector<int> bits_in_order_;                       // identical
  bool bits_reordered_ = false;                          // identical: rebuild bits_in_order_
  uint64_t cache_clock_ = 0;                             // identical
  std::unordered_map<std::string, std::unique_ptr<TableEntry>> table_;  // identical
  // The cache-hit path: a tensor announced by its bit is ready when every
  // rank that has not joined sets the bit; it needs no table entry unless
  // some rank announced the same name in full (bit_in_table_).
  std::string my_bits_;                       // bits of my pending cached tensors
  std::vector<std::unique_ptr<LocalEntry>> local_by_bit_;  // my pending tensor of each bit
  std::vector<std::string> rank_bits_;        // identical: each rank's bits, last cycle
  std::string any_bits_;                      // identical: OR of rank_bits_
  std::string all_bits_;                      // identical: bits ready on every rank, this cycle
  std::vector<char> bit_in_table_;            // identical
  std::vector<double> bit_first_seen_;        // identical: pending since (0: not pending)
  std::vector<int> stall_bits_;               // identical: the bits whose bit_first_seen_ may be set
  std::vector<double> bit_last_warned_;       // rank 0: last stall warning per bit
  uint64_t table_seq_ = 0;                               // identical
  std::vector<bool> was_joined_;                         // identical
  bool joined_ = false;
  bool sent_shutdown_ = false;  // the last message carried this rank's shutdown
  // Rank 0: since when some ranks have joined and the others made no
  // progress (0: no join pending), and whether it gave up on the join.
  double join_pending_since_ = 0;
  double join_last_warned_ = 0;
  bool join_abort_sent_ = false;
  int last_joined_ = -1;                                 // identical
  std::vector<std::string> pending_aborts_;              // rank 0: to announce
  std::vector<uint8_t> zeros_;
  FusionBuffer fusion_;
  CollectiveArgs fused_args_;  // execute_batch(): the fused allreduce, reused
  std::vector<std::shared_ptr<Work>> to_wake_;  // finished Works with a waiter to wake
  int idle_cycles_ = 0;
  bool sent_news_ = false;   // the last cycle announced new names or newly set bits
  bool bits_added_ = false;  // a tensor was announced by its bit since the last message
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
};

}  // namespace ringcc
