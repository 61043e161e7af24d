#include "core/backends/mpi/mpi_collectives.h"

#include <time.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/base/thread_name.h"
#include "core/collective/reduction.h"

namespace ringcc {

namespace {

constexpr uint32_t kBlobMagic = 0x52434d31;  // "RCM1"

// What precedes the header in an exchange message.
struct BlobPrefix {
  uint32_t magic = kBlobMagic;
  int32_t reserved = 0;
  int64_t inline_bytes = -1;  // payload bytes that follow; -1: none (data path)
};

constexpr size_t kPrefix = sizeof(BlobPrefix);
constexpr size_t kHeader = sizeof(OpHeader);

// Bytes of payload this rank would put in the exchange for `a`: its whole
// input, except for broadcast where only the root contributes.
int64_t payload_bytes(const CollectiveArgs& a, int rank) {
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  switch (a.kind) {
    case CollectiveKind::kAllreduce:
    case CollectiveKind::kAllgather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAlltoall:
      return a.count * es;
    case CollectiveKind::kBroadcast:
      return a.root == rank ? a.count * es : 0;
    default:
      return 0;
  }
}

}  // namespace

// Measured under mpirun on the 2-core machine, 2 ranks (docs/benchmarks.md,
// "MPI transport"): Open MPI's own allreduce wins up to a few MiB (one
// single-copy exchange, then a local reduction), the ring over MPI
// point-to-point wins above (at 64 MiB about 2x: it moves and reduces half
// the data per rank); allgather, broadcast and alltoall only move data, and
// MPI's own (single-copy CMA) are at least as fast as our ring at every size.
// RINGCC_MPI_ALGORITHM=native|ring overrides this; RINGCC_MPI_RING_BYTES
// moves the allreduce / reduce-scatter crossover (default 4 MiB per rank).
int64_t MpiCollectives::ring_bytes_from_env() { return env_int("RINGCC_MPI_RING_BYTES", 4 << 20); }

size_t MpiCollectives::inline_bytes_from_env() {
  return static_cast<size_t>(std::clamp<int64_t>(env_int("RINGCC_MPI_INLINE_BYTES", 4096), 0, 1 << 20));
}

int MpiCollectives::algorithm_from_env() {
  const std::string algo = env_str("RINGCC_MPI_ALGORITHM", "auto");
  if (algo == "auto") return 0;
  if (algo == "native" || algo == "mpi") return 1;
  if (algo == "ring") return 2;
  raise(ErrorKind::kInvalidArgument, "RINGCC_MPI_ALGORITHM must be auto, native or ring, got '", algo, "'");
}

bool MpiCollectives::auto_prefers_native(CollectiveKind kind, int64_t bytes, int size) {
  (void)size;
  static const int64_t ring_bytes = ring_bytes_from_env();
  switch (kind) {
    case CollectiveKind::kAllreduce:
    case CollectiveKind::kReduceScatter:
      return bytes < ring_bytes;
    case CollectiveKind::kAllgather:
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kAlltoall:
      return true;
    default:
      return false;
  }
}

MpiCollectives::MpiCollectives(std::shared_ptr<MpiComm> comm, MpiTransport* transport)
    : comm_(std::move(comm)), transport_(transport), api_(mpi_api()), rank_(comm_->rank()), size_(comm_->size()) {
  inline_cap_ = inline_bytes_from_env();
  blob_cap_ = kPrefix + kHeader + 8 * static_cast<size_t>(size_) + inline_cap_;
  algorithm_ = algorithm_from_env();
  ps_.me = rank_;
  for (int r = 0; r < size_; ++r) {
    ps_.ranks.push_back(r);
    ps_.links.push_back(r == rank_ ? nullptr : transport_);
  }
  recv_blobs_.resize(blob_cap_ * static_cast<size_t>(size_));
  recv_bytes_.resize(static_cast<size_t>(size_));
}

MpiCollectives::~MpiCollectives() {
  {
    std::lock_guard<std::mutex> lock(wd_mu_);
    wd_stop_ = true;
  }
  wd_cv_.notify_all();
  if (wd_thread_.joinable()) wd_thread_.join();
}

bool MpiCollectives::exchange(CollectiveArgs& a, Deadline deadline) {
  const size_t n = static_cast<size_t>(size_);
  const size_t me = static_cast<size_t>(rank_);
  const bool alltoall = a.kind == CollectiveKind::kAlltoall;
  const int64_t pb = payload_bytes(a, rank_);
  const bool inline_mine =
      !a.agree_only && (a.kind == CollectiveKind::kBarrier || a.kind == CollectiveKind::kLocalError ||
                        (pb >= 0 && static_cast<size_t>(pb) <= inline_cap_));

  BlobPrefix prefix;
  prefix.inline_bytes = inline_mine ? std::max<int64_t>(pb, 0) : -1;
  const size_t fixed = kPrefix + kHeader + 8 * n;
  const size_t len = fixed + (inline_mine ? static_cast<size_t>(prefix.inline_bytes) : 0);
  send_blob_.resize(std::max(len, blob_cap_));
  uint8_t* s = send_blob_.data();
  std::memcpy(s, &prefix, kPrefix);
  const OpHeader h = make_header(a);
  std::memcpy(s + kPrefix, &h, kHeader);
  std::memset(s + kPrefix + kHeader, 0, 8 * n);
  if (alltoall && a.send_counts.size() == n) std::memcpy(s + kPrefix + kHeader, a.send_counts.data(), 8 * n);
  if (inline_mine && prefix.inline_bytes > 0) {
    std::memcpy(s + fixed, a.in, static_cast<size_t>(prefix.inline_bytes));
  }

  // Everyone sends its blob to everyone: one round.
  std::vector<rcmpi_req*> reqs;
  std::vector<int> recv_of;  // for receives: the peer; -1 for sends
  reqs.reserve(2 * n);
  auto post_failed = [&](int rc, const char* what) {
    for (rcmpi_req* r : reqs) api_.cancel(r);
    mpi_check(rc, what);
  };
  for (size_t i = 1; i < n; ++i) {
    const int from = static_cast<int>((me + n - i) % n);
    rcmpi_req* r = nullptr;
    int rc = api_.irecv(comm_->get(), recv_blobs_.data() + blob_cap_ * static_cast<size_t>(from),
                        static_cast<int64_t>(blob_cap_), from, MpiTransport::kHeaderTag, &r);
    if (rc != 0) post_failed(rc, "MPI_Irecv");
    reqs.push_back(r);
    recv_of.push_back(from);
  }
  for (size_t i = 1; i < n; ++i) {
    const int to = static_cast<int>((me + i) % n);
    rcmpi_req* r = nullptr;
    int rc = api_.isend(comm_->get(), s, static_cast<int64_t>(len), to, MpiTransport::kHeaderTag, &r);
    if (rc != 0) post_failed(rc, "MPI_Isend");
    reqs.push_back(r);
    recv_of.push_back(-1);
  }
  MpiPause pause;
  size_t left = reqs.size();
  for (int spin = 0; left > 0; ++spin) {
    bool advanced = false;
    for (size_t k = 0; k < reqs.size(); ++k) {
      if (!reqs[k]) continue;
      int done = 0;
      int64_t got = 0;
      int rc = api_.test(reqs[k], &done, &got);
      if (rc != 0) {
        reqs[k] = nullptr;
        post_failed(rc, "the header exchange");
      }
      if (done) {
        if (recv_of[k] >= 0) recv_bytes_[static_cast<size_t>(recv_of[k])] = static_cast<size_t>(got);
        reqs[k] = nullptr;
        --left;
        advanced = true;
      }
    }
    if (left == 0) break;
    if (advanced) continue;
    if (Clock::now() >= deadline) {
      std::string waiting;
      for (size_t k = 0; k < reqs.size(); ++k) {
        if (!reqs[k]) continue;
        if (recv_of[k] >= 0) waiting += (waiting.empty() ? "" : ", ") + std::to_string(recv_of[k]);
        api_.cancel(reqs[k]);
        reqs[k] = nullptr;
      }
      raise(ErrorKind::kTimeout, "timed out after ", collective_timeout_seconds(), " s in ", collective_name(a.kind),
            " waiting for rank(s) ", waiting.empty() ? std::string("?") : waiting, " over MPI (",
            collective_timeout_variable(), " sets the limit)");
    }
    if (spin % 64 == 63) transport_->check_failed();
    pause();
  }
  // A peer that gave up (timeout, abort) may have left its header of that
  // collective behind: its abort notice outranks whatever the headers say.
  if (n > 1) transport_->check_failed();
  recv_bytes_[me] = len;
  std::memcpy(recv_blobs_.data() + blob_cap_ * me, s, std::min(len, blob_cap_));

  std::vector<OpHeader> headers(n);
  std::vector<int64_t> counts;
  if (alltoall) counts.resize(n * n);
  bool all_inline = true;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* b = i == me ? s : recv_blobs_.data() + blob_cap_ * i;
    BlobPrefix p;
    std::memcpy(&p, b, kPrefix);
    if (p.magic != kBlobMagic || recv_bytes_[i] < fixed) {
      raise(ErrorKind::kInternal, "corrupt collective header from rank ", i, " over MPI");
    }
    std::memcpy(&headers[i], b + kPrefix, kHeader);
    if (alltoall) std::memcpy(&counts[i * n], b + kPrefix + kHeader, 8 * n);
    all_inline = all_inline && p.inline_bytes >= 0;
  }
  check_agreement(headers, ps_.ranks, counts, rank_);
  a.recv_counts.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    a.recv_counts[i] = alltoall ? counts[i * n + me] : headers[i].count;
  }
  if (a.agree_only && alltoall) a.alltoall_counts = counts;
  if (!all_inline) return false;
  if (alltoall) alltoall_counts_ = std::move(counts);  // every sender's counts, for finish_inline
  return true;
}

void MpiCollectives::finish_inline(CollectiveArgs& a) {
  const size_t n = static_cast<size_t>(size_);
  const size_t me = static_cast<size_t>(rank_);
  const size_t es = dtype_size(a.dtype);
  const size_t fixed = kPrefix + kHeader + 8 * n;
  auto payload = [&](size_t i) -> const uint8_t* {
    return (i == me ? send_blob_.data() : recv_blobs_.data() + blob_cap_ * i) + fixed;
  };
  switch (a.kind) {
    case CollectiveKind::kAllreduce:
    case CollectiveKind::kReduceScatter: {
      int64_t lo = 0, cnt = a.count;
      if (a.kind == CollectiveKind::kReduceScatter) {
        const int64_t rows = a.row_elems > 0 ? a.count / a.row_elems : 0;
        lo = block_first_row(rows, size_, rank_) * a.row_elems;
        cnt = block_rows(rows, size_, rank_) * a.row_elems;
      }
      a.result_count = cnt;
      if (cnt == 0) return;
      std::vector<const void*> srcs(n);
      std::vector<uint8_t> scaled;
      if (a.prescale != 1.0) {
        scaled.resize(n * static_cast<size_t>(cnt) * es);
        for (size_t i = 0; i < n; ++i) {
          uint8_t* dst = scaled.data() + i * static_cast<size_t>(cnt) * es;
          scale_copy(dst, payload(i) + static_cast<size_t>(lo) * es, cnt, a.dtype, a.prescale);
          srcs[i] = dst;
        }
      } else {
        for (size_t i = 0; i < n; ++i) srcs[i] = payload(i) + static_cast<size_t>(lo) * es;
      }
      reduce_many(a.out, srcs.data(), static_cast<int>(n), cnt, a.dtype, a.op);
      if (a.postscale != 1.0) scale_inplace(a.out, cnt, a.dtype, a.postscale);
      return;
    }
    case CollectiveKind::kAllgather: {
      int64_t total = 0;
      for (size_t i = 0; i < n; ++i) total += a.recv_counts[i];
      a.result_count = total;
      auto* out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(total));
      a.out = out;
      size_t off = 0;
      for (size_t i = 0; i < n; ++i) {
        const size_t b = static_cast<size_t>(a.recv_counts[i]) * es;
        if (b) std::memcpy(out + off, payload(i), b);
        off += b;
      }
      return;
    }
    case CollectiveKind::kBroadcast: {
      a.result_count = a.count;
      const size_t b = static_cast<size_t>(a.count) * es;
      if (b) std::memcpy(a.out, payload(static_cast<size_t>(a.root)), b);
      return;
    }
    case CollectiveKind::kAlltoall: {
      const int64_t* counts = alltoall_counts_.data();
      int64_t total = 0;
      for (size_t i = 0; i < n; ++i) total += a.recv_counts[i];
      a.result_count = total;
      auto* out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(total));
      a.out = out;
      size_t off = 0;
      for (size_t i = 0; i < n; ++i) {
        int64_t start = 0;
        for (size_t j = 0; j < me; ++j) start += counts[i * n + j];
        const size_t b = static_cast<size_t>(a.recv_counts[i]) * es;
        if (b) std::memcpy(out + off, payload(i) + static_cast<size_t>(start) * es, b);
        off += b;
      }
      return;
    }
    default:
      return;
  }
}

bool MpiCollectives::native_wanted(const CollectiveArgs& a) const {
  if (algorithm_ == 2) return false;
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  // MPI counts are ints: larger collectives always take ringcc's algorithms.
  int64_t total = a.count * es;
  for (int64_t c : a.recv_counts) total = std::max(total, c * es);
  if (a.kind == CollectiveKind::kAllgather || a.kind == CollectiveKind::kAlltoall) {
    total = 0;
    for (int64_t c : a.recv_counts) total += c * es;
    total = std::max(total, a.count * es);
  }
  if (total > INT_MAX) return false;
  if (a.kind == CollectiveKind::kAllreduce || a.kind == CollectiveKind::kReduceScatter) {
    if (!api_.supports(static_cast<int>(a.dtype), static_cast<int>(a.op))) return false;  // 16-bit floats
  }
  if (algorithm_ == 1) return true;
  return auto_prefers_native(a.kind, a.count * es, size_);
}

void MpiCollectives::arm(Deadline deadline, const char* what) {
  std::lock_guard<std::mutex> lock(wd_mu_);
  if (!wd_thread_.joinable()) wd_thread_ = std::thread([this] {
      name_this_thread("ringcc-mpi-wait");
      watchdog_loop();
    });
  wd_armed_ = true;
  wd_deadline_ = deadline;
  wd_what_ = what;
  // A watchdog that waits for an earlier deadline finds the new one when
  // that passes; only an idle one needs waking (a wake-up per collective
  // would cost a thread switch each time).
  if (wd_idle_) wd_cv_.notify_all();
}

void MpiCollectives::disarm() {
  std::lock_guard<std::mutex> lock(wd_mu_);
  wd_armed_ = false;
}

void MpiCollectives::watchdog_loop() {
  std::unique_lock<std::mutex> lock(wd_mu_);
  while (!wd_stop_) {
    if (!wd_armed_) {
      wd_idle_ = true;
      wd_cv_.wait(lock);
      wd_idle_ = false;
      continue;
    }
    const Deadline d = wd_deadline_;
    if (wd_cv_.wait_until(lock, d) == std::cv_status::timeout && wd_armed_ && wd_deadline_ == d && !wd_stop_) {
      const std::string message = std::string("MPI's own ") + wd_what_ + " did not finish within " +
                                  std::to_string(collective_timeout_seconds()) + " s (" +
                                  collective_timeout_variable() + "); it cannot be interrupted, so ringcc ends "
                                  "the MPI job (MPI_Abort)";
      RINGCC_LOG(kError, message);
      api_.abort(comm_->get(), 124);
    }
  }
}

void MpiCollectives::run_native(CollectiveArgs& a, RingScratch& scratch, Deadline deadline) {
  const size_t n = static_cast<size_t>(size_);
  const size_t es = dtype_size(a.dtype);
  const char* what = collective_name(a.kind);
  arm(deadline, what);
  struct Disarm {
    MpiCollectives* self;
    ~Disarm() { self->disarm(); }
  } guard{this};
  switch (a.kind) {
    case CollectiveKind::kAllreduce: {
      a.result_count = a.count;
      const void* in = a.in;
      if (a.prescale != 1.0) {
        scale_copy(a.out, a.in, a.count, a.dtype, a.prescale);
        in = a.out;
      }
      mpi_check(api_.allreduce(comm_->get(), in, a.out, a.count, static_cast<int>(a.dtype), static_cast<int>(a.op)),
                "MPI_Allreduce");
      if (a.postscale != 1.0) scale_inplace(a.out, a.count, a.dtype, a.postscale);
      return;
    }
    case CollectiveKind::kReduceScatter: {
      const int64_t rows = a.row_elems > 0 ? a.count / a.row_elems : 0;
      std::vector<int64_t> counts(n);
      for (size_t r = 0; r < n; ++r) counts[r] = block_rows(rows, size_, static_cast<int>(r)) * a.row_elems;
      a.result_count = counts[static_cast<size_t>(rank_)];
      const void* in = a.in;
      if (a.prescale != 1.0) {
        uint8_t* work = scratch.get(scratch.work, static_cast<size_t>(a.count) * es);
        scale_copy(work, a.in, a.count, a.dtype, a.prescale);
        in = work;
      }
      mpi_check(api_.reduce_scatter(comm_->get(), in, a.out, counts.data(), static_cast<int>(a.dtype),
                                    static_cast<int>(a.op)),
                "MPI_Reduce_scatter");
      if (a.postscale != 1.0 && a.result_count > 0) scale_inplace(a.out, a.result_count, a.dtype, a.postscale);
      return;
    }
    case CollectiveKind::kAllgather: {
      std::vector<int64_t> bytes(n), displs(n);
      int64_t total = 0;
      for (size_t r = 0; r < n; ++r) {
        displs[r] = total * static_cast<int64_t>(es);
        bytes[r] = a.recv_counts[r] * static_cast<int64_t>(es);
        total += a.recv_counts[r];
      }
      a.result_count = total;
      auto* out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(total));
      a.out = out;
      mpi_check(
          api_.allgatherv(comm_->get(), a.in, a.count * static_cast<int64_t>(es), out, bytes.data(), displs.data()),
          "MPI_Allgatherv");
      return;
    }
    case CollectiveKind::kBroadcast: {
      a.result_count = a.count;
      const size_t b = static_cast<size_t>(a.count) * es;
      if (a.root == rank_ && a.out != a.in && b) std::memcpy(a.out, a.in, b);
      mpi_check(api_.bcast(comm_->get(), a.out, static_cast<int64_t>(b), a.root), "MPI_Bcast");
      return;
    }
    case CollectiveKind::kAlltoall: {
      std::vector<int64_t> sc(n), sd(n), rc(n), rd(n);
      int64_t so = 0, ro = 0;
      for (size_t r = 0; r < n; ++r) {
        sc[r] = a.send_counts[r] * static_cast<int64_t>(es);
        sd[r] = so;
        so += sc[r];
        rc[r] = a.recv_counts[r] * static_cast<int64_t>(es);
        rd[r] = ro;
        ro += rc[r];
      }
      int64_t total = 0;
      for (int64_t c : a.recv_counts) total += c;
      a.result_count = total;
      auto* out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(total));
      a.out = out;
      mpi_check(api_.alltoallv(comm_->get(), a.in, sc.data(), sd.data(), out, rc.data(), rd.data()), "MPI_Alltoallv");
      return;
    }
    default:
      return;
  }
}

void MpiCollectives::run(CollectiveArgs& a, RingScratch& scratch, Deadline deadline) {
  if (a.agree_only) {  // a device collective: its data moves on the device
    exchange(a, deadline);
    return;
  }
  if (exchange(a, deadline)) {
    finish_inline(a);
    return;
  }
  if (native_wanted(a)) {
    run_native(a, scratch, deadline);
    return;
  }
  switch (a.kind) {
    case CollectiveKind::kAllreduce:
      return ring_allreduce(ps_, a, scratch, deadline);
    case CollectiveKind::kReduceScatter:
      return ring_reduce_scatter(ps_, a, scratch, deadline);
    case CollectiveKind::kAllgather:
      return ring_allgather(ps_, a, deadline);
    case CollectiveKind::kBroadcast:
      return chain_broadcast(ps_, a, deadline);
    case CollectiveKind::kAlltoall:
      return pairwise_alltoall(ps_, a, deadline);
    default:
      return;
  }
}

}  // namespace ringcc
