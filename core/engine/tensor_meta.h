// What ranks negotiate about a named tensor: the collective, its dtype,
// shape, reduction, root, scale factors and where it lives (host or CUDA
// memory). Two ranks' descriptions of one name must agree (allgather and alltoall may differ in the first
// dimension), or every rank gets an error naming the tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/collective/collective_args.h"
#include "core/collective/op_header.h"

namespace ringcc {

struct TensorMeta {
  CollectiveKind kind = CollectiveKind::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<int64_t> shape;
  MemoryKind memory = MemoryKind::kHost;
  // A framework that packs many tensors into this one (TensorFlow's grouped
  // allreduce) hides their shapes from the shape above: this digest of them
  // stands in, so ranks that packed different tensors disagree here. Each
  // collective of a grouped call carries its group's digest (TensorFlow) or
  // length (torch, MXNet), so ranks whose groups differ disagree on every
  // collective they share. 0: neither.
  int64_t layout = 0;
  // The layout of a rank's failed call (kLocalError) that is one of several
  // collectives of a grouped call it fails together.
  static constexpr int64_t kGroupFailed = -1;

  int64_t elements() const;
  int64_t row_elems() const;  // elements per row of the first dimension
  bool operator==(const TensorMeta& o) const;

  // The most elements a shape (or a row of it) may hold: its size in bytes,
  // for any dtype, fits in an int64.
  static constexpr int64_t kMaxElements = INT64_MAX / 16;

  void serialize(std::string* out) const;
  // Reads one TensorMeta at *pos, advancing it; raises Error(kInternal) on
  // malformed data, a negative dimension or more than kMaxElements
  // elements in all or in a row.
  static TensorMeta parse(const std::string& in, size_t* pos);
};

// Equal in everything ranks must agree on (allgather and alltoall may
// differ in the first dimension); never for a rank's failed call
// (kLocalError, see Engine::enqueue).
bool compatible(const TensorMeta& a, const TensorMeta& b);

// Describes how metas[i] (from ranks[i]) disagree, or returns "" when the
// tensor can run. Allgather and alltoall may differ in the first dimension.
std::string describe_disagreement(const std::string& name, const std::vector<TensorMeta>& metas,
                                  const std::vector<int>& ranks);

}  // namespace ringcc
