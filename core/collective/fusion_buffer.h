// The fusion buffer: small tensors packed back to back so that one
// collective serves them all, then unpacked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/collective/collective_args.h"

namespace ringcc {

class FusionBuffer {
 public:
  // Copies the segments' inputs (count elements of elem_size bytes each; a
  // null input packs zeros) back to back and returns the start of the
  // packed bytes.
  uint8_t* pack(const std::vector<BufferSegment>& segments, size_t elem_size);
  // Copies each packed piece to its segment's output (a null one is skipped).
  void unpack(const std::vector<BufferSegment>& segments, size_t elem_size) const;

  // An in-place allreduce of `count` packed elements.
  CollectiveArgs allreduce(int64_t count, DataType dtype, ReduceOp op, double prescale, double postscale);

 private:
  std::vector<uint8_t> data_;
};

}  // namespace ringcc
