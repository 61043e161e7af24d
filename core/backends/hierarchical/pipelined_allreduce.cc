#include "core/backends/hierarchical/phase_helper.h"
#include "core/backends/hierarchical/pipelined_phases.h"
#include "core/collective/reduction.h"

namespace ringcc {

namespace {

CollectiveArgs piece_args(CollectiveKind kind, const CollectiveArgs& a, const void* in, int64_t count, void* out,
                          int64_t out_count) {
  CollectiveArgs p;
  p.kind = kind;
  p.dtype = a.dtype;
  p.op = a.op;
  p.in = in;
  p.count = count;
  p.out = out;
  p.out_count = out_count;
  return p;
}

}  // namespace

void pipelined_hierarchical_allreduce(const PeerSet& cross, ShmCollectives& local, int local_rank, CollectiveArgs& a,
                                      RingScratch& scratch, Deadline deadline) {
  const int hosts = cross.size(), me = cross.me, per_host = local.size();
  const size_t es = dtype_size(a.dtype);
  const auto* in = static_cast<const uint8_t*>(a.in);
  auto* out = static_cast<uint8_t*>(a.out);
  auto piece_lo = [&](int j) { return a.count * j / hosts; };
  auto piece_len = [&](int j) { return piece_lo(j + 1) - piece_lo(j); };

  RingSegments segs;
  for (int j = 0; j < hosts; ++j) {
    segs.offset.push_back(piece_lo(j) + block_first_row(piece_len(j), per_host, local_rank));
    segs.length.push_back(block_rows(piece_len(j), per_host, local_rank));
  }
  // The ring reads its segments from position me downwards and finishes
  // them from me + 1 downwards; the helper follows the same orders.
  auto reduce_order = [&](int k) { return (me - k + hosts) % hosts; };
  auto finish_order = [&](int k) { return (me + 1 - k + hosts) % hosts; };
  auto seg = [&](int j) { return out + static_cast<size_t>(segs.offset[static_cast<size_t>(j)]) * es; };

  PhaseHelper h(local, "allreduce", hosts, deadline);
  auto helper_body = [&] {
    for (int k = 0; k < hosts; ++k) {
      const int j = reduce_order(k);
      CollectiveArgs rs = piece_args(CollectiveKind::kReduceScatter, a, in + static_cast<size_t>(piece_lo(j)) * es,
                                     piece_len(j), seg(j), segs.length[static_cast<size_t>(j)]);
      rs.prescale = a.prescale;
      local.run(rs, deadline);
      h.reduced(k + 1);
    }
    for (int k = 0; k < hosts; ++k) {
      const int j = finish_order(k);
      if (!h.wait_finished(j)) return;
      if (a.postscale != 1.0) scale_inplace(seg(j), segs.length[static_cast<size_t>(j)], a.dtype, a.postscale);
      CollectiveArgs ag = piece_args(CollectiveKind::kAllgather, a, seg(j), segs.length[static_cast<size_t>(j)],
                                     out + static_cast<size_t>(piece_lo(j)) * es, piece_len(j));
      local.run(ag, deadline);
    }
  };
  segs.ready = [&](int j) { h.wait_reduced((me - j + hosts) % hosts + 1); };  // its place in reduce_order, + 1
  segs.done = [&](int j) { h.finished(j); };
  CollectiveArgs ar = piece_args(CollectiveKind::kAllreduce, a, out, a.count, out, a.count);
  h.run(helper_body, [&] { ring_allreduce(cross, ar, scratch, deadline, &segs); });
  a.result_count = a.count;
}

}  // namespace ringcc
