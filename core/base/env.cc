#include "core/base/env.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <sstream>

#include <unistd.h>

#include "core/base/error.h"

namespace ringcc {
namespace {

// A variable set to the empty string counts as unset, so `RINGCC_X= cmd`
// restores the default.
const char* env_value(const char* name) {
  if (name == nullptr) return nullptr;
  const char* value = std::getenv(name);
  return (value != nullptr && value[0] != '\0') ? value : nullptr;
}

// Our variable if set, else Horovod's if set; *used_name tells which.
const char* lookup(const char* name, const char* horovod_name, const char** used_name) {
  const char* value = env_value(name);
  *used_name = name;
  if (value == nullptr && horovod_name != nullptr) {
    value = env_value(horovod_name);
    *used_name = horovod_name;
  }
  return value;
}

std::string trimmed(const char* text) {
  std::string s(text);
  const char* space = " \t\r\n";
  size_t begin = s.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  size_t end = s.find_last_not_of(space);
  return s.substr(begin, end - begin + 1);
}

}  // namespace

bool env_is_set(const char* name) { return env_value(name) != nullptr; }

std::string env_origin(const char* name, const char* horovod_name) {
  const char* used = nullptr;
  const char* value = lookup(name, horovod_name, &used);
  return value != nullptr ? std::string(used) + "=" + value : std::string();
}

std::string env_str(const char* name, const std::string& fallback, const char* horovod_name) {
  const char* used = nullptr;
  const char* value = lookup(name, horovod_name, &used);
  return value != nullptr ? std::string(value) : fallback;
}

int64_t env_int(const char* name, int64_t fallback, const char* horovod_name) {
  const char* used = nullptr;
  const char* value = lookup(name, horovod_name, &used);
  if (value == nullptr) return fallback;
  std::string text = trimmed(value);
  char* end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(text.c_str(), &end, 10);
  bool ok = !text.empty() && end == text.c_str() + text.size() && errno != ERANGE;
  RINGCC_CHECK(ok, ErrorKind::kInvalidArgument, used, " must be a number, got '", value, "' (an integer is expected)");
  return static_cast<int64_t>(parsed);
}

double env_double(const char* name, double fallback, const char* horovod_name) {
  const char* used = nullptr;
  const char* value = lookup(name, horovod_name, &used);
  if (value == nullptr) return fallback;
  std::string text = trimmed(value);
  char* end = nullptr;
  errno = 0;
  double parsed = std::strtod(text.c_str(), &end);
  bool ok = !text.empty() && end == text.c_str() + text.size() && errno != ERANGE && std::isfinite(parsed);
  RINGCC_CHECK(ok, ErrorKind::kInvalidArgument, used, " must be a number, got '", value, "'");
  return parsed;
}

std::string format_seconds(double seconds) {
  std::ostringstream os;
  if (seconds >= 100) {
    os << std::llround(seconds);
  } else {
    os << std::setprecision(3) << seconds;
  }
  return os.str();
}

double timeout_seconds() {
  // Asked before every collective. Looking a variable up scans the whole
  // environment (hundreds of entries under mpirun), so the answer is kept
  // until the environment changes: setenv/putenv/unsetenv (and Python's
  // os.environ, which calls them) change the number of entries or put a new
  // string where the variable was.
  struct Cache {
    char** env = nullptr;
    size_t entries = 0;
    long slot = -1;  // index of the variable that was used, -1: none set
    char* entry = nullptr;
    double seconds = 0;
  };
  thread_local Cache cache;
  char** env = environ;
  size_t entries = 0;
  while (env && env[entries]) ++entries;
  if (cache.env == env && cache.entries == entries && cache.env != nullptr &&
      (cache.slot < 0 || env[cache.slot] == cache.entry)) {
    return cache.seconds;
  }
  const char* used = nullptr;
  const char* value = lookup("RINGCC_TIMEOUT_S", "HOROVOD_GLOO_TIMEOUT_SECONDS", &used);
  double seconds = env_double("RINGCC_TIMEOUT_S", 60.0, "HOROVOD_GLOO_TIMEOUT_SECONDS");
  RINGCC_CHECK(seconds > 0, ErrorKind::kInvalidArgument, used, " must be a positive number of seconds, got ", seconds);
  long slot = -1;
  if (value) {
    for (size_t i = 0; i < entries; ++i) {
      // The entry is "NAME=value"; value points just past the '='.
      const char* e = env[i];
      const size_t len = std::strlen(used);
      if (std::strncmp(e, used, len) == 0 && e[len] == '=' && e + len + 1 == value) {
        slot = static_cast<long>(i);
        break;
      }
    }
    if (slot < 0) return seconds;  // not found where expected: do not cache
  }
  cache.env = env;
  cache.entries = entries;
  cache.slot = slot;
  cache.entry = slot >= 0 ? env[slot] : nullptr;
  cache.seconds = seconds;
  return seconds;
}

}  // namespace ringcc
