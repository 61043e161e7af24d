// Helpers over CollectiveArgs.
#include "core/collective/collective_args.h"

namespace ringcc {

CollectiveArgs failed_call(CollectiveKind kind, std::string why) {
  CollectiveArgs failed;
  failed.kind = CollectiveKind::kLocalError;
  failed.failed_kind = kind;
  failed.local_error = std::move(why);
  return failed;
}

// Fewer, longer runs to gather, reduce and scatter; a single run needs no
// fusion-buffer copies at all.
void coalesce_segments(CollectiveArgs& a) {
  if (a.segments.empty()) return;
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));
  auto follows = [es](const void* next, const void* prev, int64_t prev_count) {
    if (!next || !prev) return !next && !prev;  // zeros after zeros, dropped after dropped
    return static_cast<const uint8_t*>(prev) + prev_count * es == static_cast<const uint8_t*>(next);
  };
  auto& segs = a.segments;
  size_t w = 0;
  for (size_t k = 1; k < segs.size(); ++k) {
    BufferSegment& last = segs[w];
    if (follows(segs[k].in, last.in, last.count) && follows(segs[k].out, last.out, last.count)) {
      last.count += segs[k].count;
    } else {
      segs[++w] = segs[k];
    }
  }
  segs.resize(w + 1);
  if (segs.size() == 1 && segs[0].in && segs[0].out) {
    a.in = segs[0].in;
    a.out = segs[0].out;
    segs.clear();
  }
}

}  // namespace ringcc
