// The job's first failure, kept in its rendezvous store where every rank
// can read it, and a view of a store whose waits end as soon as one is
// recorded: a rank that fails while the ranks meet (a bad setting, a
// shared-memory or link error) makes its peers fail at once, naming it,
// instead of leaving them to wait out their timeout.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/rendezvous/store.h"

namespace ringcc {

// Records `reason` as the job's first failure unless one is recorded
// already; returns that earlier one ("" when `reason` is the first, or the
// store cannot be reached).
std::string record_job_failure(Store& job_store, const std::string& reason);

// True when a failure is recorded; *reason gets it when non-null.
bool recorded_job_failure(Store& job_store, std::string* reason);

// A store whose get() gives up with Error(kPeerFailure) once the job's
// failure record appears, looking for it every `slice` while it waits.
class FailureWatchingStore : public Store {
 public:
  explicit FailureWatchingStore(std::shared_ptr<Store> base,
                                std::chrono::milliseconds slice = std::chrono::milliseconds(100))
      : base_(std::move(base)), slice_(slice) {}

  void set(const std::string& key, const std::string& value) override { base_->set(key, value); }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  bool try_get(const std::string& key, std::string* value) override { return base_->try_get(key, value); }
  int64_t add(const std::string& key, int64_t delta) override { return base_->add(key, delta); }
  Store& job_store() override { return base_->job_store(); }
  TcpStore* rank0_store() override { return base_->rank0_store(); }

 private:
  std::shared_ptr<Store> base_;
  std::chrono::milliseconds slice_;
};

}  // namespace ringcc
