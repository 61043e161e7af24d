// Element-wise reduction and scaling kernels.
//
// Layout of this file:
//   1. bit-exact 16-bit float conversions, written branch-free (selects
//      only) so the loops that call them vectorise;
//   2. the operators, as functors;
//   3. kernels for types the CPU computes in directly (float32, float64,
//      integers) and for 16-bit floats (widened to float32 block by block);
//   4. validation and dispatch behind the public functions.
//
// The kernels are plain loops over __restrict pointers; with -O3 GCC and
// Clang vectorise them for the baseline ISA (SSE2 on x86-64, NEON on
// AArch64). Float rounding follows the current FPU mode, which is
// round-to-nearest-even unless a caller changed it. Results do not depend on
// the ISA a kernel runs with: there is no FMA contraction (AVX2 alone does
// not enable FMA) and no reassociation.
#include "core/collective/reduction.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/base/error.h"

// The kernel entry points below are built twice with GCC on x86-64 glibc:
// for the baseline ISA and for AVX2, chosen once at load time through an
// ifunc. AVX2 halves the instruction count of the 16-bit conversions and of
// in-cache float loops; large buffers are memory-bound either way. Other
// toolchains build the baseline only (Clang cannot multiversion templates),
// and so does -DRINGCC_NO_MULTIVERSION (to test the baseline on an AVX2
// machine, or for tools that dislike ifuncs).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && \
    !defined(RINGCC_NO_MULTIVERSION)
#define RINGCC_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#else
#define RINGCC_MULTIVERSION
#endif

// The loops an entry point calls must be inlined into it, or its AVX2 clone
// would call their baseline build.
#if defined(__GNUC__)
#define RINGCC_INLINE inline __attribute__((always_inline))
#else
#define RINGCC_INLINE inline
#endif

namespace ringcc {
namespace {

// ---------------------------------------------------------------------------
// 16-bit float conversions
// ---------------------------------------------------------------------------

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Branch-free select. A plain `c ? a : b` whose unused arm holds float
// arithmetic is compiled as a branch (the compiler will not evaluate a float
// operation that may raise a flag speculatively), and a branch stops the
// loop from vectorising; the mask form evaluates both arms.
RINGCC_INLINE uint32_t select_bits(bool c, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return (a & mask) | (b & ~mask);
}

// The conversions below compare magnitudes (sign bit clear) as int32:
// SSE2 has signed 32-bit compares only.

// IEEE binary16 -> binary32. Exact for every input; a NaN keeps its sign
// and payload (shifted into place), so a signalling NaN stays signalling,
// as in NumPy's float16 -> float32 cast.
RINGCC_INLINE float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;  // exponent and mantissa
  const int32_t m = static_cast<int32_t>(magnitude);
  // Normal: shift into place and rebias the exponent from 15 to 127.
  const uint32_t normal = (magnitude << 13) + ((127u - 15u) << 23);
  // Inf and NaN: all-ones exponent, mantissa carried over.
  const uint32_t inf_nan = (magnitude << 13) | 0x7f800000u;
  // Zero and subnormal: the value is mantissa * 2^-24, exact in float32.
  const uint32_t subnormal = bits_of(static_cast<float>(m) * 0x1p-24f);
  uint32_t r = select_bits(m < 0x0400, subnormal, normal);
  r = select_bits(m >= 0x7c00, inf_nan, r);
  return float_of(sign | r);
}

// IEEE binary32 -> binary16 bits (in the low 16 bits of the result),
// rounding to nearest even. Overflow gives inf. A NaN keeps its sign and the
// top 10 payload bits, forced non-zero so it stays a NaN (NumPy's rule).
RINGCC_INLINE uint32_t float_to_half_bits(float f) {
  const uint32_t x = bits_of(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  const int32_t a = static_cast<int32_t>(magnitude);
  // Normal half: rebias the exponent, then add just under half an ulp plus
  // the kept lsb, so ties go to even; a carry out of the mantissa bumps the
  // exponent, which also turns [65520, 65536) into inf. (For smaller inputs
  // the subtraction wraps; that lane is not selected.)
  const uint32_t normal = (magnitude - ((127u - 15u) << 23) + 0x0fffu + ((x >> 13) & 1u)) >> 13;
  // Subnormal half (|f| < 2^-14): in |f| + 0.5 the float32 ulp is 2^-24, the
  // half subnormal step, so the FPU's own rounding yields the half mantissa
  // (and 0x400, the smallest normal, when it rounds up).
  const uint32_t subnormal = bits_of(float_of(magnitude) + 0.5f) - 0x3f000000u;
  const uint32_t payload = (x >> 13) & 0x3ffu;
  const uint32_t nan = 0x7c00u | payload | static_cast<uint32_t>(payload == 0);
  uint32_t r = select_bits(a < 0x38800000, subnormal, normal);
  r = select_bits(a >= 0x47800000, 0x7c00u, r);  // |f| >= 65536
  r = select_bits(a > 0x7f800000, nan, r);
  return sign | r;
}

// bfloat16 is the top half of a float32.
RINGCC_INLINE float bfloat16_bits_to_float(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

// Round to nearest even, result in the low 16 bits; overflow gives inf. NaN
// becomes the quiet NaN 0x7fc0 with its sign, as ml_dtypes (and Eigen) do.
RINGCC_INLINE uint32_t float_to_bfloat16_bits(float f) {
  const uint32_t x = bits_of(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = ((x >> 16) & 0x8000u) | 0x7fc0u;
  return select_bits(static_cast<int32_t>(x & 0x7fffffffu) > 0x7f800000, nan, rounded);
}

struct HalfCodec {
  static float decode(uint16_t h) { return half_bits_to_float(h); }
  static uint32_t encode(float f) { return float_to_half_bits(f); }
};

struct BFloat16Codec {
  static float decode(uint16_t b) { return bfloat16_bits_to_float(b); }
  static uint32_t encode(float f) { return float_to_bfloat16_bits(f); }
};

// ---------------------------------------------------------------------------
// Operators
// ---------------------------------------------------------------------------

// Integers are combined as their unsigned counterparts so that sum and
// product wrap around instead of overflowing (undefined for signed types).
template <typename T, bool = std::is_integral_v<T>>
struct Wrap {
  using type = T;
};
template <typename T>
struct Wrap<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using WrapType = typename Wrap<T>::type;

struct SumOp {
  template <typename T>
  static T apply(T a, T b) {
    using U = WrapType<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  }
};

struct ProductOp {
  template <typename T>
  static T apply(T a, T b) {
    using U = WrapType<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  }
};

// Float min and max propagate NaN from either side, like np.minimum and
// np.maximum. The conditions use `|`, not `||`, to stay branch-free.
struct MinOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return ((a < b) | (a != a)) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};

struct MaxOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return ((a > b) | (a != a)) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};

// ---------------------------------------------------------------------------
// Loops shared by all element types
// ---------------------------------------------------------------------------

template <typename Op, typename T>
RINGCC_INLINE void combine_inplace(T* __restrict dst, const T* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Op::apply(dst[i], src[i]);
}

template <typename Op, typename T>
RINGCC_INLINE void combine_into(T* __restrict dst, const T* __restrict a, const T* __restrict b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Op::apply(a[i], b[i]);
}

// reduce_many keeps a block of dst hot in L1 while every source streams
// through it once, instead of sweeping the whole of dst once per source.
constexpr int64_t kManyBlockBytes = 16 * 1024;

// ---------------------------------------------------------------------------
// Kernels for types the CPU computes in directly
// ---------------------------------------------------------------------------

template <typename T>
struct NativeKernels {
  template <typename Op>
  RINGCC_MULTIVERSION static void reduce_inplace(void* dst, const void* src, int64_t n) {
    combine_inplace<Op>(static_cast<T*>(dst), static_cast<const T*>(src), n);
  }

  template <typename Op>
  RINGCC_MULTIVERSION static void reduce_many(void* dst_v, const void* const* srcs_v, int nsrc, int64_t n) {
    T* dst = static_cast<T*>(dst_v);
    const T* first = static_cast<const T*>(srcs_v[0]);
    if (nsrc == 1) {
      if (dst != first) std::memcpy(dst, first, static_cast<size_t>(n) * sizeof(T));
      return;
    }
    constexpr int64_t kBlock = kManyBlockBytes / static_cast<int64_t>(sizeof(T));
    for (int64_t base = 0; base < n; base += kBlock) {
      const int64_t m = std::min(kBlock, n - base);
      T* d = dst + base;
      const T* second = static_cast<const T*>(srcs_v[1]) + base;
      if (dst == first) {
        combine_inplace<Op>(d, second, m);
      } else {
        combine_into<Op>(d, first + base, second, m);
      }
      for (int j = 2; j < nsrc; ++j) {
        combine_inplace<Op>(d, static_cast<const T*>(srcs_v[j]) + base, m);
      }
    }
  }

  RINGCC_MULTIVERSION static void scale_copy(void* dst, const void* src, int64_t n, double factor) {
    if (dst == src) {
      scale_loop_inplace(static_cast<T*>(dst), n, factor);
    } else {
      scale_loop(static_cast<T*>(dst), static_cast<const T*>(src), n, factor);
    }
  }

  // dst[i] = src[i] / divisor: floats correctly rounded, integers truncated
  // toward zero, exactly (|src / divisor| <= |src|: nothing to saturate).
  RINGCC_MULTIVERSION static void divide_copy(void* dst_v, const void* src_v, int64_t n, int64_t divisor) {
    T* dst = static_cast<T*>(dst_v);
    const T* src = static_cast<const T*>(src_v);
    if constexpr (std::is_floating_point_v<T>) {
      const T d = static_cast<T>(divisor);
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i] / d;
    } else if constexpr (std::is_unsigned_v<T>) {
      const uint64_t d = static_cast<uint64_t>(divisor);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(static_cast<uint64_t>(src[i]) / d);
    } else {
      const int64_t d = divisor;
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(static_cast<int64_t>(src[i]) / d);
    }
  }

 private:
  // Floats scale in their own precision (float32 * float32, as NumPy does
  // for a float32 array times a Python float). Integers scale in double and
  // truncate toward zero, as Horovod does; results outside the type's range
  // saturate, and NaN (only from a NaN or infinite factor) gives 0.
  RINGCC_INLINE static T scale_one(T x, double factor) {
    if constexpr (std::is_floating_point_v<T>) {
      return x * static_cast<T>(factor);
    } else if constexpr (sizeof(T) <= sizeof(int32_t)) {
      // Clamped in double, every conversion is in range: no branches, so
      // the loop vectorises. Both bounds are exact in double.
      constexpr double kLow = static_cast<double>(std::numeric_limits<T>::min());
      constexpr double kHigh = static_cast<double>(std::numeric_limits<T>::max());
      double v = static_cast<double>(x) * factor;
      v = v < kLow ? kLow : v;
      v = v > kHigh ? kHigh : v;
      v = v == v ? v : 0.0;
      return static_cast<T>(static_cast<int32_t>(v));
    } else {
      // int64: 2^63 - 1 is not a double, so saturate on the integer side.
      constexpr double kLow = static_cast<double>(std::numeric_limits<T>::min());  // -2^63
      constexpr double kHighExclusive = -kLow;                                     // 2^63
      const double v = static_cast<double>(x) * factor;
      if (v >= kHighExclusive) return std::numeric_limits<T>::max();
      if (v <= kLow) return std::numeric_limits<T>::min();
      if (v != v) return T{0};
      return static_cast<T>(v);
    }
  }

  RINGCC_INLINE static void scale_loop(T* __restrict dst, const T* __restrict src, int64_t n, double factor) {
    for (int64_t i = 0; i < n; ++i) dst[i] = scale_one(src[i], factor);
  }

  RINGCC_INLINE static void scale_loop_inplace(T* __restrict buf, int64_t n, double factor) {
    for (int64_t i = 0; i < n; ++i) buf[i] = scale_one(buf[i], factor);
  }
};

// ---------------------------------------------------------------------------
// Kernels for 16-bit floats: widen a block into float32 stack buffers,
// compute there with the float32 loops above, round back once.
// ---------------------------------------------------------------------------

// 256 float32 values: two buffers fit comfortably in L1 and the loop bodies
// run long enough to amortise the block overhead.
constexpr int64_t kWideBlock = 256;

template <typename Codec>
RINGCC_INLINE void widen(float* __restrict dst, const uint16_t* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Codec::decode(src[i]);
}

// n <= kWideBlock. Encoding into 32-bit lanes and truncating in a second
// loop keeps GCC from demoting the encoder's integer arithmetic to 16-bit
// lanes, which on SSE2 costs a shuffle cascade per vector (about 1.5x slower).
template <typename Codec>
RINGCC_INLINE void narrow(uint16_t* __restrict dst, const float* __restrict src, int64_t n) {
  alignas(64) uint32_t bits[kWideBlock];
  for (int64_t i = 0; i < n; ++i) bits[i] = Codec::encode(src[i]);
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<uint16_t>(bits[i]);
}

template <typename Codec>
struct Float16Kernels {
  template <typename Op>
  RINGCC_MULTIVERSION static void reduce_inplace(void* dst_v, const void* src_v, int64_t n) {
    uint16_t* dst = static_cast<uint16_t*>(dst_v);
    const uint16_t* src = static_cast<const uint16_t*>(src_v);
    alignas(64) float acc[kWideBlock];
    alignas(64) float operand[kWideBlock];
    for (int64_t base = 0; base < n; base += kWideBlock) {
      const int64_t m = std::min(kWideBlock, n - base);
      widen<Codec>(acc, dst + base, m);
      widen<Codec>(operand, src + base, m);
      combine_inplace<Op>(acc, operand, m);
      narrow<Codec>(dst + base, acc, m);
    }
  }

  // Every source is combined into the float32 accumulator before the single
  // rounding back to 16 bits.
  template <typename Op>
  RINGCC_MULTIVERSION static void reduce_many(void* dst_v, const void* const* srcs_v, int nsrc, int64_t n) {
    uint16_t* dst = static_cast<uint16_t*>(dst_v);
    const uint16_t* first = static_cast<const uint16_t*>(srcs_v[0]);
    if (nsrc == 1) {
      if (dst != first) std::memcpy(dst, first, static_cast<size_t>(n) * sizeof(uint16_t));
      return;
    }
    alignas(64) float acc[kWideBlock];
    alignas(64) float operand[kWideBlock];
    for (int64_t base = 0; base < n; base += kWideBlock) {
      const int64_t m = std::min(kWideBlock, n - base);
      widen<Codec>(acc, first + base, m);
      for (int j = 1; j < nsrc; ++j) {
        widen<Codec>(operand, static_cast<const uint16_t*>(srcs_v[j]) + base, m);
        combine_inplace<Op>(acc, operand, m);
      }
      narrow<Codec>(dst + base, acc, m);
    }
  }

  // dst may equal src: each block is read whole before it is written.
  RINGCC_MULTIVERSION static void scale_copy(void* dst_v, const void* src_v, int64_t n, double factor) {
    uint16_t* dst = static_cast<uint16_t*>(dst_v);
    const uint16_t* src = static_cast<const uint16_t*>(src_v);
    const float f = static_cast<float>(factor);
    alignas(64) float wide[kWideBlock];
    for (int64_t base = 0; base < n; base += kWideBlock) {
      const int64_t m = std::min(kWideBlock, n - base);
      widen<Codec>(wide, src + base, m);
      for (int64_t i = 0; i < m; ++i) wide[i] *= f;
      narrow<Codec>(dst + base, wide, m);
    }
  }

  RINGCC_MULTIVERSION static void divide_copy(void* dst_v, const void* src_v, int64_t n, int64_t divisor) {
    uint16_t* dst = static_cast<uint16_t*>(dst_v);
    const uint16_t* src = static_cast<const uint16_t*>(src_v);
    const float d = static_cast<float>(divisor);
    alignas(64) float wide[kWideBlock];
    for (int64_t base = 0; base < n; base += kWideBlock) {
      const int64_t m = std::min(kWideBlock, n - base);
      widen<Codec>(wide, src + base, m);
      for (int64_t i = 0; i < m; ++i) wide[i] /= d;
      narrow<Codec>(dst + base, wide, m);
    }
  }
};

// ---------------------------------------------------------------------------
// Validation and dispatch
// ---------------------------------------------------------------------------

void check_dtype(DataType dtype, const char* fn) {
  if (!dtype_valid(static_cast<int32_t>(dtype))) {
    raise(ErrorKind::kUnsupportedType, fn, ": unsupported dtype value ", static_cast<int32_t>(dtype));
  }
}

void check_op(ReduceOp op, const char* fn) {
  if (!reduce_op_valid(static_cast<int32_t>(op))) {
    raise(ErrorKind::kInvalidArgument, fn, ": invalid reduce op value ", static_cast<int32_t>(op));
  }
}

void check_count(int64_t count, const char* fn) {
  if (count < 0) raise(ErrorKind::kInvalidArgument, fn, ": negative element count ", count);
}

void check_pointer(const void* p, const char* what, const char* fn) {
  if (p == nullptr) raise(ErrorKind::kInvalidArgument, fn, ": ", what, " is null");
}

// Calls fn with a value whose type is the kernel set for dtype.
template <typename Fn>
void with_kernels(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat16:
      return fn(Float16Kernels<HalfCodec>{});
    case DataType::kBFloat16:
      return fn(Float16Kernels<BFloat16Codec>{});
    case DataType::kFloat32:
      return fn(NativeKernels<float>{});
    case DataType::kFloat64:
      return fn(NativeKernels<double>{});
    case DataType::kInt8:
      return fn(NativeKernels<int8_t>{});
    case DataType::kUInt8:
      return fn(NativeKernels<uint8_t>{});
    case DataType::kInt32:
      return fn(NativeKernels<int32_t>{});
    case DataType::kInt64:
      return fn(NativeKernels<int64_t>{});
  }
  raise(ErrorKind::kUnsupportedType, "unsupported dtype value ", static_cast<int32_t>(dtype));
}

// Calls fn with an operator functor. Average reduces as a sum.
template <typename Fn>
void with_op(ReduceOp op, Fn&& fn) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return fn(SumOp{});
    case ReduceOp::kMin:
      return fn(MinOp{});
    case ReduceOp::kMax:
      return fn(MaxOp{});
    case ReduceOp::kProduct:
      return fn(ProductOp{});
  }
  raise(ErrorKind::kInvalidArgument, "invalid reduce op value ", static_cast<int32_t>(op));
}

}  // namespace

void reduce_inplace(void* dst, const void* src, int64_t count, DataType dtype, ReduceOp op) {
  constexpr const char* kFn = "reduce_inplace";
  check_dtype(dtype, kFn);
  check_op(op, kFn);
  check_count(count, kFn);
  if (count == 0) return;
  check_pointer(dst, "dst", kFn);
  check_pointer(src, "src", kFn);
  with_kernels(dtype, [&](auto kernels) {
    using Kernels = decltype(kernels);
    with_op(op, [&](auto op_fn) { Kernels::template reduce_inplace<decltype(op_fn)>(dst, src, count); });
  });
}

void reduce_many(void* dst, const void* const* srcs, int nsrc, int64_t count, DataType dtype, ReduceOp op) {
  constexpr const char* kFn = "reduce_many";
  check_dtype(dtype, kFn);
  check_op(op, kFn);
  check_count(count, kFn);
  if (nsrc < 1) raise(ErrorKind::kInvalidArgument, kFn, ": needs at least one source, got ", nsrc);
  if (count == 0) return;
  check_pointer(dst, "dst", kFn);
  check_pointer(srcs, "srcs", kFn);
  for (int j = 0; j < nsrc; ++j) {
    check_pointer(srcs[j], "a source", kFn);
    if (j > 0 && srcs[j] == dst) {
      raise(ErrorKind::kInvalidArgument, kFn, ": dst may alias only the first source, not source ", j);
    }
  }
  with_kernels(dtype, [&](auto kernels) {
    using Kernels = decltype(kernels);
    with_op(op, [&](auto op_fn) { Kernels::template reduce_many<decltype(op_fn)>(dst, srcs, nsrc, count); });
  });
}

// A factor that is exactly 1/k for a whole k >= 2 (an average's postscale,
// 1/size) divides by k instead: the correctly rounded quotient, as x / k in
// torch and NumPy, where x * (1/k) is an ulp off for some x (142 * (1/3) in
// float32) and, truncated, turns integer quotients like 49 * (1/49) into 0.
// Returns k, or 0 when the factor is no such reciprocal.
int64_t reciprocal_divisor(double factor) {
  if (!(factor > 0.0 && factor <= 0.5)) return 0;
  const double k = std::nearbyint(1.0 / factor);
  if (k < 2.0 || k > 2147483648.0 || 1.0 / k != factor) return 0;
  return static_cast<int64_t>(k);
}

void scale_inplace(void* buf, int64_t count, DataType dtype, double factor) {
  constexpr const char* kFn = "scale_inplace";
  check_dtype(dtype, kFn);
  check_count(count, kFn);
  if (count == 0) return;
  check_pointer(buf, "buf", kFn);
  if (factor == 1.0) return;  // exact for every dtype (int64 beyond 2^53 too)
  if (const int64_t k = reciprocal_divisor(factor)) {
    return with_kernels(dtype, [&](auto kernels) { decltype(kernels)::divide_copy(buf, buf, count, k); });
  }
  with_kernels(dtype, [&](auto kernels) { decltype(kernels)::scale_copy(buf, buf, count, factor); });
}

void scale_copy(void* dst, const void* src, int64_t count, DataType dtype, double factor) {
  constexpr const char* kFn = "scale_copy";
  check_dtype(dtype, kFn);
  check_count(count, kFn);
  if (count == 0) return;
  check_pointer(dst, "dst", kFn);
  check_pointer(src, "src", kFn);
  if (factor == 1.0) {  // a plain copy: exact for every dtype (int64 beyond 2^53 too)
    if (dst != src) std::memmove(dst, src, static_cast<size_t>(count) * dtype_size(dtype));
    return;
  }
  if (const int64_t k = reciprocal_divisor(factor)) {
    return with_kernels(dtype, [&](auto kernels) { decltype(kernels)::divide_copy(dst, src, count, k); });
  }
  with_kernels(dtype, [&](auto kernels) { decltype(kernels)::scale_copy(dst, src, count, factor); });
}

float half_to_float(uint16_t h) { return half_bits_to_float(h); }
uint16_t float_to_half(float f) { return static_cast<uint16_t>(float_to_half_bits(f)); }
float bfloat16_to_float(uint16_t b) { return bfloat16_bits_to_float(b); }
uint16_t float_to_bfloat16(float f) { return static_cast<uint16_t>(float_to_bfloat16_bits(f)); }

}  // namespace ringcc
