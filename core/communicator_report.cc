// What a job set up, in one line: what RINGCC_LOG_LEVEL=info prints on
// rank 0 when the job forms (as NCCL_DEBUG=INFO users expect), and what
// each rank says when it leaves.
#include <chrono>
#include <sstream>
#include <string>

#include "core/base/env.h"
#include "core/communicator.h"
#include "core/os/net_interface.h"

namespace ringcc {

namespace {

std::string transport_reason(const std::string& transport, const Topology& topology) {
  if (env_is_set("RINGCC_TRANSPORT")) return "RINGCC_TRANSPORT=" + env_str("RINGCC_TRANSPORT", "");
  if (transport == "mpi") return "started by an MPI launcher";
  if (transport == "shm") return "every rank on one host";
  if (transport == "shm+tcp") return "shared memory within a host, TCP between hosts";
  if (transport == "tcp") return topology.local_size > 1 ? "TCP asked for" : "one rank per host";
  return "one rank";
}

}  // namespace

std::string Communicator::describe() const {
  std::ostringstream os;
  os << "job " << (job_id_.empty() ? "-" : job_id_) << ": " << size_ << " rank(s) on " << topology_.hosts
     << " host(s) (" << topology_.local_size << " on this one), data over " << transport_name_ << " ("
     << transport_reason(transport_name_, topology_) << ")";
  if (!advertise_address_.empty()) {
    os << ", this rank at " << advertise_address_;
    const std::string ifname = socket_interface_setting();
    os << " (" << (ifname.empty() ? "the interface toward rank 0" : ifname) << ")";
  }
  os << "; host algorithms:";
  for (const auto& backend : backends_) os << " " << backend->name();
  os << "; fusion threshold " << fusion_threshold_ << " bytes; a collective waits " << format_seconds(timeout_s())
     << " s for a live peer (" << collective_timeout_variable() << "), joining " << format_seconds(setup_timeout_s())
     << " s (RINGCC_TIMEOUT_S)";
  return os.str();
}

std::string Communicator::describe_leaving() const {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - joined_at_).count();
  return "rank " + std::to_string(rank_) + " leaves job " + (job_id_.empty() ? "-" : job_id_) + " after " +
         format_seconds(seconds) + " s";
}

}  // namespace ringcc
