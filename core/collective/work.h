// A collective submitted for asynchronous execution: the caller keeps the
// Work and waits on it; the communicator's worker thread completes it.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/base/interrupt.h"
#include "core/collective/collective_args.h"

namespace ringcc {

class Work {
 public:
  // One collective, or (grouped) a list fused into as few as fit.
  Work(std::vector<CollectiveArgs> list, bool grouped) : list_(std::move(list)), grouped_(grouped) {}

  // True once the collective finished (successfully or not).
  bool done() const { return done_.load(std::memory_order_acquire); }
  // True once it finished without an error.
  bool succeeded() const { return done() && !error_; }
  // Blocks until done or timeout (negative: no limit of its own; whoever
  // runs the collective bounds it); returns done(). Rethrows the
  // collective's error, if any, once done. On an interruptible thread
  // (core/base/interrupt.h) it may throw Error(kInterrupted) instead; the
  // collective goes on, and a later wait() can still collect it.
  bool wait(double timeout_seconds) {
    if (!done()) {
      std::unique_lock<std::mutex> lock(mu_);
      // Seen by finish() after its store of done_ unless this thread then
      // sees done_ (both sequentially consistent): it skips the lock and
      // the notify when nobody waits.
      waiting_.store(true);
      auto finished = [this] { return done_.load(); };
      if (interruptible()) {
        const auto start = std::chrono::steady_clock::now();
        const auto limit = std::chrono::duration<double>(timeout_seconds);
        while (!finished()) {
          const std::chrono::duration<double> left =
              limit - std::chrono::duration<double>(std::chrono::steady_clock::now() - start);
          if (timeout_seconds >= 0 && left.count() <= 0) return false;
          lock.unlock();
          poll_interrupt();  // the hook may take other locks (Python's)
          lock.lock();
          std::chrono::duration<double> slice = kInterruptPoll;
          if (timeout_seconds >= 0) slice = std::min(slice, left);
          cv_.wait_for(lock, slice, finished);
        }
      } else if (timeout_seconds < 0) {
        cv_.wait(lock, finished);
      } else if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_seconds), finished)) {
        return false;
      }
    }
    // error_ was written before done_ was released.
    if (error_) std::rethrow_exception(error_);
    return true;
  }
  std::vector<CollectiveArgs>& list() { return list_; }

  // True when `work` is held by its owner alone, is done and runs one
  // collective: reset() may then give it a new one. The acquire fence pairs
  // with the release by whichever thread dropped the other reference.
  static bool reusable(const std::shared_ptr<Work>& work) {
    if (!work || work.use_count() != 1) return false;
    std::atomic_thread_fence(std::memory_order_acquire);
    return work->done() && work->list_.size() == 1 && !work->grouped_;
  }
  // A pending Work for `args`, in place (see reusable()): the list keeps
  // its storage, so no allocation happens.
  void reset(CollectiveArgs&& args) {
    move_args(list_[0], std::move(args));
    error_ = nullptr;
    waiting_.store(false, std::memory_order_relaxed);
    // One thread at a time resets a Work (its owner): no atomic increment needed.
    generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    done_.store(false, std::memory_order_relaxed);
  }
  // How many times reset() gave this Work a new collective.
  uint64_t generation() const { return generation_.load(std::memory_order_relaxed); }
  bool grouped() const { return grouped_; }

  void finish(std::exception_ptr error) {
    if (mark_done(error)) wake();
  }
  // finish() in two steps, for a batch of Works: mark them all done, then
  // wake the waiters, so that a caller woken by one finds the others done
  // as well instead of blocking on each in turn. mark_done() returns
  // whether wake() is needed.
  bool mark_done(std::exception_ptr error) {
    error_ = error;  // published by the store of done_
    done_.store(true);
    return waiting_.load();
  }
  // mark_done() for many Works at a price of one fence: publish_done() on
  // each, then std::atomic_thread_fence(std::memory_order_seq_cst), then
  // waited_on() on each tells whether it needs wake(). (The fence orders
  // the stores of done_ before the loads of waiting_, as the sequentially
  // consistent store and load of mark_done() do one Work at a time.)
  void publish_done(std::exception_ptr error) {
    error_ = error;
    done_.store(true, std::memory_order_release);
  }
  bool waited_on() const { return waiting_.load(std::memory_order_relaxed); }
  void wake() {
    std::function<void()> callback;
    // The waiter holds mu_ from its check of done_ until it sleeps.
    {
      std::lock_guard<std::mutex> lock(mu_);
      callback.swap(on_done_);
    }
    cv_.notify_all();
    if (callback) callback();
  }
  // Runs `callback` once, when the Work is done: on the thread that
  // finishes it, or at once on this thread when it already is. For callers
  // that cannot block a thread on wait() (a framework's asynchronous
  // kernels). The callback must not block; one callback per collective.
  void when_done(std::function<void()> callback) {
    std::unique_lock<std::mutex> lock(mu_);
    on_done_ = std::move(callback);
    // As in wait(): a finisher either sees waiting_ (and calls wake(),
    // which takes the callback under mu_) or this thread sees done_.
    waiting_.store(true);
    if (!done_.load()) return;
    std::function<void()> now;
    now.swap(on_done_);
    lock.unlock();
    if (now) now();
  }

 private:
  std::vector<CollectiveArgs> list_;
  bool grouped_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  std::atomic<bool> waiting_{false};  // a thread blocked (or is about to block) in wait()
  std::atomic<uint64_t> generation_{0};
  std::exception_ptr error_;
  std::function<void()> on_done_;  // when_done()'s, until it runs
};

}  // namespace ringcc
