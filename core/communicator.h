// The communicator: a job's ranks, how they are grouped by host, the links
// between them and the backends that run its collectives (one per kind of
// memory and collective, chosen from the registry, core/backends/).
// Collectives run in the order they are issued (blocking and asynchronous
// alike); the first peer failure aborts the communicator so that every rank
// blocked on us fails fast too.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/backends/backend.h"
#include "core/backends/output_apart.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/collective/collective_args.h"
#include "core/collective/fusion_buffer.h"
#include "core/collective/work.h"
#include "core/device/gpu_trace.h"
#include "core/rendezvous/rendezvous.h"
#include "core/rendezvous/store.h"
#include "core/rendezvous/topology.h"

namespace ringcc {

class MpiComm;
struct Meeting;
class SecretFile;
class TcpStoreServer;
class Transport;

class Communicator {
 public:
  // Joins the job. With store == nullptr rank 0 serves a TcpStore at
  // info.master_addr:master_port and the others connect to it; an adapter
  // may hand in its own store instead.
  explicit Communicator(const RendezvousInfo& info, std::shared_ptr<Store> store = nullptr);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return topology_.local_rank; }
  int local_size() const { return topology_.local_size; }
  int cross_rank() const { return topology_.cross_rank; }
  int cross_size() const { return topology_.cross_size; }
  // "self" (one rank), "shm", "tcp", "shm+tcp" or "mpi": what carries the data.
  const std::string& transport_name() const { return transport_name_; }
  // One line on what the job set up (ranks, hosts, transport and why, the
  // interface, host algorithms, fusion threshold, bounds), and one for a
  // rank leaving it (communicator_report.cc).
  std::string describe() const;
  std::string describe_leaving() const;

  // Runs a collective, blocking, after every earlier one.
  void run(CollectiveArgs& args);
  // Queues a collective after every earlier one; returns at once.
  std::shared_ptr<Work> submit(CollectiveArgs args);
  std::shared_ptr<Work> submit_grouped(std::vector<CollectiveArgs> list);
  // Fused allreduce of many buffers: packed into the fusion buffer
  // (RINGCC_FUSION_THRESHOLD, default 64 MiB) in as few collectives as fit.
  void grouped_allreduce(std::vector<CollectiveArgs>& list);

  // Leaves the job: waits for queued work, tells the peers this rank takes
  // part in nothing more, then (rank 0) serves the rendezvous store until
  // every rank has checked out. Returns within timeout_s(): past it (or
  // when a signal handler raises on an interruptible thread, which then
  // gets Error(kInterrupted)) it aborts what is still running. Idempotent.
  void shutdown();

  // Gives up at once: a collective blocked on this rank (here or on a
  // peer) fails with PeerFailure naming `reason`; the communicator is
  // unusable afterwards. Safe to call from any thread.
  void abort(const std::string& reason);
  // True once a failure or abort broke the communicator.
  bool broken() const { return broken_.load(std::memory_order_acquire); }

  // Microseconds this rank's collectives spent waiting for peers to arrive
  // since the last call (shared memory only; 0 where the transport cannot
  // tell waiting from moving data). Call between collectives.
  double take_peer_wait_us();
  // The rank a running collective is blocked on right now, -1 when none or
  // when its backend cannot tell. Safe from any thread.
  int waiting_for() const;
  // The bound on a collective's waits (and shutdown's), in seconds. Without
  // a timeout of its own, collective_timeout_seconds() as set now.
  double timeout_s() const { return fixed_timeout_s_ > 0 ? fixed_timeout_s_ : collective_timeout_seconds(); }
  // The bound on the waits of joining (rendezvous, connections, set-up).
  double setup_timeout_s() const { return fixed_timeout_s_ > 0 ? fixed_timeout_s_ : timeout_seconds(); }

  // The rendezvous store this communicator met through (another
  // communicator of the same ranks can meet through a PrefixStore of it).
  std::shared_ptr<Store> store() const { return store_; }
  // The address peers reach this rank at over TCP ("" when unused).
  const std::string& advertise_address() const { return advertise_address_; }
  // The job secret this communicator settled on ("" when it needed none):
  // another communicator of the same ranks may take it as its own.
  const std::string& secret() const { return secret_; }
  // The key of the MACs over what ranks send each other as pickled objects
  // (HMAC-SHA-256 of the job secret with a label of its own): a payload
  // that carries one was sent by a rank of this job, and the key cannot
  // connect to the job. Derived from "" when the job has no secret (its
  // data moves only through this user's shared memory, or it is insecure).
  std::string object_key() const;

  // Bytes in the fusion buffer.
  int64_t fusion_threshold() const { return fusion_threshold_; }

  // The backend of this communicator's CUDA collectives: "nccl", "ipc",
  // "host", or "" before the first one (core/backends/registry.h).
  std::string gpu_backend_name() const;

  // Whether the callers of this communicator give their tensors' shapes
  // (CollectiveArgs::shape) for the ranks to compare; off, the ranks
  // compare element counts only (torch's backend, as torch's own do). The
  // bindings read it for every collective they prepare.
  bool compares_shapes() const { return compares_shapes_.load(std::memory_order_relaxed); }
  void set_compares_shapes(bool on) { compares_shapes_.store(on, std::memory_order_relaxed); }

 private:
  void join_job(const RendezvousInfo& info, Deadline deadline);
  // Where every rank runs, after the ranks compared the settings they
  // must share (check_shared_settings) and this rank checked what it can
  // of where the others say they run (confirm_places).
  std::vector<RankPlace> exchange_hosts(Deadline deadline, const std::string& launcher_single_host);
  // Raises on every rank (MismatchError naming the variable, the values and
  // the ranks) when settings[r], rank r's shared_settings_text(), differ.
  void check_shared_settings(const std::vector<std::string>& settings, Deadline deadline);
  // The links between the ranks (into links_ and job_): MPI's, none where
  // shared memory carries everything, else TCP's.
  void connect_links(const RendezvousInfo& info, Meeting& meeting, Deadline deadline);
  void connect_mpi_links(const RendezvousInfo& info);
  void execute(CollectiveArgs& a);
  // A fused allreduce whose backend does not gather segments, through the
  // fusion buffer.
  void run_packed(CollectiveArgs& a);
  // The host backend that takes `a`: the first in registry order.
  Backend& host_backend(const CollectiveArgs& a);
  void run_host(CollectiveArgs& a, Deadline deadline) { run_output_apart(host_backend(a), a, deadline); }
  // A collective of CUDA buffers: agreement over the host path, then the
  // device backend (made on the first one).
  void run_device(CollectiveArgs& a, Deadline deadline);
  Backend& device_backend(int device, Deadline deadline);
  void execute_grouped(std::vector<CollectiveArgs>& list);
  void execute_work(Work& work);
  void validate(CollectiveArgs& a, std::string* local_error);
  // A collective failed for `e` (a peer failed, a wait timed out or was
  // interrupted): gives up on the job (break_job), naming the job's first
  // failure if it was another, and raises.
  [[noreturn]] void fail(const Error& e);
  // Gives up on the job: records `record` as its first failure unless one
  // is recorded, then breaks the links (break_links).
  void break_job(const std::string& record, const std::string& message, const std::string& reason);
  // Records `reason` as the job's first failure unless one is recorded;
  // returns the first failure recorded before it ("" if none).
  std::string record_failure(const std::string& reason);
  // True when the job's store holds a failure record.
  bool job_failed();
  // Breaks the communicator for `reason` (kept for later calls) and makes
  // every peer blocked on us fail fast.
  void break_links(const std::string& message, const std::string& reason);
  void worker_loop();
  uint64_t take_ticket();
  // Waits for this ticket's turn; interrupted, it aborts the communicator
  // (the skipped collective would leave the ranks out of step), lets the
  // turn pass and rethrows.
  void await_turn(uint64_t ticket);
  // Waits, under lock, until pred() or the deadline (false then); polls
  // for interrupts on interruptible threads.
  template <class Pred>
  bool wait_order(std::unique_lock<std::mutex>& lock, Deadline deadline, Pred pred);
  // Takes a ticket, waits for its turn, runs run() and ends the turn.
  template <class Run>
  void run_in_turn(Run&& run);
  // The running collective's place in issue order, from 1 (its ticket's).
  uint64_t running_position() {
    std::lock_guard<std::mutex> lock(order_mu_);
    return finished_tickets_ + 1;
  }
  void leave_in_step(Deadline deadline);
  void wake_worker();
  void finish_turn();

  int rank_ = 0, size_ = 1;
  Topology topology_;
  std::string transport_name_ = "self";
  std::string job_id_;
  std::chrono::steady_clock::time_point joined_at_ = std::chrono::steady_clock::now();
  std::string secret_;
  std::string advertise_address_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<TcpStoreServer> store_server_;
  // Whether the job's store is the one this library sets up (rank 0's
  // store_server_: ringcc's own rendezvous, or the one made through MPI)
  // rather than one the caller handed in (a framework's, such as torch's):
  // only then do the ranks check out through it when they leave.
  bool store_is_ours_ = true;
  // The links between the ranks (TCP or MPI), when the job has any.
  std::unique_ptr<Transport> links_;
  std::shared_ptr<MpiComm> mpi_comm_;  // RINGCC_TRANSPORT=mpi: a communicator of our own
  // What the backends are made for (the device backend later, from it).
  BackendJob job_;
  // The backends this communicator made, in registry order (the device
  // backend, made on the first CUDA collective, last); the device it serves.
  // Changed by the thread running collectives, under backends_mu_ (abort()
  // and gpu_backend_name() read them from other threads).
  mutable std::mutex backends_mu_;
  // RINGCC_GPU_TRACE's record of device collectives (null when not
  // tracing); before backends_, which refer to it.
  std::unique_ptr<device::GpuTrace> gpu_trace_;
  std::vector<std::unique_ptr<Backend>> backends_;
  int device_ = -1;
  int64_t fusion_threshold_ = 64 << 20;
  FusionBuffer fusion_;

  // Set once a failure or abort broke the communicator; abort_reason_
  // (under abort_mu_) says why.
  std::atomic<bool> broken_{false};
  std::mutex abort_mu_;
  std::string abort_reason_;
  double fixed_timeout_s_;  // 0: follow RINGCC_TIMEOUT_S
  std::atomic<bool> compares_shapes_{true};
  bool shut_down_ = false;

  // Issue order: each collective takes a ticket and runs when its turn comes.
  // order_cv_ wakes threads waiting for their turn, work_cv_ the idle
  // worker; each is notified only when someone waits on it, so the common
  // case (one caller, idle worker) makes no wake-up system call.
  std::mutex order_mu_;
  std::condition_variable order_cv_;
  std::condition_variable work_cv_;
  int turn_waiters_ = 0;
  bool worker_idle_ = false;
  uint64_t next_ticket_ = 0;
  uint64_t finished_tickets_ = 0;
  std::deque<std::pair<uint64_t, std::shared_ptr<Work>>> queue_;
  std::thread worker_;
  bool worker_exited_ = false;  // under order_mu_; order_cv_ tells
  bool stopping_ = false;
};

}  // namespace ringcc
