// Running what is ready: batches of tensors fused into one collective, the
// response cache told what ran, the Works marked done and their callers
// woken, the entries retired for reuse. (The per-tensor path of a training
// step, kept in one file.)
#include <algorithm>
#include <cstring>

#include "core/base/error.h"
#include "core/base/thread_exit.h"
#include "core/engine/engine.h"
#include "core/engine/engine_entries.h"

namespace ringcc {

namespace {

const char* phase_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce:
      return "ALLREDUCE";
    case CollectiveKind::kAllgather:
      return "ALLGATHER";
    case CollectiveKind::kBroadcast:
      return "BROADCAST";
    case CollectiveKind::kReduceScatter:
      return "REDUCESCATTER";
    case CollectiveKind::kAlltoall:
      return "ALLTOALL";
    default:
      return "COLLECTIVE";
  }
}

}  // namespace

void Engine::run_ready(std::vector<ReadyItem>& ready) {
  size_t i = 0;
  int64_t fusion_id = 0;
  while (i < ready.size()) {
    ReadyItem& head = ready[i];
    std::string why;
    if (head.entry && !negotiation_.agree(head.name, *head.entry, &why)) {
      if (head.local) {
        if (!head.entry->failures.empty()) note_group_rest(head.name, head.local->meta, *head.entry, why);
        finish_local(*head.local, std::make_exception_ptr(Error(ErrorKind::kMismatch, why)));
        drop_local(head.name);
      }
      negotiation_.table().erase(head.name);
      ++i;
      continue;
    }
    const TensorMeta& meta = *head.meta;
    if (negotiation_.refused_by_join(name_of(head), meta, &why)) {
      refuse(head, why);
      ++i;
      continue;
    }
    if (head.entry) {
      remember(head.name, *head.entry);
    } else {
      cache_.touch(static_cast<size_t>(head.bit));
    }
    // Fuse the following ready allreduces of the same kind.
    size_t j = i + 1;
    if (meta.kind == CollectiveKind::kAllreduce) {
      int64_t bytes = meta.elements() * static_cast<int64_t>(dtype_size(meta.dtype));
      while (j < ready.size()) {
        if (j + kPrefetchAhead < ready.size()) __builtin_prefetch(ready[j + kPrefetchAhead].meta);
        if (j + kPrefetchAhead / 2 < ready.size()) __builtin_prefetch(ready[j + kPrefetchAhead / 2].meta->shape.data());
        const ReadyItem& next = ready[j];
        const TensorMeta& m = *next.meta;
        const int64_t b = m.elements() * static_cast<int64_t>(dtype_size(m.dtype));
        std::string ignored;
        if (m.kind != meta.kind || m.dtype != meta.dtype || m.op != meta.op || m.prescale != meta.prescale ||
            m.postscale != meta.postscale || m.memory != meta.memory || bytes + b > opt_.fusion_threshold ||
            (next.entry && !negotiation_.agree(next.name, *next.entry, &ignored))) {
          break;
        }
        if (next.entry) {
          remember(next.name, *next.entry);
        } else {
          cache_.touch(static_cast<size_t>(next.bit));
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

// Out of line, as everything about failed calls: run_ready() runs per
// tensor of every training step.
__attribute__((noinline)) void Engine::refuse(const ReadyItem& item, const std::string& why) {
  // Where this rank joined, it holds nothing of the tensor: the others'
  // callers get the error, and every rank forgets the tensor alike.
  if (item.local) finish_local(*item.local, std::make_exception_ptr(Error(ErrorKind::kMismatch, why)));
  retire(item);
}

void Engine::remember(const std::string& name, const TableEntry& e) {
  if (cache_.touch(name) || cache_.capacity() == 0) return;
  std::shared_ptr<const TensorMeta> meta;
  for (int r = 0; r < size_ && !meta; ++r) {
    if (e.submitted[static_cast<size_t>(r)]) meta = e.metas[static_cast<size_t>(r)];
  }
  if (!cache_.full()) {
    std::lock_guard<std::mutex> lock(mu_);  // enqueue() looks names up under it
    cache_.add(name, std::move(meta));
    return;
  }
  const int bit = evict();
  if (bit < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  cache_.replace(static_cast<size_t>(bit), name, std::move(meta));
}

int Engine::evict() {
  // The least recently used name that no rank is waiting on (the same
  // choice on every rank, as the inputs are the same).
  const int victim = cache_.victim([this](size_t b) {
    return !negotiation_.table().count(cache_.name(b)) && !negotiation_.in_table(b) &&
           !negotiation_.pending_anywhere(b);
  });
  if (victim < 0) return -1;
  const auto bit = static_cast<size_t>(victim);
  // A local tensor still announced through the evicted bit is announced
  // in full from the next cycle on.
  if (local_by_bit_[bit]) {
    std::unique_ptr<LocalEntry> entry = std::move(local_by_bit_[bit]);
    entry->cache_bit = -1;
    entry->announced = false;
    my_bits_[bit / 8] &= static_cast<char>(~(1 << (bit % 8)));
    local_.emplace(cache_.name(bit), std::move(entry));
  }
  stalls_.stop(bit);
  std::lock_guard<std::mutex> lock(mu_);  // enqueue() looks names up under it
  if (busy_bits_[bit]) {
    // An enqueued tensor not yet announced holds the evicted bit: it
    // stays in flight under its name.
    busy_bits_[bit] = 0;
    busy_names_.insert(cache_.name(bit));
    for (auto& entry : incoming_) {
      if (entry->busy_bit == victim) entry->busy_bit = -1;
    }
    for (auto& [entry_name, entry] : local_) {
      if (entry->busy_bit == victim) entry->busy_bit = -1;
    }
  }
  if (idle_by_bit_[bit] && spare_.size() < kMaxSpareEntries) spare_.push_back(std::move(idle_by_bit_[bit]));
  idle_by_bit_[bit].reset();
  return victim;
}

Engine::LocalEntry* Engine::find_local(const std::string& name) {
  auto local = local_.find(name);
  if (local != local_.end()) return local->second.get();
  const int bit = cache_.bit_of(name);
  return bit < 0 ? nullptr : local_by_bit_[static_cast<size_t>(bit)].get();
}

void Engine::drop_local(const std::string& name) {
  auto local = local_.find(name);
  if (local != local_.end()) {
    if (local->second->meta.kind == CollectiveKind::kLocalError) --failed_pending_;
    retired_.push_back(std::move(local->second));
    local_.erase(local);
    return;
  }
  const int bit = cache_.bit_of(name);
  if (bit >= 0) drop_local_bit(static_cast<size_t>(bit));
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
      if (bit < 0 || entry->cache_epoch != cache_.epoch()) bit = cache_.bit_of(entry->name, entry->meta);
      if (bit >= 0 && !idle_by_bit_[static_cast<size_t>(bit)]) {
        idle_by_bit_[static_cast<size_t>(bit)] = std::move(entry);
      } else if (spare_.size() < kMaxSpareEntries) {
        spare_.push_back(std::move(entry));
      }
    }
  }
  retired_.clear();  // past the cap: freed here
}

void Engine::release_busy(LocalEntry& entry) {
  if (entry.busy_bit >= 0) {
    busy_bits_[static_cast<size_t>(entry.busy_bit)] = 0;
  } else if (entry.busy_bit != kNotBusy) {
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

void Engine::wake_finished() {
  for (const auto& work : to_wake_) work->wake();
  to_wake_.clear();
}

const std::string& Engine::name_of(const ReadyItem& item) const {
  // A bit that is pending on some rank is never evicted, so its name stays
  // for the whole cycle.
  return item.bit >= 0 ? cache_.name(static_cast<size_t>(item.bit)) : item.name;
}

void Engine::retire(const ReadyItem& item) {
  if (item.entry) {
    negotiation_.table().erase(item.name);
    if (item.local) drop_local(item.name);
    return;
  }
  // Ready through its bit: no name to look up.
  const auto b = static_cast<size_t>(item.bit);
  stalls_.stop(b);
  if (item.local) drop_local_bit(b);
}

void Engine::execute_batch(const Batch& items, int64_t fusion_id) {
  // Buffers: ours if we enqueued the tensor, zeros if we joined.
  const TensorMeta meta = *items[0].meta;
  const int64_t t_ready = Timeline::now_us();
  if (timeline_.active()) {
    for (const auto& item : items) {
      const int64_t since = item.local ? item.local->negotiating_us : 0;
      if (since > 0) timeline_.phase(name_of(item), "NEGOTIATING", since, t_ready);
    }
  }
  std::exception_ptr error;
  const std::string fusion_args =
      timeline_.active() ? "\"fusion\": " + std::to_string(fusion_id) + ", \"tensors\": " + std::to_string(items.size())
                         : std::string();
  try {
    if (items.size() == 1) {
      run_single(items[0], meta, t_ready, fusion_args);
    } else {
      run_fused(items, meta, t_ready, fusion_args);
    }
  } catch (const ThreadExit&) {
    throw;
  } catch (...) {
    error = std::current_exception();
  }
  finish_batch(items, error);
  // Only a broken communicator stops the engine; a bad argument on one
  // tensor failed that tensor alone.
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kPeerFailure || e.kind() == ErrorKind::kTimeout || e.kind() == ErrorKind::kInternal) {
        throw;
      }
    }
  }
}

void Engine::run_single(const ReadyItem& item, const TensorMeta& meta, int64_t t_ready,
                        const std::string& fusion_args) {
  LocalEntry* local = item.local;
  CollectiveArgs a;
  if (local) {
    a = local->work->list()[0];
  } else if (meta.memory != MemoryKind::kHost) {
    stand_in_refused(meta.kind, meta.memory, &a);
  } else {
    a = joined_args(meta);
  }
  comm_->run(a);
  if (!local) return;
  CollectiveArgs& mine = local->work->list()[0];
  mine.result_count = a.result_count;
  mine.recv_counts = a.recv_counts;
  mine.out = a.out;
  if (timeline_.active()) {
    timeline_.phase(name_of(item), phase_name(meta.kind), t_ready, Timeline::now_us(), fusion_args);
  }
}

CollectiveArgs Engine::joined_args(const TensorMeta& meta) {
  // Only an allreduce runs while a rank has joined (refused_by_join).
  const size_t es = dtype_size(meta.dtype);
  CollectiveArgs a;
  a.kind = meta.kind;
  a.dtype = meta.dtype;
  a.op = meta.op;
  a.prescale = meta.prescale;
  a.postscale = meta.postscale;
  a.count = meta.elements();
  a.out_count = a.count;
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(a.count, 0)) * es;
  if (zeros_.size() < bytes) zeros_.resize(bytes);
  std::memset(zeros_.data(), 0, bytes);
  a.in = zeros_.data();
  a.out = zeros_.data();
  return a;
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

void Engine::run_fused(const Batch& items, const TensorMeta& meta, int64_t t_ready, const std::string& fusion_args) {
  // Built in place of the last batch's list (kept for its storage).
  CollectiveArgs& a = fused_args_;
  // Device buffers are fused on the device (the GPU backend takes the
  // segments), on the device and stream of this rank's tensors (a named
  // device collective runs on the process's side stream).
  const LocalEntry* first_local = nullptr;
  bool all_local = true;
  for (const auto& item : items) {
    if (item.local && !first_local) first_local = item.local;
    all_local = all_local && item.local;
  }
  if (meta.memory != MemoryKind::kHost && !all_local) {
    CollectiveArgs refused;
    stand_in_refused(CollectiveKind::kAllreduce, meta.memory, &refused);
    comm_->run(refused);
    return;
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
    if (item.local && item.local->segmented) {
      for (const BufferSegment& seg : item.local->work->list()[0].segments) {
        total += seg.count;
        a.segments.push_back(seg);
      }
      continue;
    }
    // Ours, as enqueue() noted it; a joined rank's: no input (zeros), no output.
    const BufferSegment seg = item.local ? item.local->segment : BufferSegment{nullptr, nullptr, item.meta->elements()};
    total += seg.count;
    a.segments.push_back(seg);
  }
  a.count = total;
  a.out_count = total;
  // The communicator gathers the segments in place where its backend can
  // (shared memory reads the tensors and writes the results back; tensors
  // that lie one after another in memory run as one buffer anywhere), else
  // packs them into its fusion buffer and says when it did.
  comm_->run(a);
  if (timeline_.active()) {
    const std::string args =
        fusion_args + ", \"bytes\": " + std::to_string(static_cast<size_t>(total) * dtype_size(meta.dtype));
    const int64_t t_done = Timeline::now_us();
    for (const auto& item : items) {
      if (!item.local) continue;
      if (a.packed_us == 0) {
        timeline_.phase(name_of(item), "ALLREDUCE", t_ready, t_done, args);
      } else {
        timeline_.phase(name_of(item), "MEMCPY_IN_FUSION_BUFFER", t_ready, a.packed_us, args);
        timeline_.phase(name_of(item), "ALLREDUCE", a.packed_us, a.reduced_us, args);
        timeline_.phase(name_of(item), "MEMCPY_OUT_FUSION_BUFFER", a.reduced_us, t_done, args);
      }
    }
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.fused_collectives++;
}

void Engine::finish_batch(const Batch& items, std::exception_ptr error) {
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
    const size_t n = items.size();
    for (size_t k = 0; k < n; ++k) {
      // Each item's entry, then (its entry in cache by then) its Work.
      if (k + kPrefetchAhead < n && items[k + kPrefetchAhead].local) {
        prefetch_lines(items[k + kPrefetchAhead].local, sizeof(LocalEntry));
      }
      if (k + kPrefetchAhead / 2 < n && items[k + kPrefetchAhead / 2].local) {
        __builtin_prefetch(items[k + kPrefetchAhead / 2].local->work.get());
      }
      if (items[k].local) release_busy(*items[k].local);
    }
  }
  // Last to first: a caller that finds a tensor done without sleeping (its
  // wait checks before it blocks, and an interruptible wait wakes to check)
  // then finds every later tensor of the batch done too, since the release
  // of each done_ publishes the ones stored before it.
  for (size_t k = items.size(); k-- > 0;) {
    if (items[k].local) items[k].local->work->publish_done(error);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (const auto& item : items) {
    if (item.local && item.local->work->waited_on()) to_wake_.push_back(item.local->work);
  }
  for (const auto& item : items) retire(item);
  recycle_retired();
}

}  // namespace ringcc
