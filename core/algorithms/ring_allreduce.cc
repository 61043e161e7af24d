// Ring allreduce: a reduce-scatter (n-1 steps; each step sends one segment
// to the right neighbour and reduces the segment arriving from the left,
// chunk by chunk so reduction overlaps the transfer of the next chunk, a
// segment shorter than a chunk cut in several too),
// then an allgather of the reduced segments (n-1 steps). The segment the
// last reduce-scatter step completes is the one the allgather's first step
// sends: each of its chunks goes out as soon as it is reduced, while it is
// still in cache, so the two phases run as one pipeline (transports carry
// byte streams, so the receiver takes the segment in one piece).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/algorithms/ring_algorithms.h"
#include "core/collective/reduction.h"

namespace ringcc {

namespace {

// Chunks of reduced data sent on to the right neighbour as they are done.
struct Forward {
  Transport* to = nullptr;
  int rank = -1;
  std::vector<std::unique_ptr<Request>> sends;
  size_t first_pending = 0;  // sends before it have completed

  // The sends still to progress: the oldest pending and the newest (sends
  // on one link complete in order, and progressing one moves the link).
  void add_pending(std::vector<Request*>* out) {
    while (first_pending < sends.size() && sends[first_pending]->progress()) ++first_pending;
    if (first_pending < sends.size()) out->push_back(sends[first_pending].get());
    if (sends.size() > first_pending + 1) out->push_back(sends.back().get());
  }
};

// Receives `len` elements from `from` in chunks and reduces each into dst,
// while `also` (our own send) keeps progressing. With `forward`, each
// reduced chunk is sent on at once.
void recv_reduce(Transport* t, int from, uint8_t* dst, const uint8_t* src, int64_t len, const CollectiveArgs& a,
                 uint8_t* staging, int64_t chunk_elems, Request* also, Deadline deadline, Forward* forward,
                 const char* what) {
  const size_t es = dtype_size(a.dtype);
  const int64_t nchunks = (len + chunk_elems - 1) / chunk_elems;
  std::unique_ptr<Request> pending[2];
  auto post = [&](int64_t k) {
    const int64_t off = k * chunk_elems, m = std::min(chunk_elems, len - off);
    pending[k % 2] = t->irecv(from, staging + static_cast<size_t>(k % 2) * static_cast<size_t>(chunk_elems) * es,
                              static_cast<size_t>(m) * es);
  };
  if (nchunks > 0) post(0);
  for (int64_t k = 0; k < nchunks; ++k) {
    if (k + 1 < nchunks) post(k + 1);
    std::vector<Request*> others;
    if (also) others.push_back(also);
    if (k + 1 < nchunks) others.push_back(pending[(k + 1) % 2].get());
    if (forward) forward->add_pending(&others);
    wait_one(pending[k % 2].get(), others, deadline, what);
    const int64_t off = k * chunk_elems, m = std::min(chunk_elems, len - off);
    uint8_t* reduced = dst + static_cast<size_t>(off) * es;
    const uint8_t* arrived = staging + static_cast<size_t>(k % 2) * static_cast<size_t>(chunk_elems) * es;
    if (src && src != dst) {
      const void* both[2] = {src + static_cast<size_t>(off) * es, arrived};
      reduce_many(reduced, both, 2, m, a.dtype, a.op);
    } else {
      reduce_inplace(reduced, arrived, m, a.dtype, a.op);
    }
    if (forward) {
      forward->sends.push_back(forward->to->isend(forward->rank, reduced, static_cast<size_t>(m) * es));
    }
  }
}

}  // namespace

void ring_recv_reduce(Transport* t, int from, uint8_t* dst, const uint8_t* src, int64_t len, const CollectiveArgs& a,
                      uint8_t* staging, int64_t chunk_elems, Request* also, Deadline deadline, const char* what) {
  recv_reduce(t, from, dst, src, len, a, staging, chunk_elems, also, deadline, nullptr, what);
}

void ring_allreduce(const PeerSet& ps, CollectiveArgs& a, RingScratch& scratch, Deadline deadline,
                    const RingSegments* placed) {
  const int n = ps.size();
  const size_t es = dtype_size(a.dtype);
  auto* buf = static_cast<uint8_t*>(a.out);
  if (placed == nullptr) {
    if (a.prescale != 1.0) {
      scale_copy(buf, a.in, a.count, a.dtype, a.prescale);
    } else if (a.in != a.out && a.count > 0) {
      std::memcpy(buf, a.in, static_cast<size_t>(a.count) * es);
    }
  }
  a.result_count = a.count;
  if (n > 1 && a.count > 0) {
    auto lo = [&](int j) { return placed ? placed->offset[static_cast<size_t>(j)] : a.count * j / n; };
    auto len = [&](int j) {
      return placed ? placed->length[static_cast<size_t>(j)] : a.count * (j + 1) / n - a.count * j / n;
    };
    auto at = [&](int j) { return buf + static_cast<size_t>(lo(j)) * es; };
    auto bytes = [&](int j) { return static_cast<size_t>(len(j)) * es; };
    auto ready = [&](int j) {
      if (placed && placed->ready) placed->ready(j);
    };
    auto done = [&](int j) {
      if (placed && placed->done) placed->done(j);
    };
    int64_t longest = 0;
    for (int j = 0; j < n; ++j) longest = std::max(longest, len(j));
    const int64_t chunk_elems = pipeline_chunk_elems(longest, es);
    uint8_t* staging = scratch.get(scratch.chunks, 2 * static_cast<size_t>(chunk_elems) * es);
    uint64_t total = 0;  // the same on every rank of the ring
    for (int j = 0; j < n; ++j) total += bytes(j);
    Transport* right = one_way_for(ps.links[static_cast<size_t>(ps.right())], total);
    Transport* left = one_way_for(ps.links[static_cast<size_t>(ps.left())], total);
    const int right_rank = ps.ranks[static_cast<size_t>(ps.right())];
    const int left_rank = ps.ranks[static_cast<size_t>(ps.left())];

    Forward forward;  // the allgather's first sends
    forward.to = right;
    forward.rank = right_rank;
    for (int s = 0; s < n - 1; ++s) {  // reduce-scatter
      const int sseg = (ps.me - s + n) % n, rseg = (ps.me - s - 1 + n) % n;
      if (s == 0) ready(sseg);  // later steps send what the step before reduced
      ready(rseg);
      auto sreq = right->isend(right_rank, at(sseg), bytes(sseg));
      recv_reduce(left, left_rank, at(rseg), nullptr, len(rseg), a, staging, chunk_elems, sreq.get(), deadline,
                  s == n - 2 ? &forward : nullptr, "allreduce");
      wait_all({sreq.get()}, deadline, "allreduce");
    }
    {  // allgather, first step: its segment went out chunk by chunk above
      const int rseg = ps.me;
      auto rreq = left->irecv(left_rank, at(rseg), bytes(rseg));
      std::vector<Request*> all{rreq.get()};
      for (size_t i = forward.first_pending; i < forward.sends.size(); ++i) {
        all.push_back(forward.sends[i].get());
      }
      wait_all(all, deadline, "allreduce");
      done((ps.me + 1) % n);
    }
    for (int s = 1; s < n - 1; ++s) {  // allgather, the other steps
      const int sseg = (ps.me + 1 - s + n) % n, rseg = (ps.me - s + n) % n;
      auto sreq = right->isend(right_rank, at(sseg), bytes(sseg));
      auto rreq = left->irecv(left_rank, at(rseg), bytes(rseg));
      wait_all({sreq.get(), rreq.get()}, deadline, "allreduce");
      done(sseg);  // received the step before, forwarded now
    }
    done((ps.me + 2) % n);  // the last one received
  }
  if (placed == nullptr && a.postscale != 1.0) scale_inplace(buf, a.count, a.dtype, a.postscale);
}

}  // namespace ringcc
