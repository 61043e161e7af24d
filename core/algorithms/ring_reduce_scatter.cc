// Ring reduce-scatter with uneven blocks: the reduce-scatter half of the
// ring allreduce, rotated so that rank r ends up owning block r (the rows
// block_first_row/block_rows give it), or segment r where the caller
// placed the segments.
#include <algorithm>
#include <cstring>

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

  uint8_t* work = static_cast<uint8_t*>(a.out);
  if (placed == nullptr) {
    work = scratch.get(scratch.work, static_cast<size_t>(a.count) * es);
    if (a.count > 0) scale_copy(work, a.in, a.count, a.dtype, a.prescale);
  }

  const int64_t chunk_elems = std::max<int64_t>(1, static_cast<int64_t>(ring_chunk_bytes() / es));
  uint8_t* staging = scratch.get(scratch.chunks, static_cast<size_t>(chunk_elems) * es);
  Transport* right = ps.links[static_cast<size_t>(ps.right())];
  Transport* left = ps.links[static_cast<size_t>(ps.left())];
  const int right_rank = ps.ranks[static_cast<size_t>(ps.right())];
  const int left_rank = ps.ranks[static_cast<size_t>(ps.left())];
  for (int s = 0; s < n - 1; ++s) {
    const int sseg = (ps.me - s - 1 + 2 * n) % n, rseg = (ps.me - s - 2 + 2 * n) % n;
    auto sreq =
        right->isend(right_rank, work + static_cast<size_t>(lo(sseg)) * es, static_cast<size_t>(len(sseg)) * es);
    for (int64_t off = 0; off < len(rseg); off += chunk_elems) {
      const int64_t m = std::min(chunk_elems, len(rseg) - off);
      auto rreq = left->irecv(left_rank, staging, static_cast<size_t>(m) * es);
      wait_one(rreq.get(), {sreq.get()}, deadline, "reduce_scatter");
      reduce_inplace(work + static_cast<size_t>(lo(rseg) + off) * es, staging, m, a.dtype, a.op);
    }
    wait_all({sreq.get()}, deadline, "reduce_scatter");
  }
  if (placed) return;
  auto* out = static_cast<uint8_t*>(a.out);
  if (a.result_count > 0) {
    scale_copy(out, work + static_cast<size_t>(lo(ps.me)) * es, a.result_count, a.dtype, a.postscale);
  }
}

}  // namespace ringcc
