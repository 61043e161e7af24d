#include "core/engine/response_cache.h"

#include <algorithm>

namespace ringcc {

size_t ResponseCache::add(const std::string& name, std::shared_ptr<const TensorMeta> meta) {
  const size_t bit = names_.size();
  const uint64_t stamp = ++clock_;
  names_.push_back(name);
  metas_.push_back(std::move(meta));
  used_.push_back(stamp);
  entered_.push_back(stamp);
  index_[name] = static_cast<int>(bit);
  reordered_ = true;
  return bit;
}

int ResponseCache::victim(const std::function<bool(size_t)>& may_evict) const {
  int found = -1;
  for (size_t b = 0; b < names_.size(); ++b) {
    if (!may_evict(b)) continue;
    if (found < 0 || used_[b] < used_[static_cast<size_t>(found)]) found = static_cast<int>(b);
  }
  return found;
}

void ResponseCache::replace(size_t bit, const std::string& name, std::shared_ptr<const TensorMeta> meta) {
  const uint64_t stamp = ++clock_;
  ++epoch_;
  index_.erase(names_[bit]);
  names_[bit] = name;
  metas_[bit] = std::move(meta);
  used_[bit] = stamp;
  entered_[bit] = stamp;
  index_[name] = static_cast<int>(bit);
  reordered_ = true;
}

const std::vector<int>& ResponseCache::bits_in_order() {
  if (reordered_) {
    in_order_.resize(names_.size());
    for (size_t b = 0; b < in_order_.size(); ++b) in_order_[b] = static_cast<int>(b);
    std::sort(in_order_.begin(), in_order_.end(),
              [this](int x, int y) { return entered_[static_cast<size_t>(x)] < entered_[static_cast<size_t>(y)]; });
    reordered_ = false;
  }
  return in_order_;
}

}  // namespace ringcc
