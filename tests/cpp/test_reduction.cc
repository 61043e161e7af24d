// Tests for the reduction kernels (core/collective/reduction.h) and the dtype and
// reduce-op helpers. Every kernel result is compared with a scalar reference
// written here from the definitions, including reference float16/bfloat16
// conversions built on frexp/ldexp/nearbyint rather than bit tricks.
//
// Exits 0 when every check passes, 1 otherwise.
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/base/error.h"
#include "core/collective/dtype.h"
#include "core/collective/reduce_op.h"
#include "core/collective/reduction.h"

using ringcc::DataType;
using ringcc::ReduceOp;

namespace {

int g_failures = 0;
int g_checks = 0;

// Records a failed check; prints only the first few of each run so that one
// broken kernel does not flood the output.
void fail(const std::string& message) {
  ++g_failures;
  if (g_failures <= 30) std::fprintf(stderr, "FAIL: %s\n", message.c_str());
}

#define EXPECT(cond, ...)                                   \
  do {                                                      \
    ++g_checks;                                             \
    if (!(cond)) fail(ringcc::detail::concat(__VA_ARGS__)); \
  } while (0)

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint64_t bits_of(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

// ---------------------------------------------------------------------------
// Reference conversions, from the IEEE definitions.
// ---------------------------------------------------------------------------

// binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits.
float ref_half_to_float(uint16_t h) {
  const bool negative = (h & 0x8000) != 0;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0x1f) {
    // inf or NaN: the float32 with the same sign and the payload in the
    // top mantissa bits.
    return float_of((negative ? 0x80000000u : 0u) | 0x7f800000u | (static_cast<uint32_t>(mantissa) << 13));
  }
  double magnitude =
      exponent == 0 ? std::ldexp(static_cast<double>(mantissa), -24) : std::ldexp(1024.0 + mantissa, exponent - 25);
  return static_cast<float>(negative ? -magnitude : magnitude);
}

// Shared rounding of a finite, non-zero magnitude to a binary format with
// `mantissa_bits` stored bits, exponent bias `bias` and largest exponent
// `max_exponent`; returns the bits without the sign. nearbyint rounds to
// nearest even in the default rounding mode.
uint32_t ref_round_magnitude(double a, int mantissa_bits, int bias, int max_exponent) {
  const int min_exponent = 1 - bias;
  const double unit = std::ldexp(1.0, mantissa_bits);
  if (a < std::ldexp(1.0, min_exponent)) {
    // Subnormal: a multiple of 2^(min_exponent - mantissa_bits). A result of
    // exactly 2^mantissa_bits is the smallest normal, encoded the same way.
    return static_cast<uint32_t>(std::nearbyint(std::ldexp(a, mantissa_bits - min_exponent)));
  }
  int e2;
  const double fraction = std::frexp(a, &e2);  // a = fraction * 2^e2, fraction in [0.5, 1)
  int exponent = e2 - 1;
  double m = std::nearbyint((fraction * 2.0 - 1.0) * unit);
  if (m == unit) {
    m = 0;
    ++exponent;
  }
  if (exponent > max_exponent) return static_cast<uint32_t>(max_exponent + bias + 1) << mantissa_bits;
  return (static_cast<uint32_t>(exponent + bias) << mantissa_bits) | static_cast<uint32_t>(m);
}

// NaN rule: NumPy's (keep the top payload bits, never let them become 0).
uint16_t ref_float_to_half(float f) {
  const uint32_t x = bits_of(f);
  const uint16_t sign = (x & 0x80000000u) ? 0x8000 : 0;
  if (std::isnan(f)) {
    uint32_t payload = (x >> 13) & 0x3ff;
    if (payload == 0) payload = 1;
    return static_cast<uint16_t>(sign | 0x7c00 | payload);
  }
  if (std::isinf(f)) return static_cast<uint16_t>(sign | 0x7c00);
  if (f == 0.0f) return sign;
  return static_cast<uint16_t>(sign | ref_round_magnitude(std::fabs(static_cast<double>(f)), 10, 15, 15));
}

float ref_bfloat16_to_float(uint16_t b) {
  const bool negative = (b & 0x8000) != 0;
  const int exponent = (b >> 7) & 0xff;
  const int mantissa = b & 0x7f;
  if (exponent == 0xff) {
    return float_of((negative ? 0x80000000u : 0u) | 0x7f800000u | (static_cast<uint32_t>(mantissa) << 16));
  }
  double magnitude =
      exponent == 0 ? std::ldexp(static_cast<double>(mantissa), -133) : std::ldexp(128.0 + mantissa, exponent - 134);
  return static_cast<float>(negative ? -magnitude : magnitude);
}

// NaN rule: the quiet NaN 0x7fc0 with the sign (ml_dtypes' rule).
uint16_t ref_float_to_bfloat16(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7fc0);
  if (std::isinf(f)) return static_cast<uint16_t>(sign | 0x7f80);
  if (f == 0.0f) return sign;
  return static_cast<uint16_t>(sign | ref_round_magnitude(std::fabs(static_cast<double>(f)), 7, 127, 127));
}

// splitmix64: fast, and good enough to spread test values around.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }

 private:
  uint64_t state_;
};

bool half_is_nan(uint16_t h) { return (h & 0x7fff) > 0x7c00; }
bool bfloat16_is_nan(uint16_t b) { return (b & 0x7fff) > 0x7f80; }

// ---------------------------------------------------------------------------
// Conversion tests
// ---------------------------------------------------------------------------

void test_half_all_patterns() {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    const float got = ringcc::half_to_float(b);
    const float want = ref_half_to_float(b);
    EXPECT(bits_of(got) == bits_of(want), "half_to_float(", hex(h), ") = ", hex(bits_of(got)), ", want ",
           hex(bits_of(want)));
    // Every half is exactly representable in float32, so the round trip is
    // the identity, NaN payloads included.
    EXPECT(ringcc::float_to_half(got) == b, "float_to_half(half_to_float(", hex(h),
           ")) = ", hex(ringcc::float_to_half(got)));
  }
}

void test_bfloat16_all_patterns() {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    const float got = ringcc::bfloat16_to_float(b);
    EXPECT(bits_of(got) == bits_of(ref_bfloat16_to_float(b)), "bfloat16_to_float(", hex(h), ") = ", hex(bits_of(got)));
    EXPECT(bits_of(got) == (h << 16), "bfloat16_to_float(", hex(h), ") is not the top half");
    const uint16_t back = ringcc::float_to_bfloat16(got);
    const uint16_t want = bfloat16_is_nan(b) ? static_cast<uint16_t>((b & 0x8000) | 0x7fc0) : b;
    EXPECT(back == want, "float_to_bfloat16(bfloat16_to_float(", hex(h), ")) = ", hex(back));
  }
}

// Float32 inputs covering every sign/exponent/upper-mantissa combination,
// each with low bits chosen to land exactly on, just below and just above
// the rounding ties, plus random low bits.
template <typename Fn>
void for_sampled_floats(int kept_bits, Fn&& fn) {
  const int dropped = 32 - kept_bits;
  const uint32_t half_ulp = 1u << (dropped - 1);
  const uint32_t low_mask = (1u << dropped) - 1;
  std::mt19937 rng(1234);
  const uint32_t lows[] = {0, 1, half_ulp - 1, half_ulp, half_ulp + 1, low_mask};
  for (uint64_t top = 0; top < (uint64_t{1} << kept_bits); ++top) {
    const uint32_t high = static_cast<uint32_t>(top) << dropped;
    for (uint32_t low : lows) fn(high | low);
    fn(high | (rng() & low_mask));
  }
}

void test_float_to_half_rounding() {
  // Sign, 8 exponent bits and the 10 mantissa bits a half keeps.
  for_sampled_floats(19, [](uint32_t x) {
    const float f = float_of(x);
    const uint16_t got = ringcc::float_to_half(f);
    const uint16_t want = ref_float_to_half(f);
    EXPECT(got == want, "float_to_half(", hex(x), ") = ", hex(got), ", want ", hex(want));
  });
  // Known values.
  struct Case {
    float in;
    uint16_t out;
  } cases[] = {
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {65504.0f, 0x7bff},
      {65519.99f, 0x7bff},
      {65520.0f, 0x7c00},  // ties to even: rounds up to inf
      {1e10f, 0x7c00},
      {std::ldexp(1.0f, -24), 0x0001},
      {std::ldexp(1.0f, -25), 0x0000},         // tie to even, down to 0
      {std::ldexp(3.0f, -25), 0x0002},         // tie to even, up
      {std::ldexp(1.0f, -14), 0x0400},         // smallest normal
      {std::ldexp(1023.0f, -24), 0x03ff},      // largest subnormal
      {std::ldexp(2047.0f, -25), 0x0400},      // rounds up into the normals
      {1.0f + std::ldexp(1.0f, -11), 0x3c00},  // tie, stays even
      {1.0f + std::ldexp(3.0f, -11), 0x3c02},  // tie, up to even
      {-0.0f, 0x8000},
      {float_of(0x7f800001u), 0x7c01},  // sNaN, payload below half's reach
      {float_of(0x7fc00000u), 0x7e00},
      {float_of(0xffc00001u), 0xfe00},
      {float_of(0x7f802000u), 0x7c01},
      {std::numeric_limits<float>::infinity(), 0x7c00},
      {-std::numeric_limits<float>::infinity(), 0xfc00},
  };
  for (const Case& c : cases) {
    const uint16_t got = ringcc::float_to_half(c.in);
    EXPECT(got == c.out, "float_to_half(", c.in, ") = ", hex(got), ", want ", hex(c.out));
  }
}

void test_float_to_bfloat16_rounding() {
  // Sign, 8 exponent bits and the 7 mantissa bits a bfloat16 keeps.
  for_sampled_floats(16, [](uint32_t x) {
    const float f = float_of(x);
    const uint16_t got = ringcc::float_to_bfloat16(f);
    const uint16_t want = ref_float_to_bfloat16(f);
    EXPECT(got == want, "float_to_bfloat16(", hex(x), ") = ", hex(got), ", want ", hex(want));
  });
  struct Case {
    uint32_t in;
    uint16_t out;
  } cases[] = {
      {0x3f800000u, 0x3f80}, {0x3f808000u, 0x3f80},  // tie, stays even
      {0x3f818000u, 0x3f82},                         // tie, up to even
      {0x3f808001u, 0x3f81}, {0x7f7fffffu, 0x7f80},  // FLT_MAX rounds to inf
      {0x00000001u, 0x0000}, {0x00008000u, 0x0000}, {0x00018000u, 0x0002},
      {0x7f800001u, 0x7fc0}, {0xffc12345u, 0xffc0}, {0xff800000u, 0xff80},
  };
  for (const Case& c : cases) {
    const uint16_t got = ringcc::float_to_bfloat16(float_of(c.in));
    EXPECT(got == c.out, "float_to_bfloat16(", hex(c.in), ") = ", hex(got), ", want ", hex(c.out));
  }
}

// ---------------------------------------------------------------------------
// Element types for the kernel tests: storage type S, compute type C.
// ---------------------------------------------------------------------------

template <typename T, DataType D>
struct NativeType {
  using S = T;
  using C = T;
  static constexpr DataType kDtype = D;
  static C load(S s) { return s; }
  static S store(C c) { return c; }
  static S make(C c) { return c; }
  static bool is_nan(S s) {
    if constexpr (std::is_floating_point_v<T>) return std::isnan(s);
    return false;
  }
  static bool same(S a, S b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
      return bits_of(a) == bits_of(b);
    }
    return a == b;
  }
  static std::string show(S s) {
    if constexpr (std::is_floating_point_v<T>) return ringcc::detail::concat(s, " (", hex(bits_of(s)), ")");
    return std::to_string(static_cast<int64_t>(s));
  }
};

struct HalfType {
  using S = uint16_t;
  using C = float;
  static constexpr DataType kDtype = DataType::kFloat16;
  static C load(S s) { return ref_half_to_float(s); }
  static S store(C c) { return ref_float_to_half(c); }
  // Builds test inputs; the library's conversion is much faster than the
  // reference, and any half is a valid input.
  static S make(C c) { return ringcc::float_to_half(c); }
  static bool is_nan(S s) { return half_is_nan(s); }
  static bool same(S a, S b) { return (is_nan(a) && is_nan(b)) || a == b; }
  static std::string show(S s) { return hex(s); }
};

struct BFloat16Type {
  using S = uint16_t;
  using C = float;
  static constexpr DataType kDtype = DataType::kBFloat16;
  static C load(S s) { return ref_bfloat16_to_float(s); }
  static S store(C c) { return ref_float_to_bfloat16(c); }
  static S make(C c) { return ringcc::float_to_bfloat16(c); }
  static bool is_nan(S s) { return bfloat16_is_nan(s); }
  static bool same(S a, S b) { return (is_nan(a) && is_nan(b)) || a == b; }
  static std::string show(S s) { return hex(s); }
};

// The reference operators. Integers wrap modulo 2^bits; float min/max
// return NaN when either side is NaN.
template <typename C>
C ref_combine(ReduceOp op, C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    const uint64_t ua = static_cast<uint64_t>(static_cast<int64_t>(a));
    const uint64_t ub = static_cast<uint64_t>(static_cast<int64_t>(b));
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        return static_cast<C>(ua + ub);
      case ReduceOp::kProduct:
        return static_cast<C>(ua * ub);
      case ReduceOp::kMin:
        return a < b ? a : b;
      case ReduceOp::kMax:
        return a > b ? a : b;
    }
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        return a + b;
      case ReduceOp::kProduct:
        return a * b;
      case ReduceOp::kMin:
        if (std::isnan(a)) return a;
        if (std::isnan(b)) return b;
        return b < a ? b : a == b ? b : a;
      case ReduceOp::kMax:
        if (std::isnan(a)) return a;
        if (std::isnan(b)) return b;
        return b > a ? b : a == b ? b : a;
    }
  }
  return a;
}

// Test data for an operator: integers anywhere in their range (so sums and
// products wrap); floats in a range that keeps chained products finite,
// with NaN, infinities, signed zeros and subnormals sprinkled in.
template <typename Type>
typename Type::S random_value(Rng& rng, ReduceOp op) {
  using S = typename Type::S;
  using C = typename Type::C;
  if constexpr (std::is_integral_v<C>) {
    return static_cast<S>(rng.next());
  } else {
    const uint64_t r = rng.next();
    const double u = static_cast<double>(r >> 11) * 0x1p-53;
    if (r % 64 == 0) {
      const C specials[] = {std::numeric_limits<C>::quiet_NaN(),
                            std::numeric_limits<C>::infinity(),
                            -std::numeric_limits<C>::infinity(),
                            C(0),
                            -C(0),
                            C(3e-7),
                            C(-5e-41)};
      return Type::make(specials[(r >> 6) % 7]);
    }
    if (op == ReduceOp::kProduct) {
      const double magnitude = 0.5 + 1.5 * u;
      return Type::make(static_cast<C>((r >> 6) % 2 ? magnitude : -magnitude));
    }
    return Type::make(static_cast<C>(2000.0 * u - 1000.0));
  }
}

template <typename Type>
std::vector<typename Type::S> random_buffer(Rng& rng, ReduceOp op, int64_t n) {
  std::vector<typename Type::S> v(static_cast<size_t>(n));
  for (auto& x : v) x = random_value<Type>(rng, op);
  return v;
}

const ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};
const int64_t kSizes[] = {0, 1, 7, 255, 256, 257, 1000003};
constexpr int64_t kLargeSize = 1000003;

template <typename Type>
void expect_equal(const std::vector<typename Type::S>& got, const std::vector<typename Type::S>& want,
                  const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (!Type::same(got[i], want[i])) {
      fail(ringcc::detail::concat(what, ": element ", i, " = ", Type::show(got[i]), ", want ", Type::show(want[i])));
      return;
    }
  }
  ++g_checks;
}

template <typename Type>
void test_reduce_inplace(Rng& rng) {
  using S = typename Type::S;
  for (ReduceOp op : kAllOps) {
    for (int64_t n : kSizes) {
      std::vector<S> dst = random_buffer<Type>(rng, op, n);
      const std::vector<S> src = random_buffer<Type>(rng, op, n);
      std::vector<S> want(dst.size());
      for (size_t i = 0; i < want.size(); ++i) {
        want[i] = Type::store(ref_combine(op, Type::load(dst[i]), Type::load(src[i])));
      }
      ringcc::reduce_inplace(dst.data(), src.data(), n, Type::kDtype, op);
      expect_equal<Type>(dst, want,
                         ringcc::detail::concat("reduce_inplace ", ringcc::dtype_name(Type::kDtype), " ",
                                                ringcc::reduce_op_name(op), " n=", n));
    }
  }
}

// Sources 1..5, writing to a separate dst and to the first source. 16-bit
// floats fold in float32 and round once.
template <typename Type>
void test_reduce_many(Rng& rng) {
  using S = typename Type::S;
  using C = typename Type::C;
  for (ReduceOp op : kAllOps) {
    for (int64_t n : kSizes) {
      for (int nsrc = 1; nsrc <= 5; ++nsrc) {
        // The largest size only for a few source counts, to keep the run short.
        if (n == kLargeSize && nsrc != 5) continue;
        std::vector<std::vector<S>> srcs;
        for (int j = 0; j < nsrc; ++j) srcs.push_back(random_buffer<Type>(rng, op, n));
        std::vector<S> want(static_cast<size_t>(n));
        for (size_t i = 0; i < want.size(); ++i) {
          C acc = Type::load(srcs[0][i]);
          for (int j = 1; j < nsrc; ++j) acc = ref_combine(op, acc, Type::load(srcs[j][i]));
          want[i] = nsrc == 1 ? srcs[0][i] : Type::store(acc);
        }
        std::vector<const void*> ptrs;
        for (auto& s : srcs) ptrs.push_back(s.data());
        const std::string what = ringcc::detail::concat("reduce_many ", ringcc::dtype_name(Type::kDtype), " ",
                                                        ringcc::reduce_op_name(op), " n=", n, " nsrc=", nsrc);
        std::vector<S> dst(static_cast<size_t>(n), S{});
        ringcc::reduce_many(dst.data(), ptrs.data(), nsrc, n, Type::kDtype, op);
        expect_equal<Type>(dst, want, what + " (separate dst)");
        ringcc::reduce_many(srcs[0].data(), ptrs.data(), nsrc, n, Type::kDtype, op);
        expect_equal<Type>(srcs[0], want, what + " (dst = first source)");
      }
    }
  }
}

// k when factor == 1.0 / k for a whole k in [2, 5000], found by search (the
// kernels' own test of it is arithmetic).
int64_t whole_reciprocal(double factor) {
  for (int64_t k = 2; k <= 5000; ++k) {
    if (1.0 / static_cast<double>(k) == factor) return k;
  }
  return 0;
}

// Reference scaling (a factor 1/k divides by k): floats in their own precision (16-bit ones through
// float32), integers in double truncated toward zero and saturated.
template <typename Type>
typename Type::S ref_scale(typename Type::S x, double factor) {
  using C = typename Type::C;
  if (const int64_t k = whole_reciprocal(factor)) {  // divides by k
    if constexpr (std::is_integral_v<C>) {
      return static_cast<C>(static_cast<int64_t>(x) / k);
    } else {
      return Type::store(Type::load(x) / static_cast<C>(k));
    }
  }
  if constexpr (std::is_integral_v<C>) {
    const double v = std::trunc(static_cast<double>(x) * factor);
    if (std::isnan(v)) return 0;
    if (v >= static_cast<double>(std::numeric_limits<C>::max())) return std::numeric_limits<C>::max();
    if (v <= static_cast<double>(std::numeric_limits<C>::min())) return std::numeric_limits<C>::min();
    return static_cast<C>(v);
  } else {
    return Type::store(Type::load(x) * static_cast<C>(factor));
  }
}

template <typename Type>
void test_scale(Rng& rng) {
  using S = typename Type::S;
  const double factors[] = {0.5, 3.0, -1.25, 1.0 / 3.0, 1e-3, 0.0};
  for (int64_t n : kSizes) {
    for (double factor : factors) {
      if (n == kLargeSize && factor != 1.0 / 3.0) continue;
      const std::vector<S> src = random_buffer<Type>(rng, ReduceOp::kSum, n);
      std::vector<S> want(src.size());
      for (size_t i = 0; i < src.size(); ++i) want[i] = ref_scale<Type>(src[i], factor);
      const std::string what = ringcc::detail::concat(ringcc::dtype_name(Type::kDtype), " n=", n, " factor=", factor);
      std::vector<S> out(src.size(), S{});
      ringcc::scale_copy(out.data(), src.data(), n, Type::kDtype, factor);
      expect_equal<Type>(out, want, "scale_copy " + what);
      std::vector<S> buf = src;
      ringcc::scale_inplace(buf.data(), n, Type::kDtype, factor);
      expect_equal<Type>(buf, want, "scale_inplace " + what);
    }
  }
}

// An average's postscale 1/k divides by k: float32 142 * (1/3) in float
// is an ulp above 142 / 3; 49 * (1/49) is just under 1 in double, which
// truncated made 0; int64 beyond 2^53 divides exactly.
void test_reciprocal_divides() {
  EXPECT(ringcc::reciprocal_divisor(1.0 / 3.0) == 3, "1/3 is a reciprocal");
  EXPECT(ringcc::reciprocal_divisor(1.0 / 49.0) == 49, "1/49 is a reciprocal");
  EXPECT(ringcc::reciprocal_divisor(0.5) == 2, "0.5 is a reciprocal");
  EXPECT(ringcc::reciprocal_divisor(2.0 / 3.0) == 0, "2/3 is not");
  EXPECT(ringcc::reciprocal_divisor(0.3) == 0, "0.3 is not");
  EXPECT(ringcc::reciprocal_divisor(1.0) == 0, "1 is not (a copy)");
  EXPECT(ringcc::reciprocal_divisor(-0.5) == 0, "-0.5 is not");
  EXPECT(ringcc::reciprocal_divisor(0.0) == 0, "0 is not");
  EXPECT(ringcc::reciprocal_divisor(1.0 / 4294967296.0) == 0, "1/2^32 is beyond the divisors taken");

  float f[] = {142.0f, 150.0f, -188.0f};
  ringcc::scale_inplace(f, 3, DataType::kFloat32, 1.0 / 3.0);
  const float wantf[] = {142.0f / 3.0f, 50.0f, -188.0f / 3.0f};
  for (int i = 0; i < 3; ++i) EXPECT(f[i] == wantf[i], "float32 average ", i, ": ", f[i], " != ", wantf[i]);
  EXPECT(142.0f * static_cast<float>(1.0 / 3.0) != 142.0f / 3.0f, "the case that multiplying gets wrong");

  double d[] = {142.0, 1.0};
  ringcc::scale_copy(d, d, 2, DataType::kFloat64, 1.0 / 3.0);
  EXPECT(d[0] == 142.0 / 3.0 && d[1] == 1.0 / 3.0, "float64 average: ", d[0], " ", d[1]);

  int32_t i32[] = {49, -49, 48, 2147483647};
  ringcc::scale_inplace(i32, 4, DataType::kInt32, 1.0 / 49.0);
  const int32_t want32[] = {1, -1, 0, 2147483647 / 49};
  for (int i = 0; i < 4; ++i) EXPECT(i32[i] == want32[i], "int32 average over 49 ", i, ": ", i32[i]);

  int64_t i64[] = {(int64_t{1} << 62) + 3, -((int64_t{1} << 62) + 3)};
  ringcc::scale_inplace(i64, 2, DataType::kInt64, 1.0 / 3.0);
  EXPECT(i64[0] == ((int64_t{1} << 62) + 3) / 3 && i64[1] == -i64[0], "int64 average beyond 2^53: ", i64[0]);

  uint8_t u8[] = {255, 2};
  ringcc::scale_inplace(u8, 2, DataType::kUInt8, 0.5);
  EXPECT(u8[0] == 127 && u8[1] == 1, "uint8 halves: ", int(u8[0]), " ", int(u8[1]));

  uint16_t h[] = {ringcc::float_to_half(7.0f)};
  ringcc::scale_inplace(h, 1, DataType::kFloat16, 1.0 / 3.0);
  EXPECT(h[0] == ringcc::float_to_half(7.0f / 3.0f), "float16 average: ", ringcc::half_to_float(h[0]));
}

// Integer scaling at the edges of the range: truncation toward zero and
// saturation.
void test_integer_scale_edges() {
  int32_t v32[] = {7, -7, 2000000000, -2000000000, 1};
  ringcc::scale_inplace(v32, 5, DataType::kInt32, 1.5);
  const int32_t want32[] = {10, -10, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), 1};
  for (int i = 0; i < 5; ++i) EXPECT(v32[i] == want32[i], "int32 scale edge ", i, ": ", v32[i]);

  int8_t v8[] = {100, -100, 3, -3};
  ringcc::scale_inplace(v8, 4, DataType::kInt8, 2.0);
  const int8_t want8[] = {127, -128, 6, -6};
  for (int i = 0; i < 4; ++i) EXPECT(v8[i] == want8[i], "int8 scale edge ", i, ": ", int(v8[i]));

  int64_t v64[] = {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), 5};
  ringcc::scale_inplace(v64, 3, DataType::kInt64, 4.0);
  const int64_t want64[] = {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), 20};
  for (int i = 0; i < 3; ++i) EXPECT(v64[i] == want64[i], "int64 scale edge ", i, ": ", v64[i]);

  uint8_t vu8[] = {200, 9};
  ringcc::scale_inplace(vu8, 2, DataType::kUInt8, -1.0);
  EXPECT(vu8[0] == 0 && vu8[1] == 0, "uint8 scale by -1 saturates at 0");
}

template <typename Type>
void test_type(Rng& rng) {
  test_reduce_inplace<Type>(rng);
  test_reduce_many<Type>(rng);
  test_scale<Type>(rng);
}

// ---------------------------------------------------------------------------
// Names, validity and errors
// ---------------------------------------------------------------------------

void test_names() {
  const char* names[] = {"float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64"};
  const size_t sizes[] = {2, 2, 4, 8, 1, 1, 4, 8};
  for (int i = 0; i < ringcc::kNumDataTypes; ++i) {
    const DataType d = static_cast<DataType>(i);
    EXPECT(std::string(ringcc::dtype_name(d)) == names[i], "dtype_name(", i, ")");
    EXPECT(ringcc::dtype_size(d) == sizes[i], "dtype_size(", i, ")");
    EXPECT(ringcc::dtype_valid(i), "dtype_valid(", i, ")");
  }
  EXPECT(!ringcc::dtype_valid(-1) && !ringcc::dtype_valid(8), "dtype_valid out of range");
  const char* ops[] = {"sum", "average", "min", "max", "product"};
  for (int i = 0; i < 5; ++i) {
    EXPECT(std::string(ringcc::reduce_op_name(static_cast<ReduceOp>(i))) == ops[i], "reduce_op_name(", i, ")");
    EXPECT(ringcc::reduce_op_valid(i), "reduce_op_valid(", i, ")");
  }
  EXPECT(!ringcc::reduce_op_valid(-1) && !ringcc::reduce_op_valid(5), "reduce_op_valid out of range");
}

template <typename Fn>
void expect_error(ringcc::ErrorKind kind, const char* what, Fn&& fn) {
  ++g_checks;
  try {
    fn();
    fail(ringcc::detail::concat(what, ": no error raised"));
  } catch (const ringcc::Error& e) {
    if (e.kind() != kind) fail(ringcc::detail::concat(what, ": wrong error kind: ", e.what()));
  }
}

void test_errors() {
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1};
  const void* srcs[2] = {a, b};
  const auto bad_dtype = static_cast<DataType>(42);
  const auto bad_op = static_cast<ReduceOp>(9);
  using ringcc::ErrorKind;
  expect_error(ErrorKind::kUnsupportedType, "reduce_inplace bad dtype",
               [&] { ringcc::reduce_inplace(a, b, 4, bad_dtype, ReduceOp::kSum); });
  expect_error(ErrorKind::kInvalidArgument, "reduce_inplace bad op",
               [&] { ringcc::reduce_inplace(a, b, 4, DataType::kFloat32, bad_op); });
  expect_error(ErrorKind::kInvalidArgument, "reduce_inplace negative count",
               [&] { ringcc::reduce_inplace(a, b, -1, DataType::kFloat32, ReduceOp::kSum); });
  expect_error(ErrorKind::kInvalidArgument, "reduce_inplace null dst",
               [&] { ringcc::reduce_inplace(nullptr, b, 4, DataType::kFloat32, ReduceOp::kSum); });
  expect_error(ErrorKind::kUnsupportedType, "reduce_many bad dtype",
               [&] { ringcc::reduce_many(a, srcs, 2, 4, bad_dtype, ReduceOp::kSum); });
  expect_error(ErrorKind::kInvalidArgument, "reduce_many bad op",
               [&] { ringcc::reduce_many(a, srcs, 2, 4, DataType::kFloat32, bad_op); });
  expect_error(ErrorKind::kInvalidArgument, "reduce_many no sources",
               [&] { ringcc::reduce_many(a, srcs, 0, 4, DataType::kFloat32, ReduceOp::kSum); });
  expect_error(ErrorKind::kInvalidArgument, "reduce_many dst aliases a later source",
               [&] { ringcc::reduce_many(b, srcs, 2, 4, DataType::kFloat32, ReduceOp::kSum); });
  expect_error(ErrorKind::kUnsupportedType, "scale_inplace bad dtype",
               [&] { ringcc::scale_inplace(a, 4, bad_dtype, 2.0); });
  expect_error(ErrorKind::kUnsupportedType, "scale_copy bad dtype",
               [&] { ringcc::scale_copy(a, b, 4, bad_dtype, 2.0); });
  // A count of 0 touches nothing, so null pointers are fine.
  ringcc::reduce_inplace(nullptr, nullptr, 0, DataType::kFloat32, ReduceOp::kSum);
  ringcc::reduce_many(nullptr, srcs, 2, 0, DataType::kInt8, ReduceOp::kMax);
  ringcc::scale_inplace(nullptr, 0, DataType::kFloat16, 2.0);
  ringcc::scale_copy(nullptr, nullptr, 0, DataType::kBFloat16, 2.0);
  EXPECT(a[0] == 1 && b[0] == 1, "failed calls left the buffers alone");
}

}  // namespace

int main() {
  test_names();
  test_errors();
  test_half_all_patterns();
  test_bfloat16_all_patterns();
  test_float_to_half_rounding();
  test_float_to_bfloat16_rounding();

  Rng rng(20240917);
  test_type<HalfType>(rng);
  test_type<BFloat16Type>(rng);
  test_type<NativeType<float, DataType::kFloat32>>(rng);
  test_type<NativeType<double, DataType::kFloat64>>(rng);
  test_type<NativeType<int8_t, DataType::kInt8>>(rng);
  test_type<NativeType<uint8_t, DataType::kUInt8>>(rng);
  test_type<NativeType<int32_t, DataType::kInt32>>(rng);
  test_type<NativeType<int64_t, DataType::kInt64>>(rng);
  test_integer_scale_edges();
  test_reciprocal_divides();

  if (g_failures > 0) {
    std::printf("%d passed, %d failed\n", g_checks - g_failures, g_failures);
    return 1;
  }
  std::printf("%d passed, 0 failed\n", g_checks);
  return 0;
}
