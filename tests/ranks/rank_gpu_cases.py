"""Collectives of CUDA tensors, run inside one group of ranks:

    ringrun -np N python tests/ranks/rank_gpu_cases.py --out DIR [--tags ...]

RINGCC_TEST_ARRAYS chooses the arrays: "fake" (host memory that says it is
on a CUDA device, for the stand-in CUDA driver of tests/ranks/device_double; CI),
"cupy" or "torch" (real device memory; tests/gpu). Inputs are small
integers, exact in every dtype and op, so every rank can compute the
expected result with the core's own host reductions whatever the order of
reduction. tests/ranks/test_gpu_standin.py and tests/gpu/test_gpu.py parametrize
their tests from CASES.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))  # tests/harness
from rank_harness import CaseList, Skip, check_equal, exact_inputs, expect, expect_error, run_cases  # noqa: E402

ringcc = None  # imported by main()

CASES = CaseList()

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64"]
OPS = ["Sum", "Average", "Min", "Max", "Product"]
ARRAYS = os.environ.get("RINGCC_TEST_ARRAYS", "fake")


def dtype_of(name):
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise Skip("ml_dtypes is not installed, so NumPy has no bfloat16") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


# --- device arrays ---------------------------------------------------------


class FakeCudaArray:
    """Host memory that claims, through DLPack, to be on CUDA device 0: with
    the stand-in CUDA driver, device pointers are host pointers."""

    def __init__(self, host):
        self.host = np.ascontiguousarray(host)
        self.streams = []

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, **kwargs):
        self.streams.append(stream)
        bfloat16 = self.host.dtype.kind not in "biuf"  # NumPy exports no bfloat16: its bits, relabelled
        capsule = (self.host.view(np.int16) if bfloat16 else self.host).__dlpack__()
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        tensor = get(capsule, b"dltensor")
        ctypes.c_int32.from_address(tensor + 8).value = 2  # DLTensor.device.device_type: kDLCUDA
        if bfloat16:
            ctypes.c_uint8.from_address(tensor + 20).value = 4  # DLTensor.dtype.code: kDLBfloat
        return capsule


def to_device(host):
    host = np.ascontiguousarray(host)
    if ARRAYS == "fake":
        return FakeCudaArray(host.copy())
    if ARRAYS == "cupy":
        import cupy

        if host.dtype.kind not in "biuf":
            raise Skip("CuPy has no bfloat16")
        return cupy.asarray(host)
    if ARRAYS == "torch":
        import torch

        if host.dtype.kind not in "biuf":  # bfloat16: through its bits
            return torch.from_numpy(host.view(np.int16)).view(torch.bfloat16).cuda()
        return torch.from_numpy(host).cuda()
    raise ValueError(ARRAYS)


def to_host(array, dtype):
    """The contents of a device array (any ringcc returned) as NumPy."""
    dt = np.dtype(dtype)
    if isinstance(array, FakeCudaArray):
        return array.host.copy()
    if type(array).__name__ == "DeviceArray":
        interface = array.__cuda_array_interface__
        count = int(np.prod(interface["shape"])) if interface["shape"] else 1
        if ARRAYS == "fake":
            raw = (ctypes.c_char * (count * dt.itemsize)).from_address(interface["data"][0])
            return np.frombuffer(bytes(raw), dtype=dt).reshape(interface["shape"])
        import cupy

        return cupy.asnumpy(cupy.asarray(array)).view(dt)
    if ARRAYS == "cupy":
        import cupy

        return cupy.asnumpy(array)
    if ARRAYS == "torch":
        import torch

        if array.dtype == torch.bfloat16:
            return array.view(torch.int16).cpu().numpy().view(dt)
        return array.cpu().numpy()
    raise ValueError(ARRAYS)


def synchronize():
    if ARRAYS == "cupy":
        import cupy

        cupy.cuda.runtime.deviceSynchronize()
    elif ARRAYS == "torch":
        import torch

        torch.cuda.synchronize()


# --- expected results through the core's host reductions --------------------


def expected_reduction(inputs, op, pre=1.0, post=1.0, size=None):
    size = size or len(inputs)
    scaled = []
    for x in inputs:
        y = x.copy()
        ringcc._core._scale_inplace(y, pre)
        scaled.append(y)
    out = np.empty_like(scaled[0])
    code = getattr(ringcc, op)
    ringcc._core._reduce_many(out, scaled, ringcc.Sum if op == "Average" else code)
    factor = post / size if op == "Average" else post
    ringcc._core._scale_inplace(out, factor)
    return out


def value_kind(op):
    return {"Sum": "sum", "Average": "sum", "Min": "sum", "Max": "sum", "Product": "product"}[op]


def add_allreduce(dtype, op):
    def case(ctx):
        dt = dtype_of(dtype)
        shape = (5, 37)
        inputs = exact_inputs(ctx, shape, dt, op=value_kind(op))
        # In place, no scaling.
        x = to_device(inputs[ctx.rank])
        result = ringcc.allreduce_(x, op=getattr(ringcc, op))
        expect(result is x, "allreduce_ returns its tensor")
        synchronize()
        check_equal(to_host(x, dt), expected_reduction(inputs, op), f"allreduce_ {op}")
        # Out of place with pre- and postscale (exact for these inputs).
        y = to_device(inputs[ctx.rank])
        out = ringcc.allreduce(y, op=getattr(ringcc, op), prescale_factor=2.0, postscale_factor=0.5)
        synchronize()
        check_equal(
            to_host(out, dt).reshape(shape),
            expected_reduction(inputs, op, 2.0, 0.5),
            f"allreduce {op} prescale 2 postscale 0.5",
        )
        check_equal(to_host(y, dt), inputs[ctx.rank], "the input of an out-of-place allreduce is untouched")

    CASES.add(f"allreduce_{dtype}_{op}", case)


for _dtype in DTYPES:
    for _op in OPS:
        add_allreduce(_dtype, _op)


@CASES.case("allreduce_large_steps")
def allreduce_large(ctx):
    # Longer than the staging area (RINGCC_IPC_BUFFER_BYTES of the group)
    # and the one-shot limit: several steps of reduce-scatter + allgather.
    for dtype in ("float32", "bfloat16", "int64"):
        dt = dtype_of(dtype)
        inputs = exact_inputs(ctx, (300_001,), dt, salt=3)
        x = to_device(inputs[ctx.rank])
        ringcc.allreduce_(x, op=ringcc.Sum, prescale_factor=0.5)
        synchronize()
        check_equal(to_host(x, dt), expected_reduction(inputs, "Sum", 0.5), f"large allreduce {dtype}")


@CASES.case("grouped_allreduce_fused")
def grouped(ctx):
    dt = np.dtype(np.float32)
    shapes = [(3,), (100,), (7, 9), (1000,), (1,)]
    inputs = [exact_inputs(ctx, s, dt, salt=i) for i, s in enumerate(shapes)]
    tensors = [to_device(per_rank[ctx.rank]) for per_rank in inputs]
    ringcc.grouped_allreduce_(tensors, op=ringcc.Average)
    synchronize()
    for i, t in enumerate(tensors):
        check_equal(to_host(t, dt), expected_reduction(inputs[i], "Average"), f"fused tensor {i}")


@CASES.case("allgather_ragged")
def allgather_ragged(ctx):
    dt = np.dtype(np.int32)
    rows = [r + 1 for r in range(ctx.size)]
    inputs = [np.full((rows[r], 3), r * 10 + 1, dt) + np.arange(3, dtype=dt) for r in range(ctx.size)]
    out = ringcc.allgather(to_device(inputs[ctx.rank]))
    synchronize()
    check_equal(to_host(out, dt).reshape(-1, 3), np.concatenate(inputs), "ragged allgather")


@CASES.case("broadcast_root_last")
def broadcast(ctx):
    dt = np.dtype(np.float64)
    root = ctx.size - 1
    data = np.arange(1000, dtype=dt) * (ctx.rank + 1)
    x = to_device(data)
    ringcc.broadcast_(x, root=root)
    synchronize()
    check_equal(to_host(x, dt), np.arange(1000, dtype=dt) * (root + 1), "broadcast_ in place")
    y = ringcc.broadcast(to_device(data), root=0)
    synchronize()
    check_equal(to_host(y, dt), np.arange(1000, dtype=dt), "broadcast out of place")


@CASES.case("reduce_scatter_uneven")
def reduce_scatter(ctx):
    dt = np.dtype(np.float32)
    rows = 2 * ctx.size + 1
    inputs = exact_inputs(ctx, (rows, 4), dt)
    out = ringcc.reduce_scatter(to_device(inputs[ctx.rank]), op=ringcc.Sum, prescale_factor=2.0)
    synchronize()
    full = expected_reduction(inputs, "Sum", 2.0)
    first = ctx.rank * (rows // ctx.size) + min(ctx.rank, rows % ctx.size)
    mine = rows // ctx.size + (1 if ctx.rank < rows % ctx.size else 0)
    check_equal(to_host(out, dt).reshape(-1, 4), full[first : first + mine], "reduce_scatter block")


@CASES.case("alltoall_splits")
def alltoall(ctx):
    dt = np.dtype(np.int64)
    n = ctx.size

    # Rank r sends (r + q) % 3 rows to rank q, each row tagged (r, q).
    def rows(r, q):
        return (r + q) % 3

    def block(r, q):
        return np.full((rows(r, q), 2), r * 100 + q, dt)

    mine = np.concatenate([block(ctx.rank, q) for q in range(n)])
    splits = [rows(ctx.rank, q) for q in range(n)]
    out, received = ringcc.alltoall(to_device(mine), splits=splits)
    synchronize()
    expect(list(received) == [rows(r, ctx.rank) for r in range(n)], f"received splits {received}")
    want = np.concatenate([block(r, ctx.rank) for r in range(n)])
    check_equal(to_host(out, dt).reshape(-1, 2), want, "alltoall rows")


@CASES.case("host_tensor_against_cuda_tensors", min_size=2)
def memory_mismatch(ctx):
    # Rank 0 passes a host array where the others pass CUDA tensors: every
    # rank raises MismatchError naming where the data lives.
    data = np.ones(16, np.float32)
    tensor = data if ctx.rank == 0 else to_device(data)
    expect_error(
        ringcc.MismatchError,
        ["where the data lives", "host memory", "CUDA device memory"],
        lambda: ringcc.allreduce(tensor),
        "mixed host and CUDA tensors",
    )
    # The communicator stays usable, on both kinds of memory.
    x = to_device(np.full(4, ctx.rank, np.float32))
    ringcc.allreduce_(x)
    synchronize()
    check_equal(to_host(x, np.float32), np.full(4, sum(range(ctx.size)), np.float32), "allreduce after mismatch")


@CASES.case("backend_as_expected")
def backend(ctx):
    want = os.environ.get("RINGCC_TEST_EXPECT_BACKEND")
    got = ringcc.gpu_backend()
    if want:
        expect(got == want, f"GPU backend {got!r}, expected {want!r}")
    ctx.note(f"backend {got}")


@CASES.case("named_cuda_collectives")
def named_collectives(ctx):
    # Named collectives of CUDA tensors through the background engine:
    # enqueued in a different order on each rank, the allreduces of one
    # dtype fused on the device, each waited for by its handle.
    dt = np.dtype(np.float32)
    shapes = [(3,), (257,), (4, 33), (1,), (2000,)]
    inputs = [exact_inputs(ctx, s, dt, salt=10 + i) for i, s in enumerate(shapes)]
    tensors = [to_device(per_rank[ctx.rank]) for per_rank in inputs]
    order = list(range(len(shapes)))
    if ctx.rank % 2:
        order.reverse()
    handles = {i: ringcc.allreduce_async_(tensors[i], op=ringcc.Sum, name=f"gpu.named.{i}") for i in order}
    gathered = ringcc.allgather_async(
        to_device(np.full((ctx.rank + 1, 2), ctx.rank, np.int32)), name="gpu.named.gather"
    )
    for i in range(len(shapes)):
        expect(ringcc.synchronize(handles[i]) is tensors[i], "the handle's result is the tensor")
    out = ringcc.synchronize(gathered)
    synchronize()
    for i in range(len(shapes)):
        check_equal(to_host(tensors[i], dt), expected_reduction(inputs[i], "Sum"), f"named tensor {i}")
    want = np.concatenate([np.full((r + 1, 2), r, np.int32) for r in range(ctx.size)])
    check_equal(to_host(out, np.int32).reshape(-1, 2), want, "named allgather")
    # An out-of-place named allreduce with scaling, and a named broadcast.
    y = to_device(inputs[1][ctx.rank])
    z = ringcc.synchronize(ringcc.allreduce_async(y, op=ringcc.Average, name="gpu.named.avg", prescale_factor=2.0))
    b = to_device(np.arange(10, dtype=np.float64) * (ctx.rank + 1))
    ringcc.synchronize(ringcc.broadcast_async_(b, root=ctx.size - 1, name="gpu.named.bcast"))
    synchronize()
    check_equal(to_host(z, dt), expected_reduction(inputs[1], "Average", 2.0), "named average")
    check_equal(to_host(b, np.float64), np.arange(10, dtype=np.float64) * ctx.size, "named broadcast")


@CASES.case("named_host_against_cuda_tensor", min_size=2)
def named_memory_mismatch(ctx):
    # One name, a host array on rank 0 and CUDA tensors elsewhere: every
    # rank's handle raises MismatchError saying where the tensors live.
    data = np.ones(8, np.float32)
    tensor = data if ctx.rank == 0 else to_device(data)
    handle = ringcc.allreduce_async(tensor, name="gpu.named.mixed")
    expect_error(
        ringcc.MismatchError,
        ["gpu.named.mixed", "where the tensor lives", "host memory", "CUDA device memory"],
        lambda: ringcc.synchronize(handle),
        "a named collective of host and CUDA tensors",
    )
    x = to_device(np.full(4, ctx.rank, np.float32))
    ringcc.synchronize(ringcc.allreduce_async_(x, op=ringcc.Sum, name="gpu.named.after"))
    synchronize()
    check_equal(to_host(x, np.float32), np.full(4, sum(range(ctx.size)), np.float32), "named after a mismatch")


@CASES.case("join_refuses_to_stand_in_for_cuda_tensors", min_size=2)
def join_with_cuda(ctx):
    # A joined rank stands in with zeros for host tensors only: the others'
    # named collective of CUDA tensors fails with MismatchError saying so.
    if ctx.rank == 0:
        last = ringcc.join()
        expect(last != 0 or ctx.size == 1, f"join returned {last}")
        return
    x = to_device(np.ones(6, np.float32))
    handle = ringcc.allreduce_async_(x, name="gpu.join.x")
    expect_error(
        ringcc.MismatchError,
        ["rank 0 has joined", "CUDA device memory"],
        lambda: ringcc.synchronize(handle),
        "a named CUDA allreduce after rank 0 joined",
    )
    ringcc.join()


@CASES.case("explicit_stream")
def explicit_stream(ctx):
    if ARRAYS == "fake":
        handle, stream = 0x5EED, 0x5EED  # any handle: the stand-in runs everything at once
    elif ARRAYS == "torch":
        import torch

        stream = torch.cuda.Stream()
        handle = stream.cuda_stream
    else:
        import cupy

        stream = cupy.cuda.Stream(non_blocking=True)
        handle = stream.ptr
    inputs = exact_inputs(ctx, (64,), np.float32)
    x = to_device(inputs[ctx.rank])
    synchronize()
    with ringcc.cuda_stream(stream):
        ringcc.allreduce_(x)
    if isinstance(x, FakeCudaArray):
        expect(x.streams[-1] == handle, f"the producer was asked for stream {x.streams[-1]}, not {handle}")
    synchronize()
    check_equal(to_host(x, np.float32), expected_reduction(inputs, "Sum"), "allreduce on an explicit stream")


@CASES.case("forced_nccl_without_nccl", tags=("forced_nccl",))
def forced_nccl_missing(ctx):
    # RINGCC_GPU_BACKEND=nccl where NCCL cannot be found: the same clear
    # error on every rank, naming what to install.
    x = to_device(np.ones(8, np.float32))
    expect_error(
        ringcc.InvalidArgumentError,
        ["RINGCC_GPU_BACKEND=nccl", "NCCL was not found", "pip install nvidia-nccl"],
        lambda: ringcc.allreduce_(x),
        "forced NCCL without NCCL",
    )


@CASES.case("forced_ipc_without_nvrtc", tags=("forced_ipc",))
def forced_ipc_missing(ctx):
    x = to_device(np.ones(8, np.float32))
    expect_error(
        ringcc.InvalidArgumentError,
        ["RINGCC_GPU_BACKEND=ipc", "NVRTC", "pip install nvidia-cuda-nvrtc"],
        lambda: ringcc.allreduce_(x),
        "forced CUDA IPC without NVRTC",
    )


@CASES.case("stream_order_without_host_sync", tags=("device",))
def stream_order(ctx):
    # A kernel queued after the collective on the same stream sees its
    # result, with no host synchronisation in between.
    if ARRAYS == "torch":
        import torch

        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            x = torch.full((1 << 20,), float(ctx.rank + 1), device="cuda")
            for _ in range(20):  # keep the stream busy so that a missing wait would show
                x.mul_(1.0)
            ringcc.allreduce_(x)
            y = x * 2
        stream.synchronize()
        want = 2.0 * sum(r + 1 for r in range(ctx.size))
        expect(bool((y == want).all().item()), f"y = {y[:4].tolist()}, expected {want}")
    elif ARRAYS == "cupy":
        import cupy

        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            x = cupy.full((1 << 20,), float(ctx.rank + 1), dtype=cupy.float32)
            for _ in range(20):
                x *= 1.0
            ringcc.allreduce_(x)
            y = x * 2
        stream.synchronize()
        want = 2.0 * sum(r + 1 for r in range(ctx.size))
        expect(bool((y == want).all()), f"y = {cupy.asnumpy(y[:4])}, expected {want}")
    else:
        raise Skip("needs a real GPU")


@CASES.case("collectives_on_alternating_streams", tags=("device",))
def alternating_streams(ctx):
    # Back-to-back collectives on two streams, one of them held up by
    # matrix products: a step on one stream must not overwrite the staging
    # area the previous step, on the other, still reads.
    if ARRAYS != "torch":
        raise Skip("needs torch on a real GPU")
    import torch

    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    results = []
    for i in range(24):
        stream = streams[i % 2]
        with torch.cuda.stream(stream):
            x = torch.full((1 << 14,), float(ctx.rank + i), device="cuda")
            if i % 4 == 1:
                a = torch.full((1024, 1024), 1.0 / 1024, device="cuda")
                for _ in range(6):
                    a = a @ a  # a @ a == a: keeps the stream busy, changes nothing
                x.add_(a[0, 0] * 0)
            ringcc.allreduce_(x)
            results.append((x, float(sum(r + i for r in range(ctx.size)))))
    torch.cuda.synchronize()
    for i, (x, want) in enumerate(results):
        expect(bool((x == want).all().item()), f"collective {i}: got {x[:3].tolist()}, expected {want}")


def main(argv=None) -> int:
    def on_import(module):
        global ringcc
        ringcc = module

    return run_cases(CASES, argv, on_import=on_import)


if __name__ == "__main__":
    sys.exit(main())
