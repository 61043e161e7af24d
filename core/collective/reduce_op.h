// Reduction operators. kAverage reduces as a sum; the caller divides by the
// number of contributors (it folds 1/size into the postscale factor).
#pragma once

#include <cstdint>

namespace ringcc {

enum class ReduceOp : int32_t {
  kSum = 0,
  kAverage = 1,
  kMin = 2,
  kMax = 3,
  kProduct = 4,
};

const char* reduce_op_name(ReduceOp op);
bool reduce_op_valid(int32_t value);

}  // namespace ringcc
