// The interface a GPU backend implements (core/backends/nccl, cuda_ipc,
// host_staging), and what it is told about its communicator. A backend
// runs collectives whose buffers are CUDA device memory: the ranks have
// already agreed on the collective through the host path (so `recv_counts`
// holds what every rank contributes, and `alltoall_counts` the whole
// alltoall matrix), and the backend enqueues the data movement on
// CollectiveArgs::stream without waiting for the device where it can.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/collective_args.h"
#include "core/device/cuda_device.h"
#include "core/device/gpu_trace.h"
#include "core/device/gpu_selection.h"
#include "core/socket.h"
#include "core/store.h"

namespace ringcc {
namespace device {

struct DeviceJob {
  int rank = 0;
  int size = 1;
  std::shared_ptr<Store> store;  // for the backend's own setup
  std::string key_prefix;        // store keys of this communicator's GPU backend start with it
  CudaDevice* device = nullptr;  // this rank's device
  std::vector<GpuRankInfo> ranks;  // every rank's report, in rank order
  double timeout_s = 60;         // RINGCC_TIMEOUT_S (or the communicator's own)
  // Runs a collective over host memory through the communicator's host
  // path (its own header exchange and deadline), for host staging.
  std::function<void(CollectiveArgs&)> host_run;
  // RINGCC_GPU_TRACE: where a backend marks the phases of a call (null
  // when not tracing; see gpu_trace.h).
  GpuTrace* trace = nullptr;

  // (rank, process id) of the other ranks on this host, for liveness checks.
  std::vector<std::pair<int, int>> local_peer_pids() const {
    std::vector<std::pair<int, int>> out;
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (static_cast<int>(r) != rank && ranks[r].host == ranks[static_cast<size_t>(rank)].host) {
        out.emplace_back(static_cast<int>(r), ranks[r].pid);
      }
    }
    return out;
  }
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // "nccl", "ipc" or "host".
  virtual const char* name() const = 0;
  // Runs one collective (or a fused batch: CollectiveArgs::segments) of
  // device buffers, in the caller's stream order. Sets result_count (and
  // out, when it allocated the output). Raises Error(kPeerFailure) once the
  // backend was aborted.
  virtual void run(CollectiveArgs& a, Deadline deadline) = 0;
  // Gives up: work this rank enqueued stops waiting for peers (its results
  // are undefined) and later runs raise Error(kPeerFailure) naming
  // `reason`. Safe from any thread, more than once.
  virtual void abort(const std::string& reason) = 0;
};

}  // namespace device
}  // namespace ringcc
