// Element types the core moves and reduces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ringcc {

enum class DataType : int32_t {
  kFloat16 = 0,
  kBFloat16 = 1,
  kFloat32 = 2,
  kFloat64 = 3,
  kInt8 = 4,
  kUInt8 = 5,
  kInt32 = 6,
  kInt64 = 7,
};

constexpr int kNumDataTypes = 8;

// Size of one element in bytes.
size_t dtype_size(DataType dtype);
// Lower-case NumPy-style name: "float16", "bfloat16", "float32", ...
const char* dtype_name(DataType dtype);
// True when the value names one of the enumerators above.
bool dtype_valid(int32_t value);

}  // namespace ringcc
