// Reading settings from the environment. Each getter takes our RINGCC_ name
// and optionally Horovod's, read when ours is unset, so migrating users keep
// their settings.
#pragma once

#include <cstdint>
#include <string>

namespace ringcc {

bool env_is_set(const char* name);
std::string env_str(const char* name, const std::string& fallback, const char* horovod_name = nullptr);
int64_t env_int(const char* name, int64_t fallback, const char* horovod_name = nullptr);
double env_double(const char* name, double fallback, const char* horovod_name = nullptr);
// "NAME=value" of the variable a getter would read (ours, else Horovod's),
// or "" when neither is set.
std::string env_origin(const char* name, const char* horovod_name = nullptr);

// RINGCC_TIMEOUT_S (default 60): the bound on every wait.
double timeout_seconds();

// "60", "0.25": a duration in seconds, for messages.
std::string format_seconds(double seconds);

}  // namespace ringcc
