// Ring reduce-scatter with uneven blocks: the reduce-scatter half of the
// ring allreduce, rotated so that rank r ends up owning block r (the rows
// block_first_row/block_rows give it), or segment r where the caller
// placed the segments. Each arriving block is reduced chunk by chunk while
// the next chunk arrives, as in the allreduce.
#include <algorithm>

#include "core/algorithms/ring_algorithms.h"
#include "core/collective/reduction.h"

namespace ringcc {

void ring_reduce_scatter(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline,
                         const RingSegments* placed) {
  const int n = ps.size();
  const size_t es = dtype_size(a.dtype);
  const int64_t rows = a.row_elems > 0 ? a.count / a.row_elems : 0;
  auto lo = [&](int j) {
    return placed ? placed->offset[static_cast<size_t>(j)] : block_first_row(rows, n, j) * a.row_elems;
  };
  auto len = [&](int j) {
    return placed ? placed->length[static_cast<size_t>(j)] : block_rows(rows, n, j) * a.row_elems;
  };
  a.result_count = len(ps.me);
  auto* out = static_cast<uint8_t*>(a.out);

  // The input is read where it lies: the first block sent is the input's,
  // and each arriving block is reduced with the input's copy of it into
  // work or, the last one (this rank's), into the output, which lies apart
  // from the input (run_output_apart). A prescale takes a scaled copy of
  // the input first. With placed segments everything happens in a.out.
  uint8_t* work = out;
  const uint8_t* base = out;
  if (placed == nullptr) {
    work = scratch.get(scratch.work, static_cast<size_t>(a.count) * es);
    base = static_cast<const uint8_t*>(a.in);
    if (a.prescale != 1.0) {
      if (a.count > 0) scale_copy(work, a.in, a.count, a.dtype, a.prescale);
      base = work;
    }
  }
  auto at = [&](const uint8_t* p, int j) { return p + static_cast<size_t>(lo(j)) * es; };

  int64_t longest = 0;
  for (int j = 0; j < n; ++j) longest = std::max(longest, len(j));
  const int64_t chunk_elems = pipeline_chunk_elems(longest, es);
  uint8_t* staging = scratch.get(scratch.chunks, 2 * static_cast<size_t>(chunk_elems) * es);
  uint64_t total = 0;  // the same on every rank of the ring
  for (int j = 0; j < n; ++j) total += static_cast<uint64_t>(len(j)) * es;
  Transport* right = one_way_for(ps.links[static_cast<size_t>(ps.right())], total);
  Transport* left = one_way_for(ps.links[static_cast<size_t>(ps.left())], total);
  const int right_rank = ps.ranks[static_cast<size_t>(ps.right())];
  const int left_rank = ps.ranks[static_cast<size_t>(ps.left())];
  auto ready = [&](int j) {
    if (placed && placed->ready) placed->ready(j);
  };
  for (int s = 0; s < n - 1; ++s) {
    const int sseg = (ps.me - s - 1 + 2 * n) % n, rseg = (ps.me - s - 2 + 2 * n) % n;
    if (s == 0) ready(sseg);  // later steps send what the step before reduced
    ready(rseg);
    auto sreq = right->isend(right_rank, at(s == 0 ? base : work, sseg), static_cast<size_t>(len(sseg)) * es);
    uint8_t* dst = placed == nullptr && s == n - 2 ? out : work + static_cast<size_t>(lo(rseg)) * es;
    ring_recv_reduce(left, left_rank, dst, at(base, rseg), len(rseg), a, staging, chunk_elems, sreq.get(), deadline,
                     "reduce_scatter");
    wait_all({sreq.get()}, deadline, "reduce_scatter");
  }
  if (placed || a.result_count == 0) return;
  if (n == 1) {
    scale_copy(out, at(base, ps.me), a.result_count, a.dtype, a.postscale);
  } else if (a.postscale != 1.0) {
    scale_inplace(out, a.result_count, a.dtype, a.postscale);
  }
}

}  // namespace ringcc
