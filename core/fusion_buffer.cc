#include "core/fusion_buffer.h"

#include <cstring>

namespace ringcc {

uint8_t* FusionBuffer::pack(const std::vector<const void*>& inputs,
                            const std::vector<size_t>& sizes) {
  size_t total = 0;
  for (size_t s : sizes) total += s;
  if (data_.size() < total) data_.resize(total);
  size_t off = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (sizes[k] == 0) continue;
    if (inputs[k]) {
      std::memcpy(data_.data() + off, inputs[k], sizes[k]);
    } else {
      std::memset(data_.data() + off, 0, sizes[k]);
    }
    off += sizes[k];
  }
  return data_.data();
}

void FusionBuffer::unpack(const std::vector<void*>& outputs, const std::vector<size_t>& sizes) const {
  size_t off = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k] && sizes[k]) std::memcpy(outputs[k], data_.data() + off, sizes[k]);
    off += sizes[k];
  }
}

CollectiveArgs FusionBuffer::allreduce(int64_t count, DataType dtype, ReduceOp op,
                                       double prescale, double postscale) {
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
