// One collective call as the algorithms see it: raw pointers, a dtype and
// 64-bit element counts. Frameworks reach the core only through this.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/collective/dtype.h"
#include "core/collective/op_header.h"
#include "core/collective/reduce_op.h"

namespace ringcc {

// One buffer of a fused allreduce (see CollectiveArgs::segments).
struct BufferSegment {
  const void* in = nullptr;  // null: contributes zeros
  void* out = nullptr;       // null: the result is dropped
  int64_t count = 0;         // elements
};

// Where a collective's buffers live. Every rank of a collective must agree
// (the header exchange checks it).
enum class MemoryKind : int32_t {
  kHost = 0,
  kCuda = 1,  // device memory of CollectiveScalars::device, ordered on ::stream
};

const char* memory_kind_name(MemoryKind kind);

// The fields of a collective that are plain values (CollectiveArgs adds
// the ones that own memory).
struct CollectiveScalars {
  CollectiveKind kind = CollectiveKind::kBarrier;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;  // broadcast: global rank of the root
  const void* in = nullptr;
  int64_t count = 0;       // elements this rank contributes
  int64_t row_elems = 1;   // elements per row along the first dimension
  void* out = nullptr;     // may equal `in` (in place)
  int64_t out_count = -1;  // elements `out` holds; -1: allocate through `allocate`
  double prescale = 1.0;
  double postscale = 1.0;
  // The caller's shape of the tensor: ndim dimensions at `shape`, kept
  // alive by the caller until the collective completes. Ranks that all
  // give one must agree on it (op_header.h); ndim -1: none given, the
  // ranks compare element counts only.
  const int64_t* shape = nullptr;
  int32_t ndim = -1;
  // How error messages name the tensor ("tensor 'grad.3'", "the 5th ringcc
  // collective of jit(step)"), kept alive by the caller until the
  // collective completes; empty: by its place in issue order.
  std::string_view label;
  // kLocalError: the collective this rank could not start (local_error says why).
  CollectiveKind failed_kind = CollectiveKind::kBarrier;
  // Elements held by `out` once the collective ran.
  int64_t result_count = 0;
  // kCuda: the buffers are on CUDA device `device`, and the collective is
  // enqueued on `stream` (a CUstream; CU_STREAM_LEGACY, 0x1, for the
  // legacy default stream) after whatever the caller queued there.
  MemoryKind memory = MemoryKind::kHost;
  int device = -1;
  void* stream = nullptr;
  // Set by the communicator for device collectives: the host path only
  // exchanges the headers, checks that the ranks agree and fills
  // recv_counts; the data moves on the device afterwards.
  bool agree_only = false;
};

struct CollectiveArgs : CollectiveScalars {
  std::function<void*(int64_t elements)> allocate;  // see out_count
  std::vector<int64_t> send_counts;                 // alltoall: elements to each rank (in rank order)
  // Allreduce of several buffers in one collective: when set, the input and
  // the output are the concatenations of these segments (in and out are
  // unused; count is their total). Backends that can gather and scatter
  // use them directly; for the others the communicator packs them into its
  // fusion buffer.
  std::vector<BufferSegment> segments;
  // Filled in for a fused allreduce that the communicator packed into its
  // fusion buffer (its backend does not gather segments): when the packing
  // ended and when the collective ended, in Timeline::now_us() time; 0 when
  // the backend ran on the segments in place. For the engine's timeline.
  int64_t packed_us = 0;
  int64_t reduced_us = 0;
  // kLocalError: why this rank could not start the collective.
  std::string local_error;
  // Filled in by the collective: elements received from each rank
  // (allgather, alltoall).
  std::vector<int64_t> recv_counts;
  // Filled in by the agreement of a device alltoall (agree_only): every
  // rank's send counts, n * n, row i from rank i.
  std::vector<int64_t> alltoall_counts;
};

// dst = std::move(src), for a CollectiveArgs reused call after call (an
// engine Work's): when neither holds a list, a function or an error text,
// as for every allreduce, only the plain fields are copied.
inline void move_args(CollectiveArgs& dst, CollectiveArgs&& src) {
  auto bare = [](const CollectiveArgs& a) {
    return !a.allocate && a.send_counts.empty() && a.segments.empty() && a.local_error.empty() &&
           a.recv_counts.empty() && a.alltoall_counts.empty();
  };
  if (bare(src) && bare(dst)) {
    static_cast<CollectiveScalars&>(dst) = src;
  } else {
    dst = std::move(src);
  }
}

// The collective a rank takes part in when it cannot start one of `kind`
// (a bad argument on this rank alone): the peers then fail at once with
// `why` (MismatchError naming this rank) instead of waiting for it, and
// the next collective is in step on every rank.
CollectiveArgs failed_call(CollectiveKind kind, std::string why);

// The allreduce of list[order[first]] .. list[order[end - 1]] (tensors of a
// grouped call, of one dtype and place) fused into one: their buffers as
// its segments, the first one's reduction, scaling and place. Where each
// of them has a shape, *shapes is set to a hash of them all, which the
// fused call carries (ndim kFusedShapes): ranks whose tensors differ in
// shape, if not in number of elements, then disagree. Sets the tensors'
// result counts.
CollectiveArgs fuse_allreduces(std::vector<CollectiveArgs>& list, const std::vector<size_t>& order, size_t first,
                               size_t end, int64_t* shapes);

// "[2, 3], [6]": the shapes of those tensors (their element counts where
// they have none), for messages.
std::string fused_shapes_text(const std::vector<CollectiveArgs>& list, const std::vector<size_t>& order, size_t first,
                              size_t end);

// Merges neighbouring segments of a fused allreduce whose inputs and
// outputs each continue where the previous ones end (views of one buffer,
// as frameworks' flat gradient buckets give). One run left over with real
// buffers becomes a plain allreduce of it, in place where it was.
void coalesce_segments(CollectiveArgs& a);

// The header this rank contributes for args.
inline OpHeader make_header(const CollectiveArgs& a) {
  OpHeader h;
  h.kind = static_cast<int32_t>(a.kind);
  h.dtype = static_cast<int32_t>(a.dtype);
  h.op = static_cast<int32_t>(a.op);
  h.root = a.root;
  h.count = a.count;
  h.row_elems = a.row_elems;
  h.out_count = a.out_count;
  h.failed_kind = static_cast<int32_t>(a.failed_kind);
  h.memory = static_cast<int32_t>(a.memory);
  if (a.kind == CollectiveKind::kLocalError) {
    std::strncpy(h.reason, a.local_error.c_str(), sizeof(h.reason) - 1);
  } else if ((a.ndim >= 0 || a.ndim == kFusedShapes) && (a.shape || a.ndim == 0)) {
    set_shape(h, a.shape, a.ndim);
  }
  return h;
}

// `message`, an error of collective `a` (the position-th of its
// communicator, from 1), naming the tensor: "allreduce (tensor 'grad.3',
// shape [2, 3]): ranks disagree ...", or by its position and sizes where
// it has no label and no shape.
std::string naming_tensor(const std::string& message, const CollectiveScalars& a, uint64_t position);

// Rows of axis 0 split over n ranks as evenly as possible, the lower ranks
// taking one more: the rows rank r keeps in reduce_scatter.
inline int64_t block_rows(int64_t rows, int n, int r) { return rows / n + (r < rows % n ? 1 : 0); }
inline int64_t block_first_row(int64_t rows, int n, int r) { return r * (rows / n) + (r < rows % n ? r : rows % n); }

}  // namespace ringcc
