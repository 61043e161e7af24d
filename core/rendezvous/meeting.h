// How the ranks of a communicator meet: the store they meet through and
// the job secret they share.
//
// The store is rank 0's own TcpStore, found from the environment (or, in a
// job started through MPI, told to the others with an MPI broadcast), or
// one an adapter hands in (torch's c10d store). No store ever serves the
// job secret unauthenticated: with a secret (the user's, or a single-host
// job's automatic one) every connection to our own store is authenticated;
// without one, a job that may span hosts refuses to start unless
// RINGCC_INSECURE=1.
#pragma once

#include <memory>
#include <string>

#include "core/base/deadline.h"
#include "core/rendezvous/job_secret.h"
#include "core/rendezvous/rendezvous.h"
#include "core/rendezvous/store.h"
#include "core/rendezvous/tcp_store.h"

namespace ringcc {

struct Meeting {
  std::shared_ptr<Store> store;
  std::unique_ptr<TcpStoreServer> server;  // rank 0, when the store is our own
  std::string secret;                      // "" when none is needed (yet)
  bool secret_shared = false;              // every rank is known to hold `secret`
  std::string job_id;                      // a fresh one per communicator, rank 0's
  std::string where;                       // the store, for messages: "port 29501", ...
};

// Meets the other ranks through `given` (an adapter's store) or a store of
// our own; rank 0 names the job. A single-host job's automatic secret file
// goes to *host_secret, to be removed once every rank has read it.
Meeting meet(const RendezvousInfo& info, std::shared_ptr<Store> given, Deadline deadline, SecretFile* host_secret);

// Makes sure that every rank holds the same secret before links are made.
// Through our own authenticated store or MPI they already do; through a
// store of the adapter's (which anyone who reaches it may read), the
// secret never travels in the store: ranks on one host read it from a
// private file that rank 0 makes (only the file's name travels; *made
// holds it until every rank has connected), ranks on several hosts need
// the user's RINGCC_SECRET (or RINGCC_INSECURE=1).
void agree_on_link_secret(Meeting& m, int rank, bool all_local, const RendezvousInfo& info, SecretFile* made,
                          Deadline deadline);

// Claims `rank` in the job met through `store`. A second process that
// claims it belongs to another job that met through the same store (two
// jobs given one port): it raises, and marks the store so that the ranks of
// the first job fail too (check_one_job).
void claim_rank(Store& store, int rank, const std::string& where);
// Raises when the store is marked by claim_rank or by a second rank 0.
void check_one_job(Store& store, const std::string& where);

// Remembers that this process left the job: a store that still serves it
// is not the job a later meet() looks for.
void remember_left_job(const std::string& job_id);

// "a\nb\n" -> {"a", "b", ""}.
std::vector<std::string> split_lines(const std::string& text);

}  // namespace ringcc
