"""ringcc's device kernels (core/device/reduce_kernels.cuh) are compiled at
run time by NVRTC. Without a GPU: NVRTC (from the nvidia-cuda-nvrtc wheels
for CUDA 12 and 13, which run on any machine) compiles them for every
architecture it supports and the PTX holds every entry point; and the same
source, compiled as host C++, computes exactly what the core's host
reductions compute, for every dtype and operator (NaN, infinities,
subnormals, integer wrap-around and saturation included)."""

from __future__ import annotations

import concurrent.futures
import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cuda_wheels import nvrtc_library
from rank_groups import ringcc

REPO = Path(__file__).resolve().parents[2]
core = ringcc._core

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64"]
OPS = {"sum": 0, "min": 2, "max": 3, "product": 4}


def expected_entry_points():
    names = []
    for dtype in DTYPES:
        names.append(f"ringcc_scale_{dtype}")
        names += [f"ringcc_reduce_{dtype}_{op}" for op in OPS]
    return names + ["ringcc_timestamp"]


def test_the_core_lists_every_entry_point():
    assert sorted(core._kernel_entry_points()) == sorted(expected_entry_points())


@pytest.mark.parametrize("flavour", ["cu12", "cu13"])
def test_nvrtc_compiles_every_kernel_for_every_architecture(flavour):
    library = nvrtc_library(flavour)
    info = core._probe_gpu_library("nvrtc", [library])
    assert info["found"], info["error"]
    archs = _supported_archs(library)
    assert 90 in archs and len(archs) >= 8, archs
    # PTX for compute_<arch> of every architecture this NVRTC supports,
    # compiled two at a time (NVRTC runs without the GIL).
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {arch: pool.submit(core._compile_kernels_with, library, [arch], False) for arch in archs}
        results = {arch: future.result()[arch] for arch, future in futures.items()}
    for arch, ptx in results.items():
        text = ptx.decode()
        assert re.search(rf"^\.target sm_{arch}\b", text, re.M), f"the PTX for {arch} targets something else"
        entries = set(re.findall(r"\.visible \.entry (\w+)\(", text))
        missing = set(expected_entry_points()) ^ entries
        assert not missing, f"sm_{arch}: {sorted(missing)}"


def _supported_archs(library):
    # The architectures NVRTC reports (nvrtcGetSupportedArchs), through ctypes.
    lib = ctypes.CDLL(library)
    n = ctypes.c_int()
    assert lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)) == 0
    archs = (ctypes.c_int * n.value)()
    assert lib.nvrtcGetSupportedArchs(archs) == 0
    return sorted(set(archs))


@pytest.mark.parametrize("flavour", ["cu12", "cu13"])
def test_nvrtc_makes_a_cubin_for_hopper(flavour):
    images = core._compile_kernels_with(nvrtc_library(flavour), [90], True)
    assert images[90][:4] == b"\x7fELF"
    for name in expected_entry_points():
        assert name.encode() in images[90]


# --- the kernels' arithmetic, run on the host --------------------------------

HOST_MAIN = r"""
#define RINGCC_KERNELS_ON_HOST
#include "core/device/reduce_kernels.cuh"
thread_local RingccDim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0};
thread_local RingccDim3 blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
"""


class Sources(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p * 16)]


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    compiler = shutil.which("c++") or shutil.which("g++")
    if not compiler:
        pytest.skip("no C++ compiler")
    directory = tmp_path_factory.mktemp("host_kernels")
    source = directory / "kernels.cc"
    source.write_text(HOST_MAIN)
    library = directory / "libkernels.so"
    subprocess.run(
        [
            compiler,
            "-std=c++17",
            "-O1",
            "-shared",
            "-fPIC",
            "-ffp-contract=off",
            "-I",
            str(REPO),
            "-o",
            str(library),
            str(source),
        ],
        check=True,
        timeout=300,
    )
    return ctypes.CDLL(str(library))


def numpy_dtype(name):
    if name == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def sample(dtype, rng, n):
    dt = numpy_dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        values = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dt)
        values[:4] = [info.min, info.max, 0, -1 if dt.kind == "i" else 1]
        return values
    values = (rng.standard_normal(n) * 3).astype(np.float32)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-6, 6e-8, 65504.0, 3e38], np.float32)
    values[: len(specials)] = specials
    values[len(specials) : len(specials) + 32] *= 1e-6  # subnormal in float16
    with np.errstate(over="ignore"):  # 3e38 is inf in 16 bits, as intended
        return values.astype(dt)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("nsrc", [1, 2, 3])
def test_host_build_of_the_reduce_kernel_matches_the_core(host_kernels, dtype, op, nsrc):
    rng = np.random.default_rng(hash((dtype, op, nsrc)) & 0xFFFF)
    n = 1027  # a tail after the 16-byte packs, and misaligned views below
    srcs = [sample(dtype, rng, n + 1) for _ in range(nsrc)]
    # Aligned buffers, then views one element in (the kernels' scalar path).
    for offset in (0, 1):
        views = [s[offset : offset + n] for s in srcs]
        for postscale in (1.0, 0.5, 1.0 / 3.0, -3.25):  # 1/k: divided by k
            expect = np.empty(n, numpy_dtype(dtype))
            core._reduce_many(expect, views, OPS[op])
            if postscale != 1.0:
                core._scale_inplace(expect, postscale)
            got = np.zeros(n, numpy_dtype(dtype))
            sources = Sources()
            for j, v in enumerate(views):
                sources.ptr[j] = v.ctypes.data
            getattr(host_kernels, f"ringcc_reduce_{dtype}_{op}")(
                ctypes.c_void_p(got.ctypes.data),
                sources,
                ctypes.c_int(nsrc),
                ctypes.c_longlong(n),
                ctypes.c_double(postscale),
            )
            assert got.tobytes() == expect.tobytes(), (dtype, op, nsrc, offset, postscale)


@pytest.mark.parametrize("dtype", DTYPES)
def test_host_build_of_the_scale_kernel_matches_the_core(host_kernels, dtype):
    rng = np.random.default_rng(7)
    x = sample(dtype, rng, 515)
    for factor in (0.5, 1.0 / 3.0, 1.0 / 49.0, -1.75, 1e30, float("nan"), 3.0):  # 1/k: divided by k
        expect = x.copy()
        core._scale_inplace(expect, factor)
        got = np.zeros_like(x)
        getattr(host_kernels, f"ringcc_scale_{dtype}")(
            ctypes.c_void_p(got.ctypes.data),
            ctypes.c_void_p(x.ctypes.data),
            ctypes.c_longlong(x.size),
            ctypes.c_double(factor),
        )
        assert got.tobytes() == expect.tobytes(), (dtype, factor)


def test_host_build_of_the_timestamp_kernel_reads_the_clock(host_kernels):
    import time

    slot = ctypes.c_ulonglong(0)
    before = time.time_ns()
    host_kernels.ringcc_timestamp(ctypes.byref(slot))
    after = time.time_ns()
    assert before <= slot.value <= after
