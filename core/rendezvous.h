// Finding the job from the environment: which rank we are, how many ranks
// there are, and where rank 0 serves the rendezvous store.
#pragma once

#include <string>

namespace ringcc {

struct RendezvousInfo {
  int rank = 0;
  int size = 1;
  std::string master_addr;  // where rank 0 serves the store
  int master_port = 0;
  std::string secret;       // the job secret (RINGCC_SECRET); empty: rank 0 makes one
  std::string source;       // which launcher's variables were used, for messages
  std::string advertise_address;  // where peers reach us; empty: found from the store
  double timeout_s = 0;           // bound on every wait; 0: RINGCC_TIMEOUT_S
};

// Reads, in order: ringrun (RINGCC_RANK/RINGCC_SIZE), Open MPI
// (OMPI_COMM_WORLD_*), PMI (PMI_RANK/PMI_SIZE), SLURM
// (SLURM_PROCID/SLURM_NTASKS), torchrun (RANK/WORLD_SIZE). Without any, a
// single-process job. The store address is RINGCC_MASTER_ADDR or
// MASTER_ADDR; the port RINGCC_MASTER_PORT, else MASTER_PORT + 1 (torch
// keeps MASTER_PORT for its own store). Raises Error(kInvalidArgument) when
// a multi-rank job lacks an address or a value is malformed.
RendezvousInfo rendezvous_from_env();

}  // namespace ringcc
