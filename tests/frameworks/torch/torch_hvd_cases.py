"""`import ringcc.torch as hvd` (Horovod's torch API), checked from inside a
group of ranks.

    ringrun -np 2 python tests/frameworks/torch/torch_hvd_cases.py --out DIR [--cases 'allreduce*']
    torchrun --nproc-per-node 3 tests/frameworks/torch/torch_hvd_cases.py --out DIR

rank_harness.run_cases starts ringcc (hvd.init() then finds it started),
lines the ranks up before each case and records the results; every case
checks what hvd returns against a reference computed locally from every
rank's data (which every rank can recreate). tests/frameworks/torch/test_torch_horovod.py
starts the groups and asserts on the records.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))  # tests/harness
from rank_harness import CaseList, expect, expect_threads_agree, run_cases  # noqa: E402

import ringcc  # noqa: E402
import ringcc.torch as hvd  # noqa: E402
from ringcc.torch import horovod as _hvd_module  # noqa: E402
from ringcc.torch.horovod import async_allreduce as _hvd_allreduce  # noqa: E402  (reads OUTPUT_ROWS)

CASES = CaseList()
OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max, "Product": hvd.Product}


# --------------------------------------------------------------------------
# Helpers


def gen(ctx, rank, salt=0) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed((ctx.seed * 1000003 + rank * 7919 + salt * 104729) % (2**62))
    return g


def data(ctx, rank, shape, dtype=torch.float32, salt=0):
    """Rank `rank`'s data: small integers, so sums and products are exact in
    every dtype (floats too)."""
    g = gen(ctx, rank, salt)
    shape = tuple(shape)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        return torch.view_as_complex(torch.randint(-3, 4, shape + (2,), generator=g).float()).to(dtype)
    low, high = (0, 4) if dtype == torch.uint8 else (-3, 4)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def everyone(ctx, shape, dtype=torch.float32, salt=0):
    return [data(ctx, r, shape, dtype, salt) for r in range(ctx.size)]


def reduce_ref(tensors, op):
    s = torch.stack(
        [
            t.to(
                torch.complex128
                if t.dtype.is_complex
                else (torch.float64 if t.dtype.is_floating_point else torch.int64)
            )
            for t in tensors
        ]
    )
    if op == hvd.Sum:
        r = s.sum(0)
    elif op == hvd.Average:
        r = (
            s.sum(0) / len(tensors)
            if (s.dtype.is_floating_point or s.dtype.is_complex)
            else torch.div(s.sum(0), len(tensors), rounding_mode="trunc")
        )
    elif op == hvd.Min:
        r = s.amin(0)
    elif op == hvd.Max:
        r = s.amax(0)
    else:
        r = s.prod(0)
    return r.to(tensors[0].dtype)


def same(got, want, what) -> bool:
    if not expect(isinstance(got, torch.Tensor), f"{what}: expected a tensor, got {type(got).__name__}"):
        return False
    if not expect(got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"):
        return False
    if not expect(
        tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    ):
        return False
    ok = torch.equal(got, want)
    return expect(
        ok, f"{what}: values differ: got {got.flatten()[:8].tolist()}, expected {want.flatten()[:8].tolist()}"
    )


def close(got, want, what, rtol=1e-5, atol=1e-6) -> bool:
    if not expect(
        tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    ):
        return False
    g, w = got.detach(), want.detach()
    if g.is_complex() or w.is_complex():
        g, w = torch.view_as_real(g.to(torch.complex128)), torch.view_as_real(w.to(torch.complex128))
    g, w = g.double(), w.double()
    ok = torch.allclose(g, w, rtol=rtol, atol=atol)
    if not ok:
        worst = (g - w).abs().max().item()
        expect(False, f"{what}: max abs difference {worst:g} (rtol {rtol:g}, atol {atol:g})")
    return ok


def check(got, want, what, op) -> bool:
    """Exact, except a floating-point Average of sums that depend on the
    order of addition."""
    if op == hvd.Average and (want.dtype.is_floating_point or want.dtype.is_complex):
        rtol = {torch.float16: 1e-3, torch.bfloat16: 8e-3}.get(want.dtype, 1e-6)
        return expect(got.dtype == want.dtype, f"{what}: dtype {got.dtype}") and close(
            got, want, what, rtol=rtol, atol=rtol
        )
    return same(got, want, what)


def raises(error_class, call, what, fragment=None):
    try:
        call()
    except error_class as error:
        if fragment is not None:
            expect(fragment in str(error), f"{what}: message lacks {fragment!r}: {error}")
        return error
    except Exception as error:  # noqa: BLE001
        expect(False, f"{what}: expected {error_class.__name__}, got {type(error).__name__}: {error}")
        return None
    expect(False, f"{what}: expected {error_class.__name__}, nothing was raised")
    return None


def case(name, **options):
    """Registers a case whose generated names start at a value of its own
    (so a case that failed half-way leaves no offset in the next one)."""
    index = len(CASES)

    def register(fn):
        def run(ctx):
            hvd.init()
            _hvd_module._reset_names(1_000_000 * (index + 1))
            fn(ctx)

        CASES.add(name, run, **options)
        return fn

    return register


# --------------------------------------------------------------------------
# Basics


@case("basics/topology_and_build_queries")
def _(ctx):
    expect(hvd.is_initialized(), "is_initialized")
    expect(hvd.rank() == ctx.rank and hvd.size() == ctx.size, "rank/size")
    expect(hvd.local_rank() == ctx.rank and hvd.local_size() == ctx.size, "one host: local = global")
    expect(hvd.cross_rank() == 0 and hvd.cross_size() == 1, "one host: cross_rank 0 of 1")
    expect(hvd.is_homogeneous(), "is_homogeneous")
    for query in (
        "mpi_built",
        "gloo_built",
        "ccl_built",
        "rocm_built",
        "mpi_enabled",
        "mpi_threads_supported",
        "gloo_enabled",
        "ddl_built",
    ):
        expect(getattr(hvd, query)() is False, f"{query}() should be False for ringcc")
    # What ringcc found at run time, truthfully.
    expect(hvd.nccl_built() is bool(ringcc.nccl_info()["found"]), "nccl_built() says whether NCCL was found")
    expect(hvd.cuda_built() is bool(ringcc.cuda_info()["found"]), "cuda_built() says whether CUDA was found")
    expect(issubclass(hvd.HorovodInternalError, RuntimeError), "HorovodInternalError is a RuntimeError")
    expect(hvd.global_process_set.ranks == list(range(ctx.size)), "global_process_set.ranks")
    expect(
        hvd.global_process_set.size() == ctx.size and hvd.global_process_set.rank() == ctx.rank,
        "global_process_set size/rank",
    )
    for name in ("Sum", "Average", "Min", "Max", "Product", "Adasum"):
        expect(hasattr(hvd, name), f"hvd.{name}")
    expect(hvd.Compression.none.compress(torch.ones(2))[0].dtype == torch.float32, "Compression.none")
    hvd.init()  # a second init is a no-op
    expect(hvd.size() == ctx.size, "init twice")


# --------------------------------------------------------------------------
# allreduce


@case("allreduce/ops_and_dtypes")
def _(ctx):
    dtypes = [
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int32,
        torch.int64,
        torch.int8,
        torch.uint8,
        torch.int16,
    ]
    for di, dtype in enumerate(dtypes):
        for oi, (op_name, op) in enumerate(OPS.items()):
            inputs = everyone(ctx, (3, 5), dtype, salt=di * 10 + oi)
            mine = inputs[ctx.rank].clone()
            got = hvd.allreduce(mine, op=op)
            check(got, reduce_ref(inputs, op), f"allreduce {op_name} {dtype}", op)
            same(mine, inputs[ctx.rank], f"allreduce {op_name} {dtype}: input unchanged")


@case("allreduce/unnamed_calls_pair_by_thread", min_size=2)
def _(ctx):
    # Two threads of every rank call unnamed collectives at once (blocking
    # and async): each call must pair with the same thread's call on the
    # peers (named alike), never with the other thread's.
    def work(k):
        for i in range(10):
            x = torch.full([4], float(100 * k + ctx.rank))
            total = float(sum(100 * k + r for r in range(ctx.size)))
            got = hvd.allreduce(x, op=hvd.Sum)
            later = hvd.synchronize(hvd.allreduce_async(x, op=hvd.Sum))
            if not (torch.all(got == total) and torch.all(later == total)):
                raise AssertionError(f"call {i}: {float(got[0])}, {float(later[0])} (sum {total})")

    expect_threads_agree(work)


@case("allreduce/average_divides_by_the_size")
def _(ctx):
    """Average divides the sum by the size, correctly rounded (Horovod's
    test_horovod_join_allreduce compares with no tolerance at three ranks):
    rank 0 holds whole numbers and the others zeros, so the sum is exact and
    the average must be bitwise torch's t / n (142 * (1/3) in float32 is an
    ulp off), integers truncated (49 * (1/49) in double is under 1)."""
    n, r = ctx.size, ctx.rank
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64):
        t = torch.arange(-300, 300).to(dtype)
        mine = t.clone() if r == 0 else torch.zeros_like(t)
        want = torch.div(t, n, rounding_mode="trunc") if not dtype.is_floating_point else t / n
        same(hvd.allreduce(mine, op=hvd.Average, name=f"average.exact.{dtype}"), want, f"named Average of {dtype}")
        direct = mine.clone()
        hvd.synchronize(hvd.allreduce_async_(direct, op=hvd.Average))
        same(direct, want, f"direct Average of {dtype}")
        grouped = hvd.grouped_allreduce([mine, mine[:7]], op=hvd.Average)
        same(grouped[0], want, f"grouped Average of {dtype}")
    ones = torch.full((5,), 49 if r == 0 else 0, dtype=torch.int32)
    same(hvd.allreduce(ones, op=hvd.Sum, postscale_factor=1.0 / 49), torch.ones(5, dtype=torch.int32), "49 / 49")


@case("allreduce/default_average_and_deprecated_average_flag")
def _(ctx):
    inputs = everyone(ctx, (4,), torch.float64)
    check(hvd.allreduce(inputs[ctx.rank]), reduce_ref(inputs, hvd.Average), "default op is Average", hvd.Average)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        same(hvd.allreduce(inputs[ctx.rank], average=False), reduce_ref(inputs, hvd.Sum), "average=False")
        check(
            hvd.allreduce(inputs[ctx.rank], average=True), reduce_ref(inputs, hvd.Average), "average=True", hvd.Average
        )
    raises(ValueError, lambda: hvd.allreduce(inputs[ctx.rank], average=True, op=hvd.Sum), "average and op together")
    raises(NotImplementedError, lambda: hvd.allreduce(inputs[ctx.rank], op=hvd.Adasum), "Adasum")


@case("allreduce/async_out_of_place_direct")
def _(ctx):
    """hvd.allreduce_async of plain CPU tensors (the direct path): a new
    tensor of the input's dtype and shape, the input untouched, Average by
    default, names reused with new values; tensors the direct path leaves
    to the general one (non-contiguous, complex) still reduce."""
    dtypes = [
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.int8,
    ]
    for round_ in range(2):
        inputs = {
            (dt, shape): everyone(ctx, shape, dt, salt=round_ * 100 + k)
            for k, dt in enumerate(dtypes)
            for shape in [(), (7,), (3, 5), (0,)]
        }
        handles = {
            key: hvd.allreduce_async(v[ctx.rank], name=f"oop.{key[0]}.{key[1]}", op=hvd.Sum)
            for key, v in inputs.items()
        }
        for key, h in handles.items():
            mine = inputs[key][ctx.rank]
            before = mine.clone()
            got = hvd.synchronize(h)
            expect(got is not mine and got.data_ptr() != mine.data_ptr() or mine.numel() == 0, f"{key}: a new tensor")
            expect(got.dtype == mine.dtype and got.shape == mine.shape, f"{key}: {got.dtype}{tuple(got.shape)}")
            same(got, reduce_ref(inputs[key], hvd.Sum), f"allreduce_async {key} round {round_}")
            same(mine, before, f"{key}: input untouched")
    # The default op is Average; scale factors apply.
    xs = everyone(ctx, (4, 4), torch.float64, salt=7)
    close(
        hvd.synchronize(hvd.allreduce_async(xs[ctx.rank], name="oop.avg")),
        reduce_ref(xs, hvd.Average),
        "allreduce_async default Average",
    )
    close(
        hvd.synchronize(
            hvd.allreduce_async(xs[ctx.rank], name="oop.scaled", op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25)
        ),
        reduce_ref(xs, hvd.Sum) * 0.5,
        "allreduce_async scaled",
    )
    # A tensor that requires grad: the result carries none.
    g = xs[ctx.rank].clone().requires_grad_()
    got = hvd.synchronize(hvd.allreduce_async(g, name="oop.grad", op=hvd.Sum))
    expect(not got.requires_grad, "allreduce_async's result needs no grad")
    same(got, reduce_ref(xs, hvd.Sum), "allreduce_async of a tensor that requires grad")
    # The general path: non-contiguous, complex.
    wide = everyone(ctx, (4, 6), torch.float32, salt=8)
    got = hvd.synchronize(hvd.allreduce_async(wide[ctx.rank][:, ::2], name="oop.strided", op=hvd.Max))
    same(got, reduce_ref([w[:, ::2] for w in wide], hvd.Max), "allreduce_async strided")
    cin = everyone(ctx, (3,), torch.complex64, salt=9)
    same(
        hvd.synchronize(hvd.allreduce_async(cin[ctx.rank], name="oop.complex", op=hvd.Sum)),
        reduce_ref(cin, hvd.Sum),
        "allreduce_async complex",
    )


@case("allreduce/out_of_place_results_from_slabs")
def _(ctx):
    """The out-of-place direct paths' small results are rows of shared slabs
    (ringcc.torch.output_rows): each must still behave as a tensor of its
    own. Many results of one kind: distinct memory, right values, in-place
    ops on one leave the others and their autograd alone, a kept result
    survives later rounds, and growing one past its slab is refused instead
    of moving its slab-mates' memory. Large and 0-d results are plain
    tensors; broadcast_async takes rows too."""
    from ringcc.torch import output_rows

    n = 40  # several slabs of 4 KiB rows
    inputs = [everyone(ctx, (1024,), torch.float32, salt=300 + i) for i in range(n)]
    got = [
        hvd.synchronize(hvd.allreduce_async(x[ctx.rank], name=f"rows.{i}", op=hvd.Sum)) for i, x in enumerate(inputs)
    ]
    for i, g in enumerate(got):
        same(g, reduce_ref(inputs[i], hvd.Sum), f"row result {i}")
    spans = sorted((g.data_ptr(), g.data_ptr() + g.nbytes) for g in got)
    expect(all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "row results do not overlap")
    expect(all(g._base is None and g.is_contiguous() for g in got), "row results are contiguous, not views")
    slab_max = output_rows.MAX_ROWS * output_rows.LARGEST_BYTES
    expect(max(g.untyped_storage().nbytes() for g in got) <= slab_max, f"a row keeps at most {slab_max} bytes alive")
    # In-place ops on one result: the others' values and autograd are untouched.
    w = torch.ones(1024, requires_grad=True)
    loss = (w * got[1]).sum()  # saves got[1] for backward
    got[0].mul_(2).add_(1)
    got[2].zero_()
    loss.backward()
    same(w.grad, got[1], "autograd through a row whose slab-mates changed in place")
    same(got[1], reduce_ref(inputs[1], hvd.Sum), "a slab-mate after in-place ops on its neighbours")
    # A kept result survives later rounds (its row is never handed out again).
    kept = got[3]
    for round_ in range(3):
        again = [
            hvd.synchronize(hvd.allreduce_async(x[ctx.rank], name=f"rows.{i}", op=hvd.Max))
            for i, x in enumerate(inputs)
        ]
        same(again[5], reduce_ref(inputs[5], hvd.Max), f"round {round_}")
    same(kept, reduce_ref(inputs[3], hvd.Sum), "a kept row result after three more rounds")
    raises(RuntimeError, lambda: got[4].resize_(64 * 1024), "growing a row past its slab", "not resizable")
    same(got[5], reduce_ref(inputs[5], hvd.Sum), "a slab-mate after a refused resize")
    # Large (no slab) and 0-d results: tensors of their own memory.
    big = everyone(ctx, (4096,), torch.float32, salt=350)
    g = hvd.synchronize(hvd.allreduce_async(big[ctx.rank], name="rows.big", op=hvd.Sum))
    same(g, reduce_ref(big, hvd.Sum), "a 16 KiB result")
    expect(g.untyped_storage().nbytes() == g.nbytes, "a 16 KiB result has storage of its own")
    scalars = everyone(ctx, (), torch.float64, salt=351)
    g = hvd.synchronize(hvd.allreduce_async(scalars[ctx.rank], name="rows.scalar", op=hvd.Sum))
    same(g, reduce_ref(scalars, hvd.Sum), "a 0-d result")
    expect(g.untyped_storage().nbytes() == g.nbytes, "a 0-d result has storage of its own")
    # Many kinds (more than the slabs kept at once), several dtypes.
    for k in range(70):
        dt = (torch.float32, torch.int64, torch.bfloat16)[k % 3]
        xs = everyone(ctx, (k % 5 + 1, k + 1), dt, salt=400 + k)
        same(
            hvd.synchronize(hvd.allreduce_async(xs[ctx.rank], name=f"rows.kind.{k}", op=hvd.Sum)),
            reduce_ref(xs, hvd.Sum),
            f"kind {k}",
        )
    # A slab that cannot be made on one rank fails that call on every rank,
    # naming it, and the next call works.
    xs = everyone(ctx, (1024,), torch.float32, salt=450)

    def broken(source, k):
        raise MemoryError("no slab today")

    saved = _hvd_allreduce.OUTPUT_ROWS
    if ctx.rank == 0:
        _hvd_allreduce.OUTPUT_ROWS = ringcc._core._OutputRows(broken)
    try:
        if ctx.rank == 0:
            raises(MemoryError, lambda: hvd.allreduce_async(xs[0], name="rows.broken", op=hvd.Sum), "rank 0: no slab")
        else:
            h = hvd.allreduce_async(xs[ctx.rank], name="rows.broken", op=hvd.Sum)
            error = raises(
                hvd.HorovodInternalError, lambda: hvd.synchronize(h), "a peer's slab failed", "no slab today"
            )
            expect(error is None or isinstance(error, ringcc.MismatchError), f"also a MismatchError: {error!r}")
    finally:
        _hvd_allreduce.OUTPUT_ROWS = saved
    same(
        hvd.synchronize(hvd.allreduce_async(xs[ctx.rank], name="rows.after", op=hvd.Sum)),
        reduce_ref(xs, hvd.Sum),
        "the call after a failed slab",
    )
    # broadcast_async: rows too, the root's values everywhere.
    bs = [everyone(ctx, (3, 7), torch.int32, salt=500 + i) for i in range(12)]
    root = ctx.size - 1
    for i, b in enumerate(bs):
        out = hvd.synchronize(hvd.broadcast_async(b[ctx.rank], root, name=f"rows.bcast.{i}"))
        same(out, b[root], f"broadcast_async row {i}")
        expect(out.data_ptr() != b[ctx.rank].data_ptr(), f"broadcast_async row {i}: a new tensor")


@case("allreduce/inplace_async_poll_scale_complex_noncontiguous")
def _(ctx):
    inputs = everyone(ctx, (6, 4), torch.float32)
    t = inputs[ctx.rank].clone()
    ptr = t.data_ptr()
    out = hvd.allreduce_(t, op=hvd.Sum)
    expect(out is t and t.data_ptr() == ptr, "allreduce_ returns the tensor, same memory")
    same(t, reduce_ref(inputs, hvd.Sum), "allreduce_ Sum")
    # async in place and out of place, poll, synchronize
    a = inputs[ctx.rank].clone()
    h1 = hvd.allreduce_async_(a, name="inplace", op=hvd.Max)
    h2 = hvd.allreduce_async(inputs[ctx.rank], name="outplace", op=hvd.Min)
    deadline = time.monotonic() + 20
    while not (hvd.poll(h1) and hvd.poll(h2)) and time.monotonic() < deadline:
        time.sleep(0.001)
    expect(hvd.poll(h1) and hvd.poll(h2), "poll() becomes True")
    expect(hvd.synchronize(h1) is a, "synchronize(allreduce_async_) returns the tensor")
    same(a, reduce_ref(inputs, hvd.Max), "allreduce_async_ Max")
    same(hvd.synchronize(h2), reduce_ref(inputs, hvd.Min), "allreduce_async Min")
    # prescale/postscale
    got = hvd.allreduce(inputs[ctx.rank], op=hvd.Average, prescale_factor=2.0, postscale_factor=0.5)
    close(got, reduce_ref(inputs, hvd.Average), "Average with prescale 2, postscale 0.5")
    got = hvd.allreduce(inputs[ctx.rank], op=hvd.Sum, prescale_factor=3.0)
    close(got, reduce_ref(inputs, hvd.Sum) * 3, "Sum with prescale 3")
    # complex (Sum and Average as real pairs), in place too
    cin = everyone(ctx, (5,), torch.complex64, salt=1)
    same(hvd.allreduce(cin[ctx.rank], op=hvd.Sum), reduce_ref(cin, hvd.Sum), "complex Sum")
    c = cin[ctx.rank].clone()
    hvd.allreduce_(c, op=hvd.Average)
    close(c, reduce_ref(cin, hvd.Average), "complex Average in place")
    # non-contiguous: in place writes back into the strided view
    big = everyone(ctx, (4, 6), torch.float64, salt=2)
    mine = big[ctx.rank].clone()
    view = mine.t()
    expect(not view.is_contiguous(), "the view is strided")
    hvd.allreduce_(view, op=hvd.Sum)
    same(mine, reduce_ref(big, hvd.Sum), "allreduce_ of a transposed view")
    same(
        hvd.allreduce(big[ctx.rank].t(), op=hvd.Sum),
        reduce_ref(big, hvd.Sum).t().contiguous(),
        "allreduce of a transposed view",
    )
    # 0-dim and empty
    s = torch.tensor(float(ctx.rank + 1))
    same(hvd.allreduce(s, op=hvd.Sum), torch.tensor(float(ctx.size * (ctx.size + 1) // 2)), "0-dim")
    e = torch.empty(0, 3)
    same(hvd.allreduce(e, op=hvd.Sum), torch.empty(0, 3), "empty tensor")


@case("allreduce/async_inplace_direct_path")
def _(ctx):
    """allreduce_async_ of a contiguous CPU tensor of a core dtype on the
    global set hands the tensor's address to the engine (no DLPack, the
    core's own handle); everything else takes the general path. Both give
    the same results and errors."""
    direct = ringcc._core.Handle
    dtypes = [
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int32,
        torch.int64,
        torch.int8,
        torch.uint8,
    ]
    for di, dtype in enumerate(dtypes):
        for oi, (op_name, op) in enumerate(OPS.items()):
            inputs = everyone(ctx, (3, 5), dtype, salt=di * 10 + oi)
            t = inputs[ctx.rank].clone()
            h = hvd.allreduce_async_(t, name=f"direct.{dtype}.{op_name}", op=op)
            expect(
                type(h) is direct, f"{dtype} {op_name}: the direct path gives the core's handle, got {type(h).__name__}"
            )
            expect(hvd.synchronize(h) is t, f"{dtype} {op_name}: synchronize returns the tensor")
            check(t, reduce_ref(inputs, op), f"direct allreduce_async_ {op_name} {dtype}", op)
    # default op (Average), integer and float scale factors, positional op, no name
    inputs = everyone(ctx, (2, 3, 4), torch.float64, salt=90)
    t = inputs[ctx.rank].clone()
    h = hvd.allreduce_async_(t, name="direct.default")
    expect(type(h) is direct, "default op: direct path")
    hvd.synchronize(h)
    check(t, reduce_ref(inputs, hvd.Average), "direct default op is Average (3-d)", hvd.Average)
    t = inputs[ctx.rank].clone()
    hvd.synchronize(hvd.allreduce_async_(t, None, "direct.scaled", hvd.Sum, 2, 0.25))
    close(t, reduce_ref(inputs, hvd.Sum) * 0.5, "direct Sum with prescale 2 (int), postscale 0.25")
    t = inputs[ctx.rank].clone()
    h = hvd.allreduce_async_(t, op=hvd.Max)
    expect(type(h) is direct, "unnamed: direct path")
    hvd.synchronize(h)
    same(t, reduce_ref(inputs, hvd.Max), "direct unnamed Max")
    # 0-dim and empty
    s = torch.tensor(float(ctx.rank + 1))
    hvd.synchronize(hvd.allreduce_async_(s, name="direct.scalar", op=hvd.Sum))
    same(s, torch.tensor(float(ctx.size * (ctx.size + 1) // 2)), "direct 0-dim")
    e = torch.empty(0, 3)
    expect(hvd.synchronize(hvd.allreduce_async_(e, name="direct.empty", op=hvd.Sum)) is e, "direct empty")
    # the general path: a strided view, int16, a deprecated average flag; poll on both kinds
    big = everyone(ctx, (4, 6), torch.float32, salt=91)
    mine = big[ctx.rank].clone()
    h1 = hvd.allreduce_async_(mine.t(), name="general.strided", op=hvd.Sum)
    expect(type(h1) is not direct, "a strided view takes the general path")
    i16 = everyone(ctx, (5,), torch.int16, salt=92)
    x16 = i16[ctx.rank].clone()
    h2 = hvd.allreduce_async_(x16, name="general.int16", op=hvd.Sum)
    deadline = time.monotonic() + 20
    while not (hvd.poll(h1) and hvd.poll(h2)) and time.monotonic() < deadline:
        time.sleep(0.001)
    expect(hvd.poll(h1) and hvd.poll(h2), "poll() becomes True on both kinds of handle")
    hvd.synchronize(h1)
    hvd.synchronize(h2)
    same(mine, reduce_ref(big, hvd.Sum), "general path: strided view")
    same(x16, reduce_ref(i16, hvd.Sum), "general path: int16")
    raises(NotImplementedError, lambda: hvd.allreduce_async_(torch.ones(2), op=hvd.Adasum), "Adasum")
    # Ranks may take different paths for one tensor (here even ranks hand in a contiguous
    # tensor, odd ranks a transposed view of the same values): the names agree.
    mixed = everyone(ctx, (3, 4), torch.float32, salt=93)

    def mine_as_taken():
        x = mixed[ctx.rank].clone()
        return x if ctx.rank % 2 == 0 else x.t().contiguous().t()

    t = mine_as_taken()
    expect(t.is_contiguous() is (ctx.rank % 2 == 0), "even ranks contiguous, odd ranks strided")
    hvd.synchronize(hvd.allreduce_async_(t, name="mixed.paths", op=hvd.Sum))
    same(t, reduce_ref(mixed, hvd.Sum), "one name, direct path on some ranks and general on others")
    hvd.synchronize(hvd.allreduce_async_(mine_as_taken(), op=hvd.Sum))  # unnamed: the counter agrees too
    # grouped in place: each tensor of the group takes its own path
    group = [mine_as_taken(), mixed[ctx.rank].clone().to(torch.float64), mixed[ctx.rank].clone().to(torch.int16)]
    returned = hvd.synchronize(hvd.grouped_allreduce_async_(group, name="mixed.group", op=hvd.Max))
    expect(
        len(returned) == 3 and all(a is b for a, b in zip(returned, group)),
        "grouped_allreduce_async_ returns its tensors",
    )
    for got, dtype in zip(group, (torch.float32, torch.float64, torch.int16)):
        same(got, reduce_ref([m.to(dtype) for m in mixed], hvd.Max).to(dtype), f"grouped in place, {dtype}")
    # a shape mismatch through the direct path: every rank raises from synchronize, naming it
    h = hvd.allreduce_async_(torch.ones(ctx.rank + 2), name="direct.mismatch", op=hvd.Sum)
    expect(type(h) is direct, "mismatch case: direct path")
    error = raises(
        hvd.HorovodInternalError, lambda: hvd.synchronize(h), "direct: mismatched shapes", fragment="direct.mismatch"
    )
    expect(error is None or isinstance(error, ringcc.MismatchError), f"also a MismatchError: {error!r}")
    t = inputs[ctx.rank].clone()
    hvd.synchronize(hvd.allreduce_async_(t, name="direct.after", op=hvd.Sum))
    same(t, reduce_ref(inputs, hvd.Sum), "direct path usable after a mismatch")
    # the core entry point checks what an adapter hands it
    raw = ringcc._core._allreduce_async_raw
    x = torch.ones(4)
    good = (x, x.data_ptr(), x.shape, 2, 0, "raw.bad", 1.0, 1.0)
    for index, value, error_class, fragment in (
        (3, 8, ValueError, "invalid dtype code 8"),
        (3, -1, ValueError, "invalid dtype code -1"),
        (4, 9, ValueError, "invalid op code 9"),
        (2, [4], TypeError, "shape must be a tuple"),
        (2, (-4,), ValueError, "invalid shape"),
        (1, 0, ValueError, "null data_ptr"),
        (5, "", TypeError, "name must be a non-empty str"),
        (6, "x", TypeError, None),
    ):
        bad = list(good)
        bad[index] = value
        raises(error_class, lambda: raw(*bad), f"_allreduce_async_raw with argument {index} = {value!r}", fragment)
    raises(TypeError, lambda: raw(*good[:7]), "_allreduce_async_raw with 7 arguments", "takes 8 to 11 arguments")
    raises(TypeError, lambda: raw(*good, "3"), "_allreduce_async_raw with a layout that is not an int")
    raises(
        ValueError,
        lambda: raw(*good[:5], "raw.bad-source", 1.0, 1.0, x, 0),
        "_allreduce_async_raw out of place from address 0",
        "null source_ptr",
    )


@case("allreduce/named_out_of_order")
def _(ctx):
    """Names match tensors across ranks whatever the enqueue order."""
    names = [f"t{i}" for i in range(6)]
    order = names if ctx.rank % 2 == 0 else list(reversed(names))
    inputs = {n: everyone(ctx, (3 + i,), torch.float32, salt=i) for i, n in enumerate(names)}
    handles = {n: hvd.allreduce_async(inputs[n][ctx.rank], name=n, op=hvd.Sum) for n in order}
    for n in names:
        same(hvd.synchronize(handles[n]), reduce_ref(inputs[n], hvd.Sum), f"named {n}")


@case("allreduce/grouped")
def _(ctx):
    shapes = [(3,), (2, 2), (5,), ()]
    inputs = [everyone(ctx, s, torch.float32, salt=i) for i, s in enumerate(shapes)]
    mine = [x[ctx.rank].clone() for x in inputs]
    got = hvd.grouped_allreduce(mine, op=hvd.Sum)
    for i, g in enumerate(got):
        same(g, reduce_ref(inputs[i], hvd.Sum), f"grouped_allreduce [{i}]")
    h = hvd.grouped_allreduce_async(mine, name="grp", op=hvd.Max)
    for i, g in enumerate(hvd.synchronize(h)):
        same(g, reduce_ref(inputs[i], hvd.Max), f"grouped_allreduce_async [{i}]")
    res = hvd.grouped_allreduce_(mine)
    for i, g in enumerate(res):
        expect(g is mine[i], f"grouped_allreduce_ returns the tensors [{i}]")
        check(mine[i], reduce_ref(inputs[i], hvd.Average), f"grouped_allreduce_ [{i}]", hvd.Average)
    again = [x[ctx.rank].clone() for x in inputs]
    hvd.synchronize(hvd.grouped_allreduce_async_(again, op=hvd.Sum))
    for i in range(len(shapes)):
        same(again[i], reduce_ref(inputs[i], hvd.Sum), f"grouped_allreduce_async_ [{i}]")


@case("allreduce/compression_fp16_bf16")
def _(ctx):
    g = gen(ctx, ctx.rank, 5)
    x = torch.randn(64, generator=g)
    everyone_x = [torch.randn(64, generator=gen(ctx, r, 5)) for r in range(ctx.size)]
    for comp, wire, rtol in (
        (hvd.Compression.fp16, torch.float16, 2e-3),
        (hvd.Compression.bf16, torch.bfloat16, 1.6e-2),
    ):
        got = hvd.allreduce(x, op=hvd.Average, compression=comp)
        expect(got.dtype == torch.float32, f"{wire}: decompressed back to float32")
        want = (torch.stack([v.to(wire).double() for v in everyone_x]).mean(0)).to(wire).float()
        scale = torch.stack([v.abs() for v in everyone_x]).max(0).values
        expect(
            bool(((got - want).abs() <= rtol * scale + 1e-6).all()),
            f"{wire} compressed Average: max error {(got - want).abs().max().item():g}",
        )


# --------------------------------------------------------------------------
# allgather, broadcast, alltoall, reducescatter


@case("allgather/uneven_rows_and_dtypes")
def _(ctx):
    for di, dtype in enumerate(
        [
            torch.float32,
            torch.float16,
            torch.bfloat16,
            torch.int64,
            torch.int16,
            torch.bool,
            torch.uint8,
            torch.complex64,
        ]
    ):
        inputs = [data(ctx, r, (r + 1, 3), dtype, salt=di) for r in range(ctx.size)]
        same(hvd.allgather(inputs[ctx.rank]), torch.cat(inputs), f"allgather {dtype}")
    scalars = [torch.tensor(float(r)) for r in range(ctx.size)]
    same(hvd.allgather(scalars[ctx.rank]), torch.stack(scalars), "allgather of 0-dim tensors")
    empty = [torch.zeros(0, 2) if r % 2 else torch.ones(2, 2) * r for r in range(ctx.size)]
    same(hvd.allgather(empty[ctx.rank]), torch.cat(empty), "allgather with empty contributions")
    h = hvd.allgather_async(inputs[ctx.rank], name="ag")
    same(hvd.synchronize(h), torch.cat(inputs), "allgather_async")
    group = [
        [data(ctx, r, (r + 2,), torch.int32, salt=9), data(ctx, r, (1, 2), torch.float64, salt=8)]
        for r in range(ctx.size)
    ]
    got = hvd.grouped_allgather(group[ctx.rank])
    for i in range(2):
        same(got[i], torch.cat([g[i] for g in group]), f"grouped_allgather [{i}]")
    got = hvd.synchronize(hvd.grouped_allgather_async(group[ctx.rank], name="gag"))
    same(got[1], torch.cat([g[1] for g in group]), "grouped_allgather_async")


@case("allgather_broadcast/async_direct")
def _(ctx):
    """allgather_async and broadcast_async(_) of plain CPU tensors (their
    direct path): results of the input's dtype, rows of every rank in rank
    order (none from some), inputs untouched out of place, names reused."""
    n = ctx.size
    for round_ in range(2):
        for di, dtype in enumerate([torch.float32, torch.float64, torch.int32, torch.uint8, torch.bfloat16]):
            inputs = [data(ctx, r, (r % 2 + round_, 2, 3), dtype, salt=di + 10 * round_) for r in range(n)]
            mine = inputs[ctx.rank]
            before = mine.clone()
            got = hvd.synchronize(hvd.allgather_async(mine, name=f"agd.{dtype}"))
            expect(isinstance(got, torch.Tensor) and got.dtype == dtype, f"allgather_async {dtype}: {type(got)}")
            same(got, torch.cat(inputs), f"allgather_async {dtype} round {round_}")
            same(mine, before, f"allgather_async {dtype}: input untouched")
            root = (round_ + di) % n
            inputs = [data(ctx, r, (2, 3 + round_), dtype, salt=di + 20 * round_) for r in range(n)]
            mine = inputs[ctx.rank]
            before = mine.clone()
            got = hvd.synchronize(hvd.broadcast_async(mine, root, name=f"bcd.{dtype}"))
            expect(got.data_ptr() != mine.data_ptr() or mine.numel() == 0, "broadcast_async: a new tensor")
            same(got, inputs[root], f"broadcast_async {dtype} root {root}")
            same(mine, before, f"broadcast_async {dtype}: input untouched")
            t = mine.clone()
            expect(
                hvd.synchronize(hvd.broadcast_async_(t, root, name=f"bcd_.{dtype}")) is t,
                "broadcast_async_ returns the tensor",
            )
            same(t, inputs[root], f"broadcast_async_ {dtype} root {root}")
    # A root past the last rank fails on every rank, and the job goes on.
    raises(
        hvd.HorovodInternalError,
        lambda: hvd.synchronize(hvd.broadcast_async(torch.ones(2), n, name="bcd.bad")),
        "broadcast_async from a root past the last rank",
        "root",
    )
    same(
        hvd.broadcast(torch.full((2,), float(ctx.rank)), 0, name="bcd.after"),
        torch.zeros(2),
        "a broadcast after the failed one",
    )


@case("broadcast/roots_inplace_async_dtypes")
def _(ctx):
    for root in range(ctx.size):
        for di, dtype in enumerate([torch.float32, torch.bfloat16, torch.bool, torch.int16]):
            inputs = everyone(ctx, (2, 3), dtype, salt=root * 10 + di)
            got = hvd.broadcast(inputs[ctx.rank], root_rank=root)
            same(got, inputs[root], f"broadcast root {root} {dtype}")
            t = inputs[ctx.rank].clone()
            expect(hvd.broadcast_(t, root) is t, "broadcast_ returns the tensor")
            same(t, inputs[root], f"broadcast_ root {root} {dtype}")
    inputs = everyone(ctx, (3, 4), torch.float64, salt=77)
    t = inputs[ctx.rank].clone()
    view = t.t()
    hvd.broadcast_(view, 0)
    same(t, inputs[0], "broadcast_ into a transposed view")
    h1 = hvd.broadcast_async(inputs[ctx.rank], ctx.size - 1, name="b1")
    b = inputs[ctx.rank].clone()
    h2 = hvd.broadcast_async_(b, 0, name="b2")
    same(hvd.synchronize(h1), inputs[ctx.size - 1], "broadcast_async")
    hvd.synchronize(h2)
    same(b, inputs[0], "broadcast_async_")


@case("alltoall/equal_and_given_splits")
def _(ctx):
    n = ctx.size
    inputs = everyone(ctx, (2 * n, 3), torch.float32)
    got = hvd.alltoall(inputs[ctx.rank])
    want = torch.cat([inputs[s][2 * ctx.rank : 2 * ctx.rank + 2] for s in range(n)])
    same(got, want, "alltoall, equal splits")
    # rank s sends (s + j) % 3 rows to rank j
    splits = [[(s + j) % 3 for j in range(n)] for s in range(n)]
    rows = [data(ctx, s, (sum(splits[s]), 2), torch.int64, salt=3) for s in range(n)]

    def piece(s, j):
        start = sum(splits[s][:j])
        return rows[s][start : start + splits[s][j]]

    want = torch.cat([piece(s, ctx.rank) for s in range(n)])
    for form, sp in (("list", splits[ctx.rank]), ("tensor", torch.tensor(splits[ctx.rank], dtype=torch.int32))):
        out, received = hvd.alltoall(rows[ctx.rank], splits=sp)
        same(out, want, f"alltoall with splits ({form})")
        same(
            received,
            torch.tensor([splits[s][ctx.rank] for s in range(n)], dtype=torch.int32),
            f"received splits ({form})",
        )
    h = hvd.alltoall_async(inputs[ctx.rank], name="a2a")
    same(
        hvd.synchronize(h), torch.cat([inputs[s][2 * ctx.rank : 2 * ctx.rank + 2] for s in range(n)]), "alltoall_async"
    )


@case("reducescatter/even_uneven_ops_grouped")
def _(ctx):
    n = ctx.size
    for rows in (2 * n, 2 * n + 1, 1):
        inputs = everyone(ctx, (rows, 3), torch.float32, salt=rows)
        counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
        start = sum(counts[: ctx.rank])
        for op_name in ("Sum", "Average", "Max"):
            op = OPS[op_name]
            got = hvd.reducescatter(inputs[ctx.rank], op=op)
            want = reduce_ref(inputs, op)[start : start + counts[ctx.rank]]
            check(got, want, f"reducescatter {op_name} of {rows} rows", op)
    inputs = everyone(ctx, (2 * n, 2), torch.float64, salt=1)
    check(
        hvd.reducescatter(inputs[ctx.rank]),
        reduce_ref(inputs, hvd.Average)[2 * ctx.rank : 2 * ctx.rank + 2],
        "reducescatter default op is Average",
        hvd.Average,
    )
    got = hvd.synchronize(hvd.reducescatter_async(inputs[ctx.rank], name="rs", op=hvd.Sum, prescale_factor=0.5))
    close(got, reduce_ref(inputs, hvd.Sum)[2 * ctx.rank : 2 * ctx.rank + 2] * 0.5, "reducescatter_async, prescale")
    second = everyone(ctx, (n, 4), torch.int32, salt=2)
    got = hvd.grouped_reducescatter([inputs[ctx.rank], second[ctx.rank]], op=hvd.Sum)
    same(got[0], reduce_ref(inputs, hvd.Sum)[2 * ctx.rank : 2 * ctx.rank + 2], "grouped_reducescatter [0]")
    same(got[1], reduce_ref(second, hvd.Sum)[ctx.rank : ctx.rank + 1], "grouped_reducescatter [1]")
    got = hvd.synchronize(hvd.grouped_reducescatter_async([second[ctx.rank]], op=hvd.Sum))
    same(got[0], reduce_ref(second, hvd.Sum)[ctx.rank : ctx.rank + 1], "grouped_reducescatter_async")
    x = torch.randn(2 * n, 8, generator=gen(ctx, ctx.rank, 4))
    xs = [torch.randn(2 * n, 8, generator=gen(ctx, r, 4)) for r in range(n)]
    got = hvd.reducescatter(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    want = torch.stack([v.half().double() for v in xs]).sum(0)[2 * ctx.rank : 2 * ctx.rank + 2]
    close(got, want.float(), "reducescatter with fp16 compression", rtol=2e-3, atol=2e-3)


@case("sparse_allreduce_async")
def _(ctx):
    dense = []
    for r in range(ctx.size):
        d = torch.zeros(6, 3)
        d[r % 6] = float(r + 1)
        d[(r + 2) % 6, 1] = 2.0
        dense.append(d)
    for op in (hvd.Sum, hvd.Average):
        h = hvd.sparse_allreduce_async(dense[ctx.rank].to_sparse(), name=f"sp{op}", op=op)
        result = hvd.synchronize(h)
        expect(result.is_sparse, "sparse result")
        close(result.to_dense(), reduce_ref(dense, op), f"sparse allreduce op {op}")


# --------------------------------------------------------------------------
# autograd


@case("autograd/allreduce_allgather_broadcast_alltoall_reducescatter")
def _(ctx):
    n, r = ctx.size, ctx.rank
    w = [torch.randn(4, 3, generator=gen(ctx, k, 1)) for k in range(n)]  # every rank's upstream weights
    # allreduce: y = allreduce(x) (Average); loss_r = (w_r * y).sum(); dx = allreduce(w_r) Average
    x = data(ctx, r, (4, 3), salt=2).requires_grad_()
    y = hvd.allreduce(x, op=hvd.Average)
    (w[r] * y).sum().backward()
    close(x.grad, torch.stack(w).mean(0), "allreduce gradient (Average of the upstream gradients)")
    x.grad = None
    y = hvd.allreduce(x, op=hvd.Sum)
    (w[r] * y).sum().backward()
    close(x.grad, torch.stack(w).sum(0), "allreduce Sum gradient")
    # allgather: Horovod's gradient averages the upstream gradient, keeps our rows
    rows = [k + 1 for k in range(n)]
    xg = torch.randn(rows[r], 2, generator=gen(ctx, r, 3)).requires_grad_()
    out = hvd.allgather(xg)
    up = [torch.randn(sum(rows), 2, generator=gen(ctx, k, 4)) for k in range(n)]
    (out * up[r]).sum().backward()
    start = sum(rows[:r])
    close(xg.grad, torch.stack(up).mean(0)[start : start + rows[r]], "allgather gradient")
    # broadcast: gradient averaged, kept on the root
    xb = torch.randn(3, generator=gen(ctx, r, 5)).requires_grad_()
    ups = [torch.randn(3, generator=gen(ctx, k, 6)) for k in range(n)]
    (hvd.broadcast(xb, root_rank=0) * ups[r]).sum().backward()
    want = torch.stack(ups).mean(0) if r == 0 else torch.zeros(3)
    close(xb.grad, want, "broadcast gradient")
    # alltoall: the gradient comes back the way the rows went
    xa = torch.randn(2 * n, 2, generator=gen(ctx, r, 7)).requires_grad_()
    ua = [torch.randn(2 * n, 2, generator=gen(ctx, k, 8)) for k in range(n)]
    (hvd.alltoall(xa) * ua[r]).sum().backward()
    # rank r's rows [2j, 2j+2) went to rank j, at rows [2r, 2r+2) of j's output
    want = torch.cat([ua[j][2 * r : 2 * r + 2] for j in range(n)])
    close(xa.grad, want, "alltoall gradient")
    # reducescatter, as Horovod defines its gradient: every rank's upstream
    # block, allgathered, times the size for Sum (not for Average)
    xr = torch.randn(2 * n, 3, generator=gen(ctx, r, 9)).requires_grad_()
    ur = [torch.randn(2, 3, generator=gen(ctx, k, 10)) for k in range(n)]
    (hvd.reducescatter(xr, op=hvd.Sum) * ur[r]).sum().backward()
    close(xr.grad, torch.cat(ur) * n, "reducescatter Sum gradient")
    xr.grad = None
    (hvd.reducescatter(xr, op=hvd.Average) * ur[r]).sum().backward()
    close(xr.grad, torch.cat(ur), "reducescatter Average gradient")
    xr.grad = None
    (hvd.reducescatter(xr, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0) * ur[r]).sum().backward()
    close(xr.grad, torch.cat(ur) * (n * 1.5), "reducescatter Sum gradient with scale factors")
    # grouped allreduce
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    ya, yb = hvd.grouped_allreduce([a, b], op=hvd.Sum)
    ((ya * (r + 1)).sum() + (yb * 2).sum()).backward()
    close(a.grad, torch.full((2,), float(n * (n + 1) // 2)), "grouped_allreduce gradient [0]")
    close(b.grad, torch.full((3,), 2.0 * n), "grouped_allreduce gradient [1]")


# --------------------------------------------------------------------------
# barrier, join, timeline


@case("barrier_and_join")
def _(ctx):
    hvd.barrier()
    n, r = ctx.size, ctx.rank
    # rank r has r + 1 batches; after its last it joins and stands in with zeros
    results = []
    for i in range(r + 1):
        results.append(hvd.allreduce(torch.ones(3), name=f"join.{i}", op=hvd.Sum))
    last = hvd.join()
    for i, got in enumerate(results):
        same(got, torch.full((3,), float(n - i)), f"allreduce {i} while ranks < {i} had joined")
    expect(last == n - 1, f"join() returned {last}, expected the last rank to join ({n - 1})")
    hvd.barrier()


# As Horovod's test_horovod_join_*: once a rank has joined, the others'
# allreduces take zeros from it, and their other collectives raise naming it.


def join_and_check(ctx, first):
    """join(), which must return the same rank on every rank, and not `first`
    (the rank that joined before the others). The allgather_object that
    compares the ranks' answers takes a generated name: it also checks that
    join() realigned the counters of generated names."""
    start = time.monotonic()
    last = hvd.join()
    seconds = time.monotonic() - start
    everyone = hvd.allgather_object(last)
    expect(everyone == [last] * ctx.size, f"join() returned different ranks on the ranks: {everyone}")
    expect(last != first and 0 <= last < ctx.size, f"join() returned {last}; rank {first} joined first")
    expect(seconds < JOIN_BOUND_S, f"join() took {seconds:.1f} s")


JOIN_BOUND_S = 15  # a refused collective or a join that waits longer is a hang
JOIN_DTYPES = (torch.int32, torch.int64, torch.float32, torch.float64)
JOIN_SHAPES = ((5,), (4, 6))


def refused(ctx, call, what, fragments):
    """call() must raise, within JOIN_BOUND_S, a HorovodInternalError (a
    RuntimeError, as Horovod's test expects) that is also a MismatchError
    and names the tensor's trouble (`fragments`)."""
    start = time.monotonic()
    error = raises(hvd.HorovodInternalError, call, what)
    seconds = time.monotonic() - start
    expect(seconds < JOIN_BOUND_S, f"{what}: raised after {seconds:.1f} s")
    if error is None:
        return
    expect(isinstance(error, RuntimeError), f"{what}: {type(error).__name__} is not a RuntimeError")
    expect(isinstance(error, ringcc.MismatchError), f"{what}: {type(error).__name__} is not a MismatchError")
    for fragment in fragments:
        expect(fragment in str(error), f"{what}: message lacks {fragment!r}: {error}")


@case("join/allreduce_adds_zeros_for_joined_ranks", min_size=2)
def _(ctx):
    """After rank `first` joins, the others' allreduces (Sum and Average, the
    dtypes of Horovod's test) take zeros from it: Sum is the sum over the
    other ranks, Average that sum divided by the size of the job. Names that
    ran before the join (response-cache hits when the cache is on) and fresh
    ones, through the direct path (allreduce_async, allreduce_async_), the
    general one (a non-contiguous tensor) and unnamed calls, fused."""
    n, r = ctx.size, ctx.rank
    for first in range(n):
        specs = []  # (name or None, shape, dtype, op name, path)
        for dtype in JOIN_DTYPES:
            for op_name in ("Sum", "Average"):
                specs += [
                    (f"join.{dtype}.{op_name}.{i}", shape, dtype, op_name, "out") for i, shape in enumerate(JOIN_SHAPES)
                ]
                specs.append((f"join.fresh{first}.{dtype}.{op_name}", (3, 2), dtype, op_name, "inplace"))
                specs.append((None, (2, 3), dtype, op_name, "view"))

        def tensor(k, rank):  # rank's input of specs[k]; a view's is the transpose of a tensor
            _, shape, dtype, _, path = specs[k]
            if path == "view":
                return data(ctx, rank, shape[::-1], dtype, salt=1000 * first + k).t()
            return data(ctx, rank, shape, dtype, salt=1000 * first + k)

        def start(k):
            name, _, _, op_name, path = specs[k]
            call = hvd.allreduce_async_ if path == "inplace" else hvd.allreduce_async
            return call(tensor(k, r), name=name, op=OPS[op_name])

        def want(k, ranks):
            _, shape, dtype, op_name, _ = specs[k]
            zeros = torch.zeros(shape, dtype=dtype)
            return reduce_ref([tensor(k, q) if q in ranks else zeros for q in range(n)], OPS[op_name])

        # Every rank first, so that the names that recur are cached.
        recurring = [k for k, spec in enumerate(specs) if spec[4] == "out"]
        for k, h in [(k, start(k)) for k in recurring]:
            check(hvd.synchronize(h), want(k, range(n)), f"{specs[k][0]} before the join", OPS[specs[k][3]])
        if r == first:
            join_and_check(ctx, first)
            continue
        active = [q for q in range(n) if q != first]
        for k, h in [(k, start(k)) for k in range(len(specs))]:
            name, _, dtype, op_name, path = specs[k]
            what = f"{name or 'unnamed'} ({path}) {dtype} {op_name} after rank {first} joined"
            check(hvd.synchronize(h), want(k, active), what, OPS[op_name])
        join_and_check(ctx, first)


@case("join/allgather_raises_naming_joined_ranks", min_size=2)
def _(ctx):
    """As in Horovod, an allgather cannot run while a rank has joined: it
    raises on the others, naming the joined rank, at once; named (a cached
    name and a fresh one, blocking and async) and unnamed. Before the join
    the same name gathers every rank's rows (first dimensions differ)."""
    n, r = ctx.size, ctx.rank
    for first in range(n):
        rows = [data(ctx, q, (q + 1, 3), salt=first) for q in range(n)]
        same(hvd.allgather(rows[r], name="join.gather"), torch.cat(rows), f"allgather before rank {first} joined")
        if r == first:
            join_and_check(ctx, first)
            continue
        calls = {
            "a cached name": lambda: hvd.allgather(rows[r], name="join.gather"),
            "a fresh name, async": lambda: hvd.synchronize(hvd.allgather_async(rows[r], name=f"join.gather{first}")),
            "no name": lambda: hvd.allgather(rows[r]),
            "no name, grouped": lambda: hvd.grouped_allgather([rows[r], rows[r].double()]),
        }
        for label, call in calls.items():
            fragments = ["allgather cannot run while rank(s)", f"[{first}] have joined"]
            refused(ctx, call, f"allgather ({label}) after rank {first} joined", fragments)
        join_and_check(ctx, first)
    rows = [data(ctx, q, (q + 1, 3), salt=99) for q in range(n)]
    same(hvd.allgather(rows[r]), torch.cat(rows), "an unnamed allgather after the joins")


@case("join/broadcast_raises_naming_joined_root", min_size=2)
def _(ctx):
    """A broadcast while a rank has joined raises on the others at once (as
    in Horovod), naming the joined ranks, and the root when it is one of
    them: from the joined root (a cached name, a fresh one, unnamed, in
    place) and, with 3 ranks or more, from a root that has not joined."""
    n, r = ctx.size, ctx.rank
    for first in range(n):
        t = data(ctx, r, (4, 3), salt=first)
        same(hvd.broadcast(t, first, name="join.bcast"), data(ctx, first, (4, 3), salt=first), "before the join")
        if r == first:
            join_and_check(ctx, first)
            continue
        joined = [f"broadcast from root {first} (root {first} has joined", f"rank(s) [{first}] have joined"]
        calls = {
            "a cached name": lambda: hvd.broadcast(t, first, name="join.bcast"),
            "a fresh name, async": lambda: hvd.synchronize(hvd.broadcast_async(t, first, name=f"join.bcast{first}")),
            "no name": lambda: hvd.broadcast(t, first),
            "no name, in place": lambda: hvd.broadcast_(t.clone(), first),
        }
        for label, call in calls.items():
            refused(ctx, call, f"broadcast ({label}) from joined root {first}", joined)
        if n >= 3:
            root = min(q for q in range(n) if q != first)
            fragments = [f"broadcast from root {root} cannot run", f"rank(s) [{first}] have joined"]
            refused(
                ctx, lambda: hvd.broadcast(t, root), f"broadcast from root {root} after rank {first} joined", fragments
            )
        same(t, data(ctx, r, (4, 3), salt=first), "the refused broadcasts left the input alone")
        join_and_check(ctx, first)


@case("join/alltoall_and_reducescatter_raise", min_size=2)
def _(ctx):
    """alltoall and reducescatter cannot run while a rank has joined either
    (as in Horovod): they raise on the others naming the joined rank."""
    n, r = ctx.size, ctx.rank
    first = n - 1
    t = data(ctx, r, (2 * n, 3))
    if r == first:
        join_and_check(ctx, first)
        return
    for kind, call in (
        ("alltoall", lambda: hvd.alltoall(t)),
        ("reduce_scatter", lambda: hvd.reducescatter(t, op=hvd.Sum)),
        ("reduce_scatter", lambda: hvd.grouped_reducescatter([t, t.double()], name="join.rs")),
    ):
        fragments = [f"{kind} cannot run while rank(s) [{first}] have joined"]
        refused(ctx, call, f"{kind} after rank {first} joined", fragments)
    join_and_check(ctx, first)


@case("duplicate_name_raises_at_the_call", min_size=2)
def _(ctx):
    """As Horovod's test_horovod_*_duplicate_name_error: a name enqueued twice before it
    completed raises ValueError at the second call (handles dropped); the others enqueue it
    after a barrier, so the first completes, and the job goes on."""
    t = torch.ones(17, 3)
    starts = {
        "allreduce": lambda: hvd.allreduce_async(t, name="duplicate_name"),
        "allgather": lambda: hvd.allgather_async(t, name="duplicate_name"),
        "broadcast": lambda: hvd.broadcast_async(t, 0, name="duplicate_name"),
        "alltoall": lambda: hvd.alltoall_async(torch.ones(2 * ctx.size, 3), name="duplicate_name"),
        "reducescatter": lambda: hvd.reducescatter_async(torch.ones(2 * ctx.size, 3), name="duplicate_name"),
    }
    for kind, start in starts.items():
        if ctx.rank == 0:
            start()
            raises(ValueError, start, f"the second {kind} on rank 0", "already in flight")
        hvd.barrier()
        if ctx.rank > 0:
            start()  # completes with rank 0's first, which was pending
        hvd.barrier()
    same(
        hvd.allreduce(torch.ones(3), name="after_duplicates", op=hvd.Sum),
        torch.full((3,), float(ctx.size)),
        "an allreduce after the duplicates",
    )


@case("timeline")
def _(ctx):
    path = os.path.join(tempfile.gettempdir(), f"ringcc-hvd-timeline-{os.getpid()}.json")
    hvd.start_timeline(path, mark_cycles=True)
    hvd.allreduce(torch.ones(4), name="timeline.tensor")
    hvd.stop_timeline()
    if ctx.rank == 0:
        with open(path, encoding="utf-8") as file:
            text = file.read()
        expect("timeline.tensor" in text, f"the timeline names the tensor: {text[:200]!r}")
        os.remove(path)


# --------------------------------------------------------------------------
# Process sets


@case("process_sets/ops_on_subsets", min_size=2)
def _(ctx):
    n, r = ctx.size, ctx.rank
    # two ranks (the first and the last) when the job has more, else the last alone
    members = [0, n - 1] if n >= 3 else [n - 1]
    subset = hvd.add_process_set(list(reversed(members)))  # ranks are sorted
    evens = [k for k in range(n) if k % 2 == 0]
    evens = hvd.add_process_set(hvd.ProcessSet(evens)) if len(evens) < n and evens != members else None
    expect(subset.ranks == members and subset.process_set_id not in (None, 0), f"subset: {subset}")
    expect(subset.included() == (r in members), "included()")
    if r in members:
        k, me = len(members), members.index(r)
        expect(subset.size() == k and subset.rank() == me, "set size/rank")
        inputs = {m: data(ctx, m, (2, 3), torch.float32, salt=m) for m in members}
        mine = inputs[r]
        total = sum(inputs[m] for m in members)
        same(hvd.allreduce(mine, op=hvd.Sum, process_set=subset), total, "set allreduce")
        check(hvd.allreduce(mine, process_set=subset), total / k, "set allreduce Average", hvd.Average)
        t = mine.clone()
        hvd.allreduce_(t, op=hvd.Max, process_set=subset)
        same(t, torch.stack([inputs[m] for m in members]).amax(0), "set allreduce_")
        same(hvd.allgather(mine, process_set=subset), torch.cat([inputs[m] for m in members]), "set allgather")
        # broadcast roots are global ranks
        last = members[-1]
        same(hvd.broadcast(mine, root_rank=last, process_set=subset), inputs[last], "set broadcast")
        b = mine.clone()
        hvd.broadcast_(b, members[0], process_set=subset)
        same(b, inputs[members[0]], "set broadcast_")
        outsider = next(j for j in range(n) if j not in members)
        raises(
            ValueError, lambda: hvd.broadcast(mine, root_rank=outsider, process_set=subset), "a root outside the set"
        )
        out = hvd.alltoall(torch.cat([mine + j for j in range(k)]), process_set=subset)
        same(out, torch.cat([inputs[m] + me for m in members]), "set alltoall")
        rs = hvd.reducescatter(torch.cat([mine] * k), op=hvd.Sum, process_set=subset)
        same(rs, total, "set reducescatter")
        g = hvd.grouped_allreduce([mine, mine * 2], op=hvd.Sum, process_set=subset)
        same(g[1], total * 2, "set grouped_allreduce")
        gg = hvd.grouped_allreduce_([mine.clone()], op=hvd.Sum, process_set=subset)
        same(gg[0], total, "set grouped_allreduce_")
        h = hvd.allreduce_async(mine, op=hvd.Sum, process_set=subset)
        same(hvd.synchronize(h), total, "set allreduce_async")
        # The direct path (plain CPU tensors): many in flight, dtypes, in and out of place.
        for dtype in (torch.float64, torch.int32, torch.bfloat16):
            ins = {m: [data(ctx, m, (i % 3 + 1, 2), dtype, salt=50 + i) for i in range(20)] for m in members}
            before = [x.clone() for x in ins[r]]
            outs = [hvd.allreduce_async(x, op=hvd.Sum, process_set=subset) for x in ins[r]]
            inplace = [x.clone() for x in ins[r]]
            hs = [hvd.allreduce_async_(x, op=hvd.Max, process_set=subset) for x in inplace]
            for i, (ho, hi) in enumerate(zip(outs, hs)):
                got = hvd.synchronize(ho)
                expect(got.dtype == dtype, f"set allreduce_async {dtype}: {got.dtype}")
                same(got, reduce_ref([ins[m][i] for m in members], hvd.Sum), f"set allreduce_async {dtype} [{i}]")
                same(ins[r][i], before[i], f"set allreduce_async {dtype} [{i}]: input untouched")
                expect(hvd.synchronize(hi) is inplace[i], "set allreduce_async_ returns the tensor")
                same(
                    inplace[i], reduce_ref([ins[m][i] for m in members], hvd.Max), f"set allreduce_async_ {dtype} [{i}]"
                )
        obj = hvd.broadcast_object({"from": r}, root_rank=last, process_set=subset)
        expect(obj == {"from": last}, f"set broadcast_object: {obj}")
        objs = hvd.allgather_object(r, process_set=subset)
        expect(objs == members, f"set allgather_object: {objs}")
        hvd.barrier(process_set=subset)
        if k > 1:  # members that disagree on a shape all raise, and the set goes on
            h = hvd.allreduce_async(torch.ones(me + 1), process_set=subset)
            error = raises(hvd.HorovodInternalError, lambda: hvd.synchronize(h), "set: mismatched shapes")
            expect(error is None or isinstance(error, ringcc.MismatchError), f"set mismatch: {error!r}")
            same(
                hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=subset),
                torch.full((2,), float(k)),
                "set usable after a mismatch",
            )
    else:
        raises(ValueError, lambda: hvd.allreduce(torch.ones(1), process_set=subset), "non-member allreduce")
        raises(ValueError, lambda: subset.rank(), "non-member rank()")
    if evens is not None and r % 2 == 0:
        same(
            hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=evens),
            torch.full((2,), float(len(evens.ranks))),
            "evens allreduce",
        )
    # the global set still works alongside
    same(hvd.allreduce(torch.ones(1), op=hvd.Sum), torch.full((1,), float(n)), "global after sets")
    raises(ValueError, lambda: hvd.add_process_set(members), "duplicate set")
    raises(ValueError, lambda: hvd.add_process_set(list(range(n))), "a set equal to the global one")
    expect(hvd.remove_process_set(subset) is True, "remove_process_set")
    expect(subset.process_set_id is None and subset.size() is None, "a removed set is invalidated")
    if evens is not None:
        expect(hvd.remove_process_set(evens) is True, "remove evens")
    expect(hvd.remove_process_set(hvd.global_process_set) is False, "the global set stays")
    expect(len(ringcc.torch.process_sets.process_sets()) == 1, "only the global set is left")
    # a set given to init() (init again: registers it)
    ps = hvd.ProcessSet([0])
    hvd.init(process_sets=[ps])
    expect(ps.process_set_id is not None, "init(process_sets=[...]) registers the set")
    if r == 0:
        same(hvd.allreduce(torch.ones(1) * 5, op=hvd.Sum, process_set=ps), torch.tensor([5.0]), "set from init()")
    hvd.remove_process_set(ps)
    raises(ValueError, lambda: hvd.allreduce(torch.ones(1), process_set=ps), "a removed set")


# --------------------------------------------------------------------------
# Objects, parameters, optimizer state


@case("functions/forged_objects_are_not_unpickled", min_size=2)
def _(ctx):
    """What an attacker on the wire between hosts could splice in (the
    links are authenticated at their start, not per message): an unsealed
    pickle, and a sealed one changed on its way. Rank 0 plays the attacker,
    sending through the same broadcasts broadcast_object uses; the other
    ranks refuse both before unpickling (the payload would create a file)."""
    import pickle

    marker = hvd.broadcast_object(os.path.join(tempfile.gettempdir(), f"ringcc-forged-{os.getpid()}"), 0)

    class Payload:
        def __reduce__(self):
            return (open, (marker, "w"))

    from ringcc import _objects

    evil = pickle.dumps(Payload())
    # No MAC (zeros), a MAC of other bytes, and the right MAC over changed bytes.
    changed = bytearray(evil)
    changed[-2] ^= 1
    forgeries = ((evil, [0] * 4), (evil, _objects.mac_words(b"x")), (bytes(changed), _objects.mac_words(evil)))
    for forged, words in forgeries:
        if ctx.rank == 0:
            hvd.broadcast_(torch.tensor([len(forged), *words], dtype=torch.int64), 0)
            hvd.broadcast_(torch.frombuffer(bytearray(forged), dtype=torch.uint8), 0)
        else:
            raises(
                ringcc.PeerFailureError,
                lambda: hvd.broadcast_object(None, 0),
                "a forged object",
                "the object from rank 0 failed authentication",
            )
    hvd.barrier()
    expect(not os.path.exists(marker), "a forged object was unpickled")
    expect(hvd.broadcast_object({"still": "works"}, 0) == {"still": "works"}, "broadcast_object after a forgery")


@case("functions/objects_parameters_optimizer_state")
def _(ctx):
    r = ctx.rank
    obj = {"rank": r, "list": list(range(r + 2)), "t": torch.arange(3) * r} if r == 1 % ctx.size else None
    got = hvd.broadcast_object(obj, root_rank=1 % ctx.size)
    expect(
        got["rank"] == 1 % ctx.size and torch.equal(got["t"], torch.arange(3) * (1 % ctx.size)),
        f"broadcast_object: {got}",
    )
    objs = hvd.allgather_object({"r": r, "pad": "x" * r})
    expect(objs == [{"r": k, "pad": "x" * k} for k in range(ctx.size)], f"allgather_object: {objs}")
    expect(hvd.broadcast_object("named", 0, name="nm") == "named", "broadcast_object with a name")
    # parameters: state_dict (dict) and named_parameters (list of pairs)
    torch.manual_seed(100 + r)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
    torch.manual_seed(100)
    root_model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
    root_model[1].running_mean.fill_(0.5)
    if r == 0:
        model[1].running_mean.fill_(0.5)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for (k, v), (_, w) in zip(sorted(model.state_dict().items()), sorted(root_model.state_dict().items())):
        same(v, w, f"broadcast_parameters(state_dict) {k}")
    torch.manual_seed(7 + r)
    other = nn.Linear(3, 3)
    hvd.broadcast_parameters(other.named_parameters(), root_rank=ctx.size - 1)
    torch.manual_seed(7 + ctx.size - 1)
    want = nn.Linear(3, 3)
    same(other.weight.detach(), want.weight.detach(), "broadcast_parameters(named_parameters)")
    expect(other.weight.requires_grad, "parameters still require grad")
    # optimizer state: rank 0 has stepped (momentum buffers, Adam moments), the others not
    for opt_cls, kwargs in (
        (torch.optim.SGD, {"lr": 0.1 * (r + 1), "momentum": 0.9}),
        (torch.optim.Adam, {"lr": 0.01 * (r + 1)}),
    ):
        torch.manual_seed(5)
        m = nn.Linear(3, 2)
        opt = opt_cls(m.parameters(), **kwargs)
        if r == 0:
            m(torch.ones(1, 3)).sum().backward()
            opt.step()
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        state = opt.state_dict()
        root_state = hvd.broadcast_object(state if r == 0 else None, 0)
        expect(
            state["param_groups"][0]["lr"] == root_state["param_groups"][0]["lr"],
            f"{opt_cls.__name__}: lr {state['param_groups'][0]['lr']}",
        )
        expect(len(state["state"]) == 2, f"{opt_cls.__name__}: state of both parameters")
        for pid, st in root_state["state"].items():
            for key, value in st.items():
                if isinstance(value, torch.Tensor):
                    same(state["state"][pid][key], value, f"{opt_cls.__name__} state {pid}.{key}")


# --------------------------------------------------------------------------
# DistributedOptimizer


def _toy_model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))


def _batch(ctx, rank, step):
    g = gen(ctx, rank, 1000 + step)
    return torch.randn(4, 5, generator=g), torch.randn(4, 3, generator=g)


def _local_grads(model, x, y):
    model.zero_grad()
    F.mse_loss(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def _reference_training(ctx, steps, passes=1, lr=0.1, op="avg", compress=None, predivide=1.0, momentum=0.0):
    """What every rank's model must be after `steps` steps: one model
    trained on the average (or sum) of every rank's gradients."""
    model = _toy_model()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    for step in range(steps):
        per_rank = []
        for k in range(ctx.size):
            acc = None
            for p in range(passes):
                x, y = _batch(ctx, k, step * passes + p)
                g = _local_grads(model, x, y)
                acc = g if acc is None else [a + b for a, b in zip(acc, g)]
            if compress is not None:
                acc = [a.to(compress).double() for a in acc]
            per_rank.append(acc)
        for i, p in enumerate(model.parameters()):
            total = sum(pr[i].double() for pr in per_rank)
            p.grad = (total / ctx.size if op == "avg" else total).to(p.dtype)
        opt.step()
    return model


def _train(ctx, steps, passes=1, lr=0.1, momentum=0.0, **dopt):
    model = _toy_model()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum),
        named_parameters=model.named_parameters(),
        backward_passes_per_step=passes,
        **dopt,
    )
    for step in range(steps):
        opt.zero_grad()
        for p in range(passes):
            x, y = _batch(ctx, ctx.rank, step * passes + p)
            F.mse_loss(model(x), y).backward()
        opt.step()
    return model, opt


@case("optimizer/average_matches_reference")
def _(ctx):
    model, opt = _train(ctx, 3, momentum=0.9)
    ref = _reference_training(ctx, 3, momentum=0.9)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p, q, f"Average: {name}", rtol=1e-5, atol=1e-6)
    expect(isinstance(opt, torch.optim.SGD) and type(opt).__name__ == "SGD", "the wrapped optimizer is still an SGD")


@case("optimizer/backward_passes_per_step_2")
def _(ctx):
    model, _ = _train(ctx, 2, passes=2)
    ref = _reference_training(ctx, 2, passes=2)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p, q, f"backward_passes_per_step=2: {name}", rtol=1e-5, atol=1e-6)


@case("optimizer/fp16_compression")
def _(ctx):
    model, _ = _train(ctx, 2, compression=hvd.Compression.fp16)
    ref = _reference_training(ctx, 2, compress=torch.float16)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p, q, f"fp16 compression: {name}", rtol=1e-3, atol=1e-3)
    # and the gradients really went as float16: they are float16-representable
    model2 = _toy_model()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model2.parameters(), lr=0.0),
        named_parameters=model2.named_parameters(),
        compression=hvd.Compression.fp16,
        op=hvd.Sum,
    )
    x, y = _batch(ctx, ctx.rank, 99)
    F.mse_loss(model2(x), y).backward()
    opt.synchronize()
    for name, p in model2.named_parameters():
        expect(p.grad.dtype == torch.float32, f"{name}: grad back in float32")
        same(p.grad, p.grad.half().float(), f"{name}: reduced in float16")
    with opt.skip_synchronize():
        opt.step()


@case("optimizer/sum_groups_predivide_clip_unused")
def _(ctx):
    model, _ = _train(ctx, 2, op=hvd.Sum)
    ref = _reference_training(ctx, 2, op="sum")
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p, q, f"op=Sum: {name}", rtol=1e-5, atol=1e-6)
    for groups in (2, "list"):
        m = _toy_model()
        params = list(m.parameters())
        g = [[params[0], params[3]], [params[1]]] if groups == "list" else groups
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(m.parameters(), lr=0.1), named_parameters=m.named_parameters(), groups=g
        )
        for step in range(2):
            opt.zero_grad()
            x, y = _batch(ctx, ctx.rank, step)
            F.mse_loss(m(x), y).backward()
            opt.step()
        ref = _reference_training(ctx, 2)
        for (name, p), q in zip(m.named_parameters(), ref.parameters()):
            close(p, q, f"groups={groups}: {name}", rtol=1e-5, atol=1e-6)
    model, _ = _train(ctx, 2, gradient_predivide_factor=2.0)
    ref = _reference_training(ctx, 2)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p, q, f"gradient_predivide_factor=2: {name}", rtol=1e-5, atol=1e-6)
    # synchronize, clip, step under skip_synchronize; a parameter only rank 0 uses
    torch.manual_seed(3)
    lin, extra = nn.Linear(3, 1), nn.Linear(3, 1)
    params = list(lin.parameters()) + list(extra.parameters())
    named = [(f"lin.{k}", v) for k, v in lin.named_parameters()] + [
        (f"extra.{k}", v) for k, v in extra.named_parameters()
    ]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=1.0), named_parameters=named, op=hvd.Sum)
    out = lin(torch.ones(1, 3))
    if ctx.rank == 0:
        out = out + extra(torch.ones(1, 3))
    out.sum().backward()
    raises(AssertionError, lambda: opt.zero_grad(), "zero_grad between backward and step")
    opt.synchronize()
    same(extra.bias.grad, torch.ones(1), "unused on most ranks: summed with zeros")
    same(lin.bias.grad, torch.full((1,), float(ctx.size)), "used everywhere: summed")
    torch.nn.utils.clip_grad_norm_(params, 1e9)
    with opt.skip_synchronize():
        opt.step()
    raises(
        NotImplementedError,
        lambda: hvd.DistributedOptimizer(torch.optim.SGD(lin.parameters(), lr=1), op=hvd.Adasum),
        "Adasum optimizer",
    )
    raises(
        ValueError,
        lambda: hvd.DistributedOptimizer(torch.optim.SGD(lin.parameters(), lr=1), named_parameters=[("a", lin.weight)]),
        "named_parameters missing one",
    )


@case("sync_batch_norm")
def _(ctx):
    n, r = ctx.size, ctx.rank
    batches = [torch.randn(2 + k, 4, 3, generator=gen(ctx, k, 11)) * (k + 1) + k for k in range(n)]
    ups = [torch.randn(2 + k, 4, 3, generator=gen(ctx, k, 12)) for k in range(n)]
    torch.manual_seed(0)
    sbn = hvd.SyncBatchNorm(4, momentum=0.2)
    with torch.no_grad():
        sbn.weight.copy_(torch.arange(1.0, 5.0))
        sbn.bias.copy_(torch.arange(4.0))
    ref = nn.BatchNorm1d(4, momentum=0.2)
    ref.load_state_dict(sbn.state_dict())
    x = batches[r].clone().requires_grad_()
    y = sbn(x)
    (y * ups[r]).sum().backward()
    xs = torch.cat(batches).requires_grad_()
    yr = ref(xs)
    (yr * torch.cat(ups)).sum().backward()
    start = sum(2 + k for k in range(r))
    rows = slice(start, start + 2 + r)
    close(y, yr[rows], "SyncBatchNorm output = BatchNorm over the global batch", rtol=1e-4, atol=1e-5)
    close(x.grad, xs.grad[rows], "input gradient", rtol=1e-4, atol=1e-5)
    close(sbn.running_mean, ref.running_mean, "running_mean", rtol=1e-5, atol=1e-6)
    close(sbn.running_var, ref.running_var, "running_var", rtol=1e-5, atol=1e-6)
    # weight/bias gradients are local; their allreduce (Sum) is the global one
    close(hvd.allreduce(sbn.weight.grad, op=hvd.Sum), ref.weight.grad, "weight gradient (summed)", rtol=1e-4, atol=1e-5)
    close(hvd.allreduce(sbn.bias.grad, op=hvd.Sum), ref.bias.grad, "bias gradient (summed)", rtol=1e-4, atol=1e-5)
    sbn.eval()
    ref.eval()
    close(sbn(batches[r]), ref(batches[r]), "eval mode uses the running statistics", rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------
# Seed recipe (Horovod's PyTorch recipe, as in the articles users follow)


@case("seed_recipe/linear_regression")
def _(ctx):
    """The recipe of shared/seeds (000): hvd.init, DistributedOptimizer with
    op=hvd.Average, broadcast_parameters, DistributedSampler(num_replicas=
    hvd.size(), rank=hvd.rank()), sampler.set_epoch, rank-0 checkpoint. The
    `.cuda()` calls run only with CUDA; the dataset is seeded (the recipe's
    torch.randn differs per rank otherwise)."""
    out_dir = tempfile.mkdtemp(prefix="ringcc-hvd-seed-") if ctx.rank == 0 else None
    out_dir = hvd.broadcast_object(out_dir, root_rank=0)

    def recipe(hvd, checkpoint):
        hvd.init()
        if torch.cuda.is_available():
            torch.cuda.set_device(hvd.local_rank())
        torch.manual_seed(1234 + hvd.rank())  # a different init on every rank: broadcast fixes it
        model = torch.nn.Linear(20, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), op=hvd.Average)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        g = torch.Generator().manual_seed(0)
        dataset = torch.utils.data.TensorDataset(torch.randn(200, 20, generator=g), torch.randn(200, 1, generator=g))
        sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank())
        dataloader = torch.utils.data.DataLoader(dataset, batch_size=32, sampler=sampler)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for batch_x, batch_y in dataloader:
                optimizer.zero_grad()
                outputs = model(batch_x)
                loss = torch.nn.functional.mse_loss(outputs, batch_y)
                loss.backward()
                optimizer.step()
        if hvd.rank() == 0:
            torch.save(model.state_dict(), checkpoint)
        return model

    checkpoint = os.path.join(out_dir, "model.pth")
    model = recipe(hvd, checkpoint)
    # Reference: one process replays every rank's batches, averaging gradients.
    torch.manual_seed(1234)
    ref = torch.nn.Linear(20, 1)
    opt = torch.optim.SGD(ref.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    dataset = torch.utils.data.TensorDataset(torch.randn(200, 20, generator=g), torch.randn(200, 1, generator=g))
    samplers = [
        torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=ctx.size, rank=k) for k in range(ctx.size)
    ]
    for epoch in range(2):
        for s in samplers:
            s.set_epoch(epoch)
        loaders = [iter(torch.utils.data.DataLoader(dataset, batch_size=32, sampler=s)) for s in samplers]
        for batches in zip(*loaders):
            grads = []
            for bx, by in batches:
                ref.zero_grad()
                F.mse_loss(ref(bx), by).backward()
                grads.append([p.grad.clone() for p in ref.parameters()])
            for i, p in enumerate(ref.parameters()):
                p.grad = sum(gr[i] for gr in grads) / ctx.size
            opt.step()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p, q, f"recipe model {name} = reference", rtol=1e-5, atol=1e-6)
    hvd.barrier()
    if ctx.rank == 0:
        saved = torch.load(checkpoint)
        close(saved["weight"], model.weight, "rank 0's checkpoint")
        os.remove(checkpoint)
        os.rmdir(out_dir)
    else:
        expect(not os.path.exists(os.path.join(out_dir, f"rank{ctx.rank}.pth")), "only rank 0 saves")


# --------------------------------------------------------------------------
# Errors


@case("errors/mismatch_raises_from_synchronize_and_job_goes_on")
def _(ctx):
    r = ctx.rank
    h = hvd.allreduce_async(torch.ones(r + 2), name="mismatch.shape")
    error = raises(hvd.HorovodInternalError, lambda: hvd.synchronize(h), "mismatched shapes", fragment="mismatch.shape")
    expect(isinstance(error, ringcc.MismatchError), f"also a ringcc.MismatchError: {type(error).__mro__}")
    expect(
        isinstance(error, torch.distributed.DistBackendError),
        f"also a torch.distributed.DistBackendError: {type(error).__mro__}",
    )
    dtype = torch.float32 if r == 0 else torch.float64
    raises(
        hvd.HorovodInternalError,
        lambda: hvd.allreduce(torch.ones(3, dtype=dtype), name="mismatch.dtype"),
        "mismatched dtypes (blocking allreduce)",
    )
    raises(
        ringcc.MismatchError,
        lambda: hvd.allgather(torch.ones(2, r + 1), name="mismatch.rows"),
        "allgather with different row shapes",
    )
    if ctx.size > 1:
        raises(
            ringcc.MismatchError,
            lambda: hvd.broadcast(torch.ones(2), root_rank=r, name="mismatch.root"),
            "broadcast with different roots",
        )
    same(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(ctx.size)), "the job goes on")
    raises(TypeError, lambda: hvd.allreduce([1.0, 2.0]), "a list is not a tensor")
    # docs/torch.md: bool, uint16/32/64 and float8 reductions raise TypeError naming the dtype.
    for dtype_name in ("bool", "uint16", "uint32", "uint64", "float8_e4m3fn"):
        dtype = getattr(torch, dtype_name, None)
        if dtype is None:  # a torch without this dtype
            continue
        raises(
            TypeError,
            lambda dtype=dtype: hvd.allreduce(torch.ones(2, dtype=dtype)),
            f"{dtype_name} allreduce",
            fragment=str(dtype),
        )
    raises(
        ValueError, lambda: hvd.allreduce(torch.ones(1), process_set=hvd.ProcessSet([0])), "an unregistered process set"
    )


def _dims(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _shape_mismatches(ctx, ranks, process_set, stem):
    """Ranks `ranks` (of the set) pass as many elements in different shapes to
    each collective, named after `stem`: every one of them raises MismatchError
    (a HorovodInternalError) naming the tensor and each rank's shape."""
    k = len(ranks)

    def swapped(a, b):
        return lambda m: a if m % 2 == 0 else b

    same, trailing = "disagree on the shape (", "shape after the first dimension"
    calls = [
        ("allreduce", swapped((2, 3), (3, 2)), same, lambda x, n: hvd.allreduce(x, name=n, process_set=process_set)),
        (
            "allreduce_async_",
            swapped((2, 3), (3, 2)),
            same,
            lambda x, n: hvd.synchronize(hvd.allreduce_async_(x, name=n, process_set=process_set)),
        ),
        (
            "broadcast",
            swapped((2, 3), (3, 2)),
            same,
            lambda x, n: hvd.broadcast(x, root_rank=ranks[0], name=n, process_set=process_set),
        ),
        (
            "reducescatter",
            swapped((2 * k, 3), (3, 2 * k)),
            same,
            lambda x, n: hvd.reducescatter(x, op=hvd.Sum, name=n, process_set=process_set),
        ),
        (
            "allgather",
            swapped((2, 6), (2, 3, 2)),
            trailing,
            lambda x, n: hvd.allgather(x, name=n, process_set=process_set),
        ),
    ]
    me = ranks.index(ctx.rank)
    for what, shape_of, phrase, call in calls:
        name = f"{stem}.{what}"
        error = raises(
            hvd.HorovodInternalError, lambda: call(torch.ones(shape_of(me)), name), f"{what} ({stem})", fragment=name
        )
        expect(error is None or isinstance(error, ringcc.MismatchError), f"{what} ({stem}): {error!r}")
        for fragment in [phrase] + [f"rank {m}: {_dims(shape_of(i))}" for i, m in enumerate(ranks)]:
            expect(error is None or fragment in str(error), f"{what} ({stem}): message lacks {fragment!r}: {error}")


@case("errors/shapes-with-the-same-count")
def _(ctx):
    # As many elements on every rank, in different shapes: every rank raises,
    # naming the tensor and the shapes; the job goes on.
    if ctx.size > 1:
        _shape_mismatches(ctx, list(range(ctx.size)), hvd.global_process_set, "shape.global")
    same(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(ctx.size)), "the job goes on")


@case("errors/shapes-with-the-same-count/process-set", min_size=3)
def _(ctx):
    members = [0, 1]
    pair = hvd.add_process_set(members)
    try:
        if ctx.rank in members:
            _shape_mismatches(ctx, members, pair, "shape.set")
            # Unnamed: the tensor is named by its place in issue order and shape.
            shape = (2, 3) if ctx.rank == 0 else (3, 2)
            error = raises(
                hvd.HorovodInternalError,
                lambda: hvd.allreduce(torch.ones(shape), process_set=pair),
                "an unnamed allreduce on the set",
                fragment=f"shape {_dims(shape)}",
            )
            expect(error is None or "collective #" in str(error), f"unnamed: {error}")
            same(hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=pair), torch.full((2,), 2.0), "the set goes on")
    finally:
        hvd.barrier()
        hvd.remove_process_set(pair)


class _Unpicklable:
    def __reduce__(self):
        raise TypeError("cannot pickle this object")


@case("errors/one_rank_arguments_fail_every_rank", min_size=2)
def _(ctx):
    # The last rank passes an argument only it finds wrong: it raises its own
    # error at once, every other rank a MismatchError (a HorovodInternalError)
    # naming it, for the same call, and the next call (its generated name
    # included) is in step.
    n, r = ctx.size, ctx.rank
    last = n - 1
    bad = r == last
    x = torch.full((2 * n, 2), float(r + 1))
    total = torch.full((2 * n, 2), float(n * (n + 1) // 2))
    sparse = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.tensor([1.0]), (3,), check_invariants=True)
    # A process set of the first and the last rank (a set must differ from
    # the global one): its collectives run in issue order on its own
    # communicator; the ranks outside it skip them.
    members = [0, last]
    pair = hvd.add_process_set(members) if n >= 3 else None
    in_pair = pair is not None and r in members
    pair_total = torch.full((2 * n, 2), float(1 + n))

    def pick(bad_value, good_value):
        return bad_value if bad else good_value

    calls = [
        (
            "allreduce, unknown op",
            ringcc.InvalidArgumentError,
            "unknown reduction",
            lambda: hvd.allreduce(x, op=pick("median", hvd.Sum)),
        ),
        (
            "allreduce, not a tensor",
            TypeError,
            "expected a torch.Tensor",
            lambda: hvd.allreduce(pick([1.0], x), op=hvd.Sum),
        ),
        (
            "allreduce, bool tensor",
            TypeError,
            "not supported for reductions",
            lambda: hvd.allreduce(pick(torch.ones(2 * n, 2, dtype=torch.bool), x), op=hvd.Sum),
        ),
        (
            "allreduce, op and average",
            ValueError,
            "supersedes average",
            lambda: hvd.allreduce(x, op=hvd.Sum, average=pick(True, None)),
        ),
        (
            "allreduce, fp16 compression of a list",
            AttributeError,
            "list",
            lambda: hvd.allreduce(pick([1.0], x), op=hvd.Sum, compression=hvd.Compression.fp16),
        ),
        (
            "allreduce_async, process_set not a ProcessSet",
            ValueError,
            "process_set must be a ProcessSet",
            lambda: hvd.synchronize(
                hvd.allreduce_async(x, op=hvd.Sum, process_set=pick("all", hvd.global_process_set))
            ),
        ),
        (
            "allreduce_async_ (direct path), prescale_factor a string",
            TypeError,
            "prescale_factor",
            lambda: hvd.synchronize(hvd.allreduce_async_(x.clone(), op=hvd.Sum, prescale_factor=pick("x", 1.0))),
        ),
        (
            "allreduce_ of a bool tensor",
            TypeError,
            "not supported for reductions",
            lambda: hvd.allreduce_(pick(torch.ones(2 * n, 2, dtype=torch.bool), x.clone()), op=hvd.Sum),
        ),
        (
            "grouped_allreduce, a string in the list",
            TypeError,
            "expected a torch.Tensor",
            lambda: hvd.grouped_allreduce(pick([x, "s"], [x, x]), op=hvd.Sum),
        ),
        (
            "grouped_allreduce_async_, unknown op",
            ringcc.InvalidArgumentError,
            "unknown reduction",
            lambda: hvd.synchronize(hvd.grouped_allreduce_async_([x.clone(), x.clone()], op=pick("nope", hvd.Sum))),
        ),
        ("allgather, not a tensor", TypeError, "expected a torch.Tensor", lambda: hvd.allgather(pick(None, x))),
        (
            "grouped_allgather, None in the list",
            TypeError,
            "expected a torch.Tensor",
            lambda: hvd.grouped_allgather(pick([x, None], [x, x])),
        ),
        ("broadcast, root not a number", ValueError, "invalid literal", lambda: hvd.broadcast(x, pick("a", 0))),
        (
            "broadcast_, not a tensor",
            TypeError,
            "expected a torch.Tensor",
            lambda: hvd.broadcast_(pick(3, x.clone()), 0),
        ),
        (
            "alltoall, a split not a number",
            ValueError,
            "invalid literal",
            lambda: hvd.alltoall(x, splits=pick(["a"] + [2] * (n - 1), [2] * n)),
        ),
        (
            "reducescatter, unknown op",
            ringcc.InvalidArgumentError,
            "unknown reduction",
            lambda: hvd.reducescatter(x, op=pick("nope", hvd.Sum)),
        ),
        (
            "reducescatter, 0-dim tensor",
            ValueError,
            "0-dim",
            lambda: hvd.reducescatter(pick(torch.tensor(1.0), x), op=hvd.Sum),
        ),
        (
            "grouped_reducescatter, a 0-dim tensor in the list",
            ValueError,
            "0-dim",
            lambda: hvd.grouped_reducescatter(pick([x, torch.tensor(1.0)], [x, x]), op=hvd.Sum),
        ),
        (
            "broadcast_object from a root whose object cannot be pickled",
            TypeError,
            "cannot pickle",
            lambda: hvd.broadcast_object(_Unpicklable() if bad else None, root_rank=last),
        ),
        (
            "allgather_object of an object that cannot be pickled",
            TypeError,
            "cannot pickle",
            lambda: hvd.allgather_object(_Unpicklable() if bad else r),
        ),
        (
            "sparse_allreduce_async, a dense tensor",
            ValueError,
            "sparse COO",
            lambda: hvd.synchronize(hvd.sparse_allreduce_async(pick(torch.ones(3), sparse), None, hvd.Sum)),
        ),
    ]
    if pair is not None:  # every rank goes through them, in step; those outside skip the call
        calls += [
            (
                "allreduce on a process set, not a tensor",
                TypeError,
                "expected a torch.Tensor",
                lambda: hvd.allreduce(pick("t", x), op=hvd.Sum, process_set=pair),
            ),
            (
                "grouped_allgather on a process set, None in the list",
                TypeError,
                "expected a torch.Tensor",
                lambda: hvd.grouped_allgather(pick([x, None], [x, x]), process_set=pair),
            ),
            (
                "broadcast on a process set, root outside it",
                ValueError,
                "is not in",
                lambda: hvd.broadcast(x, pick(1, 0), process_set=pair),
            ),
        ]
    for what, own, fragment, call in calls:
        if "process set" in what and not in_pair:
            pass
        elif bad:
            raises(own, call, f"{what} (rank {last}'s own error)", fragment)
        else:
            # A process set's communicator names its ranks by their place in the set.
            named = members.index(last) if "process set" in what else last
            error = raises(
                ringcc.MismatchError, call, f"{what} (rank {last}'s bad argument)", f"rank {named} could not start"
            )
            expect(
                error is None or isinstance(error, hvd.HorovodInternalError),
                f"{what}: also a HorovodInternalError: {type(error).__mro__}",
            )
            expect(error is None or fragment in str(error), f"{what}: the reason is named: {error}")
        # The next calls, with generated names, are in step.
        same(hvd.allreduce(x, op=hvd.Sum), total, f"allreduce after {what}")
        if in_pair:
            same(hvd.allreduce(x, op=hvd.Sum, process_set=pair), pair_total, f"allreduce on a process set after {what}")
    if pair is not None:
        hvd.remove_process_set(pair)


@case("errors/grouped_reducescatter_of_0dim_raises_on_every_rank")
def _(ctx):
    # As Horovod's coordinator refuses rank-zero tensors.
    n = ctx.size
    raises(
        ValueError,
        lambda: hvd.grouped_reducescatter([torch.zeros(3, 1), torch.tensor(1.0)]),
        "grouped_reducescatter with a 0-dim tensor",
        "0-dim",
    )
    raises(
        ValueError,
        lambda: hvd.reducescatter(torch.tensor(float(ctx.rank)), op=hvd.Average),
        "reducescatter of a 0-dim tensor",
        "0-dim",
    )
    same(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)), "the job goes on")


@case("errors/groups-of-different-lengths-fail-every-rank", min_size=2)
def _(ctx):
    # The last rank's group lacks its last tensor. Every collective the ranks
    # share raises MismatchError on every rank (each carries its group's
    # length), rather than reducing whichever tensors share a position; the
    # last rank then fails the others' last collective, which it never
    # started, so that no rank waits for the timeout and the same call can
    # run again at once under the same name.
    n, r = ctx.size, ctx.rank
    short = r == n - 1
    rows = 2 * n

    def group(grad=False, count=None):
        count = count or (2 if short else 3)
        return [torch.full((rows, 3), float(i + 1), requires_grad=grad) for i in range(count)]

    calls = [
        ("grouped_allreduce", lambda g: hvd.grouped_allreduce(g, name="gl.ar", op=hvd.Sum)),
        ("grouped_allreduce_", lambda g: hvd.grouped_allreduce_(g, name="gl.ar_", op=hvd.Sum)),
        (
            "grouped_allreduce (autograd)",
            lambda g: hvd.grouped_allreduce([t.requires_grad_() for t in g], name="gl.arg", op=hvd.Sum),
        ),
        ("grouped_allgather", lambda g: hvd.grouped_allgather(g, name="gl.ag")),
        (
            "grouped_allgather (autograd)",
            lambda g: hvd.grouped_allgather([t.requires_grad_() for t in g], name="gl.agg"),
        ),
        ("grouped_reducescatter", lambda g: hvd.grouped_reducescatter(g, name="gl.rs", op=hvd.Sum)),
        (
            "grouped_reducescatter (autograd)",
            lambda g: hvd.grouped_reducescatter([t.requires_grad_() for t in g], name="gl.rsg", op=hvd.Sum),
        ),
    ]
    # A name the response cache knows from a step where the groups agreed.
    full = [torch.full((rows, 3), float(i + 1)) for i in range(3)]
    for i, t in enumerate(hvd.grouped_allreduce_(full, name="gl.ar_", op=hvd.Sum)):
        same(t, torch.full((rows, 3), float(n * (i + 1))), f"the agreeing step [{i}]")
    for what, call in calls:
        start = time.monotonic()
        error = raises(ringcc.MismatchError, lambda: call(group()), what, fragment="grouped with it")
        expect(error is None or "rank 0: 3" in str(error), f"{what}: message lacks rank 0's group: {error}")
        seconds = time.monotonic() - start
        expect(seconds < 10, f"{what}: the error took {seconds:.1f} s")
        # The same call again, the groups agreeing: nothing of the failed one is left in flight.
        got = call(group(count=3))
        expect(len(got) == 3, f"{what} again: {len(got)} results")
        same(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)), f"the job goes on after {what}")
    # A group of one tensor where the others' hold two.
    start = time.monotonic()
    one = [torch.ones(rows, 3) for _ in range(1 if short else 2)]
    raises(ringcc.MismatchError, lambda: hvd.grouped_allreduce(one, name="gl.one"), "a group of one", "grouped with it")
    expect(time.monotonic() - start < 10, f"a group of one: the error took {time.monotonic() - start:.1f} s")
    expect(len(hvd.grouped_allreduce(group(count=2), name="gl.one")) == 2, "a group of two again")


@case("errors/single-and-grouped-calls-under-one-name-fail-every-rank", min_size=2)
def _(ctx):
    # The last rank calls the single form under the name its peers give a
    # grouped call. The group's first collective takes the single call's
    # name, so both meet on it and raise MismatchError on every rank at once
    # (not at the stall timeout); the single rank then fails the group's
    # other collectives, which it never starts, so that the same names can
    # run again at once on every rank.
    n, r = ctx.size, ctx.rank
    single = r == n - 1
    rows = 2 * n

    def group(grad=False):
        return [torch.full((rows, 3), float(i + 1), requires_grad=grad) for i in range(3)]

    calls = [
        (
            "allreduce against grouped_allreduce",
            lambda: hvd.allreduce(torch.ones(rows, 3), name="sg.ar", op=hvd.Sum),
            lambda: hvd.grouped_allreduce(group(), name="sg.ar", op=hvd.Sum),
        ),
        (
            "allreduce_async_ against grouped_allreduce_async_",
            lambda: hvd.synchronize(hvd.allreduce_async_(torch.ones(rows, 3), name="sg.ar_", op=hvd.Sum)),
            lambda: hvd.synchronize(hvd.grouped_allreduce_async_(group(), name="sg.ar_", op=hvd.Sum)),
        ),
        (
            "allgather against grouped_allgather",
            lambda: hvd.allgather(torch.ones(rows, 3), name="sg.ag"),
            lambda: hvd.grouped_allgather(group(), name="sg.ag"),
        ),
        (
            "allgather against grouped_allgather (autograd, one collective at a time)",
            lambda: hvd.allgather(torch.ones(rows, 3), name="sg.agg"),
            lambda: hvd.grouped_allgather(group(grad=True), name="sg.agg"),
        ),
        (
            "reducescatter against grouped_reducescatter",
            lambda: hvd.reducescatter(torch.ones(rows, 3), name="sg.rs", op=hvd.Sum),
            lambda: hvd.grouped_reducescatter(group(), name="sg.rs", op=hvd.Sum),
        ),
        (
            "allreduce against grouped_allreduce, the dtypes differing too",
            lambda: hvd.allreduce(torch.ones(rows, 3, dtype=torch.float64), name="sg.dtype", op=hvd.Sum),
            lambda: hvd.grouped_allreduce(group(), name="sg.dtype", op=hvd.Sum),
        ),
    ]
    for what, one, grouped in calls:
        start = time.monotonic()
        error = raises(ringcc.MismatchError, single and one or grouped, what, fragment="grouped with it")
        seconds = time.monotonic() - start
        expect(seconds < 10, f"{what}: the error took {seconds:.1f} s")
        expect(error is None or f"rank {n - 1}: 0" in str(error), f"{what}: message lacks the single call: {error}")
        # Both forms again on every rank: nothing of the failed calls is left in flight.
        got = grouped()
        expect(len(got) == 3, f"{what}: the grouped call again gave {len(got)} results")
        one()
    same(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)), "the job goes on")


@case("errors/failed-single-call-fails-the-peers-group", min_size=2)
def _(ctx):
    # The last rank makes the single call under the name its peers give a
    # grouped call, and its argument check fails: it takes part in the
    # group's first collective as a failed participant, and knows nothing
    # of the group's others. The peers abandon those at once (every rank
    # drops them), so the whole grouped call raises within seconds rather
    # than at the stall timeout, and the same names run again at once.
    n, r = ctx.size, ctx.rank
    single = r == n - 1
    rows = 2 * n

    def group():
        return [torch.full((rows, 3), float(i + 1)) for i in range(3)]

    calls = [
        (
            "allreduce (unknown op) against grouped_allreduce",
            ringcc.InvalidArgumentError,
            lambda: hvd.allreduce(torch.ones(rows, 3), name="fg.ar", op="median"),
            lambda: hvd.grouped_allreduce(group(), name="fg.ar", op=hvd.Sum),
            lambda: hvd.allreduce(torch.ones(rows, 3), name="fg.ar", op=hvd.Sum),
        ),
        (
            "allreduce_async_ (bool) against grouped_allreduce_async_",
            TypeError,
            lambda: hvd.synchronize(hvd.allreduce_async_(torch.ones(rows, 3, dtype=torch.bool), name="fg.ar_")),
            lambda: hvd.synchronize(hvd.grouped_allreduce_async_(group(), name="fg.ar_", op=hvd.Sum)),
            lambda: hvd.synchronize(hvd.allreduce_async_(torch.ones(rows, 3), name="fg.ar_", op=hvd.Sum)),
        ),
        (
            "allgather (not a tensor) against grouped_allgather",
            TypeError,
            lambda: hvd.allgather([1.0], name="fg.ag"),
            lambda: hvd.grouped_allgather(group(), name="fg.ag"),
            lambda: hvd.allgather(torch.ones(rows, 3), name="fg.ag"),
        ),
        (
            "allgather (not a tensor) against grouped_allgather (autograd, one collective at a time)",
            TypeError,
            lambda: hvd.allgather([1.0], name="fg.agg"),
            lambda: hvd.grouped_allgather([t.requires_grad_() for t in group()], name="fg.agg"),
            lambda: hvd.allgather(torch.ones(rows, 3), name="fg.agg"),
        ),
    ]
    for what, own_error, bad, grouped, good in calls:
        start = time.monotonic()
        if single:
            raises(own_error, bad, what)
        else:
            error = raises(ringcc.MismatchError, grouped, what, fragment=f"rank {n - 1} could not start")
            seconds = time.monotonic() - start
            expect(seconds < 10, f"{what}: the error took {seconds:.1f} s")
            expect(error is None or "tensor '" in str(error), f"{what}: message names no tensor: {error}")
        # Both forms again on every rank: nothing of the failed calls is left in flight.
        got = grouped()
        expect(len(got) == 3, f"{what}: the grouped call again gave {len(got)} results")
        good()
    same(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)), "the job goes on")


@case("errors/groups-of-different-lengths/process-set", min_size=3)
def _(ctx):
    # On a process set (collectives in issue order) rank 1's groups lack a
    # tensor: every grouped call raises MismatchError on both members before
    # any of its collectives starts, so the set's next calls stay in step.
    members = [0, 1]
    pair = hvd.add_process_set(members)
    try:
        if ctx.rank in members:

            def group(grad=False):
                return [torch.full((4, 3), float(i + 1), requires_grad=grad) for i in range(2 if ctx.rank else 3)]

            calls = [
                ("grouped_allreduce", lambda: hvd.grouped_allreduce(group(), op=hvd.Sum, process_set=pair)),
                ("grouped_allgather", lambda: hvd.grouped_allgather(group(), process_set=pair)),
                ("grouped_allgather (autograd)", lambda: hvd.grouped_allgather(group(True), process_set=pair)),
                ("grouped_reducescatter", lambda: hvd.grouped_reducescatter(group(), op=hvd.Sum, process_set=pair)),
                (
                    "grouped_reducescatter (autograd)",
                    lambda: hvd.grouped_reducescatter(group(True), op=hvd.Sum, process_set=pair),
                ),
            ]
            for what, call in calls:
                start = time.monotonic()
                raises(ringcc.MismatchError, call, f"{what} on a set")
                expect(time.monotonic() - start < 10, f"{what} on a set: took {time.monotonic() - start:.1f} s")
                got = hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=pair)
                same(got, torch.full((2,), 2.0), f"the set goes on after {what}")
    finally:
        hvd.barrier()
        hvd.remove_process_set(pair)


@case("functions/broadcast_optimizer_state_without_gradients")
def _(ctx):
    # Horovod's test_broadcast_state_no_grad: a new optimizer gets its state
    # from a zero-gradient step, so every parameter that requires a gradient
    # has one afterwards; the others keep none.
    class ModelNoGrad(nn.Module):
        def __init__(self, a, b):
            super().__init__()
            self.a = nn.Parameter(a.int(), requires_grad=False)
            self.b = nn.Parameter(b)

        def forward(self, x):
            return torch.index_select(self.b, 0, self.a.long()) * x

    torch.manual_seed(11 + ctx.rank)
    model = ModelNoGrad(torch.tensor([1.0, 3.0]), torch.rand(4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, weight_decay=1e-6, momentum=0.9, nesterov=True)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    expect(optimizer.param_groups[0]["params"][0].grad is None, "no gradient for the frozen parameter")
    grad = optimizer.param_groups[0]["params"][1].grad
    if expect(isinstance(grad, torch.Tensor), f"a zero gradient for the trained parameter: {grad!r}"):
        same(grad, torch.zeros(4), "the gradient is zero")
        same(hvd.broadcast(grad, root_rank=0), grad, "broadcast of the gradient")
    state = optimizer.state_dict()["state"]
    expect(list(state) == [1] and "momentum_buffer" in state[1], f"state of the trained parameter only: {state}")
    # The same step on every rank from the same parameters: the same state.
    root = hvd.broadcast_object(state if ctx.rank == 0 else None, 0)
    same(state[1]["momentum_buffer"], root[1]["momentum_buffer"], "momentum buffer as the root's")


@case("autograd/grouped_reducescatter_gradient_as_horovod")
def _(ctx):
    # Horovod: the incoming gradient times the size for Sum (not Average) and
    # the scale factors, allgathered.
    n = ctx.size
    for op, scale in ((hvd.Sum, float(n)), (hvd.Average, 1.0)):
        a = torch.ones(2 * n, 3, requires_grad=True)
        b = torch.ones(n, requires_grad=True)
        ya, yb = hvd.grouped_reducescatter([a, b], op=op)
        (ya.sum() + 2 * yb.sum()).backward()
        same(a.grad, torch.full((2 * n, 3), scale), f"grouped_reducescatter gradient [0], op {op}")
        same(b.grad, torch.full((n,), 2 * scale), f"grouped_reducescatter gradient [1], op {op}")
    a = torch.ones(2 * n, 3, requires_grad=True)
    hvd.grouped_reducescatter([a], op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0)[0].sum().backward()
    same(a.grad, torch.full((2 * n, 3), 2.0 * n), "grouped_reducescatter gradient with scale factors")


if __name__ == "__main__":
    sys.exit(run_cases(CASES))
