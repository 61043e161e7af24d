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
// As env_int and env_double, for settings with a range: a value outside
// [lowest, highest] is refused with the range in the message, rather than
// clamped or cast where a user would not see it.
int64_t env_int_in(const char* name, int64_t fallback, int64_t lowest, int64_t highest,
                   const char* horovod_name = nullptr);
double env_double_at_least(const char* name, double fallback, double lowest, const char* horovod_name = nullptr);
// "NAME=value" of the variable a getter would read (ours, else Horovod's),
// or "" when neither is set.
std::string env_origin(const char* name, const char* horovod_name = nullptr);

// RINGCC_TIMEOUT_S (HOROVOD_GLOO_TIMEOUT_SECONDS; default 60): the bound on
// the waits of joining a job (rendezvous, connections, set-up), and on
// every wait when set.
double timeout_seconds();

// The bound on a collective's (and shutdown's) waits for a live peer:
// RINGCC_COLLECTIVE_TIMEOUT_S, else RINGCC_TIMEOUT_S when that is set, else
// 10 minutes (torch's NCCL default: rank 0 may evaluate or write a
// checkpoint while the others wait). A dead peer fails every rank at once
// whatever the bound.
constexpr double kDefaultCollectiveTimeoutS = 600.0;
double collective_timeout_seconds();
// The variable to name in a message about that bound.
std::string collective_timeout_variable();

// RINGCC_FUSION_THRESHOLD (HOROVOD_FUSION_THRESHOLD; default 64 MiB, 0 or
// more) and RINGCC_CACHE_CAPACITY (HOROVOD_CACHE_CAPACITY; default 1024):
// read by the communicator, the engine, and the settings the ranks compare
// when they meet, which must agree.
int64_t fusion_threshold_from_env();
int cache_capacity_from_env();

// "60", "0.25": a duration in seconds, for messages.
std::string format_seconds(double seconds);

}  // namespace ringcc
