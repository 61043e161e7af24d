// The agreement that opens every collective over a transport: every rank
// learns every rank's header (and, for alltoall, its send counts) in
// O(log n) dependent steps, checks them all and reaches the same verdict.
// It doubles as the barrier.
//
// The exchange is recursive doubling over the largest power of two p <= n:
// in step k each rank swaps everything it knows with rank me ^ 2^k. The
// n - p ranks above p first hand theirs to rank me - p and get the whole
// set back from it at the end: floor(log2 n) + 2 steps for them, log2 n
// when n is a power of two (a ring would take n - 1).
//
// A small collective rides along, done when the agreement is, in the same
// round trips (one for two ranks): an allreduce's frames carry the
// sender's partial reduction of the ranks it has heard from (a
// reduce-scatter's too: each rank keeps its block of the sum); an
// allgather's the blocks of those ranks, in the order of their headers; a
// broadcast's the root's data once the sender has heard from the root.
// Every frame says how long it is, so ranks that disagree (on the
// collective, on the size, on whether to ride along at all) stay in step
// on the stream and reach the agreement's verdict; the ridden result is
// used only when every rank rode along alike, which every rank learns
// alike (an AND carried with the frames), and is written to the caller's
// buffer only once the headers agree.
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "core/algorithms/host_agreement.h"
#include "core/algorithms/ring_algorithms.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/collective/reduction.h"

namespace ringcc {

namespace {

// An allocator whose resize() leaves the new bytes unwritten: every buffer
// below is filled by a copy or a receive right after it grows, and zeroing
// it first cost as much as the copy (a riding allgather's 16 KiB blocks).
template <typename T>
struct Unfilled : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = Unfilled<U>;
  };
  Unfilled() = default;
  template <typename U>
  Unfilled(const Unfilled<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using Bytes = std::vector<uint8_t, Unfilled<uint8_t>>;

// What precedes a frame's body on the stream.
struct FramePrefix {
  uint64_t entries_bytes = 0;  // the headers the sender knows
  uint64_t rider_bytes = 0;    // its partial reduction; 0: none
  uint64_t rider_ok = 0;       // 1: every rank it heard from rode along alike
};

// One rank's contribution in a frame: its index, whether send counts
// follow (alltoall), its header.
struct EntryPrefix {
  int32_t index = 0;
  int32_t counts = 0;  // 0, or n int64 send counts after the header
};

struct Known {
  Bytes entries;  // EntryPrefix + OpHeader (+ counts), one per rank heard from
  Bytes rider;    // the partial reduction, the blocks, or the root's data
  bool rider_ok = false;
};

// What rides along with the agreement.
enum class Rider {
  kNone,
  kReduction,  // allreduce: the partial reduction
  kBlocks,     // allgather: the blocks of the ranks heard from, in the entries' order
  kRootData,   // broadcast: the root's data, once heard from
};

size_t entry_bytes(int32_t counts) {
  return sizeof(EntryPrefix) + sizeof(OpHeader) + 8 * static_cast<size_t>(counts);
}

constexpr uint64_t kMaxRiderBytes = uint64_t{1} << 30;

// A frame: the prefix, then the entries, then the rider.
void frame_of(const Known& k, Bytes* out) {
  FramePrefix f{k.entries.size(), k.rider.size(), k.rider_ok ? 1u : 0u};
  out->resize(sizeof(f) + k.entries.size() + k.rider.size());
  std::memcpy(out->data(), &f, sizeof(f));
  if (!k.entries.empty()) std::memcpy(out->data() + sizeof(f), k.entries.data(), k.entries.size());
  if (!k.rider.empty()) std::memcpy(out->data() + sizeof(f) + k.entries.size(), k.rider.data(), k.rider.size());
}

// No rank can send more than every rank's entry with counts, or a rider
// longer than it is allowed to make.
void check_prefix(const FramePrefix& f, size_t world_n, int from_rank) {
  if (f.entries_bytes > world_n * entry_bytes(static_cast<int32_t>(world_n)) || f.rider_bytes > kMaxRiderBytes ||
      f.rider_ok > 1) {
    raise(ErrorKind::kInternal, "corrupt collective header from rank ", from_rank);
  }
}

class Exchange {
 public:
  // world_n: the ranks whose entries a frame may carry (more than ps's
  // when ps is one rank per host).
  Exchange(const PeerSet& ps, size_t world_n, const CollectiveArgs& a, Deadline deadline)
      : ps_(ps), world_n_(world_n), a_(a), deadline_(deadline) {}

  void send(int index, const Known& k) {
    frame_of(k, &out_);
    pending_send_ = link(index)->isend(ps_.ranks[static_cast<size_t>(index)], out_.data(), out_.size());
  }

  // Receives a frame from `index` while the last send progresses.
  Known receive(int index) {
    Transport* t = link(index);
    const int rank = ps_.ranks[static_cast<size_t>(index)];
    FramePrefix f;
    auto head = t->irecv(rank, &f, sizeof(f));
    wait_one(head.get(), others(), deadline_, collective_name(a_.kind));
    check_prefix(f, world_n_, rank);
    Known k;
    k.entries.resize(f.entries_bytes);
    k.rider.resize(f.rider_bytes);
    k.rider_ok = f.rider_ok == 1;
    std::vector<Request*> body;
    std::unique_ptr<Request> entries, rider;
    if (!k.entries.empty()) entries = t->irecv(rank, k.entries.data(), k.entries.size());
    if (!k.rider.empty()) rider = t->irecv(rank, k.rider.data(), k.rider.size());
    if (entries) body.push_back(entries.get());
    if (rider) body.push_back(rider.get());
    if (pending_send_) body.push_back(pending_send_.get());
    wait_all(body, deadline_, collective_name(a_.kind));
    pending_send_.reset();
    return k;
  }

  void finish_send() {
    if (pending_send_) wait_all({pending_send_.get()}, deadline_, collective_name(a_.kind));
    pending_send_.reset();
  }

 private:
  Transport* link(int index) const { return ps_.links[static_cast<size_t>(index)]; }
  std::vector<Request*> others() const {
    std::vector<Request*> v;
    if (pending_send_) v.push_back(pending_send_.get());
    return v;
  }

  const PeerSet& ps_;
  size_t world_n_;
  const CollectiveArgs& a_;
  Deadline deadline_;
  Bytes out_;
  std::unique_ptr<Request> pending_send_;
};

// Adds what `from` knows to `into`: its entries, and its rider where both
// rode along alike (a reduction reduced into ours, blocks appended after
// ours as the entries are, the root's data taken, not copied).
void merge(Known& into, Known&& from, const CollectiveArgs& a, Rider kind) {
  into.entries.insert(into.entries.end(), from.entries.begin(), from.entries.end());
  bool alike = kind != Rider::kNone && into.rider_ok && from.rider_ok;
  if (kind == Rider::kReduction) alike = alike && into.rider.size() == from.rider.size();
  if (!alike) {
    into.rider.clear();  // not used: no need to send it on
  } else if (kind == Rider::kReduction) {
    if (!into.rider.empty()) reduce_inplace(into.rider.data(), from.rider.data(), a.count, a.dtype, a.op);
  } else if (kind == Rider::kBlocks) {
    into.rider.insert(into.rider.end(), from.rider.begin(), from.rider.end());
  } else if (into.rider.empty()) {
    into.rider = std::move(from.rider);
  }
  into.rider_ok = alike;
}

// Which rider this rank offers: only collectives small enough, a job of
// more than one rank, data that moves here (not a device collective's).
Rider rider_of(const PeerSet& ps, const CollectiveArgs& a, int64_t max_rider_bytes) {
  const int64_t n = ps.size();
  if (a.agree_only || n < 2) return Rider::kNone;
  const int64_t limit = std::min<int64_t>(inline_allreduce_bytes(), max_rider_bytes) /
                        static_cast<int64_t>(dtype_size(a.dtype));  // elements
  switch (a.kind) {
    case CollectiveKind::kAllreduce:
    case CollectiveKind::kReduceScatter:  // reduced whole; each rank keeps its block
      return a.count > 0 && a.count <= limit ? Rider::kReduction : Rider::kNone;
    case CollectiveKind::kAllgather:  // judged by this rank's block, as if every rank's were as long
      return a.count >= 0 && a.count <= limit / n ? Rider::kBlocks : Rider::kNone;
    case CollectiveKind::kBroadcast:
      return a.count > 0 && a.count <= limit && std::find(ps.ranks.begin(), ps.ranks.end(), a.root) != ps.ranks.end()
                 ? Rider::kRootData
                 : Rider::kNone;
    default:
      return Rider::kNone;
  }
}

// This rank's rider at the start.
Bytes first_rider(const PeerSet& ps, const CollectiveArgs& a, Rider kind) {
  const size_t bytes = static_cast<size_t>(a.count) * dtype_size(a.dtype);
  Bytes rider;
  // An allgather's blocks gather here: room for every rank's, if as long
  // as ours, so that appending them moves nothing.
  if (kind == Rider::kBlocks) rider.reserve(bytes * static_cast<size_t>(ps.size()));
  if (kind == Rider::kReduction) {
    rider.resize(bytes);
    if (a.prescale != 1.0) {
      scale_copy(rider.data(), a.in, a.count, a.dtype, a.prescale);
    } else {
      std::memcpy(rider.data(), a.in, bytes);
    }
  } else if (kind == Rider::kBlocks || (kind == Rider::kRootData && ps.ranks[static_cast<size_t>(ps.me)] == a.root)) {
    rider.resize(bytes);
    if (bytes > 0) std::memcpy(rider.data(), a.in, bytes);
  }
  return rider;
}

// The allgather's result from the ridden blocks: each entry's block (its
// header's count) at that rank's place in the output.
void place_blocks(const Known& known, const std::vector<int>& order, const std::vector<OpHeader>& headers,
                  CollectiveArgs& a) {
  const size_t es = dtype_size(a.dtype);
  std::vector<int64_t> displ(headers.size() + 1, 0);
  for (size_t r = 0; r < headers.size(); ++r) displ[r + 1] = displ[r] + headers[r].count;
  if (static_cast<size_t>(displ.back()) * es != known.rider.size()) {
    raise(ErrorKind::kInternal, "allgather: ", known.rider.size(), " bytes rode along for ", displ.back(),
          " elements");
  }
  a.result_count = displ.back();
  auto* out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(a.result_count));
  a.out = out;
  size_t off = 0;
  for (int i : order) {
    const size_t bytes = static_cast<size_t>(headers[static_cast<size_t>(i)].count) * es;
    uint8_t* block = out + static_cast<size_t>(displ[static_cast<size_t>(i)]) * es;
    if (bytes > 0) std::memcpy(block, known.rider.data() + off, bytes);
    off += bytes;
  }
}

// The whole set with a partner's (the rider replaced, not reduced: the
// partner's is already the reduction of every rank).
void adopt(Known& into, Known&& from) { into = std::move(from); }

// This rank's entry and rider, before it has heard from anyone.
Known own_known(const PeerSet& world, const CollectiveArgs& a, Rider ride) {
  const int n = world.size();
  const size_t nn = static_cast<size_t>(n);
  const bool alltoall = a.kind == CollectiveKind::kAlltoall;
  Known known;
  const EntryPrefix e{world.me, alltoall ? n : 0};
  const OpHeader h = make_header(a);
  known.entries.resize(entry_bytes(e.counts));
  std::memcpy(known.entries.data(), &e, sizeof(e));
  std::memcpy(known.entries.data() + sizeof(e), &h, sizeof(h));
  if (alltoall) {
    if (a.send_counts.size() != nn) {
      raise(ErrorKind::kInvalidArgument, "alltoall: send counts for ", a.send_counts.size(), " ranks, not ", n);
    }
    std::memcpy(known.entries.data() + sizeof(e) + sizeof(h), a.send_counts.data(), 8 * nn);
  }
  known.rider_ok = ride != Rider::kNone;
  known.rider = first_rider(world, a, ride);
  return known;
}

// Recursive doubling over ps: afterwards every rank of ps knows what every
// rank of ps knew before. world_n bounds what a frame may carry.
void exchange_known(const PeerSet& ps, size_t world_n, Known& known, const CollectiveArgs& a, Rider ride,
                    Deadline deadline) {
  const int n = ps.size();
  if (n < 2) return;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  Exchange x(ps, world_n, a, deadline);
  if (ps.me >= p) {  // hands its part to me - p, gets the whole back
    x.send(ps.me - p, known);
    adopt(known, x.receive(ps.me - p));
    return;
  }
  if (ps.me + p < n) merge(known, x.receive(ps.me + p), a, ride);
  for (int bit = 1; bit < p; bit *= 2) {
    const int partner = ps.me ^ bit;
    x.send(partner, known);
    merge(known, x.receive(partner), a, ride);
  }
  if (ps.me + p < n) x.send(ps.me + p, known);
  x.finish_send();
}

// Every rank's header, checked: one verdict everywhere; then the ridden
// result, when every rank rode along alike.
bool conclude(const PeerSet& ps, Known& known, CollectiveArgs& a, Rider ride) {
  const int n = ps.size();
  const size_t nn = static_cast<size_t>(n);
  const bool alltoall = a.kind == CollectiveKind::kAlltoall;
  // In rank order.
  std::vector<OpHeader> headers(nn);
  std::vector<int64_t> counts;
  if (alltoall) counts.assign(nn * nn, 0);
  std::vector<bool> seen(nn, false);
  std::vector<int> order;  // the entries' ranks, in the order their blocks rode along
  for (size_t off = 0; off < known.entries.size();) {
    EntryPrefix e;
    if (known.entries.size() - off < sizeof(e)) raise(ErrorKind::kInternal, "corrupt collective headers");
    std::memcpy(&e, known.entries.data() + off, sizeof(e));
    if (e.index < 0 || e.index >= n || seen[static_cast<size_t>(e.index)] || (e.counts != 0 && e.counts != n) ||
        known.entries.size() - off < entry_bytes(e.counts)) {
      raise(ErrorKind::kInternal, "corrupt collective headers");
    }
    const size_t i = static_cast<size_t>(e.index);
    seen[i] = true;
    order.push_back(e.index);
    std::memcpy(&headers[i], known.entries.data() + off + sizeof(e), sizeof(OpHeader));
    if (alltoall && e.counts == n) {
      std::memcpy(&counts[i * nn], known.entries.data() + off + sizeof(e) + sizeof(OpHeader), 8 * nn);
    }
    off += entry_bytes(e.counts);
  }
  if (std::find(seen.begin(), seen.end(), false) != seen.end()) {
    raise(ErrorKind::kInternal, "collective agreement: a rank's header is missing");
  }
  check_agreement(headers, ps.ranks, counts, ps.me);
  a.recv_counts.assign(nn, 0);
  for (size_t i = 0; i < nn; ++i) {
    a.recv_counts[i] = alltoall ? counts[i * nn + static_cast<size_t>(ps.me)] : headers[i].count;
  }
  if (a.agree_only && alltoall) a.alltoall_counts = std::move(counts);

  if (ride == Rider::kNone || !known.rider_ok) return false;
  if (ride == Rider::kBlocks) {
    place_blocks(known, order, headers, a);
    return true;
  }
  if (known.rider.size() != static_cast<size_t>(a.count) * dtype_size(a.dtype)) {
    raise(ErrorKind::kInternal, collective_name(a.kind), ": ", known.rider.size(), " bytes rode along for ", a.count,
          " elements");
  }
  if (a.kind == CollectiveKind::kReduceScatter) {
    const int64_t rows = a.row_elems > 0 ? a.count / a.row_elems : 0;
    const int64_t first = block_first_row(rows, ps.size(), ps.me) * a.row_elems;
    a.result_count = block_rows(rows, ps.size(), ps.me) * a.row_elems;
    if (a.result_count > 0) {
      scale_copy(a.out, known.rider.data() + static_cast<size_t>(first) * dtype_size(a.dtype), a.result_count, a.dtype,
                 a.postscale);
    }
    return true;
  }
  std::memcpy(a.out, known.rider.data(), known.rider.size());
  if (ride == Rider::kReduction && a.postscale != 1.0) scale_inplace(a.out, a.count, a.dtype, a.postscale);
  a.result_count = a.count;
  return true;
}

}  // namespace

int64_t inline_allreduce_bytes() {
  static const int64_t bytes = std::max<int64_t>(0, env_int("RINGCC_INLINE_BYTES", 64 << 10));
  return bytes;
}

bool agree_on_collective(const PeerSet& ps, CollectiveArgs& a, Deadline deadline) {
  const Rider ride = rider_of(ps, a, kMaxRiderBytes);
  Known known = own_known(ps, a, ride);
  exchange_known(ps, static_cast<size_t>(ps.size()), known, a, ride, deadline);
  return conclude(ps, known, a, ride);
}

bool agree_by_host(const PeerSet& world, const PeerSet& cross, ShmCollectives& local, CollectiveArgs& a,
                   Deadline deadline) {
  const Rider ride = rider_of(world, a, kMaxRiderBytes);
  Bytes mine, pooled;
  frame_of(own_known(world, a, ride), &mine);
  // Every rank of this host gets every local rank's frame, and merges them
  // in local rank order: each holds the same host set, which its exchange
  // with the other hosts (its own local rank's, in parallel with the
  // others') completes alike.
  CollectiveArgs pool;
  pool.kind = CollectiveKind::kAllgather;
  pool.dtype = DataType::kUInt8;
  pool.in = mine.data();
  pool.count = static_cast<int64_t>(mine.size());
  pool.out_count = -1;
  pool.allocate = [&pooled](int64_t bytes) {
    pooled.resize(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    return static_cast<void*>(pooled.data());
  };
  local.run(pool, deadline);
  Known host;
  size_t off = 0;
  for (size_t i = 0; i < pool.recv_counts.size(); ++i) {
    const size_t bytes = static_cast<size_t>(pool.recv_counts[i]);
    FramePrefix f;
    if (bytes < sizeof(f)) raise(ErrorKind::kInternal, "corrupt collective header from a local rank");
    std::memcpy(&f, pooled.data() + off, sizeof(f));
    check_prefix(f, static_cast<size_t>(world.size()), -1);
    if (bytes != sizeof(f) + f.entries_bytes + f.rider_bytes) {
      raise(ErrorKind::kInternal, "corrupt collective header from a local rank");
    }
    Known k;
    const uint8_t* body = pooled.data() + off + sizeof(f);
    k.entries.assign(body, body + f.entries_bytes);
    k.rider.assign(body + f.entries_bytes, body + f.entries_bytes + f.rider_bytes);
    k.rider_ok = f.rider_ok == 1;
    if (i == 0) {
      adopt(host, std::move(k));
    } else {
      merge(host, std::move(k), a, ride);
    }
    off += bytes;
  }
  exchange_known(cross, static_cast<size_t>(world.size()), host, a, ride, deadline);
  return conclude(world, host, a, ride);
}

}  // namespace ringcc
