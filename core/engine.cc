#include "core/engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace ringcc {

namespace {

constexpr uint8_t kFlagJoined = 1;
constexpr uint8_t kFlagShutdown = 2;
constexpr int kIdleCyclesBeforeBackoff = 200;
constexpr double kIdleCycleMs = 10.0;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
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
  o.stall_shutdown_s =
      env_double("RINGCC_STALL_SHUTDOWN_S", 0.0, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS");
  o.cache_capacity = static_cast<int>(env_int("RINGCC_CACHE_CAPACITY", 1024, "HOROVOD_CACHE_CAPACITY"));
  o.timeline_path = env_str("RINGCC_TIMELINE", "", "HOROVOD_TIMELINE");
  if (o.cycle_time_ms < 0) o.cycle_time_ms = 0;
  return o;
}

// A tensor this rank enqueued and that has not run yet.
struct Engine::LocalEntry {
  std::shared_ptr<Work> work;
  TensorMeta meta;
  int cache_bit = -1;      // announced through the cache
  bool announced = false;  // announced in full
  int64_t enqueued_us = 0;
  int64_t negotiating_us = 0;
};

// A tensor some rank enqueued and that has not run yet (same on all ranks).
struct Engine::TableEntry {
  uint64_t seq = 0;
  std::vector<char> submitted;
  std::vector<std::shared_ptr<const TensorMeta>> metas;
  double first_seen = 0;
  double last_warned = 0;
};

Engine::Engine(std::shared_ptr<Communicator> comm, EngineOptions options)
    : comm_(std::move(comm)), opt_(std::move(options)), rank_(comm_->rank()), size_(comm_->size()) {
  was_joined_.assign(static_cast<size_t>(size_), false);
  stats_ = EngineStats();
  if (!opt_.timeline_path.empty() && rank_ == 0) timeline_.start(opt_.timeline_path);
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  try {
    shutdown();
  } catch (...) {
  }
}

std::shared_ptr<Work> Engine::enqueue(const std::string& name, CollectiveArgs args,
                                      std::vector<int64_t> shape) {
  std::vector<CollectiveArgs> list;
  list.push_back(std::move(args));
  auto work = std::make_shared<Work>(std::move(list), false);
  std::unique_lock<std::mutex> lock(mu_);
  if (!broken_.empty()) {
    lock.unlock();
    work->finish(std::make_exception_ptr(Error(ErrorKind::kPeerFailure, broken_)));
    return work;
  }
  if (stopped_ || shutdown_requested_) {
    lock.unlock();
    work->finish(std::make_exception_ptr(
        Error(ErrorKind::kNotInitialized, "ringcc has been shut down")));
    return work;
  }
  incoming_.emplace_back(name, work);
  incoming_shapes_.push_back(std::move(shape));
  return work;
}

std::shared_ptr<Work> Engine::join() {
  auto work = std::make_shared<Work>(std::vector<CollectiveArgs>(1), false);
  std::unique_lock<std::mutex> lock(mu_);
  if (join_work_) {
    raise(ErrorKind::kInvalidArgument, "join() is already in progress on this rank");
  }
  if (!broken_.empty()) raise(ErrorKind::kPeerFailure, broken_);
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
  if (thread_.joinable()) thread_.join();
  timeline_.stop();
}

void Engine::loop() {
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
      if (productive_ && opt_.cycle_time_ms > 0) {
        // Work ran this cycle: more may be ready at once.
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
        cv_.wait_until(lock, next, [&] { return shutdown_requested_; });
      }
    }
  }
}

void Engine::fail_all(const std::string& why, ErrorKind kind) {
  std::deque<std::pair<std::string, std::shared_ptr<Work>>> incoming;
  std::shared_ptr<Work> join_work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty() && kind != ErrorKind::kNotInitialized) broken_ = why;
    stopped_ = true;
    incoming.swap(incoming_);
    incoming_shapes_.clear();
    join_work.swap(join_work_);
  }
  auto error = std::make_exception_ptr(Error(kind, why));
  for (auto& entry : local_) entry.second->work->finish(error);
  local_.clear();
  for (auto& entry : incoming) entry.second->finish(error);
  if (join_work) join_work->finish(error);
}

void Engine::take_incoming() {
  std::deque<std::pair<std::string, std::shared_ptr<Work>>> incoming;
  std::vector<std::vector<int64_t>> shapes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(incoming_);
    shapes.swap(incoming_shapes_);
    if (join_work_ && !joined_) joined_ = true;
  }
  const int64_t now = Timeline::now_us();
  for (size_t i = 0; i < incoming.size(); ++i) {
    auto& [name, work] = incoming[i];
    if (local_.count(name)) {
      work->finish(std::make_exception_ptr(Error(
          ErrorKind::kInvalidArgument, "a collective named '" + name +
                                           "' is already in flight on this rank; names must be unique until they complete")));
      continue;
    }
    const CollectiveArgs& a = work->list()[0];
    auto entry = std::make_unique<LocalEntry>();
    entry->work = work;
    entry->meta.kind = a.kind;
    entry->meta.dtype = a.dtype;
    entry->meta.op = a.op;
    entry->meta.root = a.root;
    entry->meta.prescale = a.prescale;
    entry->meta.postscale = a.postscale;
    entry->meta.shape = std::move(shapes[i]);
    entry->enqueued_us = now;
    entry->negotiating_us = now;
    auto cached = cache_index_.find(name);
    if (cached != cache_index_.end() && *cache_metas_[static_cast<size_t>(cached->second)] == entry->meta) {
      entry->cache_bit = cached->second;
    }
    local_.emplace(name, std::move(entry));
  }
}

std::string Engine::build_message() {
  std::string msg;
  uint8_t flags = 0;
  if (joined_) flags |= kFlagJoined;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_requested_) flags |= kFlagShutdown;
  }
  msg.push_back(static_cast<char>(flags));
  // Cached names: one bit each. Others: in full, once.
  std::string bits((cache_names_.size() + 7) / 8, '\0');
  std::string announced;
  uint32_t count = 0;
  for (auto& [name, entry] : local_) {
    const int b = entry->cache_bit;
    if (b >= 0) {
      bits[static_cast<size_t>(b / 8)] |= static_cast<char>(1 << (b % 8));
    } else if (!entry->announced) {
      entry->announced = true;
      put_string(&announced, name);
      entry->meta.serialize(&announced);
      ++count;
    }
  }
  put_string(&msg, bits);
  put_u32(&msg, count);
  msg.append(announced);
  put_u32(&msg, static_cast<uint32_t>(pending_aborts_.size()));
  for (const auto& name : pending_aborts_) put_string(&msg, name);
  pending_aborts_.clear();
  return msg;
}

void Engine::apply_messages(const std::vector<std::string>& messages, std::vector<bool>* joined,
                            std::vector<std::string>* aborts, bool* all_shutdown, bool* any_new) {
  const double now = now_s();
  *all_shutdown = true;
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
  for (int r = 0; r < size_; ++r) {
    const std::string& m = messages[static_cast<size_t>(r)];
    size_t pos = 0;
    if (m.empty()) raise(ErrorKind::kInternal, "empty negotiation message from rank ", r);
    const auto flags = static_cast<uint8_t>(m[pos++]);
    (*joined)[static_cast<size_t>(r)] = flags & kFlagJoined;
    if (!(flags & kFlagShutdown)) *all_shutdown = false;
    const std::string bits = get_string(m, &pos);
    for (size_t b = 0; b < bits.size() * 8 && b < cache_names_.size(); ++b) {
      if (!(bits[b / 8] & (1 << (b % 8)))) continue;
      TableEntry& e = entry_for(cache_names_[b]);
      e.submitted[static_cast<size_t>(r)] = 1;
      e.metas[static_cast<size_t>(r)] = cache_metas_[b];
    }
    const uint32_t n_new = get_u32(m, &pos);
    if (n_new) *any_new = true;
    for (uint32_t i = 0; i < n_new; ++i) {
      std::string name = get_string(m, &pos);
      TensorMeta meta = TensorMeta::parse(m, &pos);
      TableEntry& e = entry_for(name);
      e.submitted[static_cast<size_t>(r)] = 1;
      e.metas[static_cast<size_t>(r)] = std::make_shared<const TensorMeta>(std::move(meta));
    }
    const uint32_t n_abort = get_u32(m, &pos);
    for (uint32_t i = 0; i < n_abort; ++i) aborts->push_back(get_string(m, &pos));
  }
}

std::vector<int> Engine::missing_ranks(const TableEntry& e) const {
  std::vector<int> out;
  for (int r = 0; r < size_; ++r) {
    if (!e.submitted[static_cast<size_t>(r)] && !was_joined_[static_cast<size_t>(r)]) out.push_back(r);
  }
  return out;
}

void Engine::cycle() {
  const auto start = std::chrono::steady_clock::now();
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
  const auto sent = std::chrono::steady_clock::now();
  comm_->run(ag);
  const auto received = std::chrono::steady_clock::now();
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
  bool all_shutdown = false, any_new = false;
  apply_messages(messages, &joined, &aborts, &all_shutdown, &any_new);
  for (int r = 0; r < size_; ++r) {
    if (joined[static_cast<size_t>(r)] && !was_joined_[static_cast<size_t>(r)]) last_joined_ = r;
  }
  was_joined_ = joined;

  // Stalled tensors rank 0 gave up on: fail them everywhere.
  for (const auto& name : aborts) {
    auto it = table_.find(name);
    if (it == table_.end()) continue;
    const std::string why = "tensor '" + name + "' stalled for more than " +
                            std::to_string(static_cast<int>(opt_.stall_shutdown_s)) +
                            " s waiting on rank(s) " + rank_list(missing_ranks(*it->second)) +
                            " (RINGCC_STALL_SHUTDOWN_S)";
    table_.erase(it);
    auto local = local_.find(name);
    if (local != local_.end()) {
      local->second->work->finish(std::make_exception_ptr(Error(ErrorKind::kTimeout, why)));
      local_.erase(local);
    }
  }

  // Ready on every rank (joined ranks count as ready), in table order.
  std::vector<std::pair<uint64_t, std::string>> ready;
  for (const auto& [name, e] : table_) {
    bool everyone = true;
    for (int r = 0; r < size_ && everyone; ++r) {
      everyone = e->submitted[static_cast<size_t>(r)] || was_joined_[static_cast<size_t>(r)];
    }
    if (everyone) ready.emplace_back(e->seq, name);
  }
  std::sort(ready.begin(), ready.end());
  std::vector<std::string> ready_names;
  for (auto& r : ready) ready_names.push_back(std::move(r.second));

  const double negotiation_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.cycles++;
    stats_.negotiation_us += (negotiation_us - stats_.negotiation_us) / static_cast<double>(stats_.cycles);
    if (!any_new && !ready_names.empty()) {
      stats_.cached_cycles++;
      const double k = static_cast<double>(stats_.cached_cycles);
      stats_.cached_negotiation_us += (negotiation_us - stats_.cached_negotiation_us) / k;
      const double exchange_us = std::chrono::duration<double, std::micro>(received - sent).count();
      stats_.cached_exchange_us += (exchange_us - stats_.cached_exchange_us) / k;
      stats_.cached_decide_us += (negotiation_us - exchange_us - stats_.cached_decide_us) / k;
    }
  }

  const bool idle = ready_names.empty() && table_.empty() && local_.empty() && !any_new;
  idle_cycles_ = idle ? idle_cycles_ + 1 : 0;

  productive_ = !ready_names.empty();
  run_ready(ready_names);
  if (rank_ == 0) inspect_stalls();

  // Join completes once every rank has joined.
  if (std::all_of(joined.begin(), joined.end(), [](bool j) { return j; })) {
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

  if (all_shutdown) {
    fail_all("ringcc was shut down before this collective completed", ErrorKind::kNotInitialized);
  }
}

const TensorMeta& Engine::first_meta(const TableEntry& e) const {
  for (int r = 0; r < size_; ++r) {
    if (e.submitted[static_cast<size_t>(r)]) return *e.metas[static_cast<size_t>(r)];
  }
  return *e.metas[0];
}

bool Engine::agree(const std::string& name, const TableEntry& e, std::string* why) const {
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
      if (table_.count(cache_names_[b])) continue;
      if (!found || cache_used_[b] < cache_used_[bit]) {
        bit = b;
        found = true;
      }
    }
    if (!found) return;
    cache_index_.erase(cache_names_[bit]);
    // A local tensor still announced through the evicted bit is announced
    // in full from the next cycle on.
    for (auto& [local_name, entry] : local_) {
      if (entry->cache_bit == static_cast<int>(bit)) {
        entry->cache_bit = -1;
        entry->announced = false;
      }
    }
    cache_names_[bit] = name;
    cache_metas_[bit] = meta;
    cache_used_[bit] = stamp;
  } else {
    cache_names_.push_back(name);
    cache_metas_.push_back(meta);
    cache_used_.push_back(stamp);
  }
  cache_index_[name] = static_cast<int>(bit);
}

void Engine::run_ready(std::vector<std::string>& names) {
  size_t i = 0;
  int64_t fusion_id = 0;
  while (i < names.size()) {
    TableEntry& head = *table_.at(names[i]);
    std::string why;
    if (!agree(names[i], head, &why)) {
      auto local = local_.find(names[i]);
      if (local != local_.end()) {
        local->second->work->finish(std::make_exception_ptr(Error(ErrorKind::kMismatch, why)));
        local_.erase(local);
      }
      table_.erase(names[i]);
      ++i;
      continue;
    }
    remember(names[i], head);
    const TensorMeta& meta = first_meta(head);
    // Fuse the following ready allreduces of the same kind.
    std::vector<std::string> batch{names[i]};
    size_t j = i + 1;
    if (meta.kind == CollectiveKind::kAllreduce) {
      int64_t bytes = meta.elements() * static_cast<int64_t>(dtype_size(meta.dtype));
      while (j < names.size()) {
        const TableEntry& e = *table_.at(names[j]);
        const TensorMeta& m = first_meta(e);
        const int64_t b = m.elements() * static_cast<int64_t>(dtype_size(m.dtype));
        std::string ignored;
        if (m.kind != meta.kind || m.dtype != meta.dtype || m.op != meta.op ||
            m.prescale != meta.prescale || m.postscale != meta.postscale ||
            bytes + b > opt_.fusion_threshold || !agree(names[j], e, &ignored)) {
          break;
        }
        remember(names[j], e);
        bytes += b;
        batch.push_back(names[j]);
        ++j;
      }
    }
    execute_batch(batch, ++fusion_id);
    i = j;
  }
}

void Engine::execute_batch(const std::vector<std::string>& names, int64_t fusion_id) {
  // Buffers: ours if we enqueued the tensor, zeros if we joined.
  const TensorMeta meta = first_meta(*table_.at(names[0]));
  const size_t es = dtype_size(meta.dtype);
  std::vector<LocalEntry*> locals;
  std::vector<const TensorMeta*> metas;
  for (const auto& name : names) {
    auto it = local_.find(name);
    locals.push_back(it == local_.end() ? nullptr : it->second.get());
    metas.push_back(&first_meta(*table_.at(name)));
  }
  const int64_t t_ready = Timeline::now_us();
  if (timeline_.active()) {
    for (size_t k = 0; k < names.size(); ++k) {
      if (!locals[k]) continue;
      timeline_.phase(names[k], "NEGOTIATING", locals[k]->negotiating_us, t_ready);
    }
  }

  std::exception_ptr error;
  const std::string fusion_args = "\"fusion\": " + std::to_string(fusion_id) +
                                  ", \"tensors\": " + std::to_string(names.size());
  try {
    if (names.size() == 1) {
      CollectiveArgs a;
      if (locals[0]) {
        a = locals[0]->work->list()[0];
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
      if (locals[0]) {
        CollectiveArgs& mine = locals[0]->work->list()[0];
        mine.result_count = a.result_count;
        mine.recv_counts = a.recv_counts;
        mine.out = a.out;
      }
      if (timeline_.active() && locals[0]) {
        timeline_.phase(names[0], phase_name(meta.kind), t_ready, Timeline::now_us(), fusion_args);
      }
    } else {
      int64_t total = 0;
      std::vector<const void*> inputs;
      std::vector<void*> outputs;
      std::vector<size_t> sizes;
      for (size_t k = 0; k < names.size(); ++k) {
        total += metas[k]->elements();
        CollectiveArgs* mine = locals[k] ? &locals[k]->work->list()[0] : nullptr;
        inputs.push_back(mine ? mine->in : nullptr);  // joined: zeros
        outputs.push_back(mine ? mine->out : nullptr);
        sizes.push_back(static_cast<size_t>(metas[k]->elements()) * es);
        if (mine) mine->result_count = metas[k]->elements();
      }
      const size_t bytes = static_cast<size_t>(total) * es;
      fusion_.pack(inputs, sizes);
      const int64_t t_packed = Timeline::now_us();
      CollectiveArgs a = fusion_.allreduce(total, meta.dtype, meta.op, meta.prescale, meta.postscale);
      comm_->run(a);
      const int64_t t_reduced = Timeline::now_us();
      fusion_.unpack(outputs, sizes);
      const int64_t t_done = Timeline::now_us();
      if (timeline_.active()) {
        const std::string args = fusion_args + ", \"bytes\": " + std::to_string(bytes);
        for (size_t k = 0; k < names.size(); ++k) {
          if (!locals[k]) continue;
          timeline_.phase(names[k], "MEMCPY_IN_FUSION_BUFFER", t_ready, t_packed, args);
          timeline_.phase(names[k], "ALLREDUCE", t_packed, t_reduced, args);
          timeline_.phase(names[k], "MEMCPY_OUT_FUSION_BUFFER", t_reduced, t_done, args);
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
    stats_.tensors += names.size();
  }
  for (size_t k = 0; k < names.size(); ++k) {
    table_.erase(names[k]);
    if (!locals[k]) continue;
    auto work = locals[k]->work;
    local_.erase(names[k]);
    work->finish(error);
  }
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

void Engine::inspect_stalls() {
  const double now = now_s();
  std::ostringstream report;
  int stalled = 0;
  for (auto& [name, e] : table_) {
    const double age = now - e->first_seen;
    if (opt_.stall_shutdown_s > 0 && age > opt_.stall_shutdown_s) {
      pending_aborts_.push_back(name);
      continue;
    }
    if (opt_.stall_check_s > 0 && age > opt_.stall_check_s && now - e->last_warned >= opt_.stall_check_s) {
      e->last_warned = now;
      report << "\n  " << name << ": waiting on rank(s) " << rank_list(missing_ranks(*e))
             << " for " << static_cast<int>(age) << " s";
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
