"""Throughput of the reduction kernels, with NumPy's np.add(a, b, out=a) as
the baseline, on 4 MiB and 64 MiB buffers (bytes of dst).

    python -m pytest bench/bench_reduction_kernels.py
    python -m pytest bench/bench_reduction_kernels.py -k "64MiB and float16"

Each result records its throughput in GB/s of dst bytes (extra_info
"dst_GBps", in --benchmark-json output). Tests in one group (kernel x size)
compare dtypes and NumPy directly.
"""

import numpy as np
import pytest

_core = pytest.importorskip("ringcc._core", reason="ringcc._core is not built")

try:
    import ml_dtypes

    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BFLOAT16 = None

SUM = 0
SIZES = {"4MiB": 4 << 20, "64MiB": 64 << 20}
DTYPE_NAMES = ["float32", "float16", "bfloat16", "int32"]
REDUCE_MANY_SOURCES = 4


def dtype_of(name):
    if name == "bfloat16":
        if BFLOAT16 is None:
            pytest.skip("ml_dtypes is not installed")
        return BFLOAT16
    return np.dtype(name)


def make_buffer(dtype, nbytes, seed):
    """Values of moderate size: repeated sums neither overflow quickly nor
    reach subnormals (which would measure the FPU's slow path)."""
    rng = np.random.default_rng(seed)
    n = nbytes // dtype.itemsize
    if dtype.kind in "iu":
        return rng.integers(-100, 100, n).astype(dtype)
    return rng.uniform(-1.0, 1.0, n).astype(np.float32).astype(dtype)


def run(benchmark, group, nbytes, fn):
    benchmark.group = group
    benchmark(fn)
    benchmark.extra_info["dst_GBps"] = round(nbytes / benchmark.stats.stats.median / 1e9, 3)


size_params = pytest.mark.parametrize("size", list(SIZES))
dtype_params = pytest.mark.parametrize("name", DTYPE_NAMES)


@size_params
@dtype_params
def test_reduce_inplace(benchmark, name, size):
    dtype, nbytes = dtype_of(name), SIZES[size]
    dst, src = make_buffer(dtype, nbytes, 1), make_buffer(dtype, nbytes, 2)
    run(benchmark, f"reduce_inplace sum {size}", nbytes, lambda: _core._reduce_inplace(dst, src, SUM))


@size_params
@dtype_params
def test_numpy_add(benchmark, name, size):
    dtype, nbytes = dtype_of(name), SIZES[size]
    dst, src = make_buffer(dtype, nbytes, 1), make_buffer(dtype, nbytes, 2)
    run(benchmark, f"reduce_inplace sum {size}", nbytes, lambda: np.add(dst, src, out=dst))


@size_params
@dtype_params
def test_reduce_many(benchmark, name, size):
    dtype, nbytes = dtype_of(name), SIZES[size]
    srcs = [make_buffer(dtype, nbytes, 10 + j) for j in range(REDUCE_MANY_SOURCES)]
    dst = np.empty_like(srcs[0])
    run(benchmark, f"reduce_many sum x{REDUCE_MANY_SOURCES} {size}", nbytes, lambda: _core._reduce_many(dst, srcs, SUM))


@size_params
@dtype_params
def test_numpy_sum_of_sources(benchmark, name, size):
    """NumPy's closest equivalent of reduce_many: chained in-place adds."""
    dtype, nbytes = dtype_of(name), SIZES[size]
    srcs = [make_buffer(dtype, nbytes, 10 + j) for j in range(REDUCE_MANY_SOURCES)]
    dst = np.empty_like(srcs[0])

    def chained():
        np.add(srcs[0], srcs[1], out=dst)
        for src in srcs[2:]:
            np.add(dst, src, out=dst)

    run(benchmark, f"reduce_many sum x{REDUCE_MANY_SOURCES} {size}", nbytes, chained)


@size_params
@dtype_params
def test_scale_inplace(benchmark, name, size):
    # -1 keeps the values where they are across rounds, yet is not special-cased.
    dtype, nbytes = dtype_of(name), SIZES[size]
    buf = make_buffer(dtype, nbytes, 3)
    run(benchmark, f"scale {size}", nbytes, lambda: _core._scale_inplace(buf, -1.0))


@size_params
@dtype_params
def test_numpy_scale(benchmark, name, size):
    dtype, nbytes = dtype_of(name), SIZES[size]
    buf = make_buffer(dtype, nbytes, 3)
    factor = np.array(-1, dtype)
    run(benchmark, f"scale {size}", nbytes, lambda: np.multiply(buf, factor, out=buf))
