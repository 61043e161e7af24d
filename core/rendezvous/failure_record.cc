#include "core/rendezvous/failure_record.h"

#include <algorithm>

#include "core/base/deadline.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/thread_exit.h"

namespace ringcc {

namespace {

constexpr char kCountKey[] = "ringcc/abort/count";
constexpr char kReasonKey[] = "ringcc/abort/reason";

// The base store's timeout message names the last slice's wait: it
// should name the whole wait.
[[noreturn]] void raise_whole_timeout(const Error& e, std::chrono::milliseconds timeout) {
  const std::string what = e.what();
  const std::string lead = "timed out after ";
  const size_t unit = what.find(" s ", lead.size());
  if (what.rfind(lead, 0) != 0 || unit == std::string::npos) throw e;
  throw Error(ErrorKind::kTimeout, lead + format_seconds(timeout.count() / 1000.0) + what.substr(unit));
}

}  // namespace

std::string record_job_failure(Store& job_store, const std::string& reason) {
  try {
    if (job_store.add(kCountKey, 1) == 1) {
      job_store.set(kReasonKey, reason);
      return "";
    }
    return job_store.get(kReasonKey, std::chrono::milliseconds(1000));
  } catch (const ThreadExit&) {
    throw;
  } catch (...) {
    return "";
  }
}

bool recorded_job_failure(Store& job_store, std::string* reason) {
  std::string ignored;
  if (!job_store.try_get(kCountKey, &ignored)) return false;
  if (reason != nullptr && !job_store.try_get(kReasonKey, reason)) {
    *reason = "a rank failed (its reason is not recorded yet)";
  }
  return true;
}

std::string FailureWatchingStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const Deadline deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      return base_->get(key, std::max(std::chrono::milliseconds(0), std::min(left, slice_)));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kTimeout) throw;
      if (left <= slice_) raise_whole_timeout(e, timeout);
    }
    std::string reason;
    if (recorded_job_failure(base_->job_store(), &reason)) {
      raise(ErrorKind::kPeerFailure, "gave up waiting for '", key, "': ", reason);
    }
  }
}

}  // namespace ringcc
