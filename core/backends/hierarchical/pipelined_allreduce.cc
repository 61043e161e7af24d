#include "core/backends/hierarchical/pipelined_allreduce.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/thread_name.h"
#include "core/collective/reduction.h"

namespace ringcc {

namespace {

// What the two threads tell each other: how many pieces the helper has
// reduce-scattered, which segments the ring has finished, and whether
// either side gave up.
struct Handoff {
  std::mutex mu;
  std::condition_variable cv;
  int reduced = 0;               // pieces reduce-scattered, in the ring's order
  std::vector<char> finished;    // by piece: the ring no longer touches it
  bool ring_gave_up = false;     // the helper stops waiting
  std::exception_ptr helper_error;

  // The calling thread waits for the helper, bounded by the deadline and
  // answering signals as every other wait of a collective does.
  template <class Pred>
  void wait_for_helper(Pred ready, Deadline deadline) {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (helper_error) std::rethrow_exception(helper_error);
      if (ready()) return;
      if (Clock::now() >= deadline) {
        raise(ErrorKind::kTimeout, "timed out after ", collective_timeout_seconds(),
              " s in allreduce waiting for this host's shared-memory phase (", collective_timeout_variable(),
              " sets the limit)");
      }
      cv.wait_for(lock, std::chrono::milliseconds(interrupt_slice_ms(50)));
      lock.unlock();
      poll_interrupt();
      lock.lock();
    }
  }
};

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

// The variable's value, -1 when unset.
int64_t pipeline_bytes_set() {
  if (env_str("RINGCC_HIERARCHICAL_PIPELINE_BYTES", "").empty()) return -1;
  return std::max<int64_t>(env_int("RINGCC_HIERARCHICAL_PIPELINE_BYTES", 0), 0);
}

}  // namespace

int64_t hierarchical_pipeline_bytes(double cpus_per_rank) {
  const int64_t set = pipeline_bytes_set();
  if (set >= 0) return set;
  return cpus_per_rank >= 2 ? int64_t{4} << 20 : 0;
}

std::string hierarchical_pipeline_setting() {
  const int64_t set = pipeline_bytes_set();
  return set < 0 ? std::string("auto") : std::to_string(set);
}

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

  Handoff h;
  h.finished.assign(static_cast<size_t>(hosts), 0);
  std::thread helper([&] {
    name_this_thread("ringcc-hier-shm");
    try {
      for (int k = 0; k < hosts; ++k) {
        const int j = reduce_order(k);
        CollectiveArgs rs = piece_args(CollectiveKind::kReduceScatter, a, in + static_cast<size_t>(piece_lo(j)) * es,
                                       piece_len(j), seg(j), segs.length[static_cast<size_t>(j)]);
        rs.prescale = a.prescale;
        local.run(rs, deadline);
        std::lock_guard<std::mutex> lock(h.mu);
        h.reduced = k + 1;
        h.cv.notify_all();
      }
      for (int k = 0; k < hosts; ++k) {
        const int j = finish_order(k);
        {
          std::unique_lock<std::mutex> lock(h.mu);
          h.cv.wait(lock, [&] { return h.ring_gave_up || h.finished[static_cast<size_t>(j)]; });
          if (h.ring_gave_up) return;
        }
        if (a.postscale != 1.0) scale_inplace(seg(j), segs.length[static_cast<size_t>(j)], a.dtype, a.postscale);
        CollectiveArgs ag = piece_args(CollectiveKind::kAllgather, a, seg(j), segs.length[static_cast<size_t>(j)],
                                       out + static_cast<size_t>(piece_lo(j)) * es, piece_len(j));
        local.run(ag, deadline);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(h.mu);
      h.helper_error = std::current_exception();
      h.cv.notify_all();
    }
  });

  segs.ready = [&](int j) {
    const int k = (me - j + hosts) % hosts;  // its place in reduce_order
    h.wait_for_helper([&] { return h.reduced > k; }, deadline);
  };
  segs.done = [&](int j) {
    std::lock_guard<std::mutex> lock(h.mu);
    h.finished[static_cast<size_t>(j)] = 1;
    h.cv.notify_all();
  };
  CollectiveArgs ar = piece_args(CollectiveKind::kAllreduce, a, out, a.count, out, a.count);
  // The helper may be waiting for us, or for local peers that wait for
  // the ring: on any failure, release it and the local peers before leaving.
  auto release = [&](const char* why) {
    {
      std::lock_guard<std::mutex> lock(h.mu);
      h.ring_gave_up = true;
      h.cv.notify_all();
    }
    local.abort(why);
    helper.join();
  };
  try {
    ring_allreduce(cross, ar, scratch, deadline, &segs);
  } catch (const std::exception& e) {
    release(e.what());
    throw;
  } catch (...) {
    release("the allreduce across hosts stopped");
    throw;
  }
  helper.join();
  if (h.helper_error) std::rethrow_exception(h.helper_error);
  a.result_count = a.count;
}

}  // namespace ringcc
