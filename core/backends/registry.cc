#include "core/backends/registry.h"

#include <unistd.h>

#include <set>
#include <sstream>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/device/cuda_device.h"
#include "core/device/gpu_libraries.h"
#include "core/os/socket.h"
#include "core/transport/tcp_transport.h"

namespace ringcc {

// Every backend, one line each, in the order a communicator asks them. The
// folder core/backends/<name>/ defines BackendEntry <name>_backend() (and
// its CMakeLists.txt the library core/backends/CMakeLists.txt lists).
#define RINGCC_BACKENDS(X) \
  X(single)                \
  X(mpi)                   \
  X(shm)                   \
  X(hierarchical)          \
  X(p2p)                   \
  X(nccl)                  \
  X(cuda_ipc)              \
  X(host_staging)

#define RINGCC_DECLARE_BACKEND(name) BackendEntry name##_backend();
RINGCC_BACKENDS(RINGCC_DECLARE_BACKEND)

const std::vector<BackendEntry>& backend_registry() {
#define RINGCC_LIST_BACKEND(name) name##_backend(),
  static const std::vector<BackendEntry> table = {RINGCC_BACKENDS(RINGCC_LIST_BACKEND)};
  return table;
}

std::vector<std::unique_ptr<Backend>> make_host_backends(const BackendJob& job, Deadline deadline) {
  std::vector<std::unique_ptr<Backend>> made;
  for (const BackendEntry& entry : backend_registry()) {
    if (entry.memory != MemoryKind::kHost || !entry.refuses(job, false).empty()) continue;
    made.push_back(entry.make(job, deadline));
    RINGCC_LOG(kDebug, "backend ", entry.name, " serves host memory");
  }
  return made;
}

namespace {

std::vector<const BackendEntry*> device_entries() {
  std::vector<const BackendEntry*> out;
  for (const BackendEntry& entry : backend_registry()) {
    if (entry.memory != MemoryKind::kHost) out.push_back(&entry);
  }
  return out;
}

// "nccl, ipc or host"
std::string names_of(const std::vector<const BackendEntry*>& entries) {
  std::string text;
  for (size_t i = 0; i < entries.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == entries.size() ? " or " : ", ") + std::string(entries[i]->name);
  }
  return text;
}

// The entry RINGCC_GPU_BACKEND names on every rank, or null when it is unset.
const BackendEntry* forced_entry(const std::vector<device::GpuRankInfo>& ranks,
                                 const std::vector<const BackendEntry*>& entries) {
  std::set<std::string> forced;
  for (const auto& r : ranks) forced.insert(r.forced);
  if (forced.size() > 1) {
    std::ostringstream os;
    for (size_t r = 0; r < ranks.size(); ++r) os << (r ? ", " : "") << "rank " << r << ": '" << ranks[r].forced << "'";
    raise(ErrorKind::kInvalidArgument, "RINGCC_GPU_BACKEND differs between ranks (", os.str(),
          "); set the same value (", names_of(entries), ") on every rank, or none");
  }
  const std::string want = ranks.empty() ? "" : ranks[0].forced;
  if (want.empty()) return nullptr;
  for (const BackendEntry* entry : entries) {
    if (want == entry->name) return entry;
  }
  raise(ErrorKind::kInvalidArgument, "RINGCC_GPU_BACKEND must be ", names_of(entries), ", got '", want, "'");
}

}  // namespace

BackendChoice choose_device_backend(const BackendJob& job) {
  const std::vector<const BackendEntry*> entries = device_entries();
  if (const BackendEntry* entry = forced_entry(job.gpus, entries)) {
    const std::string why = entry->refuses(job, true);
    if (!why.empty()) raise(ErrorKind::kInvalidArgument, "RINGCC_GPU_BACKEND=", entry->name, ", but ", why);
    return {entry, std::string("RINGCC_GPU_BACKEND=") + entry->name};
  }
  std::string passed_over;
  for (const BackendEntry* entry : entries) {
    const std::string why = entry->refuses(job, false);
    if (why.empty()) return {entry, passed_over.empty() ? "the first that serves these ranks" : passed_over};
    passed_over += (passed_over.empty() ? "" : "; ") + std::string(entry->name) + ": " + why;
  }
  raise(ErrorKind::kInvalidArgument, "no GPU backend serves these ranks (", passed_over, ")");
}

std::unique_ptr<Backend> make_device_backend(BackendJob job, int device, Deadline deadline) {
  device::CudaDevice& dev = device::CudaDevice::get(device);
  device::GpuRankInfo mine;
  mine.host = host_name();
  mine.uuid = dev.properties().uuid;
  mine.device = device;
  mine.pid = static_cast<int>(::getpid());
  mine.nccl = device::nccl_available();
  mine.nvrtc = device::library_info(device::GpuLibrary::kNvrtc).found;
  mine.forced = env_str("RINGCC_GPU_BACKEND", "");
  job.device = &dev;
  job.gpus.assign(static_cast<size_t>(job.size), device::GpuRankInfo());
  job.gpus[static_cast<size_t>(job.rank)] = mine;
  if (job.size > 1) {
    job.store->set(job.key_prefix + "rank/" + std::to_string(job.rank), device::encode_rank_info(mine));
    for (int r = 0; r < job.size; ++r) {
      if (r == job.rank) continue;
      job.gpus[static_cast<size_t>(r)] =
          device::decode_rank_info(job.store->get(job.key_prefix + "rank/" + std::to_string(r), until(deadline)));
    }
  }
  const BackendChoice choice = choose_device_backend(job);
  job.chosen_because = choice.reason;
  std::unique_ptr<Backend> backend = choice.entry->make(job, deadline);
  RINGCC_LOG(kDebug, "GPU backend ", backend->name(), " on ", mine.uuid, " (cuda:", device, "): ", choice.reason);
  return backend;
}

std::vector<SharedSetting> shared_settings() {
  auto num = [](auto v) { return std::to_string(v); };
  std::vector<SharedSetting> list = {
      {"RINGCC_TRANSPORT", nullptr, [] { return env_str("RINGCC_TRANSPORT", "auto"); }},
      {"RINGCC_TCP_SOCKETS", nullptr, [num] { return num(TcpTransport::sockets_from_env()); }},
      {"RINGCC_TCP_STRIPE_BYTES", nullptr, [num] { return num(TcpTransport::stripe_bytes_from_env()); }},
      {"RINGCC_CHUNK_BYTES", nullptr, [num] { return num(ring_chunk_bytes_from_env()); }},
      {"RINGCC_TCP_ONE_WAY_BYTES", nullptr, [num] { return num(one_way_bytes_from_env()); }},
      // As EngineOptions::from_env() and the communicator read them.
      {"RINGCC_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD", [num] { return num(fusion_threshold_from_env()); }},
      {"RINGCC_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY", [num] { return num(cache_capacity_from_env()); }},
  };
  for (const BackendEntry& entry : backend_registry()) {
    if (entry.shared_settings) entry.shared_settings(&list);
  }
  return list;
}

}  // namespace ringcc
