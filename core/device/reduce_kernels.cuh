// ringcc's device kernels: scaling and N-way reductions for every dtype and
// operator of core/collective/dtype.h and core/collective/reduce_op.h. Compiled at run time by
// NVRTC for the device's architecture (core/device/kernel_cache.cc embeds
// this file as a string), so it includes no header at all: fixed-width
// types and the float16/bfloat16 conversions are written out here.
//
// The same text also compiles as host C++ (RINGCC_KERNELS_ON_HOST), which
// the stand-in CUDA driver of the tests uses to run the kernels' logic on
// host memory. The arithmetic follows core/collective/reduction.cc exactly: 16-bit
// floats are widened to float32, every source is combined in float32 and
// the result is rounded once (round to nearest even); integers wrap on sum
// and product; float min/max propagate NaN; integer scaling goes through
// double and truncates toward zero, saturating; a factor of exactly 1/k
// divides by k instead. NVRTC compiles this with
// --fmad=false so that no multiply and add fuse (the host never fuses).
//
// Entry points (extern "C", so their names are predictable):
//   ringcc_scale_<dtype>(void* dst, const void* src, long long n, double f)
//       dst[i] = src[i] * f   (dst may equal src; / k when f is exactly 1/k)
//   ringcc_reduce_<dtype>_<op>(void* dst, RingccSources s, int nsrc,
//                              long long n, double postscale)
//       dst[i] = s.ptr[0][i] op ... op s.ptr[nsrc-1][i], then * postscale
//       when postscale != 1 (dst may equal s.ptr[0])
// with dtype in float16 bfloat16 float32 float64 int8 uint8 int32 int64 and
// op in sum min max product (average reduces as sum with a postscale), and
//   ringcc_timestamp(unsigned long long* slot)
//       *slot = the GPU's global nanosecond timer (%globaltimer, the same for
//       every context on the device), for the phase timing of
//       RINGCC_GPU_TRACE; one thread (the host build: the host's realtime
//       clock)

#ifdef RINGCC_KERNELS_ON_HOST
// Host build: one "thread" walks every element (the grid-stride loops
// below cover the whole range with a grid of one block of one thread).
#include <cstring>
#include <ctime>
struct RingccDim3 {
  unsigned int x, y, z;
};
extern thread_local RingccDim3 threadIdx, blockIdx, blockDim, gridDim;
#define RINGCC_GLOBAL
#define RINGCC_DEVICE inline
#define RINGCC_RESTRICT __restrict__
struct RingccU4 {
  unsigned int x, y, z, w;
};
typedef RingccU4 ringcc_u4;
#else
#define RINGCC_GLOBAL __global__
#define RINGCC_DEVICE __device__ __forceinline__
#define RINGCC_RESTRICT __restrict__
typedef uint4 ringcc_u4;
#endif

typedef signed char rc_i8;
typedef unsigned char rc_u8;
typedef unsigned short rc_u16;
typedef int rc_i32;
typedef unsigned int rc_u32;
typedef long long rc_i64;
typedef unsigned long long rc_u64;

// The most ranks one reduction reads from (ranks sharing one GPU).
#define RINGCC_MAX_SOURCES 16
struct RingccSources {
  const void* ptr[RINGCC_MAX_SOURCES];
};

namespace ringcc_kernels {

union FloatBits {
  float f;
  rc_u32 u;
};
RINGCC_DEVICE rc_u32 bits_of(float f) {
  FloatBits b;
  b.f = f;
  return b.u;
}
RINGCC_DEVICE float float_of(rc_u32 u) {
  FloatBits b;
  b.u = u;
  return b.f;
}

RINGCC_DEVICE rc_u32 select_bits(bool c, rc_u32 a, rc_u32 b) { return c ? a : b; }

// IEEE binary16 -> binary32, exact; a NaN keeps sign and payload.
RINGCC_DEVICE float half_to_float(rc_u16 h) {
  const rc_u32 sign = (rc_u32)(h & 0x8000u) << 16;
  const rc_u32 magnitude = h & 0x7fffu;
  const rc_i32 m = (rc_i32)magnitude;
  const rc_u32 normal = (magnitude << 13) + ((127u - 15u) << 23);
  const rc_u32 inf_nan = (magnitude << 13) | 0x7f800000u;
  const rc_u32 subnormal = bits_of((float)m * 5.9604644775390625e-8f);  // m * 2^-24, exact
  rc_u32 r = select_bits(m < 0x0400, subnormal, normal);
  r = select_bits(m >= 0x7c00, inf_nan, r);
  return float_of(sign | r);
}

// binary32 -> binary16, round to nearest even; overflow gives inf; a NaN
// keeps sign and top payload bits, forced non-zero.
RINGCC_DEVICE rc_u16 float_to_half(float f) {
  const rc_u32 x = bits_of(f);
  const rc_u32 sign = (x >> 16) & 0x8000u;
  const rc_u32 magnitude = x & 0x7fffffffu;
  const rc_i32 a = (rc_i32)magnitude;
  const rc_u32 normal = (magnitude - ((127u - 15u) << 23) + 0x0fffu + ((x >> 13) & 1u)) >> 13;
  const rc_u32 subnormal = bits_of(float_of(magnitude) + 0.5f) - 0x3f000000u;
  const rc_u32 payload = (x >> 13) & 0x3ffu;
  const rc_u32 nan = 0x7c00u | payload | (rc_u32)(payload == 0);
  rc_u32 r = select_bits(a < 0x38800000, subnormal, normal);
  r = select_bits(a >= 0x47800000, 0x7c00u, r);
  r = select_bits(a > 0x7f800000, nan, r);
  return (rc_u16)(sign | r);
}

RINGCC_DEVICE float bfloat16_to_float(rc_u16 b) { return float_of((rc_u32)b << 16); }

// Round to nearest even; NaN becomes the quiet NaN 0x7fc0 with its sign.
RINGCC_DEVICE rc_u16 float_to_bfloat16(float f) {
  const rc_u32 x = bits_of(f);
  const rc_u32 rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const rc_u32 nan = ((x >> 16) & 0x8000u) | 0x7fc0u;
  return (rc_u16)select_bits((rc_i32)(x & 0x7fffffffu) > 0x7f800000, nan, rounded);
}

// A dtype: its storage type T, the type it computes in (Acc), and how to
// convert between them.
template <class T>
struct Native {
  typedef T Storage;
  typedef T Acc;
  static RINGCC_DEVICE Acc load(T v) { return v; }
  static RINGCC_DEVICE T store(Acc v) { return v; }
};
struct Half {
  typedef rc_u16 Storage;
  typedef float Acc;
  static RINGCC_DEVICE float load(rc_u16 v) { return half_to_float(v); }
  static RINGCC_DEVICE rc_u16 store(float v) { return float_to_half(v); }
};
struct BFloat16 {
  typedef rc_u16 Storage;
  typedef float Acc;
  static RINGCC_DEVICE float load(rc_u16 v) { return bfloat16_to_float(v); }
  static RINGCC_DEVICE rc_u16 store(float v) { return float_to_bfloat16(v); }
};

template <class T>
struct Unsigned {
  typedef T type;
};
template <>
struct Unsigned<rc_i8> {
  typedef rc_u8 type;
};
template <>
struct Unsigned<rc_i32> {
  typedef rc_u32 type;
};
template <>
struct Unsigned<rc_i64> {
  typedef rc_u64 type;
};

template <class T>
struct IsFloat {
  static const bool value = false;
};
template <>
struct IsFloat<float> {
  static const bool value = true;
};
template <>
struct IsFloat<double> {
  static const bool value = true;
};

struct Sum {
  template <class T>
  static RINGCC_DEVICE T apply(T a, T b) {
    typedef typename Unsigned<T>::type U;
    return (T)((U)a + (U)b);
  }
};
struct Product {
  template <class T>
  static RINGCC_DEVICE T apply(T a, T b) {
    typedef typename Unsigned<T>::type U;
    return (T)((U)a * (U)b);
  }
};
struct Min {
  template <class T>
  static RINGCC_DEVICE T apply(T a, T b) {
    if (IsFloat<T>::value) return ((a < b) | (a != a)) ? a : b;
    return a < b ? a : b;
  }
};
struct Max {
  template <class T>
  static RINGCC_DEVICE T apply(T a, T b) {
    if (IsFloat<T>::value) return ((a > b) | (a != a)) ? a : b;
    return a > b ? a : b;
  }
};
// uint8 products of bytes promote to int: the wrap-around cast above still
// gives the low 8 bits, as the host's unsigned char arithmetic does.

// x * factor as core/collective/reduction.cc's scale_one does it.
template <class T>
struct Scale;
template <>
struct Scale<float> {
  static RINGCC_DEVICE float apply(float x, double f) { return x * (float)f; }
};
template <>
struct Scale<double> {
  static RINGCC_DEVICE double apply(double x, double f) { return x * f; }
};
template <class T, rc_i32 kLow, rc_i32 kHigh>
struct ScaleSmallInt {
  static RINGCC_DEVICE T apply(T x, double f) {
    double v = (double)x * f;
    v = v < (double)kLow ? (double)kLow : v;
    v = v > (double)kHigh ? (double)kHigh : v;
    v = v == v ? v : 0.0;
    return (T)(rc_i32)v;
  }
};
template <>
struct Scale<rc_i8> : ScaleSmallInt<rc_i8, -128, 127> {};
template <>
struct Scale<rc_u8> : ScaleSmallInt<rc_u8, 0, 255> {};
template <>
struct Scale<rc_i32> : ScaleSmallInt<rc_i32, (-2147483647 - 1), 2147483647> {};
template <>
struct Scale<rc_i64> {
  static RINGCC_DEVICE rc_i64 apply(rc_i64 x, double f) {
    const double low = -9223372036854775808.0;  // -2^63
    const double v = (double)x * f;
    if (v >= -low) return (rc_i64)0x7fffffffffffffffLL;
    if (v <= low) return (rc_i64)(-0x7fffffffffffffffLL - 1);
    if (v != v) return 0;
    return (rc_i64)v;
  }
};

// x / k, for a factor of exactly 1/k, as core/collective/reduction.cc's
// divide_copy does it: floats correctly rounded, integers truncated toward
// zero, exactly.
template <class T>
struct Divide {
  static RINGCC_DEVICE T apply(T x, rc_i64 k) { return (T)((rc_i64)x / k); }
};
template <>
struct Divide<float> {
  static RINGCC_DEVICE float apply(float x, rc_i64 k) { return x / (float)k; }
};
template <>
struct Divide<double> {
  static RINGCC_DEVICE double apply(double x, rc_i64 k) { return x / (double)k; }
};

// k when f is exactly 1/k for a whole k >= 2 (an average's 1/size), else 0:
// reduction.cc's reciprocal_divisor.
RINGCC_DEVICE rc_i64 reciprocal_divisor(double f) {
  if (!(f > 0.0 && f <= 0.5) || 1.0 / f > 2147483648.5) return 0;
  const double k = (double)(rc_i64)(1.0 / f + 0.5);
  return 1.0 / k == f ? (rc_i64)k : 0;
}

// Scaling a stored value (divided by k when k != 0): 16-bit floats through
// float32.
template <class D>
RINGCC_DEVICE typename D::Storage scale_value(typename D::Storage x, double f, rc_i64 k) {
  if (k != 0) return D::store(Divide<typename D::Acc>::apply(D::load(x), k));
  return D::store(Scale<typename D::Acc>::apply(D::load(x), f));
}

RINGCC_DEVICE rc_i64 first_index() { return (rc_i64)blockIdx.x * blockDim.x + threadIdx.x; }
RINGCC_DEVICE rc_i64 grid_stride() { return (rc_i64)gridDim.x * blockDim.x; }

// Elements per 16-byte pack.
template <class D>
struct Pack {
  static const int kElems = 16 / sizeof(typename D::Storage);
  union Data {
    ringcc_u4 vec;
    typename D::Storage e[kElems];
  };
};

template <class D>
RINGCC_DEVICE void scale(void* dst_v, const void* src_v, rc_i64 n, double f) {
  typedef typename D::Storage T;
  T* RINGCC_RESTRICT dst = (T*)dst_v;
  const T* RINGCC_RESTRICT src = (const T*)src_v;
  const int K = Pack<D>::kElems;
  const rc_i64 div = reciprocal_divisor(f);
  rc_i64 done = 0;
  if ((((rc_u64)dst | (rc_u64)src) & 15u) == 0) {
    const rc_i64 packs = n / K;
    for (rc_i64 p = first_index(); p < packs; p += grid_stride()) {
      typename Pack<D>::Data d;
      d.vec = ((const ringcc_u4*)src)[p];
      for (int k = 0; k < K; ++k) d.e[k] = scale_value<D>(d.e[k], f, div);
      ((ringcc_u4*)dst)[p] = d.vec;
    }
    done = packs * K;
  }
  for (rc_i64 i = done + first_index(); i < n; i += grid_stride()) dst[i] = scale_value<D>(src[i], f, div);
}

template <class D, class Op>
RINGCC_DEVICE typename D::Storage finish(typename D::Acc acc, double postscale, rc_i64 div) {
  typename D::Storage r = D::store(acc);
  // Rounded first, then scaled: the host reduces, then scales the result.
  if (postscale != 1.0) r = scale_value<D>(r, postscale, div);
  return r;
}

template <class D, class Op>
RINGCC_DEVICE void reduce(void* dst_v, const RingccSources& s, int nsrc, rc_i64 n, double postscale) {
  typedef typename D::Storage T;
  typedef typename D::Acc A;
  T* dst = (T*)dst_v;
  const int K = Pack<D>::kElems;
  const rc_i64 div = reciprocal_divisor(postscale);
  rc_u64 align = (rc_u64)dst;
  for (int j = 0; j < nsrc; ++j) align |= (rc_u64)s.ptr[j];
  rc_i64 done = 0;
  if ((align & 15u) == 0) {
    const rc_i64 packs = n / K;
    for (rc_i64 p = first_index(); p < packs; p += grid_stride()) {
      typename Pack<D>::Data d;
      A acc[Pack<D>::kElems];
      d.vec = ((const ringcc_u4*)s.ptr[0])[p];
      for (int k = 0; k < K; ++k) acc[k] = D::load(d.e[k]);
      for (int j = 1; j < nsrc; ++j) {
        d.vec = ((const ringcc_u4*)s.ptr[j])[p];
        for (int k = 0; k < K; ++k) acc[k] = Op::apply(acc[k], D::load(d.e[k]));
      }
      for (int k = 0; k < K; ++k) d.e[k] = finish<D, Op>(acc[k], postscale, div);
      ((ringcc_u4*)dst)[p] = d.vec;
    }
    done = packs * K;
  }
  for (rc_i64 i = done + first_index(); i < n; i += grid_stride()) {
    A acc = D::load(((const T*)s.ptr[0])[i]);
    for (int j = 1; j < nsrc; ++j) acc = Op::apply(acc, D::load(((const T*)s.ptr[j])[i]));
    dst[i] = finish<D, Op>(acc, postscale, div);
  }
}

}  // namespace ringcc_kernels

#define RINGCC_SCALE_KERNEL(name, D)                                                                     \
  extern "C" RINGCC_GLOBAL void ringcc_scale_##name(void* dst, const void* src, long long n, double f) { \
    ringcc_kernels::scale<D>(dst, src, n, f);                                                            \
  }
#define RINGCC_REDUCE_KERNEL(name, D, opname, Op)                                                                  \
  extern "C" RINGCC_GLOBAL void ringcc_reduce_##name##_##opname(void* dst, RingccSources s, int nsrc, long long n, \
                                                                double postscale) {                                \
    ringcc_kernels::reduce<D, Op>(dst, s, nsrc, n, postscale);                                                     \
  }
#define RINGCC_KERNELS_OF(name, D)                        \
  RINGCC_SCALE_KERNEL(name, D)                            \
  RINGCC_REDUCE_KERNEL(name, D, sum, ringcc_kernels::Sum) \
  RINGCC_REDUCE_KERNEL(name, D, min, ringcc_kernels::Min) \
  RINGCC_REDUCE_KERNEL(name, D, max, ringcc_kernels::Max) \
  RINGCC_REDUCE_KERNEL(name, D, product, ringcc_kernels::Product)

RINGCC_KERNELS_OF(float16, ringcc_kernels::Half)
RINGCC_KERNELS_OF(bfloat16, ringcc_kernels::BFloat16)
RINGCC_KERNELS_OF(float32, ringcc_kernels::Native<float>)
RINGCC_KERNELS_OF(float64, ringcc_kernels::Native<double>)
RINGCC_KERNELS_OF(int8, ringcc_kernels::Native<rc_i8>)
RINGCC_KERNELS_OF(uint8, ringcc_kernels::Native<rc_u8>)
RINGCC_KERNELS_OF(int32, ringcc_kernels::Native<rc_i32>)
RINGCC_KERNELS_OF(int64, ringcc_kernels::Native<rc_i64>)

extern "C" RINGCC_GLOBAL void ringcc_timestamp(unsigned long long* slot) {
#ifdef RINGCC_KERNELS_ON_HOST
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  *slot = static_cast<unsigned long long>(now.tv_sec) * 1000000000ull + static_cast<unsigned long long>(now.tv_nsec);
#else
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  *slot = now;
#endif
}
