// Finding the job from the environment: which rank we are, how many ranks
// there are, and where rank 0 serves the rendezvous store.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ringcc {

class MpiComm;

struct RendezvousInfo {
  int rank = 0;
  int size = 1;
  std::string master_addr;  // where rank 0 serves the store
  int master_port = 0;
  // Ports rank 0's store may take, in order, when the port was derived
  // rather than given (SLURM, core/rendezvous/slurm.h): rank 0 serves on
  // the first it can bind, the others look for it on each. master_port is
  // then the first. Empty when the port was given.
  std::vector<int> store_ports;
  // How master_addr and the ports were found when derived, for messages;
  // "" when given.
  std::string store_from;
  std::string secret;  // the job secret (RINGCC_SECRET or RINGCC_SECRET_FILE); may be empty
  std::string source;  // which launcher's variables were used, for messages
  // True when the launcher's variables say that every rank runs on this
  // host (single_host_reason says which); such a job serves its store on
  // 127.0.0.1 and needs no secret of the user's (core/rendezvous/job_secret.h).
  bool single_host = false;
  std::string single_host_reason;
  // The launcher's name for this job (launcher_job_identity()), "" when it
  // gives none: ranks of two jobs never pair up when their launchers name
  // them.
  std::string launcher_job;
  std::string advertise_address;  // where peers reach us; empty: found from the store
  double timeout_s = 0;           // bound on every wait; 0: RINGCC_TIMEOUT_S
  // Set when the job was found through MPI (rendezvous_from_mpi): the
  // communicator its ranks are numbered in. master_addr is then empty: rank
  // 0 serves the store on a free port and tells the others through MPI.
  std::shared_ptr<MpiComm> mpi;
};

// Reads, in order: ringrun (RINGCC_RANK/RINGCC_SIZE), Open MPI
// (OMPI_COMM_WORLD_*), PMI (PMI_RANK/PMI_SIZE), SLURM
// (SLURM_PROCID/SLURM_NTASKS), torchrun (RANK/WORLD_SIZE). Without any, a
// single-process job. The store address is RINGCC_MASTER_ADDR or
// MASTER_ADDR; the port RINGCC_MASTER_PORT, else MASTER_PORT + 1 (torch
// keeps MASTER_PORT for its own store). Under SLURM, what is not set comes
// from SLURM: the first node of the step, ports derived from the job and
// step ids (fill_store_from_slurm). Raises Error(kInvalidArgument) when
// a multi-rank job lacks an address or a value is malformed.
// Every rank is taken to be on this host when the store's address is a
// loopback address, or the launcher says so: RINGCC_LOCAL_SIZE (ringrun),
// OMPI_COMM_WORLD_LOCAL_SIZE (Open MPI), MPI_LOCALNRANKS (MPICH, Intel MPI)
// or LOCAL_WORLD_SIZE (torchrun) equal to the world size, or one node in
// SLURM_STEP_NUM_NODES (else SLURM_NNODES).
RendezvousInfo rendezvous_from_env();

// Why the launcher that started this process says every rank of its job
// runs on this host (e.g. "LOCAL_WORLD_SIZE equals the world size"), or ""
// when it does not say so: the world of the launcher, which holds every
// group an adapter makes of it.
std::string launcher_single_host_reason();

// The launcher's name for the job this process belongs to, as
// "<launcher>:<id>", or "" when the launcher gives none: RINGCC_JOB_ID
// (ringrun), TORCHELASTIC_RUN_ID (torchrun; "none" is no name), SLURM_JOB_ID
// with SLURM_STEP_ID, PMIX_NAMESPACE or Open MPI's job id; the launcher
// whose rank variables the job was found from comes first.
std::string launcher_job_identity();

// True when an MPI launcher started this process (mpirun/mpiexec of Open
// MPI, MPICH or Intel MPI, or a PMIx/PMI launcher such as srun --mpi=pmix).
bool launched_by_mpi();

// The job as MPI sees it: rank and size in the communicator whose Fortran
// handle is given (mpi4py: comm.py2f()), or MPI_COMM_WORLD for a negative
// handle. Initialises MPI unless the user already did (asking for
// MPI_THREAD_MULTIPLE). Raises Error(kNotInitialized) when ringcc was built
// without MPI or the plugin cannot be loaded.
RendezvousInfo rendezvous_from_mpi(int64_t fortran_handle);

}  // namespace ringcc
