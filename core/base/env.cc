#include "core/base/env.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <limits>
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

int64_t env_int_in(const char* name, int64_t fallback, int64_t lowest, int64_t highest, const char* horovod_name) {
  const int64_t value = env_int(name, fallback, horovod_name);
  if (highest == std::numeric_limits<int64_t>::max()) {
    RINGCC_CHECK(value >= lowest, ErrorKind::kInvalidArgument, env_origin(name, horovod_name),
                 ": the value must be at least ", lowest);
  }
  RINGCC_CHECK(value >= lowest && value <= highest, ErrorKind::kInvalidArgument, env_origin(name, horovod_name),
               ": the value must be from ", lowest, " to ", highest);
  return value;
}

double env_double_at_least(const char* name, double fallback, double lowest, const char* horovod_name) {
  const double value = env_double(name, fallback, horovod_name);
  RINGCC_CHECK(value >= lowest, ErrorKind::kInvalidArgument, env_origin(name, horovod_name),
               ": the value must be at least ", lowest);
  return value;
}

int64_t fusion_threshold_from_env() {
  return env_int_in("RINGCC_FUSION_THRESHOLD", 64 << 20, 0, std::numeric_limits<int64_t>::max(),
                    "HOROVOD_FUSION_THRESHOLD");
}

int cache_capacity_from_env() {
  return static_cast<int>(
      env_int_in("RINGCC_CACHE_CAPACITY", 1024, 0, std::numeric_limits<int>::max(), "HOROVOD_CACHE_CAPACITY"));
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

namespace {

// Asked before every collective. Looking a variable up scans the whole
// environment (hundreds of entries under mpirun), so an answer is kept
// until the environment changes: setenv/putenv/unsetenv (and Python's
// os.environ, which calls them) change the number of entries or put a new
// string where a variable was.
template <size_t N>
class EnvAnswer {
 public:
  explicit EnvAnswer(const char* const (&names)[N]) : names_(names) {}

  template <typename Compute>
  double get(Compute compute) {
    char** env = environ;
    size_t entries = 0;
    while (env && env[entries]) ++entries;
    if (filled_ && env_ == env && entries_ == entries && unchanged(env)) return value_;
    const double value = compute();
    filled_ = locate(env, entries);
    env_ = env;
    entries_ = entries;
    value_ = value;
    return value;
  }

 private:
  bool unchanged(char** env) const {
    for (size_t i = 0; i < N; ++i) {
      if (slot_[i] >= 0 && env[slot_[i]] != entry_[i]) return false;
    }
    return true;
  }

  // Where each set variable's "NAME=value" lies; false when one that
  // getenv() sees is not found there (do not cache then).
  bool locate(char** env, size_t entries) {
    for (size_t i = 0; i < N; ++i) {
      slot_[i] = -1;
      entry_[i] = nullptr;
      if (std::getenv(names_[i]) == nullptr) continue;
      const size_t len = std::strlen(names_[i]);
      for (size_t k = 0; k < entries; ++k) {
        if (std::strncmp(env[k], names_[i], len) == 0 && env[k][len] == '=') {
          slot_[i] = static_cast<long>(k);
          entry_[i] = env[k];
          break;
        }
      }
      if (slot_[i] < 0) return false;
    }
    return true;
  }

  const char* const (&names_)[N];
  bool filled_ = false;
  char** env_ = nullptr;
  size_t entries_ = 0;
  long slot_[N] = {};
  char* entry_[N] = {};
  double value_ = 0;
};

constexpr const char* kSetupTimeoutNames[] = {"RINGCC_TIMEOUT_S", "HOROVOD_GLOO_TIMEOUT_SECONDS"};
constexpr const char* kCollectiveTimeoutNames[] = {"RINGCC_COLLECTIVE_TIMEOUT_S", "RINGCC_TIMEOUT_S",
                                                   "HOROVOD_GLOO_TIMEOUT_SECONDS"};

double positive_seconds(const char* name, double fallback, const char* horovod_name = nullptr) {
  const char* used = nullptr;
  lookup(name, horovod_name, &used);
  const double seconds = env_double(name, fallback, horovod_name);
  RINGCC_CHECK(seconds > 0, ErrorKind::kInvalidArgument, used, " must be a positive number of seconds, got ", seconds);
  return seconds;
}

}  // namespace

double timeout_seconds() {
  thread_local EnvAnswer<2> answer(kSetupTimeoutNames);
  return answer.get([] { return positive_seconds("RINGCC_TIMEOUT_S", 60.0, "HOROVOD_GLOO_TIMEOUT_SECONDS"); });
}

double collective_timeout_seconds() {
  thread_local EnvAnswer<3> answer(kCollectiveTimeoutNames);
  return answer.get([] {
    if (env_is_set("RINGCC_COLLECTIVE_TIMEOUT_S")) {
      return positive_seconds("RINGCC_COLLECTIVE_TIMEOUT_S", kDefaultCollectiveTimeoutS);
    }
    if (env_is_set("RINGCC_TIMEOUT_S") || env_is_set("HOROVOD_GLOO_TIMEOUT_SECONDS")) return timeout_seconds();
    return kDefaultCollectiveTimeoutS;
  });
}

std::string collective_timeout_variable() {
  if (env_is_set("RINGCC_COLLECTIVE_TIMEOUT_S")) return "RINGCC_COLLECTIVE_TIMEOUT_S";
  if (env_is_set("RINGCC_TIMEOUT_S")) return "RINGCC_TIMEOUT_S";
  if (env_is_set("HOROVOD_GLOO_TIMEOUT_SECONDS")) return "HOROVOD_GLOO_TIMEOUT_SECONDS";
  return "RINGCC_COLLECTIVE_TIMEOUT_S";
}

}  // namespace ringcc
