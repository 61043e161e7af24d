#include "core/backends/p2p/p2p_backend.h"

namespace ringcc {

namespace {

class P2pBackend : public Backend {
 public:
  explicit P2pBackend(const BackendJob& job) : world_(job.world) {}

  const char* name() const override { return "p2p"; }
  MemoryKind memory() const override { return MemoryKind::kHost; }
  void run(CollectiveArgs& a, Deadline deadline) override { run_over_transport(world_, a, scratch_, deadline); }
  // The links are the communicator's: it aborts them.
  void abort(const std::string& /*reason*/) override {}

 private:
  PeerSet world_;
  RingScratch scratch_;
};

std::string refuses(const BackendJob& job, bool /*forced*/) {
  if (job.transport == "mpi") return "RINGCC_TRANSPORT=mpi";
  for (int r = 0; r < job.size; ++r) {
    if (r != job.rank && !job.world.links[static_cast<size_t>(r)]) return "no link to rank " + std::to_string(r);
  }
  return "";
}

std::unique_ptr<Backend> make(const BackendJob& job, Deadline /*deadline*/) {
  return std::make_unique<P2pBackend>(job);
}

}  // namespace

BackendEntry p2p_backend() { return {"p2p", MemoryKind::kHost, &refuses, &make, nullptr}; }

}  // namespace ringcc
