// The engine's records of tensors and its constants, shared by its
// implementation files (engine.cc: the callers' side and the engine
// thread's loop; engine_cycle.cc: a cycle's steps; engine_batch.cc:
// running what is ready).
#pragma once

#include <chrono>
#include <string>

#include "core/engine/engine.h"

namespace ringcc {

// After this many cycles in a row found nothing to do on any rank, the
// engine rests until a call comes, or cycles at the slow period
// (Engine::pace).
constexpr int kIdleCyclesBeforeRest = 1;
constexpr double kIdleCycleMs = 10.0;
// Local entries kept for reuse (about 200 bytes each).
constexpr size_t kMaxSpareEntries = 4096;
// LocalEntry::busy_bit of a failed call: its name is not held in flight.
constexpr int kNotBusy = -2;

// The engine walks the records of a step's tensors (a thousand or more)
// several times a step, after the step's other work has pushed them out of
// the caches: loops over them ask for the records this many places ahead.
constexpr size_t kPrefetchAhead = 8;

// Asks for the cache lines of the `bytes` bytes at `p` ahead of their use.
inline void prefetch_lines(const void* p, size_t bytes) {
  const auto* c = static_cast<const char*>(p);
  for (size_t k = 0; k < bytes; k += 64) __builtin_prefetch(c + k);
}

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A tensor this rank enqueued and that has not run yet.
struct Engine::LocalEntry {
  std::string name;
  std::shared_ptr<Work> work;
  TensorMeta meta;
  int cache_bit = -1;        // announced through the cache
  uint64_t cache_epoch = 0;  // cache_epoch_ when cache_bit was looked up
  bool announced = false;    // announced in full
  uint64_t taken = 0;        // when the engine took it (take_incoming's count)
  // What marks its name in flight (under mu_): busy_bits_[busy_bit], or
  // its name in busy_names_ when -1; nothing for a failed call
  // (kNotBusy), which a call of the same name may follow at once.
  int busy_bit = -1;
  int64_t negotiating_us = 0;  // enqueued (0: no timeline recorded then)
  // An allreduce's buffers, as its Work holds them: a fused batch gathers
  // these without reaching into each Work. Unless `segmented`: its input
  // lies in several buffers, the segments of its Work's arguments.
  BufferSegment segment;
  bool segmented = false;
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

}  // namespace ringcc
