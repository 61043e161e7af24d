// The engine's response cache: the names (and descriptions) of tensors that
// ran before, one bit each, so that a training loop's next round announces
// each tensor by its bit instead of in full. Every rank makes the same
// changes in the same cycles, so the bits mean the same everywhere.
//
// Ready cache hits run in the order their names entered the cache, which is
// the order a training loop enqueues them, whichever bits eviction handed
// them (bits_in_order()). When the cache is full, the least recently used
// name that no rank is waiting on makes room.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/engine/tensor_meta.h"

namespace ringcc {

class ResponseCache {
 public:
  explicit ResponseCache(int capacity) : capacity_(capacity < 0 ? 0 : capacity) {}

  // Bits it may hand out (RINGCC_CACHE_CAPACITY), and bits handed out.
  size_t capacity() const { return static_cast<size_t>(capacity_); }
  size_t size() const { return names_.size(); }
  bool full() const { return names_.size() >= capacity(); }

  const std::string& name(size_t bit) const { return names_[bit]; }
  const std::shared_ptr<const TensorMeta>& meta(size_t bit) const { return metas_[bit]; }
  // The bit of `name` whatever its description, or -1.
  int bit_of(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? -1 : it->second;
  }
  // The bit of `name` if it is cached with exactly this description, or -1.
  int bit_of(const std::string& name, const TensorMeta& meta) const {
    const int bit = bit_of(name);
    return bit >= 0 && *metas_[static_cast<size_t>(bit)] == meta ? bit : -1;
  }
  // Counts evictions: a bit looked up before one may mean another name now.
  uint64_t epoch() const { return epoch_; }

  // The bit ran (again): it is used most recently.
  void touch(size_t bit) { used_[bit] = ++clock_; }
  // Touches the bit of `name`; false when it has none.
  bool touch(const std::string& name) {
    const int bit = bit_of(name);
    if (bit >= 0) touch(static_cast<size_t>(bit));
    return bit >= 0;
  }
  // A new name with its description, in the next free bit (not full()).
  size_t add(const std::string& name, std::shared_ptr<const TensorMeta> meta);
  // The least recently used bit that may_evict(bit) allows, or -1.
  int victim(const std::function<bool(size_t)>& may_evict) const;
  // Gives the bit of an evicted name to a new one.
  void replace(size_t bit, const std::string& name, std::shared_ptr<const TensorMeta> meta);

  // The bits in the order their names entered the cache.
  const std::vector<int>& bits_in_order();

 private:
  int capacity_;
  std::vector<std::string> names_;
  std::vector<std::shared_ptr<const TensorMeta>> metas_;
  std::unordered_map<std::string, int> index_;
  std::vector<uint64_t> used_;     // last use, for LRU
  std::vector<uint64_t> entered_;  // when the name took its bit
  std::vector<int> in_order_;      // bits_in_order(), rebuilt when reordered_
  bool reordered_ = false;
  uint64_t clock_ = 0;
  uint64_t epoch_ = 0;
};

}  // namespace ringcc
