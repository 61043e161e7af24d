// Logging to stderr, filtered by RINGCC_LOG_LEVEL (trace, debug, info,
// warning, error; default warning). HOROVOD_LOG_LEVEL is read when ours is
// unset. Every line starts with the time (UTC), host, rank and pid:
//   [ringcc 2025-11-26T09:14:03.127Z node1 rank 3 pid 4242] WARNING: ...
#pragma once

#include <string>

#include "core/base/error.h"

namespace ringcc {

enum class LogLevel { kTrace = 0, kDebug = 1, kInfo = 2, kWarning = 3, kError = 4 };

bool log_enabled(LogLevel level);
void log_message(LogLevel level, const std::string& message);
// Rank shown in the prefix of every line (-1: none yet).
void set_log_rank(int rank);
int log_rank();  // -1 before any

}  // namespace ringcc

#define RINGCC_LOG(level, ...)                                                                 \
  do {                                                                                         \
    if (::ringcc::log_enabled(::ringcc::LogLevel::level))                                      \
      ::ringcc::log_message(::ringcc::LogLevel::level, ::ringcc::detail::concat(__VA_ARGS__)); \
  } while (0)
