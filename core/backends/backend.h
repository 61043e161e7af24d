// A backend: what runs a communicator's collectives on one kind of memory.
//
// Each lives in a folder of its own under core/backends/ and includes none
// of the others; the registry (registry.h) lists them in the order a
// communicator asks them, as NCCL's transport table does: the first that
// can serve a job is made, and each collective goes to the first backend
// made that serves its memory and takes it (its kind, its size). The
// communicator keeps the ones it made and goes through all of them to fail,
// abort and shut down.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/algorithms/ring_algorithms.h"
#include "core/base/deadline.h"
#include "core/collective/collective_args.h"
#include "core/device/gpu_report.h"
#include "core/rendezvous/store.h"
#include "core/rendezvous/topology.h"

namespace ringcc {

class MpiComm;
class MpiTransport;
namespace device {
class CudaDevice;
class GpuTrace;
}  // namespace device

// What a backend is told about its communicator when it is made.
struct BackendJob {
  int rank = 0;
  int size = 1;
  Topology topology;               // hosts: this rank's local and cross groups
  std::shared_ptr<Store> store;    // the rendezvous store, for the backend's own setup
  std::string key_prefix;          // the backend's store keys and shared-memory names start with it
  std::string transport = "auto";  // RINGCC_TRANSPORT: auto, tcp, shm or mpi
  double timeout_s = 60;           // RINGCC_TIMEOUT_S (or the communicator's own)
  // The point-to-point links (TCP or MPI): to every rank, and to the ranks
  // of this rank's cross group. A link is null where there is none (to
  // this rank itself, and to every rank when the job made no links).
  PeerSet world;
  PeerSet cross;
  // RINGCC_TRANSPORT=mpi: the communicator's own MPI communicator and the
  // MPI links over it.
  std::shared_ptr<MpiComm> mpi;
  MpiTransport* mpi_links = nullptr;

  // Device backends, made on the communicator's first CUDA collective:
  // this rank's device, every rank's report (gpu_report.h), and the
  // communicator's host path (its own header exchange and deadline), for
  // collectives over host memory.
  device::CudaDevice* device = nullptr;
  std::vector<device::GpuRankInfo> gpus;
  std::string chosen_because;  // why the registry chose this backend, for its log
  std::function<void(CollectiveArgs&)> host_run;
  // RINGCC_GPU_TRACE: where a device backend marks the phases of a call
  // (null when not tracing; see device/gpu_trace.h).
  device::GpuTrace* trace = nullptr;

  // (rank, process id) of the other ranks on this host, for liveness checks.
  std::vector<std::pair<int, int>> local_peer_pids() const { return device::local_peer_pids(gpus, rank); }
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Its name in the registry ("shm", "nccl", ...).
  virtual const char* name() const = 0;
  // The memory its collectives' buffers live in.
  virtual MemoryKind memory() const = 0;
  // Whether it runs `a` (its kind, its size). A device collective's
  // agreement (CollectiveArgs::agree_only) goes to a host backend.
  virtual bool takes(const CollectiveArgs& /*a*/) const { return true; }
  // Whether run() takes a fused allreduce (CollectiveArgs::segments) as it
  // is; otherwise the communicator packs the segments into its fusion
  // buffer first.
  virtual bool gathers_segments() const { return false; }
  // Runs one collective, or a fused batch, every wait bounded by
  // `deadline`. Host backends exchange and check the ranks' headers first
  // (a device collective's agreement stops there); device backends run
  // collectives the ranks have agreed on through a host backend, in the
  // caller's stream order. Sets result_count (and out, when it allocated
  // the output). Raises Error(kPeerFailure) once aborted.
  virtual void run(CollectiveArgs& a, Deadline deadline) = 0;
  // Gives up: a peer blocked on this rank fails fast, and later runs raise
  // Error(kPeerFailure) naming `reason`. Safe from any thread, more than once.
  virtual void abort(const std::string& reason) = 0;
  // The first step of shutting down: this rank takes part in nothing more,
  // so a peer waiting for it fails at once (what it sent still arrives).
  // The destructor releases the rest, bounded by the job's timeout.
  virtual void shutdown() {}
  // Microseconds this rank spent waiting for its peers to arrive since the
  // last call (0 where the backend cannot tell waiting from moving data).
  virtual double take_peer_wait_us() { return 0; }
  // The rank a collective of this backend is blocked on right now, -1 when
  // none (or where the backend cannot tell). Safe from any thread: for
  // saying who is late when a wait outside the core runs out.
  virtual int waiting_for() const { return -1; }
};

// A setting that every rank of a job must share (job_settings.h).
struct SharedSetting {
  const char* name;
  const char* horovod_name;            // read when ours is unset, or null
  std::function<std::string()> value;  // as the component uses it; may raise
};

// A line of the registry.
struct BackendEntry {
  const char* name;
  MemoryKind memory;
  // "" when the backend can serve `job`, else why not. `forced`: the user
  // named it (RINGCC_GPU_BACKEND), so only what it cannot do counts, not
  // where another backend would serve better.
  std::string (*refuses)(const BackendJob& job, bool forced);
  std::unique_ptr<Backend> (*make)(const BackendJob& job, Deadline deadline);
  // The settings every rank must share while it may serve (null: none).
  void (*shared_settings)(std::vector<SharedSetting>* out);
};

}  // namespace ringcc
