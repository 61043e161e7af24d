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

std::string naming_tensor(const std::string& message, const CollectiveScalars& a, uint64_t position) {
  const std::string kind = collective_name(a.kind);
  std::string text = kind + " (";
  if (a.label.empty()) {
    text += "collective #" + std::to_string(position) + " in issue order";
  } else {
    text.append(a.label.data(), a.label.size());
  }
  if (a.ndim >= 0 && (a.shape || a.ndim == 0)) {
    text += ", shape " + shape_text(a.shape, static_cast<size_t>(a.ndim));
  } else if (a.kind != CollectiveKind::kBarrier) {
    text += ", " + std::to_string(a.count) + " elements";
    if (a.row_elems > 1) text += " in rows of " + std::to_string(a.row_elems);
  }
  // Messages of the core start with the collective's name already.
  const bool named = message.compare(0, kind.size() + 2, kind + ": ") == 0;
  return text + "): " + (named ? message.substr(kind.size() + 2) : message);
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
