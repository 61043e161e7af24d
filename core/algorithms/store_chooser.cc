#include "core/algorithms/store_chooser.h"

#include <algorithm>

namespace ringcc {

int StoreChooser::size_class(size_t bytes, bool scattered) {
  if (bytes < kFromBytes) return -1;
  int c = 0;
  for (size_t b = bytes / kFromBytes; b > 1 && c < kSizeClasses - 1; b >>= 1) ++c;
  return scattered ? c + kSizeClasses : c;
}

void StoreChooser::record(int c, bool bypass, double ns_per_byte) {
  if (c < 0 || c >= kClasses || !(ns_per_byte > 0)) return;
  Class& k = classes_[c];
  if (k.seen++ < kWarmupCalls) return;
  double& e = k.estimate[bypass ? 1 : 0];
  // A moving average of samples held to at most kSpike times it: a
  // preempted call moves it little, a change of the machine's state within
  // a dozen calls of the way in use. A sample of the way tried now and then
  // weighs more: its average is one exploration old.
  const double weight = bypass == k.bypass ? 0.3 : 0.6;
  e = e < 0 ? ns_per_byte : (1 - weight) * e + weight * std::min(ns_per_byte, kSpike * e);
  ++k.calls;
  const uint32_t bit = uint32_t{1} << c;
  const bool small = (kFromBytes << (c % kSizeClasses)) < (size_t{1} << 20);
  choices_ = choose(k, small ? kToBypassBelow1MiB : kToBypass) ? (choices_ | bit) : (choices_ & ~bit);
}

bool StoreChooser::choose(Class& k, double to_bypass) {
  // Each way is timed once before any comparison.
  if (k.estimate[0] < 0) return false;
  if (k.estimate[1] < 0) return true;
  if (k.bypass ? k.estimate[0] < kToPlain * k.estimate[1] : k.estimate[1] < to_bypass * k.estimate[0]) {
    k.bypass = !k.bypass;
  }
  // Now and then the other way, so that its estimate follows the machine.
  return k.calls % kExploreEvery == 0 ? !k.bypass : k.bypass;
}

}  // namespace ringcc
