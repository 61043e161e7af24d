#include "core/rendezvous/rendezvous.h"

#include <cstdlib>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/os/mpi_library.h"
#include "core/os/socket.h"
#include "core/rendezvous/job_secret.h"
#include "core/rendezvous/slurm.h"

namespace ringcc {

namespace {

bool read_pair(const char* rank_var, const char* size_var, RendezvousInfo* info) {
  if (!env_is_set(rank_var) || !env_is_set(size_var)) return false;
  info->rank = static_cast<int>(env_int(rank_var, 0));
  info->size = static_cast<int>(env_int(size_var, 1));
  return true;
}

bool is_loopback(const std::string& host) {
  return host.rfind("127.", 0) == 0 || host == "localhost" || host == "::1" || host.rfind("::ffff:127.", 0) == 0;
}

// Whether the launcher's variables put every rank on this host.
void read_single_host(const char* local_size_var, RendezvousInfo* info) {
  if (is_loopback(info->master_addr)) {
    info->single_host = true;
    info->single_host_reason = "the store's address " + info->master_addr + " is a loopback address";
    return;
  }
  if (local_size_var != nullptr && env_is_set(local_size_var) && env_int(local_size_var, 0) == info->size) {
    info->single_host = true;
    info->single_host_reason = std::string(local_size_var) + " equals the world size";
    return;
  }
  if (env_is_set("SLURM_PROCID")) {
    const char* nodes = env_is_set("SLURM_STEP_NUM_NODES") ? "SLURM_STEP_NUM_NODES" : "SLURM_NNODES";
    if (env_is_set(nodes) && env_int(nodes, 0) == 1) {
      info->single_host = true;
      info->single_host_reason = std::string(nodes) + " is 1";
    }
  }
}

std::string named(const char* launcher, const char* var) {
  const std::string id = env_str(var, "");
  return id.empty() ? "" : std::string(launcher) + ":" + id;
}

std::string slurm_job() {
  const std::string job = env_str("SLURM_JOB_ID", "");
  if (job.empty()) return "";
  const std::string step = env_str("SLURM_STEP_ID", "");
  return "slurm:" + job + (step.empty() ? "" : "." + step);
}

std::string torchrun_job() {
  const std::string id = env_str("TORCHELASTIC_RUN_ID", "");
  return id.empty() || id == "none" ? "" : "torchrun:" + id;
}

std::string mpi_job() {
  std::string id = named("pmix", "PMIX_NAMESPACE");
  if (id.empty()) id = named("openmpi", "OMPI_MCA_ess_base_jobid");
  if (id.empty()) id = named("openmpi", "OMPI_MCA_orte_ess_jobid");
  return id;
}

}  // namespace

std::string launcher_single_host_reason() {
  struct Launcher {
    const char* size;
    const char* local_size;
  };
  // rendezvous_from_env's launchers, in its order.
  for (const Launcher& l : {Launcher{"RINGCC_SIZE", "RINGCC_LOCAL_SIZE"},
                            Launcher{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                            Launcher{"PMI_SIZE", "MPI_LOCALNRANKS"}, Launcher{"SLURM_NTASKS", nullptr},
                            Launcher{"WORLD_SIZE", "LOCAL_WORLD_SIZE"}}) {
    if (!env_is_set(l.size)) continue;
    RendezvousInfo info;
    info.size = static_cast<int>(env_int(l.size, 0));
    read_single_host(l.local_size, &info);
    return info.single_host ? info.single_host_reason : "";
  }
  return "";
}

std::string launcher_job_identity() {
  // The launcher whose rank variables rendezvous_from_env reads, in its
  // order: only that launcher names every rank of the job alike.
  if (env_is_set("RINGCC_RANK")) return named("ringrun", "RINGCC_JOB_ID");
  if (env_is_set("OMPI_COMM_WORLD_RANK") || env_is_set("PMI_RANK") || env_is_set("PMIX_RANK")) {
    const std::string id = mpi_job();
    return id.empty() ? slurm_job() : id;
  }
  if (env_is_set("SLURM_PROCID")) return slurm_job();
  if (env_is_set("RANK")) return torchrun_job();
  return "";
}

RendezvousInfo rendezvous_from_env() {
  RendezvousInfo info;
  const char* local_size_var = nullptr;  // the launcher's count of ranks on this host
  if (read_pair("RINGCC_RANK", "RINGCC_SIZE", &info)) {
    info.source = "ringrun (RINGCC_RANK/RINGCC_SIZE)";
    local_size_var = "RINGCC_LOCAL_SIZE";
  } else if (read_pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", &info)) {
    info.source = "Open MPI (OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE)";
    local_size_var = "OMPI_COMM_WORLD_LOCAL_SIZE";
  } else if (read_pair("PMI_RANK", "PMI_SIZE", &info)) {
    info.source = "PMI (PMI_RANK/PMI_SIZE)";
    local_size_var = "MPI_LOCALNRANKS";
  } else if (read_pair("SLURM_PROCID", "SLURM_NTASKS", &info)) {
    info.source = "SLURM (SLURM_PROCID/SLURM_NTASKS)";
  } else if (read_pair("RANK", "WORLD_SIZE", &info)) {
    info.source = "torchrun (RANK/WORLD_SIZE)";
    local_size_var = "LOCAL_WORLD_SIZE";
  } else {
    info.source = "a single process (no launcher variables found)";
    return info;
  }
  if (info.size < 1 || info.rank < 0 || info.rank >= info.size) {
    raise(ErrorKind::kInvalidArgument, "invalid rank ", info.rank, " for world size ", info.size, " from ",
          info.source);
  }
  info.secret = secret_from_env();
  if (info.size == 1) return info;
  info.launcher_job = launcher_job_identity();

  // An IPv6 address may come in brackets ("[fd00::1]"), as in URLs.
  info.master_addr = unbracket_host(env_str("RINGCC_MASTER_ADDR", env_str("MASTER_ADDR", "")));
  if (env_is_set("RINGCC_MASTER_PORT")) {
    info.master_port = static_cast<int>(env_int("RINGCC_MASTER_PORT", 0));
  } else if (env_is_set("MASTER_PORT")) {
    info.master_port = static_cast<int>(env_int("MASTER_PORT", 0)) + 1;
  }
  // srun gives no address: what the user did not set comes from SLURM.
  const bool from_slurm = info.source.rfind("SLURM", 0) == 0;
  if (from_slurm && (info.master_addr.empty() || info.master_port == 0) && !info.launcher_job.empty()) {
    if (info.master_port != 0) info.store_ports.push_back(info.master_port);
    fill_store_from_slurm(info.launcher_job, &info.master_addr, &info.store_ports, &info.store_from);
    info.master_port = info.store_ports.front();
    if (info.store_ports.size() == 1) info.store_ports.clear();  // the user's port: no others to try
  }
  if (info.master_addr.empty() || info.master_port <= 0 || info.master_port > 65535) {
    raise(ErrorKind::kInvalidArgument, "ranks found from ", info.source,
          " but not where rank 0 serves the rendezvous store: set RINGCC_MASTER_ADDR and "
          "RINGCC_MASTER_PORT (or MASTER_ADDR and MASTER_PORT; ringcc then uses MASTER_PORT+1),"
          " or start the job with ringrun");
  }
  read_single_host(local_size_var, &info);
  if (!info.store_from.empty() && info.rank == 0 && !info.single_host) {
    const std::string misplaced = slurm_rank0_misplaced(info.master_addr);
    if (!misplaced.empty()) raise(ErrorKind::kInvalidArgument, misplaced);
  }
  return info;
}

bool launched_by_mpi() {
  return env_is_set("OMPI_COMM_WORLD_SIZE") || env_is_set("PMIX_RANK") || env_is_set("PMI_SIZE") ||
         env_is_set("PMI_RANK") || env_is_set("MPI_LOCALNRANKS");
}

RendezvousInfo rendezvous_from_mpi(int64_t fortran_handle) {
  RendezvousInfo info;
  mpi_ensure_initialized();
  info.mpi = MpiComm::dup_of_handle(fortran_handle, timeout_seconds());
  info.rank = info.mpi->rank();
  info.size = info.mpi->size();
  info.source = fortran_handle < 0 ? "MPI (MPI_COMM_WORLD)" : "MPI (the communicator given to init)";
  info.secret = secret_from_env();
  info.master_addr = unbracket_host(env_str("RINGCC_MASTER_ADDR", ""));
  if (env_is_set("RINGCC_MASTER_PORT")) info.master_port = static_cast<int>(env_int("RINGCC_MASTER_PORT", 0));
  if (info.master_port < 0 || info.master_port > 65535) {
    raise(ErrorKind::kInvalidArgument, "RINGCC_MASTER_PORT must be a TCP port, got ", info.master_port);
  }
  return info;
}

}  // namespace ringcc
