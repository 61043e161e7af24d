#include "core/backends/mpi/mpi_backend.h"

#include "core/backends/mpi/mpi_collectives.h"
#include "core/base/env.h"

namespace ringcc {

namespace {

class MpiBackend : public Backend {
 public:
  explicit MpiBackend(const BackendJob& job) : coll_(job.mpi, job.mpi_links) {}

  const char* name() const override { return "mpi"; }
  MemoryKind memory() const override { return MemoryKind::kHost; }
  void run(CollectiveArgs& a, Deadline deadline) override { coll_.run(a, scratch_, deadline); }
  // The MPI links are the communicator's: it aborts them (and so tells the
  // peers), and later runs fail on them.
  void abort(const std::string& /*reason*/) override {}

 private:
  MpiCollectives coll_;
  RingScratch scratch_;
};

std::string refuses(const BackendJob& job, bool /*forced*/) {
  if (!job.mpi || !job.mpi_links) return "the job has no MPI links (RINGCC_TRANSPORT=mpi makes them)";
  return "";
}

std::unique_ptr<Backend> make(const BackendJob& job, Deadline /*deadline*/) {
  return std::make_unique<MpiBackend>(job);
}

// The MPI collectives' algorithm choices matter only where they carry the
// data (a different RINGCC_TRANSPORT is reported on its own).
void settings(std::vector<SharedSetting>* out) {
  if (env_str("RINGCC_TRANSPORT", "auto") != "mpi") return;
  auto num = [](auto v) { return std::to_string(v); };
  out->push_back({"RINGCC_MPI_ALGORITHM", nullptr, [num] { return num(MpiCollectives::algorithm_from_env()); }});
  out->push_back({"RINGCC_MPI_RING_BYTES", nullptr, [num] { return num(MpiCollectives::ring_bytes_from_env()); }});
  out->push_back({"RINGCC_MPI_INLINE_BYTES", nullptr, [num] { return num(MpiCollectives::inline_bytes_from_env()); }});
}

}  // namespace

BackendEntry mpi_backend() { return {"mpi", MemoryKind::kHost, &refuses, &make, &settings}; }

}  // namespace ringcc
