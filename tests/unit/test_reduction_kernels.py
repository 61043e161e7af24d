"""The reduction kernels (ringcc._core._reduce_inplace, _reduce_many,
_scale_inplace) against NumPy, for every dtype and operator, on sizes around
the kernels' block boundaries, with NaN, infinities, signed zeros and
subnormals in the data. bfloat16 runs when ml_dtypes is installed."""

import numpy as np
import pytest

_core = pytest.importorskip("ringcc._core", reason="ringcc._core is not built")

try:
    import ml_dtypes

    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BFLOAT16 = None

SUM, AVERAGE, MIN, MAX, PRODUCT = range(5)
OPS = {SUM: "sum", AVERAGE: "average", MIN: "min", MAX: "max", PRODUCT: "product"}
NUMPY_OP = {SUM: np.add, AVERAGE: np.add, MIN: np.minimum, MAX: np.maximum, PRODUCT: np.multiply}

DTYPE_NAMES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64"]
# Around the 256-element block of the 16-bit kernels and the 16 KiB block of
# the multi-source kernels.
SIZES = [0, 1, 7, 255, 256, 257, 4099, 40009]


def dtype_of(name):
    if name == "bfloat16":
        if BFLOAT16 is None:
            pytest.skip("ml_dtypes is not installed")
        return BFLOAT16
    return np.dtype(name)


def is_float(dtype):
    return dtype == BFLOAT16 or dtype.kind == "f"


def is_16bit_float(dtype):
    return is_float(dtype) and dtype.itemsize == 2


def random_array(rng, dtype, op, n):
    """Integers anywhere in their range (sums and products wrap); floats in a
    range that keeps products of a few terms finite, with specials mixed in."""
    if not is_float(dtype):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
    if op == PRODUCT:
        values = rng.uniform(0.5, 2.0, n) * rng.choice([-1.0, 1.0], n)
    else:
        values = rng.uniform(-1000.0, 1000.0, n)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3e-7, -5e-41])
    where = rng.random(n) < 1 / 32
    values[where] = rng.choice(specials, int(where.sum()))
    with np.errstate(all="ignore"):
        return values.astype(np.float32).astype(dtype)


def assert_same(got, want, what=""):
    """Bit-exact, except that any NaN matches any NaN and +0 matches -0."""
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if not is_float(got.dtype):
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    bits = f"u{got.dtype.itemsize}"
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    same = (got.view(bits) == want.view(bits)) | (np.isnan(got64) & np.isnan(want64)) | ((got64 == 0) & (want64 == 0))
    if not same.all():
        i = int(np.argmin(same))
        pytest.fail(
            f"{what}: element {i} of {got.size} is {got[i]!r} "
            f"(bits {got.view(bits)[i]:#x}), want {want[i]!r} (bits {want.view(bits)[i]:#x})"
        )


def reference_fold(srcs, op):
    """Left fold of srcs with NumPy; 16-bit floats in float32, rounded once."""
    dtype = srcs[0].dtype
    wide = np.float32 if is_16bit_float(dtype) else dtype
    with np.errstate(all="ignore"):
        acc = srcs[0].astype(wide)
        for src in srcs[1:]:
            acc = NUMPY_OP[op](acc, src.astype(wide))
        return acc.astype(dtype)


def whole_reciprocal(factor: float) -> int:
    """k when factor is exactly 1 / k for a whole k >= 2, else 0."""
    if not 0.0 < factor <= 0.5:
        return 0
    k = round(1.0 / factor)
    return k if 2 <= k <= 2**31 and 1.0 / k == factor else 0


def reference_scale(x, factor):
    """The core's scaling: a factor of exactly 1 / k divides by k (floats
    correctly rounded, integers truncated toward zero, exactly); others
    multiply (floats in their own precision, 16-bit ones through float32,
    integers in double, truncated and saturated)."""
    k = whole_reciprocal(factor)
    with np.errstate(all="ignore"):
        if k and is_16bit_float(x.dtype):
            return (x.astype(np.float32) / np.float32(k)).astype(x.dtype)
        if k and is_float(x.dtype):
            return x / x.dtype.type(k)
        if k:
            wide = x.astype(np.int64)
            floor = wide // k
            return np.where((wide % k != 0) & (wide < 0), floor + 1, floor).astype(x.dtype)
        if is_16bit_float(x.dtype):
            return (x.astype(np.float32) * np.float32(factor)).astype(x.dtype)
        if is_float(x.dtype):
            return x * x.dtype.type(factor)
        # In double, truncated toward zero, saturated (int64's max is not a
        # double: compare before converting).
        info = np.iinfo(x.dtype)
        scaled = np.trunc(x.astype(np.float64) * factor)
        high, low = scaled >= float(info.max), scaled <= float(info.min)
        inside = ~(high | low | np.isnan(scaled))
        out = np.zeros_like(x)
        out[inside] = scaled[inside].astype(x.dtype)
        out[high], out[low] = info.max, info.min
        return out


@pytest.mark.parametrize("op", list(OPS), ids=list(OPS.values()))
@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_reduce_inplace_matches_numpy(name, op):
    dtype = dtype_of(name)
    rng = np.random.default_rng(1000 + 10 * DTYPE_NAMES.index(name) + op)
    for n in SIZES:
        dst = random_array(rng, dtype, op, n)
        src = random_array(rng, dtype, op, n)
        want = reference_fold([dst, src], op)
        _core._reduce_inplace(dst, src, op)
        assert_same(dst, want, f"{name} {OPS[op]} n={n}")


@pytest.mark.parametrize("op", list(OPS), ids=list(OPS.values()))
@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_reduce_many_matches_numpy(name, op):
    dtype = dtype_of(name)
    rng = np.random.default_rng(2000 + 10 * DTYPE_NAMES.index(name) + op)
    for n in SIZES:
        for nsrc in range(1, 6):
            srcs = [random_array(rng, dtype, op, n) for _ in range(nsrc)]
            want = srcs[0].copy() if nsrc == 1 else reference_fold(srcs, op)
            what = f"{name} {OPS[op]} n={n} nsrc={nsrc}"
            dst = np.zeros(n, dtype)
            _core._reduce_many(dst, srcs, op)
            assert_same(dst, want, what + " (separate dst)")
            _core._reduce_many(srcs[0], srcs, op)
            assert_same(srcs[0], want, what + " (dst is srcs[0])")


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_scale_inplace_matches_numpy(name):
    dtype = dtype_of(name)
    rng = np.random.default_rng(3000 + DTYPE_NAMES.index(name))
    for n in SIZES:
        for factor in (0.5, 3.0, -1.25, 1 / 3, 1e-3, 0.0):
            buf = random_array(rng, dtype, SUM, n)
            want = reference_scale(buf, factor)
            _core._scale_inplace(buf, factor)
            assert_same(buf, want, f"{name} n={n} factor={factor}")


def test_integer_scale_truncates_toward_zero_and_saturates():
    x = np.array([7, -7, 2_000_000_000, -2_000_000_000, 1], np.int32)
    _core._scale_inplace(x, 1.5)
    np.testing.assert_array_equal(x, [10, -10, 2**31 - 1, -(2**31), 1])
    y = np.array([100, -100, 3, -3], np.int8)
    _core._scale_inplace(y, 2.0)
    np.testing.assert_array_equal(y, [127, -128, 6, -6])
    z = np.array([200, 9], np.uint8)
    _core._scale_inplace(z, -1.0)
    np.testing.assert_array_equal(z, [0, 0])


def test_multidimensional_arrays_reduce_element_wise():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.ones((4, 6), np.float32)  # same size, other shape
    _core._reduce_inplace(a, b, SUM)
    np.testing.assert_array_equal(a, np.arange(24, dtype=np.float32).reshape(2, 3, 4) + 1)


# -- 16-bit conversions, bit for bit ------------------------------------------


def all_bit_patterns(dtype):
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_every_16bit_pattern_round_trips_like_numpy(name):
    """x * -1.0 through float32 and back: NaNs come out quieted (as NumPy's
    float32 multiply does), everything else exact, NaN payloads included."""
    dtype = dtype_of(name)
    x = all_bit_patterns(dtype)
    want = reference_scale(x, -1.0)
    _core._scale_inplace(x, -1.0)
    np.testing.assert_array_equal(x.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("name", ["float16", "bfloat16", "int64"])
def test_scaling_by_one_leaves_every_bit_unchanged(name):
    """A factor of 1.0 is an exact copy: signalling NaNs and int64 values
    beyond 2**53 survive it."""
    if name == "int64":
        x = np.array([2**62 + 1, -(2**62) - 3, 7], np.int64)
    else:
        x = all_bit_patterns(dtype_of(name))
    want = x.copy()
    _core._scale_inplace(x, 1.0)
    np.testing.assert_array_equal(x.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_rounding_from_float32_matches_numpy(name):
    """16-bit x by random float32 factors: every product is rounded once from
    float32, across the whole range (subnormals, overflow, ties)."""
    dtype = dtype_of(name)
    rng = np.random.default_rng(4000)
    x = all_bit_patterns(dtype)
    for factor in np.concatenate([rng.uniform(0.5, 2.0, 6), [1 + 2.0**-11, 1 + 2.0**-8, 3.0, 1e-3]]):
        buf = x.copy()
        _core._scale_inplace(buf, float(factor))
        assert_same(buf, reference_scale(x, float(factor)), f"{name} factor={factor!r}")


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_sums_of_random_16bit_patterns_match_numpy(name):
    dtype = dtype_of(name)
    rng = np.random.default_rng(5000)
    a = rng.integers(0, 1 << 16, 200_000, dtype=np.uint32).astype(np.uint16).view(dtype)
    b = rng.integers(0, 1 << 16, 200_000, dtype=np.uint32).astype(np.uint16).view(dtype)
    dst = np.empty_like(a)
    _core._reduce_many(dst, [a, b], SUM)
    assert_same(dst, reference_fold([a, b], SUM), name)


def test_float16_known_values():
    """1.0 scaled by v is v rounded to float16 once."""
    cases = {
        65504: 0x7BFF,
        65519.99: 0x7BFF,
        65520: 0x7C00,
        1e10: 0x7C00,
        2.0**-24: 0x0001,
        2.0**-25: 0x0000,
        3 * 2.0**-25: 0x0002,
        2.0**-14: 0x0400,
        1 + 2.0**-11: 0x3C00,
        1 + 3 * 2.0**-11: 0x3C02,
        -2.0: 0xC000,
    }
    for value, bits in cases.items():
        one = np.ones(1, np.float16)
        _core._scale_inplace(one, value)
        assert one.view(np.uint16)[0] == bits, f"{value!r} -> {one.view(np.uint16)[0]:#x}, want {bits:#x}"


# -- aliasing -----------------------------------------------------------------


def test_src_may_be_dst_or_overlap_it():
    a = np.arange(10, dtype=np.float32)
    _core._reduce_inplace(a, a, SUM)
    np.testing.assert_array_equal(a, 2 * np.arange(10, dtype=np.float32))

    b = np.arange(10, dtype=np.int32)
    want = b[1:] + b[:-1]
    _core._reduce_inplace(b[1:], b[:-1], SUM)
    np.testing.assert_array_equal(b[1:], want)


def test_reduce_many_sources_may_alias_dst():
    a = np.arange(1000, dtype=np.float64)
    _core._reduce_many(a, [a, a, a], SUM)
    np.testing.assert_array_equal(a, 3 * np.arange(1000, dtype=np.float64))

    c = np.arange(1000, dtype=np.float16)
    d = np.ones(1000, np.float16)
    _core._reduce_many(c, [d, c], MAX)  # dst is a later source
    np.testing.assert_array_equal(c, np.maximum(np.arange(1000, dtype=np.float16), 1))


# -- argument errors ----------------------------------------------------------


def test_mismatched_dtypes_raise_type_error():
    with pytest.raises(TypeError, match="dtype"):
        _core._reduce_inplace(np.zeros(4, np.float32), np.zeros(4, np.float64), SUM)
    with pytest.raises(TypeError, match="dtype"):
        _core._reduce_many(np.zeros(4, np.int32), [np.zeros(4, np.int32), np.zeros(4, np.int64)], SUM)


def test_mismatched_sizes_raise_value_error():
    with pytest.raises(ValueError, match="elements"):
        _core._reduce_inplace(np.zeros(4, np.float32), np.zeros(5, np.float32), SUM)
    with pytest.raises(ValueError, match="elements"):
        _core._reduce_many(np.zeros(4, np.float32), [np.zeros(4, np.float32), np.zeros(3, np.float32)], SUM)


def test_unsupported_dtypes_raise_type_error():
    for dtype in (np.bool_, np.complex64, np.int16, np.uint32):
        with pytest.raises(TypeError):
            _core._reduce_inplace(np.zeros(4, dtype), np.zeros(4, dtype), SUM)
        with pytest.raises(TypeError):
            _core._scale_inplace(np.zeros(4, dtype), 2.0)


def test_non_contiguous_and_read_only_raise_value_error():
    a = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="contiguous"):
        _core._reduce_inplace(a[::2], np.zeros(4, np.float32), SUM)
    with pytest.raises(ValueError, match="contiguous"):
        _core._reduce_inplace(np.zeros(4, np.float32), a[::2], SUM)
    frozen = np.zeros(4, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _core._reduce_inplace(frozen, np.zeros(4, np.float32), SUM)
    with pytest.raises(ValueError, match="read-only"):
        _core._scale_inplace(frozen, 2.0)
    # A read-only source is fine.
    dst = np.ones(4, np.float32)
    _core._reduce_inplace(dst, frozen, SUM)
    np.testing.assert_array_equal(dst, np.ones(4, np.float32))


def test_invalid_op_and_empty_sources_raise_value_error():
    a = np.zeros(4, np.float32)
    for op in (-1, 5, 99):
        with pytest.raises(ValueError, match="reduce op"):
            _core._reduce_inplace(a, a.copy(), op)
    with pytest.raises(ValueError, match="empty"):
        _core._reduce_many(a, [], SUM)


def test_objects_without_memory_raise_type_error():
    with pytest.raises(TypeError):
        _core._reduce_inplace([1.0, 2.0], np.zeros(2), SUM)
