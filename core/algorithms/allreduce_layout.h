// The logical input and output of an allreduce as the shared-memory
// algorithm walks them: one contiguous buffer, or the concatenation of a
// fused batch's segments (a segment without input contributes zeros).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/collective/collective_args.h"
#include "core/collective/dtype.h"
#include "core/collective/reduction.h"
#include "core/collective/stream_copy.h"

namespace ringcc {

// dst = src * factor, count elements (a copy when factor is 1).
inline void copy_scaled(void* dst, const void* src, int64_t count, DataType dtype, double factor) {
  if (count <= 0) return;
  if (factor == 1.0) {
    if (dst != src) std::memcpy(dst, src, static_cast<size_t>(count) * dtype_size(dtype));
  } else {
    scale_copy(dst, src, count, dtype, factor);
  }
}

// The logical input and output of an allreduce: the args' contiguous
// buffers, or the concatenation of their segments.
class AllreduceLayout {
 public:
  explicit AllreduceLayout(const CollectiveArgs& a) : a_(a), es_(static_cast<int64_t>(dtype_size(a.dtype))) {
    if (segmented()) {
      starts_.reserve(a.segments.size() + 1);
      int64_t at = 0;
      for (const auto& seg : a.segments) {
        starts_.push_back(at);
        at += seg.count;
      }
      starts_.push_back(at);
    }
  }
  bool segmented() const { return !a_.segments.empty(); }

  // Copies elements [lo, lo + len) of the input to dst, scaled; unscaled
  // runs with stores that bypass the cache when `bypass` says so.
  void gather(uint8_t* dst, int64_t lo, int64_t len, double factor, bool bypass = false) const {
    auto copy = [&](uint8_t* d, const uint8_t* src, int64_t n) {
      if (bypass && factor == 1.0) {
        stream_copy(d, src, static_cast<size_t>(n * es_));
      } else {
        copy_scaled(d, src, n, a_.dtype, factor);
      }
    };
    if (!segmented()) {
      copy(dst, static_cast<const uint8_t*>(a_.in) + lo * es_, len);
      return;
    }
    for_each(lo, len, [&](const BufferSegment& seg, int64_t seg_off, int64_t rel, int64_t n) {
      if (seg.in) {
        copy(dst + rel * es_, static_cast<const uint8_t*>(seg.in) + seg_off * es_, n);
      } else {
        std::memset(dst + rel * es_, 0, static_cast<size_t>(n * es_));
      }
    });
  }
  // f(input memory, offset relative to lo, elements) for each run of
  // [lo, lo + len) that lies contiguously in the input; the memory is null
  // for a segment that contributes zeros.
  template <class F>
  void for_each_input(int64_t lo, int64_t len, F f) const {
    if (!segmented()) {
      f(static_cast<const uint8_t*>(a_.in) + lo * es_, int64_t{0}, len);
      return;
    }
    for_each(lo, len, [&](const BufferSegment& seg, int64_t seg_off, int64_t rel, int64_t n) {
      f(seg.in ? static_cast<const uint8_t*>(seg.in) + seg_off * es_ : nullptr, rel, n);
    });
  }
  // Copies src to elements [lo, lo + len) of the output, scaled.
  void scatter(const uint8_t* src, int64_t lo, int64_t len, double factor) const {
    if (!segmented()) {
      copy_scaled(static_cast<uint8_t*>(a_.out) + lo * es_, src, len, a_.dtype, factor);
      return;
    }
    for_each(lo, len, [&](const BufferSegment& seg, int64_t seg_off, int64_t rel, int64_t n) {
      if (seg.out) {
        copy_scaled(static_cast<uint8_t*>(seg.out) + seg_off * es_, src + rel * es_, n, a_.dtype, factor);
      }
    });
  }

 private:
  // f(segment, offset in it, offset relative to lo, elements) for each
  // part of [lo, lo + len) that lies in one segment.
  template <class F>
  void for_each(int64_t lo, int64_t len, F f) const {
    size_t k = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), lo) - starts_.begin());
    k = k > 0 ? k - 1 : 0;
    int64_t pos = lo;
    const int64_t end = lo + len;
    while (pos < end && k < a_.segments.size()) {
      const int64_t take = std::min(end, starts_[k + 1]) - pos;
      if (take > 0) {
        f(a_.segments[k], pos - starts_[k], pos - lo, take);
        pos += take;
      }
      ++k;
    }
  }

  const CollectiveArgs& a_;
  int64_t es_;
  std::vector<int64_t> starts_;
};

}  // namespace ringcc
