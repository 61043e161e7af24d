// Deadlines: every wait in ringcc is bounded by one.
#pragma once

#include <algorithm>
#include <chrono>

namespace ringcc {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// The time left until `deadline`, at least a millisecond (for waits that
// take a timeout rather than a deadline, such as Store::get).
inline std::chrono::milliseconds until(Deadline deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

}  // namespace ringcc
