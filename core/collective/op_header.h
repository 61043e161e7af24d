// The header every rank contributes at the start of a collective. Ranks
// exchange headers before any data moves (a small allgather, or a slot in
// shared memory), so every rank sees every header and reaches the same
// verdict: on disagreement all of them raise the same MismatchError and the
// communicator stays usable. A tensor's shape travels in the room a failed
// call's reason takes, so the header has one size (216 bytes) whatever the
// shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/collective/dtype.h"
#include "core/collective/reduce_op.h"

namespace ringcc {

enum class CollectiveKind : int32_t {
  kAllreduce = 1,
  kAllgather = 2,
  kBroadcast = 3,
  kReduceScatter = 4,
  kAlltoall = 5,
  kBarrier = 6,
  // A rank that could not start the collective (bad argument on that rank
  // alone) still takes part in the exchange with this kind and its reason,
  // so that its peers fail at once instead of waiting for it.
  kLocalError = 7,
};

const char* collective_name(CollectiveKind kind);

// What the peers of a rank that could not start a collective are told:
// "rank R could not start KIND: REASON".
std::string failed_call_text(int rank, CollectiveKind kind, const std::string& reason);

// Dimensions of a shape a header holds: a longer shape keeps its first
// kShapeSlots - 1 dimensions and, in the last slot, a hash of the others.
constexpr int kShapeSlots = 20;
// The ndim of an allreduce of several tensors fused into one (a grouped
// call): its one slot holds a hash of their shapes (shape_hash).
constexpr int32_t kFusedShapes = -2;

struct OpHeader {
  uint32_t magic = 0x52434348;  // "RCCH"
  int32_t kind = 0;
  int32_t dtype = 0;
  int32_t op = 0;
  int32_t root = 0;
  int32_t failed_kind = 0;  // with kLocalError: the collective that failed
  int64_t count = 0;        // elements this rank contributes
  int64_t row_elems = 1;    // elements per row (allgather, alltoall)
  int64_t out_count = -1;   // elements the caller's output holds; -1: any
  int32_t memory = 0;       // MemoryKind of the buffers
  // Dimensions of the caller's tensor (in `shape`); -1: the caller gave no
  // shape, and the ranks compare element counts only; kFusedShapes.
  int32_t ndim = -1;
  // A failed call (kLocalError) says why; any other call holds its shape
  // there (set_shape), in the room a reason takes, so that comparing
  // shapes makes the header no larger.
  union {
    char reason[160] = {};
    int64_t shape[kShapeSlots];
  };
};

static_assert(sizeof(OpHeader) % 8 == 0, "OpHeader must pack into 8-byte words");
static_assert(sizeof(OpHeader) == 216, "OpHeader grew: every collective exchanges it");

// Writes a shape of ndim dimensions into h (not for a failed call); with
// ndim kFusedShapes, dims[0] is the hash of the fused tensors' shapes.
void set_shape(OpHeader& h, const int64_t* dims, int ndim);

// `seed` extended with a shape: the same on every rank for the same shapes.
int64_t shape_hash(const int64_t* dims, int ndim, int64_t seed);

// "[2, 3]"; "[]" for a scalar.
std::string shape_text(const int64_t* dims, size_t ndim);

// Checks what every rank must agree on: the collective, where the data
// lives, the dtype, the sizes and, where every rank gave one, the shape
// (allgather and alltoall: the dimensions after the first). headers[i]
// came from the rank ranks[i]; `alltoall_counts` holds each rank's
// per-destination element counts for alltoall (size n*n, row i from rank
// i), empty otherwise. Raises Error(kMismatch) or Error(kInvalidArgument)
// with the same message on every rank.
void check_agreement(const std::vector<OpHeader>& headers, const std::vector<int>& ranks,
                     const std::vector<int64_t>& alltoall_counts, int my_index);

}  // namespace ringcc
