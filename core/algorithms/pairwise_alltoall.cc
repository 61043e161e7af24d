// Alltoall with per-rank counts: in step s every rank sends to rank me+s and
// receives from rank me-s at the same time, so each link carries one
// message per direction per step.
#include <cstring>

#include "core/algorithms/ring_algorithms.h"

namespace ringcc {

void pairwise_alltoall(const PeerSet& ps, CollectiveArgs& a, Deadline deadline) {
  const int n = ps.size();
  const size_t es = dtype_size(a.dtype);
  std::vector<int64_t> sdispl(static_cast<size_t>(n) + 1, 0), rdispl(static_cast<size_t>(n) + 1, 0);
  for (int r = 0; r < n; ++r) {
    sdispl[static_cast<size_t>(r) + 1] = sdispl[static_cast<size_t>(r)] + a.send_counts[static_cast<size_t>(r)];
    rdispl[static_cast<size_t>(r) + 1] = rdispl[static_cast<size_t>(r)] + a.recv_counts[static_cast<size_t>(r)];
  }
  a.result_count = rdispl.back();
  auto* out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(a.result_count));
  a.out = out;
  const auto* in = static_cast<const uint8_t*>(a.in);
  const size_t me = static_cast<size_t>(ps.me);
  if (a.send_counts[me] > 0) {
    std::memmove(out + static_cast<size_t>(rdispl[me]) * es, in + static_cast<size_t>(sdispl[me]) * es,
                 static_cast<size_t>(a.send_counts[me]) * es);
  }
  for (int s = 1; s < n; ++s) {
    const size_t to = static_cast<size_t>((ps.me + s) % n);
    const size_t from = static_cast<size_t>((ps.me - s + n) % n);
    // Each message on the stream its size picks: both ends know it.
    const size_t send_bytes = static_cast<size_t>(a.send_counts[to]) * es;
    const size_t recv_bytes = static_cast<size_t>(a.recv_counts[from]) * es;
    auto sreq = one_way_for(ps.links[to], send_bytes)
                    ->isend(ps.ranks[to], in + static_cast<size_t>(sdispl[to]) * es, send_bytes);
    auto rreq = one_way_for(ps.links[from], recv_bytes)
                    ->irecv(ps.ranks[from], out + static_cast<size_t>(rdispl[from]) * es, recv_bytes);
    wait_all({sreq.get(), rreq.get()}, deadline, "alltoall");
  }
}

}  // namespace ringcc
