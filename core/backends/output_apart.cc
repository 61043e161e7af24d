#include "core/backends/output_apart.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ringcc {

namespace {

bool output_inside_input(const CollectiveArgs& a) {
  if (a.kind != CollectiveKind::kReduceScatter || a.memory != MemoryKind::kHost || !a.in || !a.out ||
      a.out_count <= 0 || a.count <= 0) {
    return false;
  }
  const size_t es = dtype_size(a.dtype);
  const auto* in = static_cast<const uint8_t*>(a.in);
  const auto* out = static_cast<const uint8_t*>(a.out);
  return out < in + static_cast<size_t>(a.count) * es && in < out + static_cast<size_t>(a.out_count) * es;
}

}  // namespace

void run_output_apart(Backend& backend, CollectiveArgs& a, Deadline deadline) {
  if (!output_inside_input(a)) return backend.run(a, deadline);
  void* const out = a.out;
  std::vector<uint8_t> apart(static_cast<size_t>(a.out_count) * dtype_size(a.dtype));
  a.out = apart.data();
  try {
    backend.run(a, deadline);
  } catch (...) {
    a.out = out;
    throw;
  }
  a.out = out;
  const int64_t written = std::min(a.result_count, a.out_count);
  if (written > 0) std::memcpy(out, apart.data(), static_cast<size_t>(written) * dtype_size(a.dtype));
}

}  // namespace ringcc
