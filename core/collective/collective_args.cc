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

CollectiveArgs fuse_allreduces(std::vector<CollectiveArgs>& list, const std::vector<size_t>& order, size_t first,
                               size_t end, int64_t* shapes) {
  const CollectiveArgs& head = list[order[first]];
  CollectiveArgs fused;
  fused.kind = CollectiveKind::kAllreduce;
  fused.dtype = head.dtype;
  fused.op = head.op;
  fused.prescale = head.prescale;
  fused.postscale = head.postscale;
  fused.memory = head.memory;
  fused.device = head.device;
  fused.stream = head.stream;
  fused.label = "the tensors of a grouped allreduce fused into one";
  fused.segments.reserve(end - first);
  bool shaped = true;
  *shapes = 0;
  for (size_t k = first; k < end; ++k) {
    CollectiveArgs& e = list[order[k]];
    fused.segments.push_back({e.in, e.out, e.count});
    fused.count += e.count;
    e.result_count = e.count;
    shaped = shaped && e.ndim >= 0 && (e.shape || e.ndim == 0);
    if (shaped) *shapes = shape_hash(e.shape, e.ndim, *shapes);
  }
  fused.out_count = fused.count;
  if (shaped) {
    fused.shape = shapes;
    fused.ndim = kFusedShapes;
  }
  return fused;
}

std::string fused_shapes_text(const std::vector<CollectiveArgs>& list, const std::vector<size_t>& order, size_t first,
                              size_t end) {
  std::string text;
  for (size_t k = first; k < end; ++k) {
    const CollectiveArgs& e = list[order[k]];
    if (k > first) text += ", ";
    const bool shaped = e.ndim >= 0 && (e.shape || e.ndim == 0);
    text += shaped ? shape_text(e.shape, static_cast<size_t>(e.ndim)) : std::to_string(e.count) + " elements";
  }
  return text;
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
