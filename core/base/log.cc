#include "core/base/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "core/base/env.h"

namespace ringcc {
namespace {

std::atomic<int> g_rank{-1};
std::atomic<bool> g_warned_bad_level{false};
std::mutex g_write_mutex;

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "TRACE";
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "LOG";
}

// RINGCC_HOSTNAME (what groups ranks by host) or the system's host name,
// looked up once: every line of a process names the same host.
const std::string& log_host() {
  static const std::string host = [] {
    std::string name = env_str("RINGCC_HOSTNAME", "");
    if (!name.empty()) return name;
    char buf[256] = {0};
    if (::gethostname(buf, sizeof(buf) - 1) != 0) return std::string("?");
    return std::string(buf);
  }();
  return host;
}

// "2025-11-26T09:14:03.127Z": UTC, so lines from several hosts sort together.
std::string utc_time() {
  struct timeval tv;
  ::gettimeofday(&tv, nullptr);
  struct tm parts;
  ::gmtime_r(&tv.tv_sec, &parts);
  char buf[40];
  size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &parts);
  std::snprintf(buf + n, sizeof(buf) - n, ".%03dZ", static_cast<int>(tv.tv_usec / 1000));
  return buf;
}

// "[ringcc 2025-11-26T09:14:03.127Z node1 rank 3 pid 4242] "; "rank" is left
// out before the process joins a job.
std::string line_prefix() {
  int rank = g_rank.load(std::memory_order_relaxed);
  std::string prefix = "[ringcc " + utc_time() + " " + log_host();
  if (rank >= 0) prefix += " rank " + std::to_string(rank);
  return prefix + " pid " + std::to_string(::getpid()) + "] ";
}

// Writes the whole line with as few write(2) calls as the kernel allows (one,
// for anything that fits a pipe buffer), so concurrent lines do not mix.
void write_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_write_mutex);
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr is gone; nothing better to do
    p += n;
    left -= static_cast<size_t>(n);
  }
}

bool parse_level(std::string text, LogLevel* level) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (text == "trace")
    *level = LogLevel::kTrace;
  else if (text == "debug")
    *level = LogLevel::kDebug;
  else if (text == "info")
    *level = LogLevel::kInfo;
  else if (text == "warning" || text == "warn")
    *level = LogLevel::kWarning;
  else if (text == "error" || text == "fatal")
    *level = LogLevel::kError;
  else
    return false;
  return true;
}

// The configured threshold. Read from the environment on every call (a
// getenv and a short compare) so a level set after import still applies.
LogLevel threshold() {
  std::string text = env_str("RINGCC_LOG_LEVEL", "", "HOROVOD_LOG_LEVEL");
  LogLevel level = LogLevel::kWarning;
  if (text.empty() || parse_level(text, &level)) return level;
  if (!g_warned_bad_level.exchange(true)) {
    write_line(line_prefix() + "WARNING: unknown log level '" + text +
               "' (expected trace, debug, info, warning or error); using warning\n");
  }
  return LogLevel::kWarning;
}

}  // namespace

bool log_enabled(LogLevel level) { return level >= threshold(); }

void log_message(LogLevel level, const std::string& message) {
  std::string line = line_prefix() + level_name(level) + ": " + message;
  if (line.empty() || line.back() != '\n') line += '\n';
  write_line(line);
}

void set_log_rank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

int log_rank() { return g_rank.load(std::memory_order_relaxed); }

bool LogRateLimiter::allow(const std::string& key, Clock::time_point now, int64_t* held_back) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    Entry& e = it->second;
    by_age_.splice(by_age_.end(), by_age_, e.age);
    if (now - e.last < interval_) {
      ++e.held_back;
      return false;
    }
    *held_back = e.held_back;
    e.held_back = 0;
    e.last = now;
    return true;
  }
  if (entries_.size() >= max_keys_ && !by_age_.empty()) {
    entries_.erase(by_age_.front());
    by_age_.pop_front();
  }
  Entry& e = entries_[key];
  e.last = now;
  e.age = by_age_.insert(by_age_.end(), key);
  *held_back = 0;
  return true;
}

void log_limited(LogLevel level, const std::string& key, const std::string& message) {
  if (!log_enabled(level)) return;
  static LogRateLimiter limiter(5.0);
  int64_t held_back = 0;
  if (!limiter.allow(key, LogRateLimiter::Clock::now(), &held_back)) return;
  log_message(level, held_back == 0 ? message
                                    : message + " (and " + std::to_string(held_back) +
                                          " more like it from there in the last seconds, not logged)");
}

}  // namespace ringcc
