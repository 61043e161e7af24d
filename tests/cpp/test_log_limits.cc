// Unit tests of what strangers can make ringcc do as often as they like:
// the rate limit on log lines about refused connections
// (core/base/log.h, LogRateLimiter) driven with made-up times, and the
// host an endpoint's text names (core/os/socket.h, endpoint_host).
//
// Exits 0 when every check passes, 1 otherwise.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/base/log.h"
#include "core/os/socket.h"
#include "tests/cpp/expect.h"

using namespace ringcc;  // NOLINT(build/namespaces)

namespace {

using Clock = LogRateLimiter::Clock;

void test_one_line_per_key_and_interval() {
  LogRateLimiter limiter(5.0);
  const Clock::time_point t0 = Clock::now();
  int64_t held = -1;
  EXPECT(limiter.allow("10.0.0.9 refused", t0, &held) && held == 0);
  int allowed = 0;
  for (int i = 1; i <= 1000; ++i) {
    allowed += limiter.allow("10.0.0.9 refused", t0 + std::chrono::milliseconds(i), &held);
  }
  EXPECT(allowed == 0);
  // Another source, or another reason, has a line of its own.
  EXPECT(limiter.allow("10.0.0.8 refused", t0 + std::chrono::seconds(1), &held) && held == 0);
  EXPECT(limiter.allow("10.0.0.9 bad greeting", t0 + std::chrono::seconds(1), &held) && held == 0);
  // After the interval the next line says how many were held back.
  EXPECT(limiter.allow("10.0.0.9 refused", t0 + std::chrono::seconds(6), &held) && held == 1000);
  EXPECT(!limiter.allow("10.0.0.9 refused", t0 + std::chrono::seconds(7), &held));
  EXPECT(limiter.allow("10.0.0.9 refused", t0 + std::chrono::seconds(12), &held) && held == 1);
}

void test_keys_stay_bounded() {
  LogRateLimiter limiter(5.0, 4);
  const Clock::time_point t0 = Clock::now();
  int64_t held = 0;
  for (int i = 0; i < 100; ++i) EXPECT(limiter.allow("source " + std::to_string(i), t0, &held));
  // The oldest were forgotten: a line for them is logged again at once.
  EXPECT(limiter.allow("source 0", t0 + std::chrono::milliseconds(1), &held) && held == 0);
  // The most recent are remembered.
  EXPECT(!limiter.allow("source 99", t0 + std::chrono::milliseconds(1), &held));
}

void test_endpoint_host() {
  EXPECT(endpoint_host("10.0.0.1:5000") == "10.0.0.1");
  EXPECT(endpoint_host("[fd00::1]:5000") == "fd00::1");
  EXPECT(endpoint_host("fd00::1") == "fd00::1");
  EXPECT(endpoint_host("node7") == "node7");
}

}  // namespace

int main() {
  test_one_line_per_key_and_interval();
  test_keys_stay_bounded();
  test_endpoint_host();
  std::printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
