// Pipelined broadcast along the ring starting at the root: every rank
// receives a chunk from its left neighbour and forwards it to its right one
// while the next chunk is arriving.
#include <algorithm>
#include <cstring>
#include <deque>

#include "core/algorithms/ring_algorithms.h"

namespace ringcc {

void chain_broadcast(const PeerSet& ps, CollectiveArgs& a, Deadline deadline) {
  const int n = ps.size();
  const size_t es = dtype_size(a.dtype);
  const size_t total = static_cast<size_t>(a.count) * es;
  auto* out = static_cast<uint8_t*>(a.out);
  a.result_count = a.count;
  const int root = static_cast<int>(std::find(ps.ranks.begin(), ps.ranks.end(), a.root) - ps.ranks.begin());
  const bool is_root = root == ps.me;
  const bool is_last = (root - 1 + n) % n == ps.me;
  if (is_root && out != a.in && total > 0) std::memcpy(out, a.in, total);
  if (n == 1 || total == 0) return;

  Transport* right = ps.links[static_cast<size_t>(ps.right())];
  Transport* left = ps.links[static_cast<size_t>(ps.left())];
  const int right_rank = ps.ranks[static_cast<size_t>(ps.right())];
  const int left_rank = ps.ranks[static_cast<size_t>(ps.left())];
  if (is_root) {
    auto sreq = right->isend(right_rank, out, total);
    wait_all({sreq.get()}, deadline, "broadcast");
    return;
  }
  // The root sends one message; we receive it chunk by chunk (a stream
  // transport matches bytes, so the split on our side is free) and forward.
  const size_t chunk = static_cast<size_t>(pipeline_chunk_elems(static_cast<int64_t>(total), 1));
  std::deque<std::unique_ptr<Request>> sends;
  std::unique_ptr<Request> next;
  auto post = [&](size_t off) { return left->irecv(left_rank, out + off, std::min(chunk, total - off)); };
  next = post(0);
  for (size_t off = 0; off < total; off += chunk) {
    auto cur = std::move(next);
    std::vector<Request*> others;
    if (off + chunk < total) {
      next = post(off + chunk);
      others.push_back(next.get());
    }
    for (auto& s : sends) others.push_back(s.get());
    wait_one(cur.get(), others, deadline, "broadcast");
    if (!is_last) sends.push_back(right->isend(right_rank, out + off, std::min(chunk, total - off)));
  }
  std::vector<Request*> pending;
  for (auto& s : sends) pending.push_back(s.get());
  wait_all(pending, deadline, "broadcast");
}

}  // namespace ringcc
