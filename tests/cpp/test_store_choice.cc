// Unit tests of how the shared-memory allreduce writes its areas: the copy
// whose stores bypass the cache (core/collective/stream_copy.h) against
// memcpy at every alignment and length around its 16- and 64-byte steps,
// and the chooser that times both ways (core/algorithms/store_chooser.h)
// driven with made-up timings.
//
// Exits 0 when every check passes, 1 otherwise.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/algorithms/store_chooser.h"
#include "core/collective/stream_copy.h"
#include "tests/cpp/expect.h"

using namespace ringcc;  // NOLINT(build/namespaces)

namespace {

void test_stream_copy() {
  std::vector<uint8_t> src(4096 + 256), dst(4096 + 256), want(4096 + 256);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  const size_t lengths[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 4096};
  for (size_t dst_off = 0; dst_off < 20; ++dst_off) {
    for (size_t src_off = 0; src_off < 20; src_off += 3) {
      for (size_t len : lengths) {
        std::memset(dst.data(), 0xEE, dst.size());
        std::memset(want.data(), 0xEE, want.size());
        std::memcpy(want.data() + dst_off, src.data() + src_off, len);
        stream_copy(dst.data() + dst_off, src.data() + src_off, len);
        // Equal bytes, and nothing written before or after the range.
        EXPECT(std::memcmp(dst.data(), want.data(), dst.size()) == 0);
      }
    }
  }
}

void test_size_classes() {
  EXPECT(StoreChooser::size_class(0) == -1);
  EXPECT(StoreChooser::size_class((32 << 10) - 1) == -1);
  EXPECT(StoreChooser::size_class(32 << 10) == 0);
  EXPECT(StoreChooser::size_class((64 << 10) - 1) == 0);
  EXPECT(StoreChooser::size_class(64 << 10) == 1);
  EXPECT(StoreChooser::size_class(1 << 20) == 5);
  EXPECT(StoreChooser::size_class(16 << 20) == 9);
  EXPECT(StoreChooser::size_class((64 << 20) + 5) == 11);
  EXPECT(StoreChooser::size_class(size_t{1} << 62) == StoreChooser::kSizeClasses - 1);
  // A fused batch: the same sizes, kSizeClasses on.
  EXPECT(StoreChooser::size_class((32 << 10) - 1, true) == -1);
  EXPECT(StoreChooser::size_class(32 << 10, true) == StoreChooser::kSizeClasses);
  EXPECT(StoreChooser::size_class(4 << 20, true) == 7 + StoreChooser::kSizeClasses);
  EXPECT(StoreChooser::size_class(size_t{1} << 62, true) == StoreChooser::kClasses - 1);
  EXPECT(StoreChooser::kClasses <= 32);  // one bit each in choices()
}

bool bypasses(const StoreChooser& c, int size_class) { return (c.choices() >> size_class) & 1U; }

// Feeds `calls` allreduces of class c timed by plain_ns / bypass_ns per
// byte, each written the way the chooser chose; counts the bypassing ones.
int run(StoreChooser& c, int size_class, int calls, double plain_ns, double bypass_ns) {
  int bypassed = 0;
  for (int i = 0; i < calls; ++i) {
    const bool b = bypasses(c, size_class);
    bypassed += b ? 1 : 0;
    c.record(size_class, b, b ? bypass_ns : plain_ns);
  }
  return bypassed;
}

void test_chooser() {
  {
    StoreChooser c;
    EXPECT(c.choices() == 0);  // plain until timed
    for (uint32_t i = 0; i < StoreChooser::kWarmupCalls; ++i) {
      c.record(2, false, 50.0);  // warm-up calls: not counted
      EXPECT(c.choices() == 0);
    }
    c.record(2, false, 1.0);
    EXPECT(bypasses(c, 2));   // then the other way, once
    EXPECT(!bypasses(c, 3));  // other classes untouched
    c.record(2, true, 2.0);
    EXPECT(!bypasses(c, 2));  // plain was faster
  }
  {
    // Bypassing twice as fast: used, apart from one call in kExploreEvery.
    StoreChooser c;
    const int n = 32 * static_cast<int>(StoreChooser::kExploreEvery);
    run(c, 0, 6, 2.0, 1.0);
    const int bypassed = run(c, 0, n, 2.0, 1.0);
    EXPECT(bypassed >= n - n / static_cast<int>(StoreChooser::kExploreEvery) - 1);
    EXPECT(bypassed < n);  // the plain way is still tried now and then
  }
  {
    // Plain twice as fast: bypassing only when exploring.
    StoreChooser c;
    const int n = 32 * static_cast<int>(StoreChooser::kExploreEvery);
    const int bypassed = run(c, 5, n, 1.0, 2.0);
    EXPECT(bypassed <= n / static_cast<int>(StoreChooser::kExploreEvery) + 2);
    EXPECT(bypassed > 0);
  }
  {
    // A fused batch and one buffer of the same size, alternating, where
    // plain stores suit the buffer and bypassing the batch: each its own
    // way (a class fed both would compare the ways' batches and buffers).
    StoreChooser c;
    const int buffer = StoreChooser::size_class(4 << 20);
    const int batch = StoreChooser::size_class(4 << 20, true);
    const int n = 8 * static_cast<int>(StoreChooser::kExploreEvery);
    int buffer_bypassed = 0, batch_bypassed = 0;
    for (int i = 0; i < n; ++i) {
      buffer_bypassed += run(c, buffer, 1, 1.0, 1.5);
      batch_bypassed += run(c, batch, 1, 3.0, 2.0);
    }
    EXPECT(buffer_bypassed <= n / static_cast<int>(StoreChooser::kExploreEvery) + 2);
    EXPECT(batch_bypassed >= n - n / static_cast<int>(StoreChooser::kExploreEvery) - 2);
  }
  {
    // Within the margins: no taking turns call by call.
    StoreChooser c;
    run(c, 1, 6, 1.0, 1.0);
    int changes = 0;
    bool last = bypasses(c, 1);
    for (int i = 0; i < 200; ++i) {
      const bool b = bypasses(c, 1);
      changes += b != last ? 1 : 0;
      last = b;
      c.record(1, b, b ? (i % 2 ? 1.04 : 0.97) : (i % 3 ? 1.0 : 1.05));
    }
    EXPECT(changes <= 2 * 200 / static_cast<int>(StoreChooser::kExploreEvery) + 2);
  }
  {
    // The machine changes: plain fast, then bypassing fast, then plain.
    StoreChooser c;
    const int n = 8 * static_cast<int>(StoreChooser::kExploreEvery);
    run(c, 3, n, 1.0, 1.4);
    run(c, 3, n, 3.0, 1.4);  // plain became slow
    const int late = run(c, 3, n, 3.0, 1.4);
    EXPECT(late >= n - n / static_cast<int>(StoreChooser::kExploreEvery) - 2);
    run(c, 3, n, 1.0, 1.4);  // and fast again
    const int after = run(c, 3, n, 1.0, 1.4);
    EXPECT(after <= n / static_cast<int>(StoreChooser::kExploreEvery) + 2);
  }
  {
    // A gain within kToBypass keeps plain stores; a clear one does not
    // (class 5: 1 MiB).
    StoreChooser a, b;
    const int n = 8 * static_cast<int>(StoreChooser::kExploreEvery);
    run(a, 5, 6, 1.0, 0.9);
    EXPECT(run(a, 5, n, 1.0, 0.9) <= n / static_cast<int>(StoreChooser::kExploreEvery) + 1);
    run(b, 5, 6, 1.0, 0.8);
    EXPECT(run(b, 5, n, 1.0, 0.8) >= n - n / static_cast<int>(StoreChooser::kExploreEvery) - 1);
  }
  {
    // Below 1 MiB (classes 0 to 4, and 16 to 20 for fused batches) the
    // gain must pass kToBypassBelow1MiB: 20% keeps plain stores there, 40%
    // does not.
    for (int cls : {0, 4, StoreChooser::kSizeClasses, StoreChooser::kSizeClasses + 4}) {
      StoreChooser a, b;
      const int n = 8 * static_cast<int>(StoreChooser::kExploreEvery);
      run(a, cls, 6, 1.0, 0.8);
      EXPECT(run(a, cls, n, 1.0, 0.8) <= n / static_cast<int>(StoreChooser::kExploreEvery) + 1);
      run(b, cls, 6, 1.0, 0.6);
      EXPECT(run(b, cls, n, 1.0, 0.6) >= n - n / static_cast<int>(StoreChooser::kExploreEvery) - 1);
    }
  }
  {
    // Plain 15% faster, with one call in five preempted (6x its time):
    // plain stays in use.
    StoreChooser c;
    run(c, 2, 6, 1.0, 1.15);
    int bypassed = 0;
    const int n = 16 * static_cast<int>(StoreChooser::kExploreEvery);
    for (int i = 0; i < n; ++i) {
      const bool b = bypasses(c, 2);
      bypassed += b ? 1 : 0;
      c.record(2, b, (b ? 1.15 : 1.0) * (i % 5 == 0 ? 6.0 : 1.0));
    }
    EXPECT(bypassed <= n / static_cast<int>(StoreChooser::kExploreEvery) + 2);
  }
  {
    // Nonsense timings and classes are ignored.
    StoreChooser c;
    c.record(-1, false, 1.0);
    c.record(StoreChooser::kClasses, false, 1.0);
    c.record(0, false, 0.0);
    c.record(0, false, -3.0);
    EXPECT(c.choices() == 0);
  }
}

}  // namespace

int main() {
  test_stream_copy();
  test_size_classes();
  test_chooser();
  if (g_failures > 0) {
    std::printf("%d passed, %d failed\n", g_checks - g_failures, g_failures);
    return 1;
  }
  std::printf("all %d checks passed\n", g_checks);
  return 0;
}
