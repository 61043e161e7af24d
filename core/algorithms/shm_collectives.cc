#include "core/algorithms/shm_collectives.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/algorithms/allreduce_layout.h"
#include "core/algorithms/shm_control.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/collective/reduction.h"
#include "core/collective/stream_copy.h"
#include "core/os/process_memory.h"
#include "core/os/wait_policy.h"

namespace ringcc {


constexpr uint64_t kProbeValue = 0x72696e6763636d61ULL;

namespace {

constexpr size_t kAlign = 4096;
// The data areas start this far into a page. User buffers mostly start at
// page offset 0 to 64 (malloc's and mmap's headers, 64-byte alignment), and
// copying between addresses that sit a few bytes apart modulo 4 KiB makes
// loads wait on unrelated stores (4K aliasing): with many small tensors of
// one buffer (a fused batch) that halved the copy speed. Half a page keeps
// them apart.
constexpr size_t kAreaSkew = 2048 + 64;
// The reduced part of an allreduce that bypasses the cache goes through a
// scratch buffer this long (fits L1 beside its sources' lines).
constexpr size_t kBypassStepBytes = 16384;

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace

size_t ShmCollectives::area_bytes_from_env() {
  return round_up(static_cast<size_t>(std::max<int64_t>(env_int("RINGCC_SHM_AREA_BYTES", 4 << 20), 64 * 1024)), kAlign);
}

size_t ShmCollectives::allreduce_piece_bytes_from_env() {
  // Measured on a 2-core machine (1 MiB of L2 per core), 2 and 4 ranks,
  // 1 to 64 MiB: 512 KiB pieces beat 4 MiB ones by 1.3-1.6x from 4 MiB
  // up, 256 KiB and 1 MiB were within 10% of 512 KiB, 128 KiB lost 25%.
  // An allreduce touches each piece's area four times (the peer-owned
  // parts written, the own part reduced into it, every part read by every
  // rank); both parities' pieces stay in a core's L2 where whole areas,
  // and the user buffers beside them, spill to L3 or memory. The other
  // collectives copy each byte once or twice and keep whole areas.
  const int64_t bytes = env_int("RINGCC_SHM_ALLREDUCE_PIECE_BYTES", 512 * 1024);
  return round_up(
      static_cast<size_t>(std::clamp<int64_t>(bytes, 64 * 1024, static_cast<int64_t>(area_bytes_from_env()))), kAlign);
}

ShmCollectives::StoreMode ShmCollectives::store_mode_from_env() {
  const std::string v = env_str("RINGCC_SHM_STORES", "auto");
  if (v == "auto") return StoreMode::kAuto;
  if (v == "plain") return StoreMode::kPlain;
  if (v == "bypass") return StoreMode::kBypass;
  raise(ErrorKind::kInvalidArgument, "RINGCC_SHM_STORES must be auto, plain or bypass, not '", v, "'");
}

size_t ShmCollectives::small_bytes_from_env() {
  return static_cast<size_t>(std::clamp<int64_t>(env_int("RINGCC_SHM_SMALL_BYTES", 64 * 1024), 0,
                                                 static_cast<int64_t>(area_bytes_from_env())));
}

ShmCollectives::ShmCollectives(Store& store, const std::string& key_prefix, std::vector<int> ranks, int me,
                               Deadline deadline)
    : ranks_(std::move(ranks)), me_(me) {
  const size_t n = ranks_.size();
  area_bytes_ = area_bytes_from_env();
  small_bytes_ = small_bytes_from_env();
  allreduce_piece_bytes_ = std::min(allreduce_piece_bytes_from_env(), area_bytes_);
  store_mode_ = store_mode_from_env();
  if (store_mode_ == StoreMode::kAuto && !stream_copy_bypasses_cache()) store_mode_ = StoreMode::kPlain;
  header_bytes_ = round_up(sizeof(OpHeader) + 8 * n, 64);
  segment_bytes_ = round_up(sizeof(ShmControl) + 2 * header_bytes_, kAlign) + kAreaSkew + 2 * area_bytes_;

  // Our segment's name is in /dev/shm only from here until every rank has
  // mapped it: removed then, or at once if anything below fails. A rank
  // killed in between leaves it behind; its pid in the name lets the next
  // job on this host remove it.
  remove_stale_shm_objects();
  auto tag_of = [&](size_t i) { return key_prefix + "-" + std::to_string(ranks_[i]); };
  const std::string mine = ShmSegment::owned_name(tag_of(static_cast<size_t>(me_)));
  segments_.resize(n);
  segments_[static_cast<size_t>(me_)] = ShmSegment::create(mine, segment_bytes_);
  try {
    ShmControl* ctl = new (segments_[static_cast<size_t>(me_)].data()) ShmControl();
    ctl->phase.store(0);
    ctl->sleepers.store(0);
    ctl->aborted.store(0);
    ctl->left.store(0);
    ctl->store_choices.store(0);
    ctl->pid = static_cast<int32_t>(getpid());
    ctl->cpu.store(-1);  // not known until the first phase
    ctl->probe = kProbeValue;
    ctl->probe_addr = reinterpret_cast<uint64_t>(&ctl->probe);
    affinity_mask(ctl->cpu_mask, 16);

    auto wait_ms = [&] { return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()); };
    store.set(key_prefix + "/created/" + std::to_string(ranks_[static_cast<size_t>(me_)]), mine);
    for (size_t i = 0; i < n; ++i) {
      if (static_cast<int>(i) == me_) continue;
      const std::string name = store.get(key_prefix + "/created/" + std::to_string(ranks_[i]), wait_ms());
      if (!ShmSegment::is_owned_name(name, tag_of(i))) {
        raise(ErrorKind::kInternal, "rank ", ranks_[i],
              " announced a shared memory segment that is not this job's (its name is not what rank ", ranks_[i],
              " of this job makes): refusing to map it");
      }
      segments_[i] = ShmSegment::open(name, segment_bytes_);
    }
    // Can we read the peers' memory directly? Every rank tries on every
    // peer and tells the others with its "mapped" mark, so all decide alike.
    bool cma = env_int("RINGCC_SHM_CMA", 1) != 0;
    for (size_t i = 0; i < n && cma; ++i) {
      if (static_cast<int>(i) == me_) continue;
      uint64_t value = 0;
      const ShmControl* peer = control(static_cast<int>(i));
      cma = read_peer(static_cast<int>(i), &value, peer->probe_addr, sizeof(value)) && value == kProbeValue;
    }
    store.set(key_prefix + "/mapped/" + std::to_string(ranks_[static_cast<size_t>(me_)]), cma ? "cma" : "1");
    for (size_t i = 0; i < n; ++i) {
      if (static_cast<int>(i) == me_) continue;
      cma = store.get(key_prefix + "/mapped/" + std::to_string(ranks_[i]), wait_ms()) == "cma" && cma;
    }
    cma_ = cma;
    // More ranks than CPUs to share among them: waiters must give their
    // CPU away rather than spin (wait_policy.h).
    uint64_t all_cpus[16] = {};
    for (size_t i = 0; i < n; ++i) {
      for (int w = 0; w < 16; ++w) all_cpus[w] |= control(static_cast<int>(i))->cpu_mask[w];
    }
    int cpus = 0;
    for (uint64_t w : all_cpus) cpus += __builtin_popcountll(w);
    note_host_sharing(static_cast<int>(n), cpus);
  } catch (...) {
    ShmSegment::unlink(mine);
    throw;
  }
  // Everyone has mapped every segment: the names can go, so nothing is left
  // behind in /dev/shm even if a rank is killed later.
  ShmSegment::unlink(mine);
  srcs_.resize(n);
}

ShmCollectives::~ShmCollectives() = default;

bool ShmCollectives::read_peer(int peer, void* dst, uint64_t remote_addr, size_t bytes) const {
  return read_process_memory(control(peer)->pid, dst, remote_addr, bytes);
}

void ShmCollectives::raise_read_failure(int peer, int err, const char* what, bool writing) const {
  const int rank = ranks_[static_cast<size_t>(peer)];
  const char* call = writing ? "process_vm_writev" : "process_vm_readv";
  if (err == ESRCH) {
    raise(ErrorKind::kPeerFailure, "rank ", rank, " exited or was killed: no process left to ",
          writing ? "write its " : "read its ", what, writing ? " into (" : " from (", call, ")");
  }
  raise(ErrorKind::kInternal, writing ? "writing the " : "reading the ", what, " of rank ", rank, " through ", call,
        " failed: ", std::strerror(err), " (RINGCC_SHM_CMA=0 turns direct reads off)");
}

ShmControl* ShmCollectives::control(int i) const {
  return reinterpret_cast<ShmControl*>(segments_[static_cast<size_t>(i)].data());
}

uint8_t* ShmCollectives::header_slot(int i, int parity) const {
  return segments_[static_cast<size_t>(i)].data() + sizeof(ShmControl) + static_cast<size_t>(parity) * header_bytes_;
}

uint8_t* ShmCollectives::area(int i, int parity) const {
  return segments_[static_cast<size_t>(i)].data() + round_up(sizeof(ShmControl) + 2 * header_bytes_, kAlign) +
         kAreaSkew + static_cast<size_t>(parity) * area_bytes_;
}

void ShmCollectives::put_header(int p, const CollectiveArgs& a) {
  const OpHeader h = make_header(a);
  uint8_t* slot = header_slot(me_, p);
  std::memcpy(slot, &h, sizeof(h));
  if (a.kind == CollectiveKind::kAlltoall) {
    std::memcpy(slot + sizeof(OpHeader), a.send_counts.data(), 8 * a.send_counts.size());
  }
}

void ShmCollectives::check_headers(int p, CollectiveArgs& a) {
  const size_t n = ranks_.size();
  std::vector<OpHeader> headers(n);
  std::vector<int64_t> counts;
  const bool alltoall = a.kind == CollectiveKind::kAlltoall;
  if (alltoall) counts.resize(n * n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* slot = header_slot(static_cast<int>(i), p);
    std::memcpy(&headers[i], slot, sizeof(OpHeader));
    if (alltoall && headers[i].kind == static_cast<int32_t>(CollectiveKind::kAlltoall)) {
      std::memcpy(&counts[i * n], slot + sizeof(OpHeader), 8 * n);
    }
  }
  check_agreement(headers, ranks_, counts, me_);
  a.recv_counts.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    a.recv_counts[i] = alltoall ? counts[i * n + static_cast<size_t>(me_)] : headers[i].count;
  }
  if (a.agree_only && alltoall) a.alltoall_counts = std::move(counts);
}

void ShmCollectives::run(CollectiveArgs& a, Deadline dl) {
  // A device collective's agreement: headers only (every data path starts
  // with the same header phase, so a rank with host buffers still meets it).
  const CollectiveKind kind = a.agree_only ? CollectiveKind::kBarrier : a.kind;
  bulk_ = static_cast<size_t>(std::max<int64_t>(a.count, 0)) * dtype_size(a.dtype) > small_bytes_;
  switch (kind) {
    case CollectiveKind::kAllreduce:
      return allreduce(a, dl);
    case CollectiveKind::kReduceScatter:
      return reduce_scatter(a, dl);
    case CollectiveKind::kAllgather:
      return allgather(a, dl);
    case CollectiveKind::kBroadcast:
      return broadcast(a, dl);
    case CollectiveKind::kAlltoall:
      return alltoall(a, dl);
    case CollectiveKind::kBarrier:
    case CollectiveKind::kLocalError: {
      int p = next_parity();
      put_header(p, a);
      sync(dl, collective_name(a.kind));
      check_headers(p, a);
      return;
    }
  }
}

void ShmCollectives::allreduce(CollectiveArgs& a, Deadline dl) {
  const int n = size();
  const size_t es = dtype_size(a.dtype);
  auto* out = static_cast<uint8_t*>(a.out);
  const int64_t count = a.count;
  const AllreduceLayout layout(a);

  // The peer-read parts of the areas go in with plain stores or stores that
  // bypass the cache, as the first rank chose for this size (see
  // store_chooser.h); it times the allreduce for its next choices.
  const size_t bytes = static_cast<size_t>(count) * es;
  const int size_class = StoreChooser::size_class(bytes, layout.segmented());
  const bool bypass = bypasses(size_class);
  const bool timed = me_ == 0 && store_mode_ == StoreMode::kAuto && size_class >= 0;
  auto started = timed ? Clock::now() : Clock::time_point{};
  // The first meeting's wait is how far apart the ranks arrived, which the
  // way of storing does not change: it stays out of the timing.
  auto meet = [&](bool first) {
    const auto before = timed && first ? Clock::now() : Clock::time_point{};
    sync(dl, "allreduce");
    if (timed && first) started += Clock::now() - before;
  };
  // Recorded now, taken into the choices at the next allreduce's first
  // phase: the choices change only between a collective's phases.
  auto note_time = [&] {
    if (timed) {
      const double ns = std::chrono::duration<double, std::nano>(Clock::now() - started).count();
      timing_ = {size_class, bypass, ns / static_cast<double>(bytes)};
    }
  };

  if (bytes <= small_bytes_) {
    // One phase: everyone publishes, everyone reduces everything.
    int p = next_parity();
    put_header(p, a);
    layout.gather(area(me_, p), 0, count, a.prescale, bypass);
    meet(true);
    check_headers(p, a);
    // Every rank has read the choices for this allreduce; a peer that reads
    // them for its next one before this store sees an older choice, which
    // changes only how it stores, not what.
    if (me_ == 0 && store_mode_ == StoreMode::kAuto) publish_store_choices();
    if (count > 0) {
      for (int i = 0; i < n; ++i) srcs_[static_cast<size_t>(i)] = area(i, p);
      uint8_t* result = out;
      if (layout.segmented()) {
        if (scratch_.size() < static_cast<size_t>(count) * es) scratch_.resize(static_cast<size_t>(count) * es);
        result = scratch_.data();
      }
      reduce_many(result, srcs_.data(), n, count, a.dtype, a.op);
      if (a.postscale != 1.0) scale_inplace(result, count, a.dtype, a.postscale);
      if (layout.segmented()) layout.scatter(result, 0, count, 1.0);
    }
    note_time();
    return;
  }

  // Pieces. Each rank owns one segment of a piece: it publishes only the
  // segments others own, reduces its own segment from its input and the
  // peers' published copies into its area, and everyone copies the reduced
  // segments out of their owners' areas. The peer-owned parts and the
  // reduced own part are what peers read.
  const int64_t piece_elems = static_cast<int64_t>(allreduce_piece_bytes_ / es);
  const int64_t ses = static_cast<int64_t>(es);
  for (int64_t off = 0, first = 1; first || off < count; off += piece_elems, first = 0) {
    const int64_t m = std::min(piece_elems, count - off);
    auto seg_lo = [&](int j) { return m * j / n; };
    int p = next_parity();
    if (first) put_header(p, a);
    for (int j = 0; j < n; ++j) {
      if (j == me_) continue;
      layout.gather(area(me_, p) + seg_lo(j) * ses, off + seg_lo(j), seg_lo(j + 1) - seg_lo(j), a.prescale, bypass);
    }
    meet(first != 0);
    if (first) {
      check_headers(p, a);
      // Every rank has read the choices for this allreduce (before its first
      // phase), and none reads them again before our next phase.
      if (me_ == 0 && store_mode_ == StoreMode::kAuto) publish_store_choices();
    }
    const int64_t lo = seg_lo(me_);
    reduce_own_part(a, layout, p, off + lo, lo, seg_lo(me_ + 1) - lo, bypass);
    sync(dl, "allreduce");
    for (int j = 0; j < n; ++j) {
      const int64_t jlo = seg_lo(j), jlen = seg_lo(j + 1) - jlo;
      layout.scatter(area(j, p) + jlo * ses, off + jlo, jlen, a.postscale);
    }
  }
  note_time();
}

void ShmCollectives::reduce_own_part(const CollectiveArgs& a, const AllreduceLayout& layout, int p, int64_t at,
                                     int64_t lo, int64_t len, bool bypass) {
  if (len <= 0) return;
  const int n = size();
  const int64_t ses = static_cast<int64_t>(dtype_size(a.dtype));
  uint8_t* mine = area(me_, p) + lo * ses;
  if (a.prescale == 1.0) {
    // Our own part straight from the input, run by run (one run unless
    // the input is a list of buffers): no copy of it into the area.
    layout.for_each_input(at, len, [&](const uint8_t* src, int64_t rel, int64_t cnt) {
      if (!src) {  // zeros: reduced in place in the area
        std::memset(mine + rel * ses, 0, static_cast<size_t>(cnt * ses));
        src = mine + rel * ses;
      }
      // Bypassing the cache: reduced a few KiB at a time into scratch
      // that stays in L1, then streamed into the area.
      const int64_t step = bypass ? static_cast<int64_t>(kBypassStepBytes) / ses : cnt;
      if (bypass && scratch_.size() < kBypassStepBytes) scratch_.resize(kBypassStepBytes);
      for (int64_t q = 0; q < cnt; q += step) {
        const int64_t c = std::min(step, cnt - q);
        srcs_[0] = src + q * ses;
        for (int i = 0, k = 1; i < n; ++i) {
          if (i != me_) srcs_[static_cast<size_t>(k++)] = area(i, p) + (lo + rel + q) * ses;
        }
        uint8_t* dst = mine + (rel + q) * ses;
        if (!bypass) {
          reduce_many(dst, srcs_.data(), n, c, a.dtype, a.op);
        } else {
          reduce_many(scratch_.data(), srcs_.data(), n, c, a.dtype, a.op);
          stream_copy(dst, scratch_.data(), static_cast<size_t>(c * ses));
        }
      }
    });
  } else {
    layout.gather(mine, at, len, a.prescale);
    srcs_[0] = mine;
    for (int i = 0, k = 1; i < n; ++i) {
      if (i != me_) srcs_[static_cast<size_t>(k++)] = area(i, p) + lo * ses;
    }
    reduce_many(mine, srcs_.data(), n, len, a.dtype, a.op);
  }
}

bool ShmCollectives::bypasses(int size_class) const {
  if (store_mode_ != StoreMode::kAuto || size_class < 0) return store_mode_ == StoreMode::kBypass;
  return (control(0)->store_choices.load(std::memory_order_acquire) >> size_class) & 1U;
}

void ShmCollectives::publish_store_choices() {
  if (timing_.size_class >= 0) chooser_.record(timing_.size_class, timing_.bypass, timing_.ns_per_byte);
  timing_.size_class = -1;
  const uint32_t choices = chooser_.choices();
  if (choices != control(me_)->store_choices.load(std::memory_order_relaxed)) {
    RINGCC_LOG(kDebug, "shared-memory allreduce: stores that bypass the cache for size classes 0x", std::hex, choices,
               std::dec, " (bit c: from 2^c x 32 KiB; fused batches from bit 16)");
  }
  control(me_)->store_choices.store(choices, std::memory_order_release);
}

void ShmCollectives::reduce_scatter(CollectiveArgs& a, Deadline dl) {
  const int n = size();
  const size_t es = dtype_size(a.dtype);
  const auto* in = static_cast<const uint8_t*>(a.in);
  auto* out = static_cast<uint8_t*>(a.out);
  const int64_t rows = a.row_elems > 0 ? a.count / a.row_elems : 0;
  // Each piece carries, for every rank's block, the next q elements of it.
  const int64_t q = std::max<int64_t>(1, static_cast<int64_t>(area_bytes_ / es) / n);
  int64_t longest = 0;
  for (int r = 0; r < n; ++r) longest = std::max(longest, block_rows(rows, n, r) * a.row_elems);
  const int64_t my_first = block_first_row(rows, n, me_) * a.row_elems;
  const int64_t my_len = block_rows(rows, n, me_) * a.row_elems;
  for (int64_t off = 0, first = 1; first || off < longest; off += q, first = 0) {
    int p = next_parity();
    if (first) put_header(p, a);
    for (int r = 0; r < n; ++r) {
      const int64_t blen = block_rows(rows, n, r) * a.row_elems;
      const int64_t bstart = block_first_row(rows, n, r) * a.row_elems;
      const int64_t m = std::clamp<int64_t>(blen - off, 0, q);
      copy_scaled(area(me_, p) + r * q * static_cast<int64_t>(es), in + (bstart + off) * static_cast<int64_t>(es), m,
                  a.dtype, a.prescale);
    }
    sync(dl, "reduce_scatter");
    if (first) check_headers(p, a);
    const int64_t m = std::clamp<int64_t>(my_len - off, 0, q);
    if (m > 0) {
      for (int i = 0; i < n; ++i) {
        srcs_[static_cast<size_t>(i)] = area(i, p) + me_ * q * static_cast<int64_t>(es);
      }
      uint8_t* dst = out + off * static_cast<int64_t>(es);
      reduce_many(dst, srcs_.data(), n, m, a.dtype, a.op);
      if (a.postscale != 1.0) scale_inplace(dst, m, a.dtype, a.postscale);
    }
  }
  (void)my_first;
  a.result_count = my_len;
}

void ShmCollectives::allgather_placed(CollectiveArgs& a, const Placement& placement, Deadline dl) {
  bulk_ = static_cast<size_t>(std::max<int64_t>(a.count, 0)) * dtype_size(a.dtype) > small_bytes_;
  allgather(a, dl, &placement);
}

void ShmCollectives::allgather_scattered(CollectiveArgs& a, const Placement& placement, Deadline dl) {
  bulk_ = static_cast<size_t>(std::max<int64_t>(a.count, 0)) * dtype_size(a.dtype) > small_bytes_;
  allgather(a, dl, &placement, true);
}

void ShmCollectives::allgather(CollectiveArgs& a, Deadline dl, const Placement* placement, bool scattered) {
  const int n = size();
  const size_t es = dtype_size(a.dtype);
  const auto* in = static_cast<const uint8_t*>(a.in);
  const int64_t piece_elems = static_cast<int64_t>(area_bytes_ / es);
  std::vector<int64_t> displ;
  int64_t longest = 0;
  uint8_t* out = nullptr;
  for (int64_t off = 0, first = 1; first || off < longest; off += piece_elems, first = 0) {
    int p = next_parity();
    if (first) {
      put_header(p, a);
      // Where our input lives, for peers that read it directly.
      const uint64_t addr = reinterpret_cast<uint64_t>(in);
      std::memcpy(header_slot(me_, p) + sizeof(OpHeader), &addr, sizeof(addr));
    }
    // A contribution longer than one piece goes through cross-memory
    // attach when the host allows it (decided below, alike on every rank):
    // no need to stage it.
    if (!scattered && !(first && cma_ && a.count > piece_elems)) {
      copy_scaled(area(me_, p), in + off * static_cast<int64_t>(es), std::clamp<int64_t>(a.count - off, 0, piece_elems),
                  a.dtype, 1.0);
    }
    sync(dl, "allgather");
    if (first) {
      std::vector<uint64_t> addrs(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        std::memcpy(&addrs[static_cast<size_t>(r)], header_slot(r, p) + sizeof(OpHeader), sizeof(uint64_t));
      }
      check_headers(p, a);
      displ.assign(static_cast<size_t>(n) + 1, 0);
      for (int r = 0; r < n; ++r) {
        displ[static_cast<size_t>(r) + 1] = displ[static_cast<size_t>(r)] + a.recv_counts[static_cast<size_t>(r)];
        longest = std::max(longest, a.recv_counts[static_cast<size_t>(r)]);
      }
      a.result_count = displ.back();
      if (placement) {
        check_placement(*placement, a.recv_counts, scattered);
        if (scattered && !cma_) {
          raise(ErrorKind::kInternal, "allgather: blocks scattered in the peers' buffers need direct reads");
        }
      } else {
        out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(a.result_count));
        a.out = out;
      }
      if (cma_ && (scattered || longest > piece_elems)) {
        // One copy per byte: every rank reads every peer's input straight
        // into its output, then waits until all are done reading its own.
        bool ok = true;
        int read_errno = 0, unread = -1;
        auto take = [&](int r, int64_t from, int64_t count, uint8_t* dst) {
          const int64_t bytes = count * static_cast<int64_t>(es), skip = from * static_cast<int64_t>(es);
          if (r == me_) {
            if (bytes > 0 && dst != in + skip) std::memmove(dst, in + skip, static_cast<size_t>(bytes));
          } else if (bytes > 0 && ok) {
            ok = read_peer(r, dst, addrs[static_cast<size_t>(r)] + static_cast<uint64_t>(skip),
                           static_cast<size_t>(bytes));
            if (!ok) {
              read_errno = errno;
              unread = r;
              // A peer that is gone will not reach the phase below either.
              if (read_errno == ESRCH) raise_read_failure(r, read_errno, "allgather input");
            }
          }
        };
        for (int k = 1; k <= n; ++k) {
          const int r = (me_ + k) % n;  // peers in a staggered order, then ourselves
          if (placement) {
            for (const Block& b : (*placement)[static_cast<size_t>(r)]) take(r, b.from, b.count, b.dst);
          } else {
            take(r, 0, a.recv_counts[static_cast<size_t>(r)], out + displ[static_cast<size_t>(r)] * es);
          }
        }
        sync(dl, "allgather");
        if (!ok) raise_read_failure(unread, read_errno, "allgather input");
        return;
      }
    }
    for (int r = 0; r < n; ++r) {
      const int64_t m = std::clamp<int64_t>(a.recv_counts[static_cast<size_t>(r)] - off, 0, piece_elems);
      if (!placement) {
        copy_scaled(out + (displ[static_cast<size_t>(r)] + off) * static_cast<int64_t>(es), area(r, p), m, a.dtype,
                    1.0);
        continue;
      }
      for (const Block& b : (*placement)[static_cast<size_t>(r)]) {  // the parts of this piece
        const int64_t lo = std::max(b.from, off), hi = std::min(b.from + b.count, off + m);
        if (lo < hi) std::memcpy(b.dst + (lo - b.from) * es, area(r, p) + (lo - off) * es, (hi - lo) * es);
      }
    }
  }
}

void ShmCollectives::check_placement(const Placement& placement, const std::vector<int64_t>& counts,
                                     bool scattered) const {
  bool whole = placement.size() == counts.size();
  for (size_t r = 0; whole && r < counts.size(); ++r) {
    int64_t at = 0;
    for (const Block& b : placement[r]) {
      whole = whole && (scattered ? b.from >= 0 : b.from == at) && b.count >= 0;
      at += b.count;
    }
    whole = whole && at == counts[r];
  }
  if (!whole) raise(ErrorKind::kInternal, "allgather: the placement of the results does not cover each contribution");
}

void ShmCollectives::broadcast(CollectiveArgs& a, Deadline dl) {
  const size_t es = dtype_size(a.dtype);
  const int root = static_cast<int>(std::find(ranks_.begin(), ranks_.end(), a.root) - ranks_.begin());
  const bool is_root = root == me_;
  const auto* in = static_cast<const uint8_t*>(a.in);
  auto* out = static_cast<uint8_t*>(a.out);
  const int64_t piece_elems = static_cast<int64_t>(area_bytes_ / es);
  // A message longer than one area goes through cross-memory attach when
  // the host allows it (decided alike on every rank; broadcast_direct).
  // Staged through the root's area, the bytes pass through the root's
  // cache, which between CPU complexes ran at 2 GB/s: 64 MiB, 2 ranks,
  // staged 4.2 ms under one cache, 6.6-27 ms across two; direct 4.0-5.4 ms.
  const bool direct = cma_ && a.count > piece_elems;
  for (int64_t off = 0, first = 1; first || off < a.count; off += piece_elems, first = 0) {
    const int64_t m = std::clamp<int64_t>(a.count - off, 0, piece_elems);
    int p = next_parity();
    if (first) {
      put_header(p, a);
      // Where broadcast_direct finds this rank's input and output.
      const uint64_t addrs[2] = {reinterpret_cast<uint64_t>(in), reinterpret_cast<uint64_t>(out)};
      std::memcpy(header_slot(me_, p) + sizeof(OpHeader), addrs, sizeof(addrs));
    }
    if (is_root && !direct) copy_scaled(area(me_, p), in + off * static_cast<int64_t>(es), m, a.dtype, 1.0);
    sync(dl, "broadcast");
    if (first) check_headers(p, a);
    if (direct) return broadcast_direct(a, root, p, dl);
    if (!is_root && root < size()) {
      copy_scaled(out + off * static_cast<int64_t>(es), area(root, p), m, a.dtype, 1.0);
    }
  }
  if (is_root && out != in) copy_scaled(out, in, a.count, a.dtype, 1.0);
}

void ShmCollectives::broadcast_direct(const CollectiveArgs& a, int root, int p, Deadline dl) {
  const size_t total = static_cast<size_t>(a.count) * dtype_size(a.dtype);
  // After the header: the input's and output's addresses, the root's refusal.
  auto word = [&](int i, int which) { return header_slot(i, p) + sizeof(OpHeader) + 8 * which; };
  auto addr_of = [&](int i, int which) {
    uint64_t addr = 0;
    std::memcpy(&addr, word(i, which), sizeof(addr));
    return addr;
  };
  // Readers reading the whole message leave the root's CPU idle: cut it in
  // size() blocks, the root writing one into each reader (process_vm_writev)
  // while the reader reads the others. 2 ranks, medians of 4 runs: 8 MiB
  // 0.45 against 0.73 ms, 64 MiB 5.2 against 5.7 ms. A root whose output is
  // apart from its input copies the message already and writes nothing.
  const bool shared = root < size() && addr_of(root, 0) == addr_of(root, 1);
  const size_t block = shared ? (total / static_cast<size_t>(size()) + 4095) / 4096 * 4096 : 0;
  auto written_part = [&](int reader) {  // [lo, hi) of `reader`'s output the root writes
    const size_t order = static_cast<size_t>(reader < root ? reader : reader - 1);
    const size_t lo = std::min(total, order * block);
    return std::make_pair(lo, std::min(total, lo + block));
  };
  bool ok = true;
  int read_errno = 0;
  uint64_t unwritten = 0;  // (reader + 1) << 32 | errno of the first write refused
  if (me_ != root && root < size()) {
    const auto [lo, hi] = written_part(me_);
    auto* out = static_cast<uint8_t*>(a.out);
    const uint64_t from = addr_of(root, 0);
    ok = read_peer(root, out, from, lo) && read_peer(root, out + hi, from + hi, total - hi);
    if (!ok) read_errno = errno;
    if (!ok && read_errno == ESRCH) raise_read_failure(root, read_errno, "broadcast buffer");  // gone
  } else if (me_ == root) {
    if (a.out != a.in) copy_scaled(a.out, a.in, a.count, a.dtype, 1.0);
    for (int i = 0; i < size() && shared && !unwritten; ++i) {
      const auto [lo, hi] = written_part(i);
      if (i == root || hi == lo) continue;
      if (!write_process_memory(control(i)->pid, addr_of(i, 1) + lo, static_cast<const uint8_t*>(a.in) + lo,
                                hi - lo)) {
        if (errno == ESRCH) raise_read_failure(i, errno, "broadcast output", true);  // gone
        unwritten = (static_cast<uint64_t>(i) + 1) << 32 | static_cast<uint32_t>(errno);
      }
    }
    std::memcpy(word(me_, 2), &unwritten, sizeof(unwritten));
  }
  sync(dl, "broadcast");  // the root's buffer is read, and the readers' written, by now
  if (!ok) raise_read_failure(root, read_errno, "broadcast buffer");
  // A block the root could not write fails the call on every rank, in step.
  if (root < size()) std::memcpy(&unwritten, word(root, 2), sizeof(unwritten));
  const int why = static_cast<int>(unwritten & 0xffffffffu);
  if (unwritten) raise_read_failure(static_cast<int>(unwritten >> 32) - 1, why, "broadcast output", true);
}

void ShmCollectives::alltoall(CollectiveArgs& a, Deadline dl) {
  const int n = size();
  const size_t es = dtype_size(a.dtype);
  const auto* in = static_cast<const uint8_t*>(a.in);
  const int64_t q = std::max<int64_t>(1, static_cast<int64_t>(area_bytes_ / es) / n);
  std::vector<int64_t> sdispl(static_cast<size_t>(n) + 1, 0), rdispl;
  for (int d = 0; d < n; ++d) {
    sdispl[static_cast<size_t>(d) + 1] = sdispl[static_cast<size_t>(d)] + a.send_counts[static_cast<size_t>(d)];
  }
  int64_t longest = 0;
  uint8_t* out = nullptr;
  for (int64_t off = 0, first = 1; first || off < longest; off += q, first = 0) {
    int p = next_parity();
    if (first) put_header(p, a);
    for (int d = 0; d < n; ++d) {
      const int64_t m = std::clamp<int64_t>(a.send_counts[static_cast<size_t>(d)] - off, 0, q);
      copy_scaled(area(me_, p) + d * q * static_cast<int64_t>(es),
                  in + (sdispl[static_cast<size_t>(d)] + off) * static_cast<int64_t>(es), m, a.dtype, 1.0);
    }
    sync(dl, "alltoall");
    if (first) {
      check_headers(p, a);
      // Longest message between any pair decides the number of pieces.
      for (int s = 0; s < n; ++s) {
        const auto* counts = reinterpret_cast<const int64_t*>(header_slot(s, p) + sizeof(OpHeader));
        for (int d = 0; d < n; ++d) longest = std::max(longest, counts[d]);
      }
      rdispl.assign(static_cast<size_t>(n) + 1, 0);
      for (int s = 0; s < n; ++s) {
        rdispl[static_cast<size_t>(s) + 1] = rdispl[static_cast<size_t>(s)] + a.recv_counts[static_cast<size_t>(s)];
      }
      a.result_count = rdispl.back();
      out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(a.result_count));
      a.out = out;
    }
    for (int s = 0; s < n; ++s) {
      const int64_t m = std::clamp<int64_t>(a.recv_counts[static_cast<size_t>(s)] - off, 0, q);
      copy_scaled(out + (rdispl[static_cast<size_t>(s)] + off) * static_cast<int64_t>(es),
                  area(s, p) + me_ * q * static_cast<int64_t>(es), m, a.dtype, 1.0);
    }
  }
}

}  // namespace ringcc
