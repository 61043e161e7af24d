#include "core/backends/shm/shm_backend.h"

#include "core/algorithms/shm_collectives.h"

namespace ringcc {

namespace {

class ShmBackend : public Backend {
 public:
  ShmBackend(const BackendJob& job, Deadline deadline)
      : shm_(*job.store, job.key_prefix, job.world.ranks, job.rank, deadline) {}

  const char* name() const override { return "shm"; }
  MemoryKind memory() const override { return MemoryKind::kHost; }
  bool gathers_segments() const override { return true; }
  void run(CollectiveArgs& a, Deadline deadline) override { shm_.run(a, deadline); }
  void abort(const std::string& reason) override { shm_.abort(reason); }
  void shutdown() override { shm_.leave(); }
  double take_peer_wait_us() override { return shm_.take_peer_wait_us(); }
  int waiting_for() const override { return shm_.waiting_for(); }

 private:
  ShmCollectives shm_;
};

std::string refuses(const BackendJob& job, bool /*forced*/) {
  if (job.size < 2) return "one rank";
  if (!job.topology.all_local()) return "the ranks span hosts";
  if (job.transport == "tcp" || job.transport == "mpi") return "RINGCC_TRANSPORT=" + job.transport;
  return "";
}

std::unique_ptr<Backend> make(const BackendJob& job, Deadline deadline) {
  return std::make_unique<ShmBackend>(job, deadline);
}

void settings(std::vector<SharedSetting>* out) {
  auto num = [](auto v) { return std::to_string(v); };
  out->push_back({"RINGCC_SHM_AREA_BYTES", nullptr, [num] { return num(ShmCollectives::area_bytes_from_env()); }});
  out->push_back({"RINGCC_SHM_SMALL_BYTES", nullptr, [num] { return num(ShmCollectives::small_bytes_from_env()); }});
  out->push_back({"RINGCC_SHM_ALLREDUCE_PIECE_BYTES", nullptr,
                  [num] { return num(ShmCollectives::allreduce_piece_bytes_from_env()); }});
}

}  // namespace

BackendEntry shm_backend() { return {"shm", MemoryKind::kHost, &refuses, &make, &settings}; }

}  // namespace ringcc
