// The header exchange that opens every collective over a transport: a ring
// allgather of fixed-size blobs (a header plus, for alltoall, the per-rank
// counts). It doubles as the barrier.
#include <cstring>

#include "core/algorithms/ring_algorithms.h"
#include "core/base/error.h"

namespace ringcc {

void ring_exchange_headers(const PeerSet& ps, CollectiveArgs& a, Deadline deadline) {
  const int n = ps.size();
  const size_t nn = static_cast<size_t>(n);
  const size_t blob = sizeof(OpHeader) + 8 * nn;
  std::vector<uint8_t> all(blob * nn, 0);

  const OpHeader h = make_header(a);
  uint8_t* mine = all.data() + blob * static_cast<size_t>(ps.me);
  std::memcpy(mine, &h, sizeof(h));
  const bool alltoall = a.kind == CollectiveKind::kAlltoall;
  if (alltoall) std::memcpy(mine + sizeof(OpHeader), a.send_counts.data(), 8 * nn);

  Transport* right = ps.links[static_cast<size_t>(ps.right())];
  Transport* left = ps.links[static_cast<size_t>(ps.left())];
  for (int s = 0; s < n - 1; ++s) {
    const int send_block = (ps.me - s + n) % n;
    const int recv_block = (ps.me - s - 1 + n) % n;
    auto sreq = right->isend(ps.ranks[static_cast<size_t>(ps.right())],
                             all.data() + blob * static_cast<size_t>(send_block), blob);
    auto rreq = left->irecv(ps.ranks[static_cast<size_t>(ps.left())],
                            all.data() + blob * static_cast<size_t>(recv_block), blob);
    wait_all({sreq.get(), rreq.get()}, deadline, collective_name(a.kind));
  }

  std::vector<OpHeader> headers(nn);
  std::vector<int64_t> counts;
  if (alltoall) counts.resize(nn * nn);
  for (size_t i = 0; i < nn; ++i) {
    std::memcpy(&headers[i], all.data() + blob * i, sizeof(OpHeader));
    if (alltoall) std::memcpy(&counts[i * nn], all.data() + blob * i + sizeof(OpHeader), 8 * nn);
  }
  check_agreement(headers, ps.ranks, counts, ps.me);
  a.recv_counts.assign(nn, 0);
  for (size_t i = 0; i < nn; ++i) {
    a.recv_counts[i] = alltoall ? counts[i * nn + static_cast<size_t>(ps.me)] : headers[i].count;
  }
  if (a.agree_only && alltoall) a.alltoall_counts = std::move(counts);
}

}  // namespace ringcc
