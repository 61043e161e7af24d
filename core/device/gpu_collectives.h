// A communicator's collectives on CUDA device memory. Created by the
// communicator the first time a CUDA collective reaches it (so that CPU-only
// users never load CUDA); on that first collective every rank reports its
// host, device UUID, process and libraries through the rendezvous store,
// the ranks choose a backend alike (gpu_selection.h) and build it. Every
// later CUDA collective of the communicator goes to that backend, on the
// same device.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/collective_args.h"
#include "core/device/device_backend.h"
#include "core/socket.h"
#include "core/store.h"

namespace ringcc {
namespace device {

class GpuCollectives {
 public:
  GpuCollectives(int rank, int size, std::shared_ptr<Store> store, std::string key_prefix,
                 double timeout_s, std::function<void(CollectiveArgs&)> host_run);
  ~GpuCollectives();
  GpuCollectives(const GpuCollectives&) = delete;
  GpuCollectives& operator=(const GpuCollectives&) = delete;

  // Runs a device collective whose agreement the host path has checked.
  // The first one sets the backend up (a collective step over the store).
  // `started`: when the call reached the communicator (RINGCC_GPU_TRACE).
  void run(CollectiveArgs& a, Deadline deadline, Clock::time_point started = Clock::now());
  // See DeviceBackend::abort; before setup, later runs raise.
  void abort(const std::string& reason);

  // The device the backend serves (-1 before the first collective).
  int device() const { return device_; }
  // "nccl", "ipc", "host", or "" before the first collective.
  std::string backend_name() const;

 private:
  void set_up(int device, Deadline deadline);

  int rank_, size_;
  std::shared_ptr<Store> store_;
  std::string key_prefix_;
  double timeout_s_;
  std::function<void(CollectiveArgs&)> host_run_;
  int device_ = -1;
  mutable std::mutex mu_;  // backend_ against abort from other threads
  std::unique_ptr<GpuTrace> trace_;  // before backend_: the backend refers to it
  std::unique_ptr<DeviceBackend> backend_;
  std::string aborted_;
};

}  // namespace device
}  // namespace ringcc
