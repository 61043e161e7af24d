#include "core/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_set>

#include "core/device/gpu_collectives.h"
#include "core/env.h"
#include "core/error.h"
#include "core/fusion_buffer.h"
#include "core/job_secret.h"
#include "core/interrupt.h"
#include "core/job_settings.h"
#include "core/log.h"
#include "core/mpi_collectives.h"
#include "core/mpi_library.h"
#include "core/mpi_transport.h"
#include "core/net_interface.h"
#include "core/reduction.h"
#include "core/sha256.h"
#include "core/shm_collectives.h"
#include "core/socket.h"
#include "core/tcp_store.h"
#include "core/tcp_transport.h"

namespace ringcc {

namespace {

std::string random_hex(size_t bytes) {
  std::vector<uint8_t> buf(bytes);
  random_bytes(buf.data(), buf.size());
  return to_hex(buf.data(), buf.size());
}

std::chrono::milliseconds until(Deadline deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

// Jobs this process was part of and left: a store that still serves one is
// not the job an init() is looking for.
std::mutex g_left_jobs_mu;
std::unordered_set<std::string> g_left_jobs;

bool left_job(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(g_left_jobs_mu);
  return g_left_jobs.count(job_id) > 0;
}

void remember_left_job(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(g_left_jobs_mu);
  g_left_jobs.insert(job_id);
}

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

}  // namespace

Communicator::Communicator(const RendezvousInfo& info, std::shared_ptr<Store> store)
    : rank_(info.rank),
      size_(info.size),
      store_(std::move(store)),
      fixed_timeout_s_(info.timeout_s) {
  set_log_rank(rank_);
  world_.me = rank_;
  for (int r = 0; r < size_; ++r) world_.ranks.push_back(r);
  world_.links.assign(static_cast<size_t>(size_), nullptr);
  if (size_ > 1) join_job(info, deadline_after(timeout_s()));
  // Read after the ranks compared it (a value this rank cannot parse fails
  // every rank's join, not this rank's alone).
  fusion_threshold_ = env_int("RINGCC_FUSION_THRESHOLD", 64 << 20, "HOROVOD_FUSION_THRESHOLD");
  worker_ = std::thread([this] { worker_loop(); });
}

Communicator::~Communicator() {
  UninterruptibleWait quiet;  // a destructor cannot raise the handler's exception
  try {
    shutdown();
  } catch (...) {
  }
}

// Under MPI there is no MASTER_ADDR: rank 0 serves the store on a free port
// (or RINGCC_MASTER_PORT) and sends its addresses, the port and the job
// secret to the others with an MPI broadcast; they connect to the first
// address that answers (127.0.0.1 first when every rank is on this host).
void Communicator::meet_through_mpi(const RendezvousInfo& info, Deadline deadline) {
  const MpiApi& api = mpi_api();
  MpiComm& comm = *info.mpi;
  std::string text;
  // Every rank on this host: the store listens on 127.0.0.1 only.
  int local_rank = 0, local_size = 0;
  const bool single_host =
      api.comm_node(comm.get(), &local_rank, &local_size) == 0 && local_size == size_;
  if (rank_ == 0) {
    if (secret_.empty()) secret_ = random_hex(32);
    std::string error;
    int port = 0;
    try {
      const std::string listen = single_host ? "127.0.0.1" : env_str("RINGCC_LISTEN_ADDR", "");
      store_server_ = std::make_unique<TcpStoreServer>(listen, info.master_port, secret_);
      port = store_server_->port();
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::vector<std::string> addrs;
    if (single_host) {
      addrs.push_back("127.0.0.1");
    } else {
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
        if (error.empty()) error = e.what();
      }
      addrs.push_back(host_name());
    }
    text = error.empty() ? "ok\n" : "error\n" + error + "\n";
    text += std::to_string(port) + "\n" + secret_ + "\n";
    for (const auto& a : addrs) text += a + "\n";
  }
  // Length first, then the text.
  int64_t len = static_cast<int64_t>(text.size());
  rcmpi_req* req = nullptr;
  mpi_check(api.ibcast(comm.get(), &len, sizeof(len), 0, &req), "MPI_Ibcast");
  mpi_wait(req, deadline, "the rendezvous through MPI");
  text.resize(static_cast<size_t>(len));
  mpi_check(api.ibcast(comm.get(), &text[0], len, 0, &req), "MPI_Ibcast");
  mpi_wait(req, deadline, "the rendezvous through MPI");
  auto lines = split_lines(text);
  if (lines.size() < 4 || lines[0] != "ok") {
    raise(ErrorKind::kInternal, "rank 0 could not serve the rendezvous store: ",
          lines.size() > 1 ? lines[1] : std::string("?"));
  }
  const int port = std::stoi(lines[1]);
  secret_ = lines[2];
  secret_shared_ = true;
  std::string tried;
  for (size_t i = 3; i < lines.size() && !store_; ++i) {
    if (lines[i].empty()) continue;
    try {
      const Deadline one = std::min(deadline, deadline_after(rank_ == 0 ? 30.0 : 3.0));
      store_ = std::make_shared<TcpStore>(lines[i], port, secret_, one);
    } catch (const Error& e) {
      tried += (tried.empty() ? "" : "; ") + lines[i] + ": " + e.what();
    }
  }
  if (!store_) {
    raise(ErrorKind::kTimeout, "cannot reach rank 0's rendezvous store at port ", port, " (", tried,
          "); set RINGCC_MASTER_ADDR to an address of rank 0's host that the others can reach");
  }
}

// Rank 0 serves the store, every rank connects. No store ever serves the
// job secret unauthenticated: with a secret (the user's, or a single-host
// job's automatic one) every connection is authenticated; without one, a
// job that may span hosts refuses to start unless RINGCC_INSECURE=1.
void Communicator::open_store(const RendezvousInfo& info, Deadline deadline, SecretFile* host_secret) {
  const bool single = info.single_host;
  if (secret_.empty()) {
    if (single) {
      *host_secret = SecretFile::find_or_create("port" + std::to_string(info.master_port));
      secret_ = host_secret->secret();
    } else if (insecure_allowed()) {
      warn_insecure("the job found from " + info.source +
                    " may span hosts and was given no secret");
    } else {
      raise(ErrorKind::kInvalidArgument, "this job (found from ", info.source,
            ") may span hosts and has no job secret: set RINGCC_SECRET, or RINGCC_SECRET_FILE "
            "(a file holding it), to the same secret on every rank (docs/api.md, \"Security\", "
            "shows how under torchrun, SLURM and Kubernetes; ringrun does it for you). A job "
            "whose ranks all run on this host needs none when its launcher says so (e.g. "
            "LOCAL_WORLD_SIZE equal to WORLD_SIZE). RINGCC_INSECURE=1 starts without a secret, "
            "unauthenticated.");
    }
  }
  secret_shared_ = !secret_.empty();
  const std::string listen = single ? "127.0.0.1" : env_str("RINGCC_LISTEN_ADDR", "");
  const std::string reach = single ? "127.0.0.1" : info.master_addr;
  if (rank_ == 0) store_server_ = std::make_unique<TcpStoreServer>(listen, info.master_port, secret_);
  try {
    store_ = std::make_shared<TcpStore>(reach, info.master_port, secret_, deadline);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kTimeout) throw;
    if (!single) raise(ErrorKind::kTimeout, e.what(), " (rank 0 serves the rendezvous store)");
    raise(ErrorKind::kTimeout, e.what(), " (rank 0 serves the rendezvous store; every rank was taken to "
          "be on this host, as ", info.single_host_reason, ", so it serves it on 127.0.0.1 only)");
  }
}

// Makes sure that every rank holds the same secret before links are made.
// Through our own authenticated store or MPI they already do; through a
// store of the adapter's (torch's, which anyone who reaches it may read),
// the secret never travels in the store: ranks on one host read it from a
// private file that rank 0 makes (only the file's name travels), ranks on
// several hosts need the user's RINGCC_SECRET (or RINGCC_INSECURE=1).
void Communicator::agree_on_link_secret(Store& store, bool all_local, const RendezvousInfo& info,
                                        SecretFile* made, Deadline deadline) {
  if (secret_shared_) return;
  std::string how;
  if (rank_ == 0) {
    if (!secret_.empty()) {
      how = "own";
    } else if (all_local) {
      *made = SecretFile::create_unique();
      secret_ = made->secret();
      how = "file " + made->path();
    } else if (insecure_allowed()) {
      warn_insecure("the ranks (found from " + info.source + ") span hosts and were given no secret");
      secret_ = random_hex(32);
      store.set("ringcc/secret", secret_);
      how = "store";
    } else {
      how = "none";
    }
    store.set("ringcc/secret-how", how);
  } else {
    how = store.get("ringcc/secret-how", until(deadline));
  }
  if (how == "none") {
    raise(ErrorKind::kInvalidArgument, "the ranks (found from ", info.source,
          ") span hosts and have no job secret: set RINGCC_SECRET, or RINGCC_SECRET_FILE (a file "
          "holding it), to the same secret on every rank (docs/api.md, \"Security\"), or "
          "RINGCC_INSECURE=1 to connect them unauthenticated");
  }
  if (rank_ == 0) return;
  if (how == "own") {
    RINGCC_CHECK(!secret_.empty(), ErrorKind::kInvalidArgument,
                 "rank 0 has a job secret (RINGCC_SECRET or RINGCC_SECRET_FILE) but rank ", rank_,
                 " has none: give every rank the same");
    return;
  }
  RINGCC_CHECK(secret_.empty(), ErrorKind::kInvalidArgument, "rank ", rank_,
               " has a job secret (RINGCC_SECRET or RINGCC_SECRET_FILE) but rank 0 has none: "
               "give every rank the same");
  if (how.rfind("file ", 0) == 0) {
    secret_ = SecretFile::read(how.substr(5));
  } else {
    secret_ = store.get("ringcc/secret", until(deadline));
  }
}

void Communicator::join_job(const RendezvousInfo& info, Deadline deadline) {
  secret_ = info.secret.empty() ? secret_from_env() : info.secret;
  // A single-host job's automatic secret: removed (by this object) when
  // join_job returns or fails; by then every rank has read it.
  SecretFile host_secret;
  if (!store_ && info.mpi) meet_through_mpi(info, deadline);
  const bool own_store = !store_;
  if (own_store && rank_ == 0) open_store(info, deadline, &host_secret);
  if (rank_ == 0) {
    job_id_ = random_hex(6);
    store_->set("ringcc/job", job_id_);
  } else {
    // Rank 0 may still serve the store of a job this process has left (an
    // init() right after a shutdown() is faster than rank 0's): meet again
    // once it serves the new one.
    for (;;) {
      try {
        if (!store_) open_store(info, deadline, &host_secret);
        job_id_ = store_->get("ringcc/job", until(deadline));
        if (!own_store || !left_job(job_id_)) break;
      } catch (const Error& e) {
        // The old store closed under us, or refused the new job's secret.
        if (!own_store || e.kind() != ErrorKind::kPeerFailure || Clock::now() >= deadline) throw;
      }
      if (Clock::now() >= deadline) {
        raise(ErrorKind::kTimeout, "timed out after ", timeout_seconds(),
              " s waiting for rank 0 to start a new job at ", info.master_addr, ":",
              info.master_port, " (it still serves a job this process left)");
      }
      store_.reset();
      poll_interrupt();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  Store& store = *store_;

  // Who is where (ranks are grouped by host name), and the settings every
  // rank must share, compared before any transport is set up.
  const std::string host = host_name();
  const std::string mine = host + "\n" + shared_settings_text();
  store.set("ringcc/host/" + std::to_string(rank_), mine);
  std::vector<std::string> hosts(static_cast<size_t>(size_));
  std::vector<std::string> settings(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    std::string text = mine;
    if (r != rank_) {
      try {
        text = store.get("ringcc/host/" + std::to_string(r), until(deadline));
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kTimeout) throw;
        raise(ErrorKind::kTimeout, "rank ", r, " did not join the job (it exited, crashed, hangs or never "
              "started): ", e.what());
      }
    }
    const size_t nl = text.find('\n');
    hosts[static_cast<size_t>(r)] = text.substr(0, nl);
    if (nl != std::string::npos) settings[static_cast<size_t>(r)] = text.substr(nl + 1);
  }
  check_shared_settings(settings, deadline);
  std::vector<int> local, local_rank_of(static_cast<size_t>(size_));
  std::map<std::string, int> seen;
  for (int r = 0; r < size_; ++r) {
    local_rank_of[static_cast<size_t>(r)] = seen[hosts[static_cast<size_t>(r)]]++;
    if (hosts[static_cast<size_t>(r)] == host) local.push_back(r);
  }
  local_size_ = static_cast<int>(local.size());
  local_rank_ = local_rank_of[static_cast<size_t>(rank_)];
  cross_size_ = 0;
  cross_rank_ = 0;
  for (int r = 0; r < size_; ++r) {
    if (local_rank_of[static_cast<size_t>(r)] != local_rank_) continue;
    if (r < rank_) ++cross_rank_;
    ++cross_size_;
  }

  const std::string mode = env_str("RINGCC_TRANSPORT", "auto");
  if (mode != "auto" && mode != "tcp" && mode != "shm" && mode != "mpi") {
    raise(ErrorKind::kInvalidArgument, "RINGCC_TRANSPORT must be auto, tcp, shm or mpi, got '", mode,
          "'");
  }
  if (mode == "mpi") {
    if (!info.mpi) {
      raise(ErrorKind::kInvalidArgument,
            "RINGCC_TRANSPORT=mpi needs a job started through MPI (ringcc.init() under "
            "mpirun/mpiexec/srun, or ringcc.init(comm=an_mpi4py_communicator)); this communicator "
            "met through ", info.source);
    }
    const MpiState& state = mpi_ensure_initialized();
    if (state.thread_level < RCMPI_THREAD_MULTIPLE) {
      raise(ErrorKind::kInvalidArgument, "RINGCC_TRANSPORT=mpi needs MPI_THREAD_MULTIPLE (ringcc "
            "calls MPI from its background threads) but MPI was initialised with ",
            mpi_thread_level_name(state.thread_level),
            "; initialise MPI with MPI_THREAD_MULTIPLE (mpi4py does by default; "
            "mpi4py.rc.thread_level = 'multiple') or let ringcc initialise it");
    }
    mpi_comm_ = info.mpi->dup(timeout_s());
    mpi_ = std::make_unique<MpiTransport>(mpi_comm_);
    mpi_coll_ = std::make_unique<MpiCollectives>(mpi_comm_, mpi_.get());
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) world_.links[static_cast<size_t>(r)] = mpi_.get();
    }
    RINGCC_LOG(kDebug, "joined ", size_, " ranks over MPI (job ", job_id_, ", ",
               mpi_plugin_info().library, ")");
    return;
  }
  const bool all_local = local_size_ == size_;
  if (mode == "shm" && !all_local) {
    raise(ErrorKind::kInvalidArgument,
          "RINGCC_TRANSPORT=shm needs every rank on one host, but the ranks span ",
          seen.size(), " hosts");
  }
  if (all_local && mode != "tcp") {
    shm_ = std::make_unique<ShmCollectives>(store, "ringcc-" + job_id_, world_.ranks, rank_,
                                            deadline);
    RINGCC_LOG(kDebug, "joined ", size_, " ranks over shared memory (job ", job_id_, ")");
    return;
  }

  // Made by rank 0 when the ranks meet through an adapter's store; removed
  // once every rank has connected (so has read it).
  SecretFile link_secret;
  agree_on_link_secret(store, all_local, info, &link_secret, deadline);
  // Every rank on this host: links listen on, and are reached at, 127.0.0.1.
  // Across hosts, an interface chosen by name or address (RINGCC_SOCKET_IFNAME
  // and the like) gives both, unless RINGCC_LISTEN_ADDR / RINGCC_ADVERTISE_ADDR say.
  const SocketInterface iface = all_local ? SocketInterface{} : socket_interface_from_env();
  std::string listen = all_local ? "127.0.0.1" : env_str("RINGCC_LISTEN_ADDR", "");
  if (listen.empty()) listen = iface.address;
  tcp_ = std::make_unique<TcpTransport>(rank_, size_, secret_, job_id_, listen);
  std::string addr = all_local ? "127.0.0.1" : env_str("RINGCC_ADVERTISE_ADDR", info.advertise_address);
  if (addr.empty()) addr = iface.address;
  if (addr.empty()) {
    if (auto* tcp_store = dynamic_cast<TcpStore*>(store_.get())) addr = tcp_store->local_address();
  }
  if (addr.empty()) addr = host;
  advertise_address_ = addr;
  if (!iface.variable.empty()) {
    RINGCC_LOG(kDebug, "links listen on ", endpoint_text(listen.empty() ? "*" : listen, tcp_->listen_port()),
               ", reached at ", addr, " (interface ", iface.interface, " from ", iface.variable, "=", iface.spec, ")");
  }
  store.set("ringcc/tcp/" + std::to_string(rank_), addr + "\n" + std::to_string(tcp_->listen_port()));
  std::vector<TcpPeerAddress> addresses(static_cast<size_t>(size_));
  std::vector<int> peers;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    auto lines = split_lines(store.get("ringcc/tcp/" + std::to_string(r), until(deadline)));
    addresses[static_cast<size_t>(r)] = {lines.at(0), std::stoi(lines.at(1))};
    peers.push_back(r);
  }
  tcp_->connect(peers, addresses, deadline);
  for (int r : peers) world_.links[static_cast<size_t>(r)] = tcp_.get();

  // Several hosts with several ranks each: allreduce goes hierarchical
  // (reduce-scatter in shared memory, allreduce of the shards over TCP
  // between hosts, allgather in shared memory) when every host has the same
  // number of ranks.
  bool homogeneous = true;
  for (const auto& entry : seen) homogeneous = homogeneous && entry.second == local_size_;
  const bool want = env_int("RINGCC_HIERARCHICAL_ALLREDUCE", 1, "HOROVOD_HIERARCHICAL_ALLREDUCE") != 0;
  if (mode != "tcp" && local_size_ > 1) {
    local_shm_ = std::make_unique<ShmCollectives>(store, "ringcc-" + job_id_, local, local_rank_,
                                                  deadline);
    hierarchical_ = want && homogeneous && cross_size_ > 1;
  }
  for (int r = 0; r < size_; ++r) {
    if (local_rank_of[static_cast<size_t>(r)] != local_rank_) continue;
    if (r == rank_) cross_.me = static_cast<int>(cross_.ranks.size());
    cross_.ranks.push_back(r);
    cross_.links.push_back(r == rank_ ? nullptr : tcp_.get());
  }
  RINGCC_LOG(kDebug, "joined ", size_, " ranks over TCP (job ", job_id_, ")");
}

void Communicator::check_shared_settings(const std::vector<std::string>& settings,
                                         Deadline deadline) {
  bool invalid = false;
  const std::string problem = compare_shared_settings(settings, rank_, &invalid);
  if (problem.empty()) return;
  // Every rank raises. They leave in step, as shutdown() does: rank 0
  // serves the store until every rank has read what it needed, and the
  // others wait until it stops, so that an init() that follows meets a
  // fresh store rather than this one.
  try {
    store_->add("ringcc/settings-checked", 1);
    if (store_server_) {
      while (store_->add("ringcc/settings-checked", 0) < size_ && Clock::now() < deadline) {
        usleep(1000);
      }
    } else if (dynamic_cast<TcpStore*>(store_.get())) {
      store_->get("ringcc/never-set", until(deadline));
    }
  } catch (...) {
  }
  raise(invalid ? ErrorKind::kInvalidArgument : ErrorKind::kMismatch, problem);
}

std::string Communicator::transport_name() const {
  if (size_ == 1) return "self";
  if (mpi_coll_) return "mpi";
  if (shm_) return "shm";
  return local_shm_ ? "shm+tcp" : "tcp";
}

void Communicator::hierarchical_allreduce(CollectiveArgs& a, Deadline deadline) {
  // Every rank first agrees on the collective with every other rank (the
  // same opening as the flat algorithms), so that a mismatch anywhere is
  // reported on every rank before the phases below begin.
  ring_exchange_headers(world_, a, deadline);
  if (a.kind == CollectiveKind::kLocalError || a.agree_only) return;

  const size_t es = dtype_size(a.dtype);
  auto* out = static_cast<uint8_t*>(a.out);
  uint8_t* shard = out + block_first_row(a.count, local_size_, local_rank_) * static_cast<int64_t>(es);
  const int64_t mine = block_rows(a.count, local_size_, local_rank_);

  // Reduce-scatter within the host (shared memory).
  CollectiveArgs rs = a;
  rs.kind = CollectiveKind::kReduceScatter;
  rs.row_elems = 1;
  rs.postscale = 1.0;
  rs.out = shard;
  rs.out_count = mine;
  local_shm_->run(rs, deadline);

  // Allreduce of this rank's shard with its peers on the other hosts (TCP).
  CollectiveArgs ar;
  ar.kind = CollectiveKind::kAllreduce;
  ar.dtype = a.dtype;
  ar.op = a.op;
  ar.in = ar.out = shard;
  ar.count = ar.out_count = mine;
  ar.postscale = a.postscale;
  run_over_transport(cross_, ar, scratch_, deadline);

  // Allgather of the shards within the host (shared memory).
  CollectiveArgs ag;
  ag.kind = CollectiveKind::kAllgather;
  ag.dtype = a.dtype;
  ag.in = shard;
  ag.count = mine;
  ag.out = out;
  ag.out_count = a.count;
  local_shm_->run(ag, deadline);
  a.result_count = a.count;
}

void Communicator::validate(CollectiveArgs& a, std::string* err) {
  auto bad = [&](const std::string& msg) {
    if (err->empty()) *err = std::string(collective_name(a.kind)) + ": " + msg;
  };
  if (!dtype_valid(static_cast<int32_t>(a.dtype))) bad("unsupported dtype");
  if (!reduce_op_valid(static_cast<int32_t>(a.op))) bad("unsupported reduction");
  if (a.count < 0) bad("negative element count");
  if (a.row_elems < 1) a.row_elems = 1;
  if (!std::isfinite(a.prescale) || !std::isfinite(a.postscale)) bad("scale factors must be finite");
  switch (a.kind) {
    case CollectiveKind::kBroadcast:
      if (a.root < 0 || a.root >= size_) {
        bad("root rank " + std::to_string(a.root) + " is out of range for " +
            std::to_string(size_) + " ranks");
      }
      break;
    case CollectiveKind::kReduceScatter: {
      if (a.count % a.row_elems != 0) bad("the element count is not a whole number of rows");
      const int64_t rows = a.count / a.row_elems;
      const int64_t mine = block_rows(rows, size_, rank_) * a.row_elems;
      if (a.out_count >= 0 && a.out_count != mine) {
        bad("the output holds " + std::to_string(a.out_count) + " elements but this rank's block has " +
            std::to_string(mine));
      }
      break;
    }
    case CollectiveKind::kAllgather:
      if (a.count % a.row_elems != 0) bad("the element count is not a whole number of rows");
      break;
    case CollectiveKind::kAlltoall: {
      if (static_cast<int>(a.send_counts.size()) != size_) {
        bad("splits must have one entry per rank (" + std::to_string(size_) + "), got " +
            std::to_string(a.send_counts.size()));
        a.send_counts.assign(static_cast<size_t>(size_), 0);
        break;
      }
      int64_t sum = 0;
      for (int64_t c : a.send_counts) {
        if (c < 0) bad("splits must not be negative");
        sum += c;
      }
      if (sum != a.count) {
        bad("splits add up to " + std::to_string(sum / a.row_elems) + " rows but the input has " +
            std::to_string(a.count / a.row_elems));
      }
      break;
    }
    default:
      break;
  }
}

double Communicator::take_peer_wait_us() { return shm_ ? shm_->take_peer_wait_us() : 0.0; }

void Communicator::execute(CollectiveArgs& a) {
  if (shut_down_) raise(ErrorKind::kNotInitialized, "ringcc has been shut down");
  if (broken()) {
    std::lock_guard<std::mutex> lock(abort_mu_);
    raise(ErrorKind::kPeerFailure, "the communicator is unusable after an earlier failure: ",
          abort_reason_);
  }
  coalesce_segments(a);
  if (!a.segments.empty() && !shm_ && a.memory == MemoryKind::kHost) {
    // Only the shared-memory allreduce gathers and scatters segments itself.
    fusion_.pack(a.segments, dtype_size(a.dtype));
    CollectiveArgs fused = fusion_.allreduce(a.count, a.dtype, a.op, a.prescale, a.postscale);
    execute(fused);
    fusion_.unpack(a.segments, dtype_size(a.dtype));
    a.result_count = a.count;
    return;
  }
  std::string local_error;
  validate(a, &local_error);
  if (a.memory != MemoryKind::kHost && local_error.empty()) {
    std::lock_guard<std::mutex> lock(gpu_mu_);
    if (a.device < 0) {
      local_error = std::string(collective_name(a.kind)) + ": a CUDA tensor without its device";
    } else if (gpu_ && gpu_->device() >= 0 && a.device != gpu_->device()) {
      local_error = std::string(collective_name(a.kind)) + ": this communicator runs its GPU collectives on cuda:" +
                    std::to_string(gpu_->device()) + ", but the tensor is on cuda:" + std::to_string(a.device);
    }
  }
  CollectiveArgs failed;
  CollectiveArgs* todo = &a;
  if (!local_error.empty()) {
    // Take part anyway, so that the peers fail at once instead of waiting.
    failed.kind = CollectiveKind::kLocalError;
    failed.failed_kind = a.kind;
    failed.local_error = local_error;
    failed.send_counts.assign(static_cast<size_t>(size_), 0);
    todo = &failed;
  }
  if (todo->op == ReduceOp::kAverage) {
    todo->op = ReduceOp::kSum;
    todo->postscale /= size_;
  }
  if (todo->kind == CollectiveKind::kAlltoall && todo->send_counts.empty()) {
    todo->send_counts.assign(static_cast<size_t>(size_), 0);
  }
  const Deadline deadline = deadline_after(timeout_s());
  try {
    if (todo->memory != MemoryKind::kHost) {
      run_device(*todo, deadline);
    } else {
      run_host(*todo, deadline);
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kPeerFailure || e.kind() == ErrorKind::kTimeout) fail(e, true);
    if (e.kind() == ErrorKind::kInterrupted) {
      // Abandoned halfway: the peers cannot finish it without us.
      fail(Error(ErrorKind::kInterrupted,
                 std::string("interrupted by a signal (its handler raised) during ") +
                     collective_name(a.kind)),
           true);
    }
    throw;
  }
  if (!local_error.empty()) raise(ErrorKind::kInvalidArgument, local_error);
}

void Communicator::run_host(CollectiveArgs& a, Deadline deadline) {
  if (mpi_coll_) {
    mpi_coll_->run(a, scratch_, deadline);
  } else if (shm_) {
    shm_->run(a, deadline);
  } else if (hierarchical_ && (a.kind == CollectiveKind::kAllreduce ||
                               a.failed_kind == CollectiveKind::kAllreduce)) {
    hierarchical_allreduce(a, deadline);
  } else {
    run_over_transport(world_, a, scratch_, deadline);
  }
}

void Communicator::run_device(CollectiveArgs& a, Deadline deadline) {
  const Clock::time_point started = Clock::now();  // for RINGCC_GPU_TRACE
  if (size_ > 1) {
    // Every rank agrees on the collective (and learns the others' counts)
    // through the host path, exactly as for host buffers, so that a rank
    // whose peers hold host tensors fails with MismatchError everywhere.
    CollectiveArgs probe;
    static_cast<CollectiveScalars&>(probe) = a;
    probe.send_counts = a.send_counts;
    probe.agree_only = true;
    run_host(probe, deadline);
    a.recv_counts = std::move(probe.recv_counts);
    a.alltoall_counts = std::move(probe.alltoall_counts);
  } else {
    const int64_t mine = a.kind == CollectiveKind::kAlltoall && !a.send_counts.empty() ? a.send_counts[0] : a.count;
    a.recv_counts.assign(1, mine);
    a.alltoall_counts.assign(1, mine);
  }
  device::GpuCollectives* gpu = nullptr;
  {
    std::lock_guard<std::mutex> lock(gpu_mu_);
    if (!gpu_) {
      // Host staging runs the host algorithms chunk by chunk, each with
      // its own deadline, through this communicator's host path.
      gpu_ = std::make_unique<device::GpuCollectives>(
          rank_, size_, store_, "ringcc/gpu/", timeout_s(),
          [this](CollectiveArgs& h) { run_host(h, deadline_after(timeout_s())); });
    }
    gpu = gpu_.get();
  }
  gpu->run(a, deadline, started);
}

std::string Communicator::gpu_backend_name() const {
  std::lock_guard<std::mutex> lock(gpu_mu_);
  return gpu_ ? gpu_->backend_name() : "";
}

std::string Communicator::record_failure(const std::string& reason) {
  std::shared_ptr<Store> store;
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    store = store_;
  }
  if (!store) return "";
  try {
    Store& job = store->job_store();
    if (job.add("ringcc/abort/count", 1) == 1) {
      job.set("ringcc/abort/reason", reason);
      return "";
    }
    return job.get("ringcc/abort/reason", std::chrono::milliseconds(1000));
  } catch (...) {
    return "";
  }
}

bool Communicator::job_failed() {
  std::string ignored;
  return store_->job_store().try_get("ringcc/abort/count", &ignored);
}

void Communicator::break_links(const std::string& message, const std::string& reason) {
  std::lock_guard<std::mutex> lock(abort_mu_);
  if (abort_reason_.empty()) abort_reason_ = message;
  broken_.store(true, std::memory_order_release);
  if (shm_) shm_->abort(reason);
  if (local_shm_) local_shm_->abort(reason);
  if (tcp_) tcp_->abort(reason);
  if (mpi_) mpi_->abort(reason);
  {
    std::lock_guard<std::mutex> lock(gpu_mu_);
    if (gpu_) gpu_->abort(reason);
  }
}

void Communicator::fail(const std::exception& e, bool) {
  // What follows must finish even though a signal may be pending.
  UninterruptibleWait quiet;
  const Error* err = dynamic_cast<const Error*>(&e);
  std::string reason = e.what();
  // Record the first failure in the job where every rank can read it, then
  // break our links so that everyone blocked on us fails fast too.
  const std::string first = record_failure("rank " + std::to_string(rank_) + ": " + reason);
  std::string message = reason;
  if (!first.empty() && first.find(reason) == std::string::npos) {
    message += " (first failure in the job: " + first + ")";
  }
  break_links(message, reason);
  RINGCC_LOG(kError, message);
  throw Error(err ? err->kind() : ErrorKind::kPeerFailure, message);
}

void Communicator::abort(const std::string& reason) {
  UninterruptibleWait quiet;
  // Recorded first, so that peers that only see a closed socket can tell why.
  record_failure("rank " + std::to_string(rank_) + " aborted: " + reason);
  break_links("this rank aborted: " + reason, reason);
}

void Communicator::execute_grouped(std::vector<CollectiveArgs>& list) {
  // Batches of one dtype, packed up to the fusion threshold, in list order.
  std::vector<size_t> order(list.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return static_cast<int>(list[x].dtype) < static_cast<int>(list[y].dtype);
  });
  const size_t threshold = static_cast<size_t>(std::max<int64_t>(fusion_threshold_, 0));
  size_t i = 0;
  while (i < order.size()) {
    CollectiveArgs& head = list[order[i]];
    const size_t es = dtype_size(head.dtype);
    const size_t head_bytes = static_cast<size_t>(head.count) * es;
    if (head_bytes >= threshold || order.size() == 1) {
      execute(head);
      ++i;
      continue;
    }
    size_t j = i, total = 0;
    // Buffers fuse only with buffers in the same memory (every rank cuts
    // its list alike; the stream, the same for a whole list, is the head's).
    auto same_place = [&](const CollectiveArgs& e) { return e.memory == head.memory && e.device == head.device; };
    while (j < order.size() && list[order[j]].dtype == head.dtype && same_place(list[order[j]]) &&
           total + static_cast<size_t>(list[order[j]].count) * es <= threshold) {
      total += static_cast<size_t>(list[order[j]].count) * es;
      ++j;
    }
    CollectiveArgs fused;
    fused.kind = CollectiveKind::kAllreduce;
    fused.dtype = head.dtype;
    fused.op = head.op;
    fused.prescale = head.prescale;
    fused.postscale = head.postscale;
    fused.memory = head.memory;
    fused.device = head.device;
    fused.stream = head.stream;
    fused.count = static_cast<int64_t>(total / es);
    fused.out_count = fused.count;
    fused.segments.reserve(j - i);
    for (size_t k = i; k < j; ++k) {
      CollectiveArgs& e = list[order[k]];
      fused.segments.push_back({e.in, e.out, e.count});
      e.result_count = e.count;
    }
    execute(fused);
    i = j;
  }
}

void Communicator::execute_work(Work& work) {
  if (work.grouped()) {
    execute_grouped(work.list());
  } else {
    for (auto& a : work.list()) execute(a);
  }
}

uint64_t Communicator::take_ticket() {
  std::lock_guard<std::mutex> lock(order_mu_);
  if (stopping_) raise(ErrorKind::kNotInitialized, "ringcc has been shut down");
  return next_ticket_++;
}

template <class Pred>
bool Communicator::wait_order(std::unique_lock<std::mutex>& lock, Deadline deadline, Pred pred) {
  ++turn_waiters_;
  while (!pred()) {
    if (Clock::now() >= deadline) {
      --turn_waiters_;
      return false;
    }
    if (interruptible()) {
      lock.unlock();
      try {
        poll_interrupt();
      } catch (...) {
        lock.lock();
        --turn_waiters_;
        throw;
      }
      lock.lock();
      order_cv_.wait_until(lock, std::min(deadline, Clock::now() + kInterruptPoll), pred);
    } else if (deadline == Deadline::max()) {
      order_cv_.wait(lock, pred);
    } else {
      order_cv_.wait_until(lock, deadline, pred);
    }
  }
  --turn_waiters_;
  return true;
}

void Communicator::await_turn(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(order_mu_);
  if (finished_tickets_ == ticket) return;
  auto my_turn = [&] { return finished_tickets_ == ticket; };
  try {
    wait_order(lock, Deadline::max(), my_turn);
  } catch (const Error&) {
    lock.unlock();
    {
      // The collectives before ours fail fast once the links are broken.
      UninterruptibleWait quiet;
      const std::string reason =
          "interrupted by a signal (its handler raised) while waiting to start a collective";
      record_failure("rank " + std::to_string(rank_) + ": " + reason);
      break_links(reason, reason);
      lock.lock();
      wait_order(lock, Deadline::max(), my_turn);
      lock.unlock();
    }
    finish_turn();
    throw;
  }
}

void Communicator::finish_turn() {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(order_mu_);
    ++finished_tickets_;
    wake = turn_waiters_ > 0;
  }
  if (wake) order_cv_.notify_all();
}

void Communicator::wake_worker() {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(order_mu_);
    wake = worker_idle_;
  }
  if (wake) work_cv_.notify_one();
}

void Communicator::run(CollectiveArgs& args) {
  const uint64_t ticket = take_ticket();
  await_turn(ticket);
  try {
    execute(args);
  } catch (...) {
    finish_turn();
    throw;
  }
  finish_turn();
}

void Communicator::grouped_allreduce(std::vector<CollectiveArgs>& list) {
  const uint64_t ticket = take_ticket();
  await_turn(ticket);
  try {
    execute_grouped(list);
  } catch (...) {
    finish_turn();
    throw;
  }
  finish_turn();
}

std::shared_ptr<Work> Communicator::submit(CollectiveArgs args) {
  std::vector<CollectiveArgs> list;
  list.push_back(std::move(args));
  auto work = std::make_shared<Work>(std::move(list), false);
  {
    std::lock_guard<std::mutex> lock(order_mu_);
    if (stopping_) raise(ErrorKind::kNotInitialized, "ringcc has been shut down");
    queue_.emplace_back(next_ticket_++, work);
  }
  wake_worker();
  return work;
}

std::shared_ptr<Work> Communicator::submit_grouped(std::vector<CollectiveArgs> list) {
  auto work = std::make_shared<Work>(std::move(list), true);
  {
    std::lock_guard<std::mutex> lock(order_mu_);
    if (stopping_) raise(ErrorKind::kNotInitialized, "ringcc has been shut down");
    queue_.emplace_back(next_ticket_++, work);
  }
  wake_worker();
  return work;
}

void Communicator::worker_loop() {
  for (;;) {
    std::shared_ptr<Work> work;
    {
      std::unique_lock<std::mutex> lock(order_mu_);
      worker_idle_ = true;
      work_cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      worker_idle_ = false;
      if (queue_.empty()) {
        worker_exited_ = true;
        lock.unlock();
        order_cv_.notify_all();
        return;
      }
      const uint64_t ticket = queue_.front().first;
      if (finished_tickets_ != ticket) {
        ++turn_waiters_;
        order_cv_.wait(lock, [&] { return finished_tickets_ == ticket; });
        --turn_waiters_;
      }
      work = queue_.front().second;
      queue_.pop_front();
    }
    std::exception_ptr error;
    try {
      execute_work(*work);
    } catch (...) {
      error = std::current_exception();
    }
    finish_turn();
    work->finish(error);
  }
}

void Communicator::shutdown() {
  {
    std::lock_guard<std::mutex> lock(order_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  work_cv_.notify_all();
  // Everything within one timeout: queued collectives and blocking ones of
  // other threads finish (each has its own bound); past the deadline, or
  // on an interrupt, what still runs is aborted and fails fast.
  const Deadline deadline = deadline_after(timeout_s());
  std::exception_ptr interrupted;
  {
    std::unique_lock<std::mutex> lock(order_mu_);
    auto idle = [&] { return worker_exited_ && finished_tickets_ == next_ticket_; };
    bool finished = false;
    try {
      finished = wait_order(lock, deadline, idle);
    } catch (const Error&) {
      interrupted = std::current_exception();
    }
    if (!finished) {
      lock.unlock();
      UninterruptibleWait quiet;
      const std::string reason =
          interrupted ? std::string("interrupted by a signal (its handler raised) while shutting down")
                      : detail::concat("shutdown() gave up after ", timeout_s(),
                                       " s (RINGCC_TIMEOUT_S) on collectives that were still running");
      record_failure("rank " + std::to_string(rank_) + ": " + reason);
      break_links(reason, reason);
      lock.lock();
      wait_order(lock, Deadline::max(), idle);
    }
  }
  if (worker_.joinable()) worker_.join();
  if (!job_id_.empty()) remember_left_job(job_id_);
  if (!interrupted) {
    try {
      leave_in_step(deadline);
    } catch (const Error&) {
      interrupted = std::current_exception();
    }
  }
  shut_down_ = true;
  {
    std::unique_ptr<device::GpuCollectives> gpu;
    {
      std::lock_guard<std::mutex> lock(gpu_mu_);
      gpu.swap(gpu_);
    }
    gpu.reset();  // waits (bounded) for the peers to finish with this rank's device buffers
  }
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    shm_.reset();
    local_shm_.reset();
    tcp_.reset();
    mpi_coll_.reset();
    mpi_.reset();
    mpi_comm_.reset();
    store_.reset();
    store_server_.reset();
  }
  if (interrupted) std::rethrow_exception(interrupted);
}

void Communicator::leave_in_step(Deadline deadline) {
  if (size_ <= 1 || !store_) return;
  // A peer still waiting for us in a collective we will never join fails
  // now rather than at its deadline (what we sent still arrives).
  if (shm_) shm_->leave();
  if (local_shm_) local_shm_->leave();
  if (tcp_) tcp_->leave();
  if (broken()) return;
  // Rank 0 keeps serving the store until every rank has checked out: a
  // slower rank may still be meeting the others through it. A failure
  // anywhere in the job ends the wait (the failed rank may never check
  // out). The others need not wait: an init() that finds this job's store
  // still up waits for the next one (join_job()).
  try {
    store_->add("ringcc/shutdown", 1);
    if (store_server_) {
      while (Clock::now() < deadline && store_->add("ringcc/shutdown", 0) < size_ && !job_failed()) {
        poll_interrupt();
        usleep(1000);
      }
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInterrupted) throw;
  } catch (...) {  // an adapter's store may fail its own way; leaving goes on regardless
  }
}

}  // namespace ringcc
