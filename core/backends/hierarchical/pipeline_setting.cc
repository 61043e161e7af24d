#include <algorithm>

#include "core/backends/hierarchical/pipelined_phases.h"
#include "core/base/env.h"

namespace ringcc {

namespace {

// The variable's value, -1 when unset.
int64_t pipeline_bytes_set() {
  if (env_str("RINGCC_HIERARCHICAL_PIPELINE_BYTES", "").empty()) return -1;
  return std::max<int64_t>(env_int("RINGCC_HIERARCHICAL_PIPELINE_BYTES", 0), 0);
}

}  // namespace

int64_t hierarchical_pipeline_bytes(double cpus_per_rank) {
  const int64_t set = pipeline_bytes_set();
  if (set >= 0) return set;
  return cpus_per_rank >= 2 ? int64_t{4} << 20 : 0;
}

std::string hierarchical_pipeline_setting() {
  const int64_t set = pipeline_bytes_set();
  return set < 0 ? std::string("auto") : std::to_string(set);
}

}  // namespace ringcc
