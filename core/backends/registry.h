// The registry: every backend, one line each in registry.cc, in the order a
// communicator asks them (backend.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backends/backend.h"

namespace ringcc {

const std::vector<BackendEntry>& backend_registry();

// The host backends for `job`: every host-memory entry that can serve it,
// made in registry order (each collective goes to the first that takes it).
std::vector<std::unique_ptr<Backend>> make_host_backends(const BackendJob& job, Deadline deadline);

// Which device backend serves `job` (whose `gpus` hold every rank's
// report), the same on every rank: the one RINGCC_GPU_BACKEND names (every
// rank must name the same), else the first device entry that can serve.
// Raises Error(kInvalidArgument) saying why when the ranks name different
// ones, an unknown one, or one that cannot serve them.
struct BackendChoice {
  const BackendEntry* entry = nullptr;
  std::string reason;  // why, for the log
};
BackendChoice choose_device_backend(const BackendJob& job);

// Sets up the device backend for CUDA device `device` (a collective step of
// the job): every rank reports itself (gpu_report.h) through the store
// under job.key_prefix, then all choose alike and make it.
std::unique_ptr<Backend> make_device_backend(BackendJob job, int device, Deadline deadline);

// The settings every rank of a job must share, as the components read them
// (job_settings.h compares them): the transports', the algorithms', the
// engine's and every backend's.
std::vector<SharedSetting> shared_settings();

}  // namespace ringcc
