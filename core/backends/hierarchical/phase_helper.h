// The helper thread of a pipelined hierarchical collective: it runs this
// host's shared-memory phases, piece by piece, while the calling thread
// runs the ring between hosts, and the two hand pieces over through it.
// Either side's failure releases the other, and this host's other ranks,
// before the collective raises.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include "core/algorithms/shm_collectives.h"
#include "core/base/deadline.h"

namespace ringcc {

class PhaseHelper {
 public:
  // what: the collective, as a timeout names it; pieces: how many the
  // ring may mark finished.
  PhaseHelper(ShmCollectives& local, const char* what, int pieces, Deadline deadline);

  // Runs helper_body on a thread of its own and ring_body on this one;
  // returns once both have, raising the first failure.
  void run(const std::function<void()>& helper_body, const std::function<void()>& ring_body);

  // Helper side: the first `count` pieces of its order are reduced.
  void reduced(int count);
  // Helper side: waits until the ring has finished piece j; false: the
  // ring gave up, and the helper should return.
  bool wait_finished(int j);
  // Ring side: waits until the helper has reduced `count` pieces, bounded
  // by the deadline and answering signals as every wait of a collective
  // does; raises the helper's failure.
  void wait_reduced(int count);
  // Ring side: the ring no longer touches piece j.
  void finished(int j);

 private:
  void give_up(const char* why);

  ShmCollectives& local_;
  const char* what_;
  Deadline deadline_;
  std::mutex mu_;
  std::condition_variable cv_;
  int reduced_ = 0;
  std::vector<char> finished_;
  bool ring_gave_up_ = false;
  std::exception_ptr helper_error_;
};

}  // namespace ringcc
