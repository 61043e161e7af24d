// A job started by srun: where rank 0 serves the rendezvous store when the
// user set nothing. SLURM tells every task the step's nodes (in its
// compressed host-list syntax), the job and step ids, but no port: rank 0's
// store gets a port derived from the job and step ids, with a few more
// derived ones to fall back on when it is taken.
#pragma once

#include <string>
#include <vector>

namespace ringcc {

// Expands SLURM's compressed host list: "node[01-04,07],gpu-a[1-2]" ->
// node01 node02 node03 node04 node07 gpu-a1 gpu-a2. Brackets may appear
// more than once in a name ("r[1-2]n[1-2]": every combination, first
// bracket slowest); a range keeps the zero padding of its first bound.
// Raises Error(kInvalidArgument), naming `text`, for an unbalanced bracket,
// an empty name or range, a range whose end is below its start, or more
// than a million names.
std::vector<std::string> expand_slurm_host_list(const std::string& text);

// How many derived ports a SLURM step's store may use, and their range:
// below Linux's ephemeral ports (32768 and up), so that no outgoing
// connection holds one.
constexpr int kSlurmStorePorts = 8;
constexpr int kSlurmFirstPort = 20000;
constexpr int kSlurmPortRange = 12000;

// The ports a store of the step named `identity` ("slurm:<job>.<step>")
// tries, in order: kSlurmFirstPort + the first 8 hex digits of
// sha256("<identity>/<salt>/<i>") mod kSlurmPortRange, for i = 0, 1, ...
// (repeats left out). `salt` keeps apart the stores of one step (ringcc's
// own, "store"; torch's, "torch"). ringcc/slurm.py computes the same.
std::vector<int> slurm_store_ports(const std::string& identity, const std::string& salt);

// Where the store of a job found from SLURM's variables is, for what the
// user did not set: `addr` (when empty) becomes the first node of
// SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST, SLURM_NODELIST) and
// `ports` (when empty) slurm_store_ports(identity, "store"). `why`
// receives how, for messages. Raises Error(kInvalidArgument) when SLURM
// gives no node list or an unreadable one.
void fill_store_from_slurm(const std::string& identity, std::string* addr, std::vector<int>* ports, std::string* why);

// Rank 0 serves where the others look only when it runs on the first node
// of the step: "" when it does (or SLURM does not say where it runs), else
// what is wrong and what to set.
std::string slurm_rank0_misplaced(const std::string& addr);

}  // namespace ringcc
