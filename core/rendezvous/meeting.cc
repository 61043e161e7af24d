#include "core/rendezvous/meeting.h"

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/log.h"
#include "core/base/sha256.h"
#include "core/rendezvous/failure_record.h"
#include "core/os/mpi_library.h"
#include "core/os/net_interface.h"
#include "core/os/socket.h"

namespace ringcc {

namespace {

std::string random_hex(size_t bytes) {
  std::vector<uint8_t> buf(bytes);
  random_bytes(buf.data(), buf.size());
  return to_hex(buf.data(), buf.size());
}

// Jobs this process was part of and left: a store that still serves one is
// not the job a meet() is looking for.
std::mutex g_left_jobs_mu;
std::unordered_set<std::string> g_left_jobs;

bool left_job(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(g_left_jobs_mu);
  return g_left_jobs.count(job_id) > 0;
}

// Rank 0's addresses for the others to try, best first.
std::vector<std::string> store_addresses(const RendezvousInfo& info, bool single_host, std::string* error) {
  std::vector<std::string> addrs;
  if (single_host) {
    addrs.push_back("127.0.0.1");
    return addrs;
  }
  if (!info.master_addr.empty()) addrs.push_back(info.master_addr);
  // The chosen interface's address first (RINGCC_SOCKET_IFNAME and the
  // like), then every address but loopback and link-local ones. A
  // failure goes to the other ranks with the rest, not left for their timeout.
  try {
    const SocketInterface iface = socket_interface_from_env();
    if (!iface.address.empty()) addrs.push_back(iface.address);
    for (bool ipv6 : {false, true}) {
      for (const LocalAddress& a : local_addresses()) {
        if (a.ipv6 == ipv6 && !a.loopback && !a.link_local && a.address != iface.address) {
          addrs.push_back(a.address);
        }
      }
    }
  } catch (const std::exception& e) {
    if (error->empty()) *error = e.what();
  }
  addrs.push_back(host_name());
  return addrs;
}

// Rank 0's broadcast of where its store is: "ok" or "error\n<why>", the
// port, the secret, then the addresses to try, one a line.
std::string broadcast_store_text(MpiComm& comm, std::string text, Deadline deadline) {
  const MpiApi& api = mpi_api();
  // Length first, then the text.
  int64_t len = static_cast<int64_t>(text.size());
  rcmpi_req* req = nullptr;
  mpi_check(api.ibcast(comm.get(), &len, sizeof(len), 0, &req), "MPI_Ibcast");
  mpi_wait(req, deadline, "the rendezvous through MPI");
  text.resize(static_cast<size_t>(len));
  mpi_check(api.ibcast(comm.get(), &text[0], len, 0, &req), "MPI_Ibcast");
  mpi_wait(req, deadline, "the rendezvous through MPI");
  return text;
}

// Under MPI there is no MASTER_ADDR: rank 0 serves the store on a free port
// (or RINGCC_MASTER_PORT) and sends its addresses, the port and the job
// secret to the others with an MPI broadcast; they connect to the first
// address that answers (127.0.0.1 first when every rank is on this host).
void meet_through_mpi(const RendezvousInfo& info, Deadline deadline, Meeting* m) {
  MpiComm& comm = *info.mpi;
  std::string text;
  // Every rank on this host: the store listens on 127.0.0.1 only.
  int local_rank = 0, local_size = 0;
  const bool single_host = mpi_api().comm_node(comm.get(), &local_rank, &local_size) == 0 && local_size == info.size;
  if (info.rank == 0) {
    if (m->secret.empty()) m->secret = random_hex(32);
    std::string error;
    int port = 0;
    try {
      const std::string listen = single_host ? "127.0.0.1" : listen_address_from_env();
      m->server = std::make_unique<TcpStoreServer>(listen, info.master_port, m->secret);
      port = m->server->port();
    } catch (const std::exception& e) {
      error = e.what();
    }
    const std::vector<std::string> addrs = store_addresses(info, single_host, &error);
    text = error.empty() ? "ok\n" : "error\n" + error + "\n";
    text += std::to_string(port) + "\n" + m->secret + "\n";
    for (const auto& a : addrs) text += a + "\n";
  }
  auto lines = split_lines(broadcast_store_text(comm, text, deadline));
  if (lines.size() < 4 || lines[0] != "ok") {
    raise(ErrorKind::kInternal,
          "rank 0 could not serve the rendezvous store: ", lines.size() > 1 ? lines[1] : std::string("?"));
  }
  const int port = std::stoi(lines[1]);
  m->secret = lines[2];
  m->secret_shared = true;
  std::string tried;
  for (size_t i = 3; i < lines.size() && !m->store; ++i) {
    if (lines[i].empty()) continue;
    try {
      const Deadline one = std::min(deadline, deadline_after(info.rank == 0 ? 30.0 : 3.0));
      m->store = std::make_shared<TcpStore>(lines[i], port, m->secret, one);
    } catch (const Error& e) {
      tried += (tried.empty() ? "" : "; ") + lines[i] + ": " + e.what();
    }
  }
  if (!m->store) {
    raise(ErrorKind::kTimeout, "cannot reach rank 0's rendezvous store at port ", port, " (", tried,
          "); set RINGCC_MASTER_ADDR to an address of rank 0's host that the others can reach");
  }
}

constexpr char kTwoJobsKey[] = "ringcc/two-jobs";
constexpr char kLauncherJobKey[] = "ringcc/launcher-job";

std::string hex_digest(const std::string& text, size_t chars) {
  const Digest d = sha256(text.data(), text.size());
  return to_hex(d.data(), d.size()).substr(0, chars);
}

// The single-host secret file's name: the store's port, and the launcher's
// name for the job when it gives one, so that two jobs given one port hold
// different secrets and cannot meet.
std::string host_secret_key(const RendezvousInfo& info) {
  // Derived ports: the store may end up on any of them, and the launcher's
  // name for the job (which they are derived from) is key enough.
  if (!info.store_ports.empty()) return "job" + hex_digest(info.launcher_job, 16);
  std::string key = "port" + std::to_string(info.master_port);
  if (!info.launcher_job.empty()) key += "-job" + hex_digest(info.launcher_job, 16);
  return key;
}

// What a store value looks like in a message: the store may be anyone's,
// so its text is cut short and kept printable.
std::string quoted(const std::string& value) {
  std::string out;
  for (char c : value.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return "'" + out + (value.size() > 80 ? "...'" : "'");
}

std::string two_jobs_text(const std::string& where) {
  return "two jobs met on " + where + ": ";
}

const char* const kOwnPortHint =
    "; give each job its own port (MASTER_PORT, or RINGCC_MASTER_PORT), or start it with a launcher that names its "
    "jobs (ringrun, torchrun, SLURM, mpirun)";

// Rank 0 serves the store. When the port is taken, a store of this user's
// there that knows this secret is another job given the same port: it is
// marked so that its ranks fail too, and this rank says so.
void serve_store(const RendezvousInfo& info, const std::string& listen, const std::string& reach, Meeting* m) {
  try {
    m->server = std::make_unique<TcpStoreServer>(listen, info.master_port, m->secret);
    return;
  } catch (const Error& e) {
    bool ours = false;
    const std::string why = "a second rank 0 (pid " + std::to_string(getpid()) + ") found the port served";
    try {
      TcpStore other(reach, info.master_port, m->secret, deadline_after(2.0));
      other.set(kTwoJobsKey, why);
      record_job_failure(other, two_jobs_text(m->where) + why);
      ours = true;
    } catch (const Error&) {
      // Not a store that knows our secret: another program, or a job with another secret.
    }
    if (!ours) {
      raise(e.kind(), e.what(), " (rank 0 serves the rendezvous store at port ", info.master_port,
            ": is another job or program using that port?)");
    }
    raise(ErrorKind::kInvalidArgument, two_jobs_text(m->where), "this process is rank 0 but another job's rank 0 "
          "already serves its rendezvous store there", kOwnPortHint);
  }
}

std::string ports_text(const std::vector<int>& ports) {
  std::string text;
  for (int p : ports) text += (text.empty() ? "" : ", ") + std::to_string(p);
  return text;
}

// Rank 0 of a job whose store ports were derived (SLURM) serves on the
// first it can bind: a port another program (or another job) holds is no
// reason to fail, and the others look on each in turn.
void serve_on_derived_port(const RendezvousInfo& info, const std::string& listen, Meeting* m) {
  std::string tried;
  for (int port : info.store_ports) {
    try {
      m->server = std::make_unique<TcpStoreServer>(listen, port, m->secret);
      if (port != info.store_ports.front()) {
        RINGCC_LOG(kInfo, "the rendezvous store serves on port ", port, ": the ports before it (", info.store_from,
                   ") are taken (", tried, ")");
      }
      return;
    } catch (const Error& e) {
      tried += (tried.empty() ? "" : "; ") + std::to_string(port) + ": " + e.what();
    }
  }
  raise(ErrorKind::kInternal, "rank 0 cannot serve the rendezvous store on any of the ports derived from the job (",
        info.store_from, "): ", tried, "; set RINGCC_MASTER_PORT to a free port");
}

// The others look for rank 0's store on each derived port in turn, until
// one answers with this job's secret and the launcher's name for this job
// (a port may be held by another program, or by another job of this user
// that holds the same secret).
std::shared_ptr<TcpStore> find_derived_store(const RendezvousInfo& info, const std::string& host,
                                             const std::string& secret, Deadline deadline, int* found) {
  std::string last;
  for (;;) {
    for (int port : info.store_ports) {
      if (Clock::now() >= deadline) {
        raise(ErrorKind::kTimeout, "timed out after ", timeout_seconds(), " s looking for rank 0's rendezvous store at ",
              host, " on ports ", ports_text(info.store_ports), " (", info.store_from, "); the last port tried: ",
              last);
      }
      try {
        auto store = std::make_shared<TcpStore>(host, port, secret, std::min(deadline, deadline_after(0.25)));
        const std::string theirs =
            store->get(kLauncherJobKey, std::min(until(deadline), std::chrono::milliseconds(5000)));
        if (theirs == info.launcher_job) {
          *found = port;
          return store;
        }
        last = std::to_string(port) + " serves another job, " + quoted(theirs);
      } catch (const Error& e) {
        last = std::to_string(port) + ": " + e.what();
      }
      poll_interrupt();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Rank 0 serves the store, every rank connects.
void open_store(const RendezvousInfo& info, Deadline deadline, SecretFile* host_secret, Meeting* m) {
  const bool single = info.single_host;
  if (m->secret.empty()) {
    if (single) {
      *host_secret = SecretFile::find_or_create(host_secret_key(info));
      m->secret = host_secret->secret();
    } else if (insecure_allowed()) {
      warn_insecure("the job found from " + info.source + " may span hosts and was given no secret");
    } else {
      raise(ErrorKind::kInvalidArgument, "this job (found from ", info.source,
            ") may span hosts and has no job secret: set RINGCC_SECRET, or RINGCC_SECRET_FILE "
            "(a file holding it), to the same secret on every rank (docs/api.md, \"Security\", "
            "shows how under torchrun, SLURM and Kubernetes; ringrun does it for you). A job "
            "whose ranks all run on this host needs none when its launcher says so (e.g. "
            "LOCAL_WORLD_SIZE equal to WORLD_SIZE). RINGCC_INSECURE=1 starts without a secret, "
            "unauthenticated.",
            info.store_from.empty() ? "" : " Under SLURM, in the batch script before srun: export RINGCC_SECRET=$("
            "python3 -c 'import secrets; print(secrets.token_hex(32))') (docs/launchers.md).");
    }
  }
  m->secret_shared = !m->secret.empty();
  // Only rank 0 serves the store: the others meet first, so that a setting
  // of theirs that fails fails where the ranks hear of it (connect_tcp_links).
  const std::string listen = single ? "127.0.0.1" : info.rank == 0 ? listen_address_from_env() : std::string();
  const std::string reach = single ? "127.0.0.1" : info.master_addr;
  if (!info.store_ports.empty()) {
    int port = 0;
    if (info.rank == 0) {
      serve_on_derived_port(info, listen, m);
      port = m->server->port();
      m->store = std::make_shared<TcpStore>(reach, port, m->secret, deadline);
    } else {
      m->store = find_derived_store(info, reach, m->secret, deadline, &port);
    }
    m->where = "port " + std::to_string(port) + " (" + info.store_from + ")";
    return;
  }
  if (info.rank == 0) serve_store(info, listen, reach, m);
  try {
    m->store = std::make_shared<TcpStore>(reach, info.master_port, m->secret, deadline);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kTimeout) throw;
    if (!single) raise(ErrorKind::kTimeout, e.what(), " (rank 0 serves the rendezvous store)");
    raise(ErrorKind::kTimeout, e.what(),
          " (rank 0 serves the rendezvous store; every rank was taken to "
          "be on this host, as ",
          info.single_host_reason, ", so it serves it on 127.0.0.1 only)");
  }
}

// Rank 0 may still serve the store of a job this process has left (an
// init() right after a shutdown() is faster than rank 0's): a rank other
// than 0 meets again once it serves the new one.
void await_job_id(const RendezvousInfo& info, bool own_store, Deadline deadline, SecretFile* host_secret, Meeting* m) {
  for (;;) {
    try {
      if (!m->store) open_store(info, deadline, host_secret, m);
      m->job_id = m->store->get("ringcc/job", until(deadline));
      if (!own_store || !left_job(m->job_id)) return;
    } catch (const Error& e) {
      // The old store closed under us, or refused the new job's secret: a
      // job that ran before on this port may still be leaving.
      if (!own_store || e.kind() != ErrorKind::kPeerFailure) throw;
      if (Clock::now() >= deadline) {
        raise(e.kind(), e.what(), " (the store there never accepted this job's secret: did two jobs meet on ",
              m->where, "?)", kOwnPortHint);
      }
    }
    if (Clock::now() >= deadline) {
      raise(ErrorKind::kTimeout, "timed out after ", timeout_seconds(), " s waiting for rank 0 to start a new job at ",
            info.master_addr, ":", info.master_port, " (it still serves a job this process left)");
    }
    m->store.reset();
    poll_interrupt();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}


constexpr char kSecretHowKey[] = "ringcc/secret-how";

[[noreturn]] void raise_no_secret(const RendezvousInfo& info) {
  raise(ErrorKind::kInvalidArgument, "the ranks (found from ", info.source,
        ") span hosts and have no job secret: set RINGCC_SECRET, or RINGCC_SECRET_FILE (a file "
        "holding it), to the same secret on every rank (docs/api.md, \"Security\"), or "
        "RINGCC_INSECURE=1 to connect them unauthenticated");
}

// A rank other than 0 follows rank 0's word on how the link secret is
// agreed only as far as its own settings allow: the adapter's store is
// unauthenticated, so whoever can write to it may pose as rank 0. A secret
// file in this user's private directory authenticates itself (no other
// user can make one); a secret handed out through the store is taken only
// by a rank that was itself started with RINGCC_INSECURE=1.
void take_link_secret(Meeting& m, int rank, const std::string& how, const RendezvousInfo& info, Deadline deadline) {
  const std::string said = std::string(kSecretHowKey) + "=" + quoted(how);
  if (how == "none") raise_no_secret(info);
  if (!m.secret.empty()) {
    RINGCC_CHECK(how == "own", ErrorKind::kInvalidArgument, "rank ", rank,
                 " has a job secret (RINGCC_SECRET or RINGCC_SECRET_FILE) but rank 0 has none (the store says ", said,
                 "): give every rank the same");
    return;
  }
  if (how == "own") {
    raise(ErrorKind::kInvalidArgument, "rank 0 has a job secret (RINGCC_SECRET or RINGCC_SECRET_FILE) but rank ", rank,
          " has none: give every rank the same");
  }
  if (how.rfind("file ", 0) == 0) {
    m.secret = SecretFile::read(how.substr(5), m.job_id);
    return;
  }
  if (how == "store") {
    if (!insecure_allowed()) {
      raise(ErrorKind::kInvalidArgument, "the rendezvous store (from ", info.source, ") says ", said,
            ": rank 0 hands the job secret out through the store, where anyone who can reach the store can read "
            "it and anyone who can write to it can pose as rank 0. Rank ", rank,
            " refuses: it was not started with RINGCC_INSECURE=1. Set RINGCC_SECRET, or RINGCC_SECRET_FILE, to the "
            "same secret on every rank (docs/api.md, \"Security\")");
    }
    warn_insecure("rank 0 hands the job secret out through the rendezvous store (from " + info.source + ")");
    m.secret = m.store->get("ringcc/secret", until(deadline));
    return;
  }
  raise(ErrorKind::kInvalidArgument, "the rendezvous store (from ", info.source, ") says ", said,
        ", which is no way of agreeing on a job secret that rank ", rank,
        " knows: it was not written by a rank of ringcc's version, or not by a rank of this job");
}
}  // namespace

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t nl = s.find('\n', start);
    out.push_back(s.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) return out;
    start = nl + 1;
  }
}

void remember_left_job(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(g_left_jobs_mu);
  g_left_jobs.insert(job_id);
}

Meeting meet(const RendezvousInfo& info, std::shared_ptr<Store> given, Deadline deadline, SecretFile* host_secret) {
  Meeting m;
  remove_stale_secret_files();
  m.store = std::move(given);
  m.secret = info.secret.empty() ? secret_from_env() : info.secret;
  const bool own_store = !m.store && !info.mpi;
  m.where = own_store ? "port " + std::to_string(info.master_port)
                      : "the rendezvous store (found from " + info.source + ")";
  if (!m.store && info.mpi) meet_through_mpi(info, deadline, &m);
  if (info.rank == 0) {
    if (own_store) open_store(info, deadline, host_secret, &m);
    // The launcher's name for the job goes into the job's id, so that the
    // links of two jobs (which bind the id) never pair.
    m.job_id = (info.launcher_job.empty() ? "" : hex_digest(info.launcher_job, 8) + "-") + random_hex(6);
    m.store->set(kLauncherJobKey, info.launcher_job);
    m.store->set("ringcc/job", m.job_id);
  } else {
    await_job_id(info, own_store, deadline, host_secret, &m);
    const std::string theirs = m.store->get(kLauncherJobKey, until(deadline));
    if (theirs != info.launcher_job) {
      auto name = [](const std::string& job) { return job.empty() ? std::string("a job its launcher does not name") : quoted(job); };
      raise(ErrorKind::kInvalidArgument, two_jobs_text(m.where), "rank 0 there belongs to ", name(theirs),
            ", this rank to ", name(info.launcher_job), kOwnPortHint);
    }
  }
  return m;
}

void claim_rank(Store& store, int rank, const std::string& where) {
  if (store.add("ringcc/claims/" + std::to_string(rank), 1) == 1) return;
  store.job_store().set(kTwoJobsKey, "rank " + std::to_string(rank) + " joined twice");
  raise(ErrorKind::kInvalidArgument, two_jobs_text(where), "rank ", rank,
        " of this job has already joined (a rank of another job given the same port and number)", kOwnPortHint);
}

void check_one_job(Store& store, const std::string& where) {
  std::string why;
  if (store.job_store().try_get(kTwoJobsKey, &why)) {
    raise(ErrorKind::kInvalidArgument, two_jobs_text(where), why, kOwnPortHint);
  }
}

void agree_on_link_secret(Meeting& m, int rank, bool all_local, const RendezvousInfo& info, SecretFile* made,
                          Deadline deadline) {
  if (m.secret_shared) return;
  Store& store = *m.store;
  if (rank == 0) {
    std::string how;
    if (!m.secret.empty()) {
      how = "own";
    } else if (all_local) {
      *made = SecretFile::create_unique(m.job_id);
      m.secret = made->secret();
      how = "file " + made->path();
    } else if (insecure_allowed()) {
      warn_insecure("the ranks (found from " + info.source + ") span hosts and were given no secret");
      m.secret = random_hex(32);
      store.set("ringcc/secret", m.secret);
      how = "store";
    } else {
      how = "none";
    }
    store.set(kSecretHowKey, how);
    if (how == "none") raise_no_secret(info);
    return;
  }
  take_link_secret(m, rank, store.get(kSecretHowKey, until(deadline)), info, deadline);
}

}  // namespace ringcc
