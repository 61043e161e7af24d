#include "core/collective/dtype.h"

namespace ringcc {

size_t dtype_size(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kFloat32:
    case DataType::kInt32:
      return 4;
    case DataType::kFloat64:
    case DataType::kInt64:
      return 8;
    case DataType::kInt8:
    case DataType::kUInt8:
      return 1;
  }
  return 0;
}

const char* dtype_name(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kInt8:
      return "int8";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
  }
  return "unknown";
}

bool dtype_valid(int32_t value) { return value >= 0 && value < kNumDataTypes; }

}  // namespace ringcc
