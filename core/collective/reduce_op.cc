#include "core/collective/reduce_op.h"

namespace ringcc {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "average";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProduct:
      return "product";
  }
  return "unknown";
}

bool reduce_op_valid(int32_t value) {
  return value >= static_cast<int32_t>(ReduceOp::kSum) && value <= static_cast<int32_t>(ReduceOp::kProduct);
}

}  // namespace ringcc
