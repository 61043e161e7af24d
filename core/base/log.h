// Logging to stderr, filtered by RINGCC_LOG_LEVEL (trace, debug, info,
// warning, error; default warning). HOROVOD_LOG_LEVEL is read when ours is
// unset. Every line starts with the time (UTC), host, rank and pid:
//   [ringcc 2025-11-26T09:14:03.127Z node1 rank 3 pid 4242] WARNING: ...
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/base/error.h"

namespace ringcc {

enum class LogLevel { kTrace = 0, kDebug = 1, kInfo = 2, kWarning = 3, kError = 4 };

bool log_enabled(LogLevel level);
void log_message(LogLevel level, const std::string& message);
// Rank shown in the prefix of every line (-1: none yet).
void set_log_rank(int rank);
int log_rank();  // -1 before any

// Decides which of many lines of one kind get logged: one per key every
// interval; the lines held back in between are counted and the next line
// logged for the key says how many. Remembers at most `max_keys` keys (the
// longest unseen is forgotten), so a flood from many sources stays
// bounded. Thread-safe.
class LogRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogRateLimiter(double interval_s, size_t max_keys = 256)
      : interval_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval_s))),
        max_keys_(max_keys) {}
  // True when a line for `key` may be logged at `now`; *held_back then
  // gets how many lines for it were held back since the last one logged.
  bool allow(const std::string& key, Clock::time_point now, int64_t* held_back);

 private:
  struct Entry {
    Clock::time_point last;
    int64_t held_back = 0;
    std::list<std::string>::iterator age;
  };
  Clock::duration interval_;
  size_t max_keys_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> by_age_;  // least recently seen first
};

// Logs `message` at most once every 5 s per `key` (e.g. a connection's
// source and what was wrong with it), with the count of lines held back:
// for what strangers can make happen as often as they like.
void log_limited(LogLevel level, const std::string& key, const std::string& message);

}  // namespace ringcc

#define RINGCC_LOG(level, ...)                                                                 \
  do {                                                                                         \
    if (::ringcc::log_enabled(::ringcc::LogLevel::level))                                      \
      ::ringcc::log_message(::ringcc::LogLevel::level, ::ringcc::detail::concat(__VA_ARGS__)); \
  } while (0)
