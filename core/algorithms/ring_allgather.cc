// Ring allgather where every rank may contribute a different number of
// elements (known to all from the header exchange): n-1 steps, each passing
// one rank's block to the right, received straight into the output, or
// straight where the caller placed each block.
#include <cstring>

#include "core/algorithms/ring_algorithms.h"

namespace ringcc {

void ring_allgather(const PeerSet& ps, CollectiveArgs& a, Deadline deadline, uint8_t* const* places) {
  const int n = ps.size();
  const size_t es = dtype_size(a.dtype);
  std::vector<int64_t> displ(static_cast<size_t>(n) + 1, 0);
  for (int r = 0; r < n; ++r) {
    displ[static_cast<size_t>(r) + 1] = displ[static_cast<size_t>(r)] + a.recv_counts[static_cast<size_t>(r)];
  }
  a.result_count = displ.back();
  uint8_t* out = nullptr;
  if (places == nullptr) {
    out = static_cast<uint8_t*>(a.out_count >= 0 ? a.out : a.allocate(a.result_count));
    a.out = out;
  }
  auto block = [&](int r) {
    return places ? places[r] : out + static_cast<size_t>(displ[static_cast<size_t>(r)]) * es;
  };
  auto bytes = [&](int r) { return static_cast<size_t>(a.recv_counts[static_cast<size_t>(r)]) * es; };
  if (bytes(ps.me) > 0 && block(ps.me) != a.in) std::memcpy(block(ps.me), a.in, bytes(ps.me));

  const uint64_t total = static_cast<uint64_t>(a.result_count) * es;  // the same on every rank
  Transport* right = one_way_for(ps.links[static_cast<size_t>(ps.right())], total);
  Transport* left = one_way_for(ps.links[static_cast<size_t>(ps.left())], total);
  for (int s = 0; s < n - 1; ++s) {
    const int sb = (ps.me - s + n) % n, rb = (ps.me - s - 1 + n) % n;
    auto sreq = right->isend(ps.ranks[static_cast<size_t>(ps.right())], block(sb), bytes(sb));
    auto rreq = left->irecv(ps.ranks[static_cast<size_t>(ps.left())], block(rb), bytes(rb));
    wait_all({sreq.get(), rreq.get()}, deadline, "allgather");
  }
}

}  // namespace ringcc
