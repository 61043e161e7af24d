#include "core/backends/hierarchical/phase_helper.h"

#include <chrono>
#include <thread>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/thread_name.h"

namespace ringcc {

PhaseHelper::PhaseHelper(ShmCollectives& local, const char* what, int pieces, Deadline deadline)
    : local_(local), what_(what), deadline_(deadline), finished_(static_cast<size_t>(pieces), 0) {}

void PhaseHelper::run(const std::function<void()>& helper_body, const std::function<void()>& ring_body) {
  std::thread helper([&] {
    name_this_thread("ringcc-hier-shm");
    try {
      helper_body();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      helper_error_ = std::current_exception();
      cv_.notify_all();
    }
  });
  // The helper may be waiting for the ring, or for local peers that wait
  // for theirs: on any failure, release it and the local peers first.
  auto release = [&](const char* why) {
    give_up(why);
    helper.join();
  };
  try {
    ring_body();
  } catch (const std::exception& e) {
    release(e.what());
    throw;
  } catch (...) {
    release("the collective across hosts stopped");
    throw;
  }
  helper.join();
  if (helper_error_) std::rethrow_exception(helper_error_);
}

void PhaseHelper::give_up(const char* why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ring_gave_up_ = true;
    cv_.notify_all();
  }
  local_.abort(why);
}

void PhaseHelper::reduced(int count) {
  std::lock_guard<std::mutex> lock(mu_);
  reduced_ = count;
  cv_.notify_all();
}

bool PhaseHelper::wait_finished(int j) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return ring_gave_up_ || finished_[static_cast<size_t>(j)]; });
  return !ring_gave_up_;
}

void PhaseHelper::wait_reduced(int count) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (helper_error_) std::rethrow_exception(helper_error_);
    if (reduced_ >= count) return;
    if (Clock::now() >= deadline_) {
      raise(ErrorKind::kTimeout, "timed out after ", collective_timeout_seconds(), " s in ", what_,
            " waiting for this host's shared-memory phase (", collective_timeout_variable(), " sets the limit)");
    }
    cv_.wait_for(lock, std::chrono::milliseconds(interrupt_slice_ms(50)));
    lock.unlock();
    poll_interrupt();
    lock.lock();
  }
}

void PhaseHelper::finished(int j) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_[static_cast<size_t>(j)] = 1;
  cv_.notify_all();
}

}  // namespace ringcc
