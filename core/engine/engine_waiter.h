// What a caller holds while it waits on the background engine.
#pragma once

#include <atomic>
#include <memory>
#include <utility>

namespace ringcc {

// Held by a caller for as long as it blocks on a Work of an engine (a
// handle's wait, synchronize, join): each cycle tells the other ranks
// whether a caller of this process is blocked, for the deadlock watch.
// The count it holds may outlive the engine (another thread may shut
// ringcc down while this one waits).
class EngineWaiter {
 public:
  EngineWaiter() = default;
  explicit EngineWaiter(std::shared_ptr<std::atomic<int>> blocked) : blocked_(std::move(blocked)) {
    if (blocked_) blocked_->fetch_add(1, std::memory_order_relaxed);
  }
  EngineWaiter(EngineWaiter&&) noexcept = default;  // the moved-from one counts nothing
  EngineWaiter& operator=(EngineWaiter&&) = delete;
  ~EngineWaiter() {
    if (blocked_) blocked_->fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  std::shared_ptr<std::atomic<int>> blocked_;
};

}  // namespace ringcc
