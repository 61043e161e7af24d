#include "core/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "core/backends/job_settings.h"
#include "core/backends/registry.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/log.h"
#include "core/base/sha256.h"
#include "core/base/thread_exit.h"
#include "core/base/thread_name.h"
#include "core/base/timeline.h"
#include "core/collective/fusion_buffer.h"
#include "core/device/cuda_device.h"
#include "core/device/device_memory.h"
#include "core/os/mpi_library.h"
#include "core/os/socket.h"
#include "core/os/wait_policy.h"
#include "core/rendezvous/failure_record.h"
#include "core/rendezvous/meeting.h"
#include "core/rendezvous/tcp_store.h"
#include "core/transport/mpi_transport.h"
#include "core/transport/tcp_links.h"

namespace ringcc {

// The least time the ranks give each other to set a device backend up
// (const at namespace scope: internal linkage).
constexpr double kDeviceSetUpSeconds = 120;

Communicator::Communicator(const RendezvousInfo& info, std::shared_ptr<Store> store)
    : rank_(info.rank), size_(info.size), store_(std::move(store)), fixed_timeout_s_(info.timeout_s) {
  store_is_ours_ = store_ == nullptr;
  set_log_rank(rank_);
  wait_policy_setting();  // a bad RINGCC_WAIT_POLICY fails here, before any wait
  job_.rank = rank_;
  job_.size = size_;
  job_.timeout_s = timeout_s();
  job_.world.me = rank_;
  for (int r = 0; r < size_; ++r) job_.world.ranks.push_back(r);
  job_.world.links.assign(static_cast<size_t>(size_), nullptr);
  const Deadline joined_by = deadline_after(setup_timeout_s());
  if (size_ > 1) join_job(info, joined_by);
  if (size_ == 1) backends_ = make_host_backends(job_, joined_by);
  // Read after the ranks compared it (a value this rank cannot parse fails
  // every rank's join, not this rank's alone).
  fusion_threshold_ = fusion_threshold_from_env();
  worker_ = std::thread([this] { worker_loop(); });
}

Communicator::~Communicator() {
  UninterruptibleWait quiet;  // a destructor cannot raise the handler's exception
  try {
    shutdown();
  } catch (...) {
  }
}

void Communicator::join_job(const RendezvousInfo& info, Deadline deadline) {
  // A single-host job's automatic secret: removed (by this object) when
  // join_job returns or fails; by then every rank has read it.
  SecretFile host_secret;
  Meeting meeting = meet(info, std::move(store_), deadline, &host_secret);
  // From here every wait gives up as soon as a rank records that it failed.
  meeting.store = store_ = std::make_shared<FailureWatchingStore>(meeting.store);
  store_server_ = std::move(meeting.server);
  secret_ = meeting.secret;
  job_id_ = meeting.job_id;
  try {
    claim_rank(*store_, rank_, meeting.where);
    // The launcher's word only: ranks that reach rank 0 over loopback may
    // still name hosts of their own (hosts made up on one machine).
    topology_ = topology_of(exchange_hosts(deadline, launcher_single_host_reason()), rank_);
    check_one_job(*store_, meeting.where);
    job_.topology = topology_;
    job_.store = store_;
    job_.key_prefix = "ringcc-" + job_id_;
    job_.transport = transport_from_env();
    connect_links(info, meeting, deadline);
    backends_ = make_host_backends(job_, deadline);
    check_one_job(*store_, meeting.where);
  } catch (const Error& e) {
    // The peers fail at once, naming this rank, instead of waiting out
    // their timeout for what this rank will never post.
    record_job_failure(store_->job_store(), "rank " + std::to_string(rank_) + " failed while the ranks met: " + e.what());
    throw;
  }
  RINGCC_LOG(kDebug, describe());
}

// Who is where (ranks are grouped by host name), and the settings every rank
// must share, compared before any link is made.
std::vector<RankPlace> Communicator::exchange_hosts(Deadline deadline, const std::string& launcher_single_host) {
  Store& store = *store_;
  const std::string mine = RankPlace::mine().text() + "\n" + shared_settings_text();
  store.set("ringcc/host/" + std::to_string(rank_), mine);
  std::vector<RankPlace> places(static_cast<size_t>(size_));
  std::vector<std::string> settings(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    std::string text = mine;
    if (r != rank_) {
      try {
        text = store.get("ringcc/host/" + std::to_string(r), until(deadline));
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kTimeout) throw;
        raise(ErrorKind::kTimeout, "rank ", r,
              " did not join the job (it exited, crashed, hangs or never "
              "started): ",
              e.what());
      }
    }
    places[static_cast<size_t>(r)] = RankPlace::parse(text, &settings[static_cast<size_t>(r)]);
  }
  check_shared_settings(settings, deadline);
  confirm_places(places, rank_, launcher_single_host);
  note_machine_sharing(places, rank_);  // for the wait policy
  return places;
}

void Communicator::connect_links(const RendezvousInfo& info, Meeting& meeting, Deadline deadline) {
  const std::string& mode = job_.transport;
  if (mode == "mpi") {
    connect_mpi_links(info);
    transport_name_ = "mpi";
    return;
  }
  const bool all_local = topology_.all_local();
  if (mode == "shm" && !all_local) {
    raise(ErrorKind::kInvalidArgument, "RINGCC_TRANSPORT=shm needs every rank on one host, but the ranks span ",
          topology_.hosts, " hosts");
  }
  if (all_local && mode != "tcp") {
    transport_name_ = "shm";  // shared memory carries everything: no links
    return;
  }
  transport_name_ = mode != "tcp" && topology_.local_size > 1 ? "shm+tcp" : "tcp";
  // Made by rank 0 when the ranks meet through an adapter's store; removed
  // once every rank has connected (so has read it).
  SecretFile link_secret;
  agree_on_link_secret(meeting, rank_, all_local, info, &link_secret, deadline);
  secret_ = meeting.secret;
  TcpLinks tcp =
      connect_tcp_links(*store_, rank_, size_, secret_, job_id_, all_local, info.advertise_address, deadline);
  advertise_address_ = tcp.advertise_address;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) job_.world.links[static_cast<size_t>(r)] = tcp.transport.get();
  }
  PeerSet& cross = job_.cross;
  for (int r : topology_.cross_ranks) {
    if (r == rank_) cross.me = static_cast<int>(cross.ranks.size());
    cross.ranks.push_back(r);
    cross.links.push_back(r == rank_ ? nullptr : tcp.transport.get());
  }
  links_ = std::move(tcp.transport);
}

void Communicator::connect_mpi_links(const RendezvousInfo& info) {
  if (!info.mpi) {
    raise(ErrorKind::kInvalidArgument,
          "RINGCC_TRANSPORT=mpi needs a job started through MPI (ringcc.init() under "
          "mpirun/mpiexec/srun, or ringcc.init(comm=an_mpi4py_communicator)); this communicator "
          "met through ",
          info.source);
  }
  const MpiState& state = mpi_ensure_initialized();
  if (state.thread_level < RCMPI_THREAD_MULTIPLE) {
    raise(ErrorKind::kInvalidArgument,
          "RINGCC_TRANSPORT=mpi needs MPI_THREAD_MULTIPLE (ringcc "
          "calls MPI from its background threads) but MPI was initialised with ",
          mpi_thread_level_name(state.thread_level),
          "; initialise MPI with MPI_THREAD_MULTIPLE (mpi4py does by default; "
          "mpi4py.rc.thread_level = 'multiple') or let ringcc initialise it");
  }
  mpi_comm_ = info.mpi->dup(setup_timeout_s());
  auto mpi = std::make_unique<MpiTransport>(mpi_comm_);
  job_.mpi = mpi_comm_;
  job_.mpi_links = mpi.get();
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) job_.world.links[static_cast<size_t>(r)] = mpi.get();
  }
  links_ = std::move(mpi);
  RINGCC_LOG(kDebug, "MPI links: ", mpi_plugin_info().library);
}

void Communicator::check_shared_settings(const std::vector<std::string>& settings, Deadline deadline) {
  bool invalid = false;
  const std::string problem = compare_shared_settings(settings, rank_, &invalid);
  if (problem.empty()) return;
  // Every rank raises. They leave in step, as shutdown() does: rank 0
  // serves the store until every rank has read what it needed, and the
  // others wait until it stops, so that an init() that follows meets a
  // fresh store rather than this one.
  try {
    store_->add("ringcc/settings-checked", 1);
    if (store_server_) {
      while (store_->add("ringcc/settings-checked", 0) < size_ && Clock::now() < deadline) {
        usleep(1000);
      }
    } else if (store_->rank0_store() != nullptr) {
      store_->get("ringcc/never-set", until(deadline));
    }
  } catch (const ThreadExit&) {
    throw;
  } catch (...) {
  }
  raise(invalid ? ErrorKind::kInvalidArgument : ErrorKind::kMismatch, problem);
}

void Communicator::validate(CollectiveArgs& a, std::string* err) {
  auto bad = [&](const std::string& msg) {
    if (err->empty()) *err = std::string(collective_name(a.kind)) + ": " + msg;
  };
  if (!dtype_valid(static_cast<int32_t>(a.dtype))) bad("unsupported dtype");
  if (!reduce_op_valid(static_cast<int32_t>(a.op))) bad("unsupported reduction");
  if (a.count < 0) bad("negative element count");
  if (a.row_elems < 1) a.row_elems = 1;
  if (!std::isfinite(a.prescale) || !std::isfinite(a.postscale)) bad("scale factors must be finite");
  switch (a.kind) {
    case CollectiveKind::kBroadcast:
      if (a.root < 0 || a.root >= size_) {
        bad("root rank " + std::to_string(a.root) + " is out of range for " + std::to_string(size_) + " ranks");
      }
      break;
    case CollectiveKind::kReduceScatter: {
      if (a.count % a.row_elems != 0) bad("the element count is not a whole number of rows");
      const int64_t rows = a.count / a.row_elems;
      const int64_t mine = block_rows(rows, size_, rank_) * a.row_elems;
      if (a.out_count >= 0 && a.out_count != mine) {
        bad("the output holds " + std::to_string(a.out_count) + " elements but this rank's block has " +
            std::to_string(mine));
      }
      break;
    }
    case CollectiveKind::kAllgather:
      if (a.count % a.row_elems != 0) bad("the element count is not a whole number of rows");
      break;
    case CollectiveKind::kAlltoall: {
      if (static_cast<int>(a.send_counts.size()) != size_) {
        bad("splits must have one entry per rank (" + std::to_string(size_) + "), got " +
            std::to_string(a.send_counts.size()));
        a.send_counts.assign(static_cast<size_t>(size_), 0);
        break;
      }
      int64_t sum = 0;
      for (int64_t c : a.send_counts) {
        if (c < 0) bad("splits must not be negative");
        sum += c;
      }
      if (sum != a.count) {
        bad("splits add up to " + std::to_string(sum / a.row_elems) + " rows but the input has " +
            std::to_string(a.count / a.row_elems));
      }
      break;
    }
    default:
      break;
  }
}

double Communicator::take_peer_wait_us() {
  double us = 0;
  for (const auto& backend : backends_) us += backend->take_peer_wait_us();
  return us;
}

void Communicator::execute(CollectiveArgs& a) {
  if (shut_down_) raise(ErrorKind::kNotInitialized, "ringcc has been shut down");
  if (broken()) {
    std::lock_guard<std::mutex> lock(abort_mu_);
    raise(ErrorKind::kPeerFailure, "the communicator is unusable after an earlier failure: ", abort_reason_);
  }
  if (!a.segments.empty()) {
    a.packed_us = a.reduced_us = 0;
    coalesce_segments(a);
    if (!a.segments.empty() && a.memory == MemoryKind::kHost && !host_backend(a).gathers_segments()) {
      run_packed(a);
      return;
    }
  }
  std::string local_error;
  validate(a, &local_error);
  if (a.memory != MemoryKind::kHost && local_error.empty()) {
    std::lock_guard<std::mutex> lock(backends_mu_);
    if (a.device < 0) {
      local_error = std::string(collective_name(a.kind)) + ": a CUDA tensor without its device";
    } else if (device_ >= 0 && a.device != device_) {
      local_error = std::string(collective_name(a.kind)) +
                    ": this communicator runs its GPU collectives on cuda:" + std::to_string(device_) +
                    ", but the tensor is on cuda:" + std::to_string(a.device);
    }
  }
  CollectiveArgs failed;
  CollectiveArgs* todo = &a;
  if (!local_error.empty()) {
    // Take part anyway, so that the peers fail at once instead of waiting.
    failed = failed_call(a.kind, local_error);
    failed.send_counts.assign(static_cast<size_t>(size_), 0);
    todo = &failed;
  }
  if (todo->op == ReduceOp::kAverage) {
    todo->op = ReduceOp::kSum;
    todo->postscale /= size_;
  }
  if (todo->kind == CollectiveKind::kAlltoall && todo->send_counts.empty()) {
    todo->send_counts.assign(static_cast<size_t>(size_), 0);
  }
  const Deadline deadline = deadline_after(timeout_s());
  try {
    if (todo->memory != MemoryKind::kHost) {
      run_device(*todo, deadline);
    } else {
      run_host(*todo, deadline);
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kPeerFailure || e.kind() == ErrorKind::kTimeout) fail(e);
    if (e.kind() == ErrorKind::kInterrupted) {
      // Abandoned halfway: the peers cannot finish it without us.
      fail(Error(ErrorKind::kInterrupted,
                 std::string("interrupted by a signal (its handler raised) during ") + collective_name(a.kind)));
    }
    // This rank's own argument error, or how the ranks disagree: naming the tensor.
    const bool own = !local_error.empty() && e.kind() == ErrorKind::kInvalidArgument;
    if (own || e.kind() == ErrorKind::kMismatch) {
      throw Error(e.kind(), naming_tensor(own ? local_error : e.what(), a, running_position()));
    }
    throw;
  }
  if (!local_error.empty()) raise(ErrorKind::kInvalidArgument, naming_tensor(local_error, a, running_position()));
}

void Communicator::run_packed(CollectiveArgs& a) {
  const size_t es = dtype_size(a.dtype);
  fusion_.pack(a.segments, es);
  a.packed_us = Timeline::now_us();
  CollectiveArgs fused = fusion_.allreduce(a.count, a.dtype, a.op, a.prescale, a.postscale);
  // What the ranks compare of the segments' tensors, and how errors name them.
  fused.shape = a.shape;
  fused.ndim = a.ndim;
  fused.label = a.label;
  execute(fused);
  a.reduced_us = Timeline::now_us();
  fusion_.unpack(a.segments, es);
  a.result_count = a.count;
}

Backend& Communicator::host_backend(const CollectiveArgs& a) {
  for (const auto& backend : backends_) {
    if (backend->memory() == MemoryKind::kHost && backend->takes(a)) return *backend;
  }
  raise(ErrorKind::kInternal, "no backend of this communicator takes ", collective_name(a.kind));
}

void Communicator::run_device(CollectiveArgs& a, Deadline deadline) {
  const Clock::time_point started = Clock::now();  // for RINGCC_GPU_TRACE
  if (size_ > 1) {
    // Every rank agrees on the collective (and learns the others' counts)
    // through the host path, exactly as for host buffers, so that a rank
    // whose peers hold host tensors fails with MismatchError everywhere.
    CollectiveArgs probe;
    static_cast<CollectiveScalars&>(probe) = a;
    probe.send_counts = a.send_counts;
    probe.agree_only = true;
    run_host(probe, deadline);
    a.recv_counts = std::move(probe.recv_counts);
    a.alltoall_counts = std::move(probe.alltoall_counts);
  } else {
    const int64_t mine = a.kind == CollectiveKind::kAlltoall && !a.send_counts.empty() ? a.send_counts[0] : a.count;
    a.recv_counts.assign(1, mine);
    a.alltoall_counts.assign(1, mine);
  }
  Backend& backend = device_backend(a.device, deadline);
  device::GpuTrace* trace =
      a.kind == CollectiveKind::kBarrier || a.kind == CollectiveKind::kLocalError ? nullptr : gpu_trace_.get();
  if (trace) {
    trace->begin(a, backend.name(), started);
    trace->device_mark(device::stream_of(a), "start");
  }
  backend.run(a, deadline);
  if (trace) {
    trace->device_mark(device::stream_of(a), "end");
    trace->end(device::stream_of(a));
  }
}

Backend& Communicator::device_backend(int device, Deadline deadline) {
  {
    std::lock_guard<std::mutex> lock(backends_mu_);
    for (const auto& backend : backends_) {
      if (backend->memory() != MemoryKind::kCuda) continue;
      if (device != device_) {
        raise(ErrorKind::kInvalidArgument, "this communicator runs its GPU collectives on cuda:", device_,
              ", but the tensor is on cuda:", device);
      }
      return *backend;
    }
  }
  BackendJob job = job_;
  job.key_prefix = "ringcc/gpu/";
  job.timeout_s = timeout_s();
  // Host staging runs the host algorithms chunk by chunk, each with its own
  // deadline, through this communicator's host path.
  job.host_run = [this](CollectiveArgs& h) { run_host(h, deadline_after(timeout_s())); };
  gpu_trace_ = device::GpuTrace::from_env(device::CudaDevice::get(device), rank_);
  job.trace = gpu_trace_.get();
  // Setting up compiles (or loads) the device kernels and starts NCCL on
  // every rank before they meet: a one-time step, bounded more loosely.
  std::unique_ptr<Backend> made =
      make_device_backend(job, device, std::max(deadline, deadline_after(std::max(timeout_s(), kDeviceSetUpSeconds))));
  std::lock_guard<std::mutex> abort_lock(abort_mu_);
  if (broken()) made->abort(abort_reason_);
  std::lock_guard<std::mutex> lock(backends_mu_);
  device_ = device;
  backends_.push_back(std::move(made));
  return *backends_.back();
}

std::string Communicator::object_key() const {
  static constexpr char kLabel[] = "ringcc object MAC key";
  const Digest key = hmac_sha256(secret_, kLabel, sizeof(kLabel) - 1);
  return std::string(reinterpret_cast<const char*>(key.data()), key.size());
}

int Communicator::waiting_for() const {
  std::lock_guard<std::mutex> lock(backends_mu_);
  for (const auto& backend : backends_) {
    const int rank = backend->waiting_for();
    if (rank >= 0) return rank;
  }
  return -1;
}

std::string Communicator::gpu_backend_name() const {
  std::lock_guard<std::mutex> lock(backends_mu_);
  for (const auto& backend : backends_) {
    if (backend->memory() == MemoryKind::kCuda) return backend->name();
  }
  return "";
}

std::string Communicator::record_failure(const std::string& reason) {
  std::shared_ptr<Store> store;
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    store = store_;
  }
  return store ? record_job_failure(store->job_store(), reason) : "";
}

bool Communicator::job_failed() { return recorded_job_failure(store_->job_store(), nullptr); }

void Communicator::break_links(const std::string& message, const std::string& reason) {
  std::lock_guard<std::mutex> lock(abort_mu_);
  if (abort_reason_.empty()) abort_reason_ = message;
  broken_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(backends_mu_);
    for (const auto& backend : backends_) backend->abort(reason);
  }
  if (links_) links_->abort(reason);
}

void Communicator::fail(const Error& e) {
  // What follows must finish even though a signal may be pending.
  UninterruptibleWait quiet;
  const std::string reason = e.what();
  // Record the first failure where every rank can read it; break our links so those blocked on us fail fast.
  const std::string first = record_failure("rank " + std::to_string(rank_) + ": " + reason);
  std::string message = reason;
  if (!first.empty() && first.find(reason) == std::string::npos) {
    message += " (first failure in the job: " + first + ")";
  }
  break_links(message, reason);
  // A peer's failure is the failing rank's to report (it logs that it aborts): not an error here.
  const LogLevel level = e.kind() == ErrorKind::kPeerFailure ? LogLevel::kDebug : LogLevel::kError;
  if (log_enabled(level)) log_message(level, message);
  throw Error(e.kind(), message);
}

void Communicator::break_job(const std::string& record, const std::string& message, const std::string& reason) {
  UninterruptibleWait quiet;
  // Recorded first, so that peers that only see a closed socket can tell why.
  record_failure(record);
  break_links(message, reason);
}

void Communicator::abort(const std::string& reason) {
  break_job("rank " + std::to_string(rank_) + " aborted: " + reason, "this rank aborted: " + reason, reason);
}

void Communicator::execute_grouped(std::vector<CollectiveArgs>& list) {
  // Batches of one dtype, packed up to the fusion threshold, in list order.
  std::vector<size_t> order(list.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return static_cast<int>(list[x].dtype) < static_cast<int>(list[y].dtype);
  });
  const size_t threshold = static_cast<size_t>(std::max<int64_t>(fusion_threshold_, 0));
  size_t i = 0;
  while (i < order.size()) {
    CollectiveArgs& head = list[order[i]];
    const size_t es = dtype_size(head.dtype);
    const size_t head_bytes = static_cast<size_t>(head.count) * es;
    if (head_bytes >= threshold || order.size() == 1) {
      execute(head);
      ++i;
      continue;
    }
    size_t j = i, total = 0;
    // Buffers fuse only with buffers in the same memory (every rank cuts
    // its list alike; the stream, the same for a whole list, is the head's).
    auto same_place = [&](const CollectiveArgs& e) { return e.memory == head.memory && e.device == head.device; };
    while (j < order.size() && list[order[j]].dtype == head.dtype && same_place(list[order[j]]) &&
           total + static_cast<size_t>(list[order[j]].count) * es <= threshold) {
      total += static_cast<size_t>(list[order[j]].count) * es;
      ++j;
    }
    int64_t shapes = 0;
    CollectiveArgs fused = fuse_allreduces(list, order, i, j, &shapes);
    try {
      execute(fused);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kMismatch) throw;
      throw Error(e.kind(), std::string(e.what()) + "; this rank's tensors: " + fused_shapes_text(list, order, i, j));
    }
    i = j;
  }
}

void Communicator::execute_work(Work& work) {
  if (work.grouped()) {
    execute_grouped(work.list());
  } else {
    for (auto& a : work.list()) execute(a);
  }
}

uint64_t Communicator::take_ticket() {
  std::lock_guard<std::mutex> lock(order_mu_);
  if (stopping_) raise(ErrorKind::kNotInitialized, "ringcc has been shut down");
  return next_ticket_++;
}

template <class Pred>
bool Communicator::wait_order(std::unique_lock<std::mutex>& lock, Deadline deadline, Pred pred) {
  ++turn_waiters_;
  while (!pred()) {
    if (Clock::now() >= deadline) {
      --turn_waiters_;
      return false;
    }
    if (interruptible()) {
      lock.unlock();
      try {
        poll_interrupt();
      } catch (...) {
        lock.lock();
        --turn_waiters_;
        throw;
      }
      lock.lock();
      order_cv_.wait_until(lock, std::min(deadline, Clock::now() + kInterruptPoll), pred);
    } else if (deadline == Deadline::max()) {
      order_cv_.wait(lock, pred);
    } else {
      order_cv_.wait_until(lock, deadline, pred);
    }
  }
  --turn_waiters_;
  return true;
}

void Communicator::await_turn(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(order_mu_);
  if (finished_tickets_ == ticket) return;
  auto my_turn = [&] { return finished_tickets_ == ticket; };
  try {
    wait_order(lock, Deadline::max(), my_turn);
  } catch (const Error&) {
    lock.unlock();
    {
      // The collectives before ours fail fast once the links are broken.
      UninterruptibleWait quiet;
      const std::string reason = "interrupted by a signal (its handler raised) while waiting to start a collective";
      break_job("rank " + std::to_string(rank_) + ": " + reason, reason, reason);
      lock.lock();
      wait_order(lock, Deadline::max(), my_turn);
      lock.unlock();
    }
    finish_turn();
    throw;
  }
}

void Communicator::finish_turn() {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(order_mu_);
    ++finished_tickets_;
    wake = turn_waiters_ > 0;
  }
  if (wake) order_cv_.notify_all();
}

void Communicator::wake_worker() {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(order_mu_);
    wake = worker_idle_;
  }
  if (wake) work_cv_.notify_one();
}

template <class Run>
void Communicator::run_in_turn(Run&& run) {
  const uint64_t ticket = take_ticket();
  await_turn(ticket);
  try {
    run();
  } catch (...) {
    finish_turn();
    throw;
  }
  finish_turn();
}

void Communicator::run(CollectiveArgs& args) {
  run_in_turn([&] { execute(args); });
}

void Communicator::grouped_allreduce(std::vector<CollectiveArgs>& list) {
  run_in_turn([&] { execute_grouped(list); });
}

std::shared_ptr<Work> Communicator::submit(CollectiveArgs args) {
  std::vector<CollectiveArgs> list;
  list.push_back(std::move(args));
  auto work = std::make_shared<Work>(std::move(list), false);
  {
    std::lock_guard<std::mutex> lock(order_mu_);
    if (stopping_) raise(ErrorKind::kNotInitialized, "ringcc has been shut down");
    queue_.emplace_back(next_ticket_++, work);
  }
  wake_worker();
  return work;
}

std::shared_ptr<Work> Communicator::submit_grouped(std::vector<CollectiveArgs> list) {
  auto work = std::make_shared<Work>(std::move(list), true);
  {
    std::lock_guard<std::mutex> lock(order_mu_);
    if (stopping_) raise(ErrorKind::kNotInitialized, "ringcc has been shut down");
    queue_.emplace_back(next_ticket_++, work);
  }
  wake_worker();
  return work;
}

void Communicator::worker_loop() {
  name_this_thread("ringcc-worker");
  for (;;) {
    std::shared_ptr<Work> work;
    {
      std::unique_lock<std::mutex> lock(order_mu_);
      worker_idle_ = true;
      work_cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      worker_idle_ = false;
      if (queue_.empty()) {
        worker_exited_ = true;
        lock.unlock();
        order_cv_.notify_all();
        return;
      }
      const uint64_t ticket = queue_.front().first;
      if (finished_tickets_ != ticket) {
        ++turn_waiters_;
        order_cv_.wait(lock, [&] { return finished_tickets_ == ticket; });
        --turn_waiters_;
      }
      work = queue_.front().second;
      queue_.pop_front();
    }
    std::exception_ptr error;
    try {
      execute_work(*work);
    } catch (const ThreadExit&) {
      throw;
    } catch (...) {
      error = std::current_exception();
    }
    finish_turn();
    work->finish(error);
  }
}

void Communicator::shutdown() {
  {
    std::lock_guard<std::mutex> lock(order_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  work_cv_.notify_all();
  // Everything within one timeout: queued collectives and blocking ones of
  // other threads finish (each has its own bound); past the deadline, or
  // on an interrupt, what still runs is aborted and fails fast.
  const Deadline deadline = deadline_after(timeout_s());
  std::exception_ptr interrupted;
  {
    std::unique_lock<std::mutex> lock(order_mu_);
    auto idle = [&] { return worker_exited_ && finished_tickets_ == next_ticket_; };
    bool finished = false;
    try {
      finished = wait_order(lock, deadline, idle);
    } catch (const Error&) {
      interrupted = std::current_exception();
    }
    if (!finished) {
      lock.unlock();
      UninterruptibleWait quiet;
      const std::string reason = interrupted
                                     ? std::string("interrupted by a signal (its handler raised) while shutting down")
                                     : detail::concat("shutdown() gave up after ", timeout_s(), " s (",
                                                      collective_timeout_variable(), ") on collectives still running");
      break_job("rank " + std::to_string(rank_) + ": " + reason, reason, reason);
      lock.lock();
      wait_order(lock, Deadline::max(), idle);
    }
  }
  if (worker_.joinable()) worker_.join();
  if (!job_id_.empty()) remember_left_job(job_id_);
  if (!interrupted) {
    try {
      leave_in_step(deadline);
    } catch (const Error&) {
      interrupted = std::current_exception();
    }
  }
  shut_down_ = true;
  {
    std::vector<std::unique_ptr<Backend>> backends;
    {
      std::lock_guard<std::mutex> lock(backends_mu_);
      backends.swap(backends_);
    }
    // The last made first: the device backend waits (bounded) for the
    // peers to finish with this rank's device buffers.
    while (!backends.empty()) backends.pop_back();
  }
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    links_.reset();
    job_ = BackendJob();
    mpi_comm_.reset();
    store_.reset();
    store_server_.reset();
  }
  if (interrupted) std::rethrow_exception(interrupted);
}

void Communicator::leave_in_step(Deadline deadline) {
  if (size_ <= 1 || !store_) return;
  // A peer still waiting for us in a collective we will never join fails
  // now rather than at its deadline (what we sent still arrives).
  for (const auto& backend : backends_) backend->shutdown();
  if (links_) links_->leave();
  if (broken()) return;
  // Rank 0 keeps serving the store until every rank has checked out: a
  // slower rank may still be meeting the others through it. A failure
  // anywhere in the job ends the wait (the failed rank may never check
  // out). The others need not wait: an init() that finds this job's store
  // still up waits for the next one (join_job()). A store the caller handed
  // in is served by its owner, who may already have closed it (torch's
  // rank 0 drops its TCPStore with its group): nobody waits on a check-out
  // there, and a call into a closed store would only make its client log.
  if (!store_is_ours_) return;
  try {
    store_->add("ringcc/shutdown", 1);
    if (store_server_) {
      while (Clock::now() < deadline && store_->add("ringcc/shutdown", 0) < size_ && !job_failed()) {
        poll_interrupt();
        usleep(1000);
      }
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInterrupted) throw;
  } catch (const ThreadExit&) {
    throw;
  } catch (...) {  // an adapter's store may fail its own way; leaving goes on regardless
  }
}

}  // namespace ringcc
