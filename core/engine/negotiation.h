// How the ranks' engines agree, cycle after cycle, without a coordinator.
//
// In each cycle every rank sends every other rank one message: flags (it
// joined, it shuts down, a caller of it is blocked on the engine, it
// announces something new, rank 0 calls a deadlock), one bit per response-cache entry for the cached
// tensors it has pending, the names it announced in full earlier and
// withdraws (Engine::fail_group_rests), the tensors it enqueued since its last message
// that the cache does not know (announced in full: name and description,
// and for a call it could not start, what failed and why), and the names
// rank 0 gives up on (stall_inspector.h). Every rank reads every message
// into the same table, so every rank reaches the same decisions: which
// tensors are ready everywhere (joined ranks count as ready), whether their
// descriptions agree, and in what order they run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/engine/response_cache.h"
#include "core/engine/tensor_meta.h"

namespace ringcc {

constexpr uint8_t kFlagJoined = 1;
constexpr uint8_t kFlagShutdown = 2;
// A caller of this rank is blocked on the engine (a handle's wait,
// synchronize, join).
constexpr uint8_t kFlagWaiting = 4;
// This message announces a name in full or sets a bit it did not set last
// time: the pending names changed.
constexpr uint8_t kFlagNews = 8;
// Rank 0: every rank has waited on names none can run, unchanged, for
// RINGCC_TIMEOUT_S (deadlock_watch.h); fail them if that still holds.
constexpr uint8_t kFlagDeadlock = 16;

// Writes one rank's message of a cycle, in place (the steady state of a
// training loop, where every tensor is a cache hit, allocates nothing).
class MessageBuilder {
 public:
  void start() {
    announced_.clear();
    count_ = 0;
  }
  void announce(const std::string& name, const TensorMeta& meta);
  // A call this rank could not start: `kind` failed for `reason`.
  void announce_failed(const std::string& name, const TensorMeta& meta, CollectiveKind kind, const std::string& reason);
  uint32_t announced() const { return count_; }
  // The message: flags, the cache bits, the names withdrawn, what was
  // announced, the aborts.
  void finish(uint8_t flags, const std::string& bits, const std::vector<std::string>& aborts, std::string* out,
              const std::vector<std::string>& withdrawn = {}) const;

 private:
  std::string announced_;
  uint32_t count_ = 0;
};

// A tensor some rank announced in full and that has not run yet (the same
// on every rank).
struct TableEntry {
  uint64_t seq = 0;  // the order entries appeared in
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

// What a cycle's messages said besides the table.
struct CycleNews {
  std::vector<bool> joined;         // by rank
  std::vector<int> shut_down;       // ranks that shut down
  std::vector<std::string> aborts;  // names rank 0 gave up on ("": the join)
  // Names whose entry went as a rank withdrew from it, leaving only failed
  // calls (kLocalError): the ranks that made those drop them.
  std::vector<std::string> dropped;
  bool any_new = false;             // some rank announced a tensor in full
  bool all_waiting = false;         // every rank has a caller blocked on the engine
  bool changed = false;             // some rank's pending names changed (kFlagNews)
  bool deadlock_called = false;     // rank 0 set kFlagDeadlock
};

// "[0, 2]"
std::string rank_list(const std::vector<int>& ranks);

class Negotiation {
 public:
  explicit Negotiation(int size);
  int size() const { return size_; }

  // Room for every bit the cache may hand out (the same on every rank).
  void resize_bits(size_t cache_capacity);
  size_t bit_bytes() const { return any_bits_.size(); }

  // Reads every rank's message of the cycle (messages[r] is rank r's) into
  // the table and the bits. A name rank r withdraws loses r's submission
  // before r's announcements are read (r may announce it anew), and its
  // entry goes when nobody else submitted it, or only failed calls
  // (CycleNews::dropped). Raises Error(kMismatch) when the ranks' caches
  // differ in size, Error(kInternal) on a malformed message.
  void apply(const std::vector<std::string>& messages, const ResponseCache& cache, double now, CycleNews* news);

  // The ranks that have joined, as of the last cycle.
  const std::vector<bool>& joined() const { return joined_; }
  void set_joined(const std::vector<bool>& joined) { joined_ = joined; }
  void clear_joined() { std::fill(joined_.begin(), joined_.end(), false); }

  // Fills all_bits() with the cache bits every rank that has not joined
  // has set, of names without a table entry; returns how many.
  size_t find_ready_bits(const ResponseCache& cache);
  const std::string& all_bits() const { return all_bits_; }
  // The OR of every rank's bits: pending somewhere.
  const std::string& any_bits() const { return any_bits_; }
  bool pending_anywhere(size_t bit) const { return any_bits_[bit / 8] & (1 << (bit % 8)); }
  // Some rank has a name pending: a table entry or a cache bit.
  bool any_pending() const;
  // Rank r set `bit` in its last message.
  bool has_bit(int r, size_t bit) const { return rank_bits_[static_cast<size_t>(r)][bit / 8] & (1 << (bit % 8)); }
  bool in_table(size_t bit) const { return bit_in_table_[bit] != 0; }

  // The table entries that every rank has submitted (or joined), in the
  // order they appeared: (entry, its name).
  void ready_entries(std::vector<std::pair<TableEntry*, const std::string*>>* out);

  // True when the ranks' descriptions of `e` agree (and none failed);
  // otherwise *why says how they differ, naming the tensor.
  bool agree(const std::string& name, const TableEntry& e, std::string* why) const;
  // True when `meta` cannot run because some rank has joined: while a rank
  // has joined, only allreduce runs (the joined ranks add zeros), as in
  // Horovod; *why then says so, naming the tensor, the joined ranks and a
  // broadcast's root among them.
  bool refused_by_join(const std::string& name, const TensorMeta& meta, std::string* why) const;
  // The first description submitted for `e`.
  const TensorMeta& first_meta(const TableEntry& e) const;
  // Ranks that have neither submitted `e` (or set `bit`) nor joined.
  std::vector<int> missing_ranks(const TableEntry& e) const;
  std::vector<int> missing_ranks(size_t bit) const;

  std::unordered_map<std::string, std::unique_ptr<TableEntry>>& table() { return table_; }
  const std::unordered_map<std::string, std::unique_ptr<TableEntry>>& table() const { return table_; }

 private:
  TableEntry& entry_for(const std::string& name, double now);
  void withdraw(int rank, const std::string& name, CycleNews* news);

  int size_;
  std::unordered_map<std::string, std::unique_ptr<TableEntry>> table_;
  uint64_t table_seq_ = 0;
  std::vector<bool> joined_;
  // The cache-hit path: a tensor announced by its bit is ready when every
  // rank that has not joined sets the bit; it needs no table entry unless
  // some rank announced the same name in full (bit_in_table_).
  std::vector<std::string> rank_bits_;  // each rank's bits, last cycle
  std::string any_bits_;                // OR of rank_bits_
  std::string all_bits_;                // bits ready on every rank, this cycle
  std::vector<char> bit_in_table_;
};

}  // namespace ringcc
