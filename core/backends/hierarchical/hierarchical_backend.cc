#include "core/backends/hierarchical/hierarchical_backend.h"

#include <algorithm>
#include <cstring>

#include "core/algorithms/host_agreement.h"
#include "core/algorithms/shm_collectives.h"
#include "core/backends/hierarchical/pipelined_phases.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/collective/reduction.h"

namespace ringcc {

namespace {

// From this many bytes in a local rank's gathered set, where the ranks
// outnumber the CPUs they run on, the allgather's local phase reads the
// peers' blocks from their outputs (one system call per block) rather than
// staging them through shared memory: every copy then costs CPU time the
// other ranks wait for, and reading in place makes one copy of a block
// where staging makes three. With a CPU each, copies staged between caches
// run faster than the kernel's reads (2 ranks of one host, 512 KiB: 16 us
// staged, 74-79 read): there the peers' blocks are read in place only
// past the area, as the flat allgather reads them.
constexpr int64_t kReadPeersFromBytes = 512 << 10;

bool wanted() { return env_int("RINGCC_HIERARCHICAL_ALLREDUCE", 1, "HOROVOD_HIERARCHICAL_ALLREDUCE") != 0; }

bool in_rank_order(const Topology& t) {
  for (size_t r = 0; r < t.local_rank_of.size(); ++r) {
    if (t.local_rank_of[r] != static_cast<int>(r) % t.local_size) return false;
  }
  return true;
}

class HierarchicalBackend : public Backend {
 public:
  HierarchicalBackend(const BackendJob& job, Deadline deadline)
      : world_(job.world),
        cross_(job.cross),
        local_rank_(job.topology.local_rank),
        local_size_(job.topology.local_size),
        local_ranks_(job.topology.local_ranks),
        local_rank_of_(job.topology.local_rank_of),
        pipeline_from_(hierarchical_pipeline_bytes(job.topology.cpus_per_rank)),
        crowded_(job.topology.cpus_per_rank > 0 && job.topology.cpus_per_rank < 1),
        hosts_in_rank_order_(in_rank_order(job.topology)),
        local_(*job.store, job.key_prefix, job.topology.local_ranks, job.topology.local_rank, deadline) {}

  const char* name() const override { return "hierarchical"; }
  MemoryKind memory() const override { return MemoryKind::kHost; }
  // Every host collective: they all open with the same agreement (by
  // host), which ranks calling different collectives must meet. Those
  // with no hierarchical algorithm run the flat one over every rank.
  bool takes(const CollectiveArgs&) const override { return true; }
  void run(CollectiveArgs& a, Deadline deadline) override;
  void broadcast(CollectiveArgs& a, Deadline deadline);
  void allgather(CollectiveArgs& a, Deadline deadline);
  void reduce_scatter(CollectiveArgs& a, Deadline deadline);
  void abort(const std::string& reason) override { local_.abort(reason); }
  void shutdown() override { local_.leave(); }

 private:
  PeerSet world_;
  PeerSet cross_;
  int local_rank_, local_size_;
  std::vector<int> local_ranks_;    // global ranks on this host, by local rank
  std::vector<int> local_rank_of_;  // every rank's local rank
  int64_t pipeline_from_;           // bytes from which allreduces and reduce-scatters are pipelined; 0: never
  bool crowded_;                    // the ranks of a machine outnumber its CPUs (alike on every rank)
  // Every host runs a run of consecutive ranks (rank = host * L + local
  // rank), as launchers place them by default: each host's blocks of a
  // reduce-scatter are then one piece of the input.
  bool hosts_in_rank_order_;
  ShmCollectives local_;
  RingScratch scratch_;
  std::vector<uint8_t> across_;  // the allgather's blocks of this rank's cross group
};

void HierarchicalBackend::run(CollectiveArgs& a, Deadline deadline) {
  // Every rank first agrees on the collective with every other rank, so
  // that a mismatch anywhere is reported on every rank before the phases
  // below begin: pooled in shared memory within each host, then between
  // hosts. A small collective is done by then, in as many round trips.
  if (agree_by_host(world_, cross_, local_, a, deadline)) return;
  if (a.kind == CollectiveKind::kLocalError || a.agree_only) return;
  if (a.kind == CollectiveKind::kBroadcast) return broadcast(a, deadline);
  if (a.kind == CollectiveKind::kAllgather) return allgather(a, deadline);
  if (a.kind == CollectiveKind::kReduceScatter && hosts_in_rank_order_) return reduce_scatter(a, deadline);
  if (a.kind != CollectiveKind::kAllreduce) return run_agreed_over_transport(world_, a, scratch_, deadline);

  const size_t es = dtype_size(a.dtype);
  if (pipeline_from_ > 0 && a.count * static_cast<int64_t>(es) >= pipeline_from_) {
    return pipelined_hierarchical_allreduce(cross_, local_, local_rank_, a, scratch_, deadline);
  }
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
  local_.run(rs, deadline);

  // Allreduce of this rank's shard with its peers on the other hosts (TCP),
  // with no agreement of its own: the world's covered it.
  CollectiveArgs ar;
  ar.kind = CollectiveKind::kAllreduce;
  ar.dtype = a.dtype;
  ar.op = a.op;
  ar.in = ar.out = shard;
  ar.count = ar.out_count = mine;
  ar.postscale = a.postscale;
  ring_allreduce(cross_, ar, scratch_, deadline);

  // Allgather of the shards within the host (shared memory).
  CollectiveArgs ag;
  ag.kind = CollectiveKind::kAllgather;
  ag.dtype = a.dtype;
  ag.in = shard;
  ag.count = mine;
  ag.out = out;
  ag.out_count = a.count;
  local_.run(ag, deadline);
  a.result_count = a.count;
}

// The root's data crosses the network once per host: a chain over the
// ranks with the root's local rank (one per host, TCP), then a broadcast
// in shared memory on every host from that rank.
void HierarchicalBackend::broadcast(CollectiveArgs& a, Deadline deadline) {
  if (a.root < 0 || static_cast<size_t>(a.root) >= local_rank_of_.size()) {
    raise(ErrorKind::kInvalidArgument, "broadcast: root rank ", a.root, " is not a rank of this job");
  }
  const int root_local = local_rank_of_[static_cast<size_t>(a.root)];
  if (local_rank_ == root_local) {
    CollectiveArgs across = a;
    chain_broadcast(cross_, across, deadline);
  }
  CollectiveArgs within = a;
  within.root = local_ranks_[static_cast<size_t>(root_local)];
  within.in = a.out;  // the host's root holds the data there by now
  local_.run(within, deadline);
  a.result_count = a.count;
}

// Every rank's block crosses the network once per other host: a ring
// among the ranks of this rank's local rank (one per host) gathers their
// blocks, then the ranks of a host gather those sets in shared memory, and
// the blocks are put in rank order. Where the ranks of a host read each
// other's memory directly and the sets are long enough (see
// kReadPeersFromBytes), the ring writes its blocks to their places in the
// output, and the others read them from there: no block is copied within
// a rank.
void HierarchicalBackend::allgather(CollectiveArgs& a, Deadline deadline) {
  const size_t es = dtype_size(a.dtype);
  const size_t n = local_rank_of_.size();
  std::vector<int64_t> displ(n + 1, 0);
  for (size_t r = 0; r < n; ++r) displ[r + 1] = displ[r] + a.recv_counts[r];
  a.result_count = displ.back();
  auto* out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(a.result_count));
  a.out = out;
  // What each local rank's cross group contributes (the same on every rank).
  std::vector<int64_t> gathered_by(static_cast<size_t>(local_size_), 0);
  for (size_t r = 0; r < n; ++r) gathered_by[static_cast<size_t>(local_rank_of_[r])] += a.recv_counts[r];
  const int64_t gathered = gathered_by[static_cast<size_t>(local_rank_)];
  const int64_t longest = *std::max_element(gathered_by.begin(), gathered_by.end());
  const int64_t longest_bytes = longest * static_cast<int64_t>(es);
  const bool from_outputs =
      local_.reads_peers() && (crowded_ ? longest_bytes >= kReadPeersFromBytes
                                        : longest_bytes > static_cast<int64_t>(local_.area_bytes()));

  CollectiveArgs across;
  across.kind = CollectiveKind::kAllgather;
  across.dtype = a.dtype;
  across.in = a.in;
  across.count = a.count;
  std::vector<uint8_t*> places;
  for (int r : cross_.ranks) {
    across.recv_counts.push_back(a.recv_counts[static_cast<size_t>(r)]);
    places.push_back(out + static_cast<size_t>(displ[static_cast<size_t>(r)]) * es);
  }
  if (from_outputs) {
    ring_allgather(cross_, across, deadline, places.data());
  } else {
    if (across_.size() < static_cast<size_t>(gathered) * es) across_.resize(static_cast<size_t>(gathered) * es);
    across.out = across_.data();
    across.out_count = gathered;
    ring_allgather(cross_, across, deadline);
  }

  // Local rank j contributes its cross group's blocks: each goes straight
  // to its rank's place in the output, from the same place in j's output
  // (from_outputs) or from j's gathered blocks, in rank order.
  ShmCollectives::Placement placement(static_cast<size_t>(local_size_));
  for (size_t r = 0; r < n; ++r) {
    auto& blocks = placement[static_cast<size_t>(local_rank_of_[r])];
    const int64_t from = from_outputs ? displ[r] : blocks.empty() ? 0 : blocks.back().from + blocks.back().count;
    blocks.push_back({from, a.recv_counts[r], out + static_cast<size_t>(displ[r]) * es});
  }
  CollectiveArgs within;
  within.kind = CollectiveKind::kAllgather;
  within.dtype = a.dtype;
  within.count = gathered;
  within.out_count = displ.back();
  if (from_outputs) {
    within.in = out;
    local_.allgather_scattered(within, placement, deadline);
  } else {
    within.in = across_.data();
    local_.allgather_placed(within, placement, deadline);
  }
}

// Every block crosses the network once, host-reduced: for each host in
// turn, the ranks of this host reduce-scatter in shared memory the piece
// of the input that holds that host's ranks' blocks (local rank l gets the
// host's sum of the block of that host's local rank l), then a ring among
// the ranks of this rank's local rank (one per host) reduce-scatters those
// sums, leaving each rank its own block. From RINGCC_HIERARCHICAL_PIPELINE_BYTES
// on, a helper thread runs the shared-memory phases beside the ring.
void HierarchicalBackend::reduce_scatter(CollectiveArgs& a, Deadline deadline) {
  const size_t es = dtype_size(a.dtype);
  const int n = static_cast<int>(local_rank_of_.size()), hosts = cross_.size();
  const int64_t rows = a.row_elems > 0 ? a.count / a.row_elems : 0;
  auto first = [&](int r) { return block_first_row(rows, n, r) * a.row_elems; };
  RingSegments sums;
  int64_t total = 0;
  for (int h = 0; h < hosts; ++h) {
    sums.offset.push_back(total);
    sums.length.push_back(block_rows(rows, n, h * local_size_ + local_rank_) * a.row_elems);
    total += sums.length.back();
  }
  if (across_.size() < static_cast<size_t>(total) * es) across_.resize(static_cast<size_t>(total) * es);
  const auto* in = static_cast<const uint8_t*>(a.in);
  auto reduce_within = [&](int h) {
    CollectiveArgs within;
    within.kind = CollectiveKind::kReduceScatter;
    within.dtype = a.dtype;
    within.op = a.op;
    within.in = in + static_cast<size_t>(first(h * local_size_)) * es;
    within.count = first((h + 1) * local_size_) - first(h * local_size_);
    within.row_elems = a.row_elems;
    within.prescale = a.prescale;
    within.out = across_.data() + static_cast<size_t>(sums.offset[static_cast<size_t>(h)]) * es;
    within.out_count = sums.length[static_cast<size_t>(h)];
    local_.run(within, deadline);
  };
  CollectiveArgs between;
  between.kind = CollectiveKind::kReduceScatter;
  between.dtype = a.dtype;
  between.op = a.op;
  between.count = total;
  between.out = across_.data();
  if (pipeline_from_ > 0 && a.count * static_cast<int64_t>(es) >= pipeline_from_) {
    pipelined_hierarchical_reduce_scatter(cross_, local_, reduce_within, between, sums, scratch_, deadline);
  } else {
    for (int h = 0; h < hosts; ++h) reduce_within(h);
    ring_reduce_scatter(cross_, between, scratch_, deadline, &sums);
  }
  a.result_count = sums.length[static_cast<size_t>(cross_.me)];
  if (a.result_count > 0) {
    scale_copy(a.out, across_.data() + static_cast<size_t>(sums.offset[static_cast<size_t>(cross_.me)]) * es,
               a.result_count, a.dtype, a.postscale);
  }
}

std::string refuses(const BackendJob& job, bool /*forced*/) {
  const Topology& t = job.topology;
  if (job.transport == "tcp" || job.transport == "mpi") return "RINGCC_TRANSPORT=" + job.transport;
  if (t.all_local()) return "every rank is on one host";
  if (t.local_size < 2) return "one rank on this host";
  if (!t.homogeneous) return "the hosts run different numbers of ranks";
  if (!wanted()) return "RINGCC_HIERARCHICAL_ALLREDUCE=0";
  return "";
}

std::unique_ptr<Backend> make(const BackendJob& job, Deadline deadline) {
  return std::make_unique<HierarchicalBackend>(job, deadline);
}

void settings(std::vector<SharedSetting>* out) {
  out->push_back({"RINGCC_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLREDUCE",
                  [] { return std::string(wanted() ? "1" : "0"); }});
  out->push_back({"RINGCC_HIERARCHICAL_PIPELINE_BYTES", nullptr,
                  [] { return hierarchical_pipeline_setting(); }});
}

}  // namespace

BackendEntry hierarchical_backend() { return {"hierarchical", MemoryKind::kHost, &refuses, &make, &settings}; }

}  // namespace ringcc
