#include "core/collective/fusion_buffer.h"

#include <cstring>

namespace ringcc {

uint8_t* FusionBuffer::pack(const std::vector<BufferSegment>& segments, size_t elem_size) {
  size_t total = 0;
  for (const auto& seg : segments) total += static_cast<size_t>(seg.count) * elem_size;
  if (data_.size() < total) data_.resize(total);
  size_t off = 0;
  for (const auto& seg : segments) {
    const size_t bytes = static_cast<size_t>(seg.count) * elem_size;
    if (bytes == 0) continue;
    if (seg.in) {
      std::memcpy(data_.data() + off, seg.in, bytes);
    } else {
      std::memset(data_.data() + off, 0, bytes);
    }
    off += bytes;
  }
  return data_.data();
}

void FusionBuffer::unpack(const std::vector<BufferSegment>& segments, size_t elem_size) const {
  size_t off = 0;
  for (const auto& seg : segments) {
    const size_t bytes = static_cast<size_t>(seg.count) * elem_size;
    if (seg.out && bytes) std::memcpy(seg.out, data_.data() + off, bytes);
    off += bytes;
  }
}

CollectiveArgs FusionBuffer::allreduce(int64_t count, DataType dtype, ReduceOp op, double prescale, double postscale) {
  CollectiveArgs a;
  a.kind = CollectiveKind::kAllreduce;
  a.dtype = dtype;
  a.op = op;
  a.prescale = prescale;
  a.postscale = postscale;
  a.in = data_.data();
  a.out = data_.data();
  a.count = count;
  a.out_count = count;
  return a;
}

}  // namespace ringcc
