// Element-wise reduction kernels, written as plain loops the compiler
// vectorises (no intrinsics, so they stay portable). 16-bit floats are
// widened to float32, combined, and rounded back (round to nearest even).
#pragma once

#include <cstdint>

#include "core/collective/dtype.h"
#include "core/collective/reduce_op.h"

namespace ringcc {

// dst[i] = dst[i] (op) src[i] for i in [0, count). kAverage acts as kSum.
void reduce_inplace(void* dst, const void* src, int64_t count, DataType dtype, ReduceOp op);

// dst[i] = srcs[0][i] (op) srcs[1][i] (op) ... (op) srcs[n-1][i].
// dst may alias srcs[0] (but no other source). nsrc >= 1. For 16-bit floats
// the whole chain accumulates in float32 and rounds once at the end.
void reduce_many(void* dst, const void* const* srcs, int nsrc, int64_t count, DataType dtype, ReduceOp op);

// buf[i] *= factor. Integers: computed in double and rounded toward zero
// (as Horovod does for integer pre/postscale). 16-bit floats via float32.
void scale_inplace(void* buf, int64_t count, DataType dtype, double factor);

// k when factor is exactly 1/k for a whole k >= 2, else 0: such a factor
// (an average's postscale) divides by k, correctly rounded for floats and
// exactly truncated for integers, rather than multiplying.
int64_t reciprocal_divisor(double factor);

// dst[i] = src[i] * factor (dst may equal src).
void scale_copy(void* dst, const void* src, int64_t count, DataType dtype, double factor);

// Conversions used by the kernels and by tests.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

}  // namespace ringcc
