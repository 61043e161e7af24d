"""The collective cases, run inside one group of ranks:

    ringrun -np N python tests/ranks/rank_cases.py --out DIR [--tags torch] [--cases PATTERNS]

Every case checks ringcc's result against NumPy. Inputs are generated from a
per-case seed, so every rank can rebuild any rank's input and the expected
result. tests/ranks/test_collectives.py parametrizes its tests from CASES.
"""

from __future__ import annotations

import array
import os
import sys
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))  # tests/harness
from rank_harness import CaseList, Skip, check_close, check_equal, expect, expect_error, fail, run_cases  # noqa: E402

ringcc = None  # imported by main(), so that pytest can read CASES without the compiled core

CASES = CaseList()

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64"]
OPS = ["Sum", "Average", "Min", "Max", "Product"]

# The core's defaults: messages up to SMALL_BYTES take the one-phase
# shared-memory path; longer allreduces go in pieces of ALLREDUCE_PIECE_BYTES,
# the other collectives in pieces of SHM_AREA_BYTES.
SMALL_BYTES = 64 << 10
ALLREDUCE_PIECE_BYTES = 512 << 10
SHM_AREA_BYTES = 4 << 20

# Tolerance (relative to the sum of the magnitudes that were added) for
# float results: 16-bit floats accumulate in float32 and round to 16 bits,
# over TCP once per ring step.
RTOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-6, "float64": 1e-14}


def dtype_of(name: str) -> np.dtype:
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise Skip("ml_dtypes is not installed, so NumPy has no bfloat16") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def is_int(dt: np.dtype) -> bool:
    return dt.kind in "iu"


def op_value(op: str):
    return getattr(ringcc, op)


def value_kind(op: str) -> str:
    return {"Sum": "sum", "Average": "sum", "Min": "minmax", "Max": "minmax", "Product": "product"}[op]


def make_input(ctx, rank: int, dt: np.dtype, count: int, kind: str = "sum", salt: int = 0) -> np.ndarray:
    """Rank `rank`'s input for this case: values that suit the reduction.

    Integers for sum/min/max span the whole type (sums wrap around, as in
    NumPy); products use small factors so they stay meaningful."""
    rng = ctx.rng(rank, salt)
    if is_int(dt):
        info = np.iinfo(dt)
        if kind == "product":
            low, high = (0, 7) if dt.kind == "u" else (-5, 5)
        else:
            low, high = int(info.min), int(info.max)
        return rng.integers(low, high, size=count, endpoint=True, dtype=dt)
    if kind == "product":
        values = rng.choice(np.array([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0]), size=count)
    elif kind == "minmax":
        values = rng.uniform(-100.0, 100.0, size=count)
    else:
        values = rng.uniform(-4.0, 4.0, size=count)
    return values.astype(np.float32).astype(dt)


def whole_reciprocal(factor: float) -> int:
    """k when factor is exactly 1 / k for a whole k >= 2 (the core then divides by k), else 0."""
    if not 0.0 < factor <= 0.5:
        return 0
    k = round(1.0 / factor)
    return k if 2 <= k <= 2**31 and 1.0 / k == factor else 0


def scale_int(values: np.ndarray, factor: float) -> np.ndarray:
    """Integer scaling as the core does it: a factor 1 / k divides by k,
    exactly, truncated toward zero; others in float64, truncated, saturated."""
    dt = values.dtype
    k = whole_reciprocal(factor)
    if k:
        floor = values // k  # NumPy floors; the core truncates toward zero
        return np.where((values % k != 0) & (values < 0), floor + 1, floor).astype(dt)
    info = np.iinfo(dt)
    scaled = values.astype(np.float64) * factor
    out = np.empty(values.shape, dtype=dt)
    high = scaled >= float(info.max) + 1.0
    low = scaled <= float(info.min)
    middle = ~(high | low)
    out[middle] = np.trunc(scaled[middle]).astype(dt)
    out[high] = info.max
    out[low] = info.min
    return out


def check_reduction(got, inputs, op: str, what: str, pre: float = 1.0, post: float = 1.0) -> None:
    """got must be the reduction of `inputs` (one array per rank) by `op`."""
    dt = inputs[0].dtype
    n = len(inputs)
    factor = post / n if op == "Average" else post
    if is_int(dt):
        stack = np.stack([scale_int(x, pre) if pre != 1.0 else x for x in inputs])
        if op in ("Sum", "Average"):
            want = np.add.reduce(stack, axis=0, dtype=dt)
        elif op == "Product":
            want = np.multiply.reduce(stack, axis=0, dtype=dt)
        elif op == "Min":
            want = stack.min(axis=0)
        else:
            want = stack.max(axis=0)
        if factor != 1.0:
            want = scale_int(want, factor)
        check_equal(got, want, what)
        return
    if op in ("Min", "Max") and pre == 1.0 and factor == 1.0:
        stack32 = np.stack([x.astype(np.float32) for x in inputs])
        want32 = stack32.min(axis=0) if op == "Min" else stack32.max(axis=0)
        check_equal(got, want32.astype(dt), what)
        return
    stack = np.stack([x.astype(np.float64) * pre for x in inputs])
    if op in ("Sum", "Average"):
        want = stack.sum(axis=0) * factor
        scale = np.abs(stack).sum(axis=0) * abs(factor)
    elif op == "Product":
        want = stack.prod(axis=0) * factor
        scale = np.abs(want)
    else:
        want = (stack.min(axis=0) if op == "Min" else stack.max(axis=0)) * factor
        scale = np.abs(want)
    check_close(got, want, scale, RTOL[dt.name] * max(n - 1, 1), what, want_dtype=dt)


def scale_kwargs(pre: float, post: float) -> dict:
    kwargs = {}
    if pre != 1.0:
        kwargs["prescale_factor"] = pre
    if post != 1.0:
        kwargs["postscale_factor"] = post
    return kwargs


def block(rows: int, n: int, r: int):
    """Rank r's block of `rows` rows for reduce_scatter: (first row, row count)."""
    base, extra = divmod(rows, n)
    return r * base + min(r, extra), base + (1 if r < extra else 0)


def poll_done(handle, what: str, seconds: float = 60.0) -> None:
    """Waits for done() to turn True without calling wait()."""
    deadline = time.monotonic() + seconds
    while not handle.done():
        if time.monotonic() > deadline:
            fail(f"{what}: done() stayed False for {seconds:g} s")
            return
        time.sleep(0.001)


# --------------------------------------------------------------------------
# allreduce


def add_allreduce(
    dtype_name: str,
    op: str,
    count: int,
    *,
    pre: float = 1.0,
    post: float = 1.0,
    op_arg=None,
    shape=None,
    name: str = None,
    **options,
) -> None:
    """allreduce (new array), allreduce_ (in place) and allreduce(out=) of one input."""
    if name is None:
        name = f"allreduce/{dtype_name}/{op}/n={count}"
        if pre != 1.0 or post != 1.0:
            name += f"/pre={pre:g},post={post:g}"

    def run(ctx):
        dt = dtype_of(dtype_name)
        the_op = op_value(op) if op_arg is None else op_arg
        kwargs = scale_kwargs(pre, post)
        inputs = [make_input(ctx, r, dt, count, value_kind(op)).reshape(shape or (count,)) for r in range(ctx.size)]
        mine = inputs[ctx.rank]
        original = mine.copy()

        got = ringcc.allreduce(mine, the_op, **kwargs)
        check_reduction(got, inputs, op, "allreduce", pre, post)
        check_equal(mine, original, "allreduce's input after the call")

        buffer = mine.copy()
        returned = ringcc.allreduce_(buffer, the_op, **kwargs)
        expect(returned is buffer, "allreduce_ must return its argument")
        check_reduction(buffer, inputs, op, "allreduce_ (in place)", pre, post)

        out = np.zeros_like(mine)
        returned = ringcc.allreduce(mine, the_op, out=out, **kwargs)
        expect(returned is out, "allreduce(out=) must return out")
        check_reduction(out, inputs, op, "allreduce(out=)", pre, post)

    CASES.add(name, run, **options)


def register_allreduce_cases() -> None:
    planned = {}

    def plan(dtype_name, op, count):
        planned.setdefault((dtype_name, op, count), None)

    for dtype_name in DTYPES:
        itemsize = 2 if dtype_name == "bfloat16" else np.dtype(dtype_name).itemsize
        plan(dtype_name, "Sum", 0)
        for op in OPS:
            # odd, prime, and one element past the one-phase shared-memory path
            for count in (7, 1009, SMALL_BYTES // itemsize + 1):
                plan(dtype_name, op, count)
        plan(dtype_name, "Sum", ALLREDUCE_PIECE_BYTES // itemsize + 1)  # two shared-memory pieces
    plan("float64", "Average", SHM_AREA_BYTES // 8 * 2 + 3)  # 17 pieces, the last one short
    # float32 around every boundary: the small-message threshold (16384
    # elements = 64 KiB), the allreduce piece (131072 = 512 KiB) and the
    # shared-memory area (1048576 = 4 MiB).
    for count in (1, 16383, 16384, 16385, 131071, 131072, 131073, 1048575, 1048576, 1048577):
        plan("float32", "Sum", count)
    for dtype_name, op, count in planned:
        add_allreduce(dtype_name, op, count)

    for dtype_name in DTYPES:
        itemsize = 2 if dtype_name == "bfloat16" else np.dtype(dtype_name).itemsize
        add_allreduce(dtype_name, "Sum", 1009, pre=0.5, post=3.0)
        add_allreduce(dtype_name, "Sum", SMALL_BYTES // itemsize + 1, pre=0.5, post=3.0)
        add_allreduce(dtype_name, "Average", 1009, pre=2.0, post=0.25)

    for text, op in (
        ("sum", "Sum"),
        ("avg", "Average"),
        ("average", "Average"),
        ("mean", "Average"),
        ("min", "Min"),
        ("max", "Max"),
        ("product", "Product"),
        ("prod", "Product"),
    ):
        add_allreduce("float32", op, 7, op_arg=text, name=f"allreduce/op-string/{text}")
    add_allreduce("float32", "Sum", 105, shape=(3, 5, 7), name="allreduce/float32/Sum/shape=(3,5,7)")
    add_allreduce("int64", "Max", 24, shape=(2, 3, 4), name="allreduce/int64/Max/shape=(2,3,4)")


register_allreduce_cases()


@CASES.case("allreduce/float32/Sum/64MiB")
def allreduce_64mib(ctx):
    count = 16 << 20  # 64 MiB of float32
    pattern = (np.arange(count, dtype=np.int32) % 13).astype(np.float32)
    mine = pattern + np.float32(ctx.rank)
    n = ctx.size
    want = pattern * np.float32(n) + np.float32(n * (n - 1) // 2)  # small integers: exact
    del pattern
    check_equal(ringcc.allreduce(mine), want, "allreduce of 64 MiB")
    ringcc.allreduce_(mine)
    check_equal(mine, want, "allreduce_ of 64 MiB")


@CASES.case("allreduce/buffer-protocol")
def allreduce_buffer_protocol(ctx):
    n, r = ctx.size, ctx.rank
    values = array.array("i", [r + i for i in range(10)])
    got = ringcc.allreduce(values)
    want = np.array([sum(q + i for q in range(n)) for i in range(10)], dtype=np.int32)
    check_equal(got, want, "allreduce of an array.array('i')")
    got = ringcc.allreduce(memoryview(bytes([r + 1] * 5)), ringcc.Max)
    check_equal(got, np.full(5, n, dtype=np.uint8), "allreduce of a read-only memoryview")


@CASES.case("allreduce_/buffer-protocol")
def allreduce_inplace_buffer_protocol(ctx):
    n, r = ctx.size, ctx.rank
    values = array.array("i", [r + i for i in range(10)])
    returned = ringcc.allreduce_(values, ringcc.Max)
    expect(returned is values, "allreduce_ must return its argument")
    check_equal(
        np.frombuffer(values, dtype=np.int32), np.arange(10, dtype=np.int32) + n - 1, "allreduce_(array.array, Max)"
    )
    data = bytearray([r + 1] * 5)
    ringcc.allreduce_(data, ringcc.Product)
    product = 1
    for q in range(n):
        product = product * (q + 1) % 256
    expect(bytes(data) == bytes([product] * 5), f"allreduce_(bytearray, Product): {bytes(data)!r}")


class _SubArray(np.ndarray):
    """An ndarray subclass: the compiled allreduce_ leaves it to the general path."""


@CASES.case("allreduce_/compiled-path-array-kinds")
def allreduce_inplace_compiled_path(ctx):
    """allreduce_(x[, op]) of a plain NumPy array runs compiled (no Python frame); every other
    call (a subclass, keywords, a str op) takes the general path. Both give NumPy's result."""
    n, r = ctx.size, ctx.rank
    expect(
        type(ringcc.allreduce_).__name__ == "builtin_function_or_method",
        f"ringcc.allreduce_ is {ringcc.allreduce_!r}, not the compiled path",
    )
    triangle = n * (n + 1) // 2
    for name in ("float16", "float32", "float64", "int8", "uint8", "intc", "int_", "longlong"):
        dt = np.dtype(getattr(np, name))
        sign = -1 if dt.kind == "i" else 1
        x = np.full((2, 3), sign * (r + 1), dtype=dt)
        expect(ringcc.allreduce_(x) is x, f"allreduce_({name}) returns its argument")
        check_equal(x, np.full((2, 3), sign * triangle, dtype=dt), f"allreduce_({name})")
    arrays = {
        "0-d": np.array(r + 1.0, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "9-d": np.full((1, 2, 1, 2, 1, 2, 1, 2, 3), r + 1.0),
        "subclass": np.full(5, r + 1.0, dtype=np.float32).view(_SubArray),
        "offset view": np.full(10, r + 1.0, dtype=np.float32)[3:8],
    }
    for key, x in arrays.items():
        expect(ringcc.allreduce_(x) is x, f"allreduce_({key}) returns its argument")
        check_equal(x, np.full(x.shape, triangle, dtype=x.dtype), f"allreduce_({key})")
    calls = {
        "Max positionally": (lambda x: ringcc.allreduce_(x, ringcc.Max), n),
        "Average positionally": (lambda x: ringcc.allreduce_(x, ringcc.Average), (n + 1) / 2),
        "op as a keyword": (lambda x: ringcc.allreduce_(x, op=ringcc.Min), 1),
        "op as a str": (lambda x: ringcc.allreduce_(x, "max"), n),
        "a prescale": (lambda x: ringcc.allreduce_(x, prescale_factor=2.0), 2 * triangle),
    }
    for what, (call, want) in calls.items():
        x = np.full(7, r + 1.0)
        call(x)
        check_equal(x, np.full(7, float(want)), f"allreduce_ with {what}")


@CASES.case("broadcast_/compiled-path-array-kinds")
def broadcast_inplace_compiled_path(ctx):
    """broadcast_(x[, root]) of a plain NumPy array runs compiled; a root by keyword, a
    subclass or a numpy integer root take the general path. Both give the root's array."""
    n, r = ctx.size, ctx.rank
    expect(
        type(ringcc.broadcast_).__name__ == "builtin_function_or_method",
        f"ringcc.broadcast_ is {ringcc.broadcast_!r}, not the compiled path",
    )
    last = n - 1
    for name in ("float16", "float32", "float64", "int8", "uint8", "intc", "int_", "longlong"):
        dt = np.dtype(getattr(np, name))
        x = np.full((2, 3), r + 1, dtype=dt)
        expect(ringcc.broadcast_(x, last) is x, f"broadcast_({name}) returns its argument")
        check_equal(x, np.full((2, 3), n, dtype=dt), f"broadcast_({name}, {last})")
    calls = {
        "root 0 by default": (lambda x: ringcc.broadcast_(x), 0),
        "root by keyword": (lambda x: ringcc.broadcast_(x, root=last), last),
        "a numpy integer root": (lambda x: ringcc.broadcast_(x, np.int64(last)), last),
        "a subclass": (lambda x: ringcc.broadcast_(x.view(_SubArray), last), last),
        "a 0-d array": (lambda x: ringcc.broadcast_(x[0, ...], last), last),
        "an offset view": (lambda x: ringcc.broadcast_(x[2:], last), last),
    }
    for what, (call, root) in calls.items():
        x = np.full(5, float(r))
        call(x)
        touched = {"a 0-d array": slice(0, 1), "an offset view": slice(2, 5)}.get(what, slice(0, 5))
        check_equal(x[touched], np.full(touched.stop - touched.start, float(root)), f"broadcast_ with {what}")


@CASES.case("allreduce/dlpack/torch", tags=("torch",))
def allreduce_torch(ctx):
    try:
        import torch
    except ImportError:
        raise Skip("torch is not installed") from None
    n, r = ctx.size, ctx.rank
    tensor = torch.arange(12, dtype=torch.float32).reshape(3, 4) + r
    want = (np.arange(12, dtype=np.float32).reshape(3, 4) * n + n * (n - 1) / 2).astype(np.float32)
    got = ringcc.allreduce(tensor)
    check_equal(got, want, "allreduce(torch tensor)")
    returned = ringcc.allreduce_(tensor)
    expect(returned is tensor, "allreduce_ must return the tensor it was given")
    check_equal(tensor.numpy(), want, "allreduce_(torch tensor) in place")

    counts = torch.full((5,), r + 1, dtype=torch.int64)
    ringcc.allreduce_(counts, ringcc.Max)
    check_equal(counts.numpy(), np.full(5, n, dtype=np.int64), "allreduce_(int64 tensor, Max)")

    halves = torch.full((7,), 0.5 * (r + 1), dtype=torch.bfloat16)
    ringcc.allreduce_(halves)
    got = halves.float().numpy()
    expected = 0.5 * n * (n + 1) / 2
    expect(np.all(got == np.float32(expected)), f"allreduce_(bfloat16 tensor): {got}, expected {expected}")


# --------------------------------------------------------------------------
# allgather


def rows_of(rank: int) -> int:
    """Rows that `rank` contributes: differ between ranks, and rank 1 gives none."""
    return [3, 0, 5, 1][rank % 4] + rank // 4


def add_allgather(dtype_name: str, row_shape=(), rows=rows_of, name: str = None, **options) -> None:
    if name is None:
        name = f"allgather/{dtype_name}/row={row_shape}"

    def run(ctx):
        dt = dtype_of(dtype_name)
        row_elems = int(np.prod(row_shape, dtype=np.int64))
        inputs = [
            make_input(ctx, r, dt, rows(r) * row_elems).reshape((rows(r),) + tuple(row_shape)) for r in range(ctx.size)
        ]
        want = np.concatenate(inputs, axis=0)
        mine = inputs[ctx.rank]
        check_equal(ringcc.allgather(mine), want, "allgather")
        out = np.zeros_like(want)
        returned = ringcc.allgather(mine, out=out)
        expect(returned is out, "allgather(out=) must return out")
        check_equal(out, want, "allgather(out=)")

    CASES.add(name, run, **options)


for _dtype in DTYPES:
    add_allgather(_dtype)
add_allgather("float32", (4,))
add_allgather("int32", (2, 3))
add_allgather("float64", (2, 3), rows=lambda r: 0, name="allgather/float64/all-ranks-empty")
add_allgather("float32", (), rows=lambda r: 300_000 * (r + 1) + r, name="allgather/float32/large")
# Longer than one shared-memory piece (SHM_AREA_BYTES) on every rank, and
# of a different length on each.
add_allgather(
    "float32", (), rows=lambda r: SHM_AREA_BYTES // 4 * (r + 1) + 7 * r + 1, name="allgather/float32/several-pieces"
)


@CASES.case("allgather/compiled-path-array-kinds")
def allgather_compiled_path(ctx):
    """allgather(x, out=array) of plain NumPy arrays of one dtype runs compiled (no Python
    frame); every other call (no out, a subclass, a 0-d input, an out by position) takes the
    general path. Both give the concatenated blocks, or the general path's error."""
    n, r = ctx.size, ctx.rank
    expect(
        type(ringcc.allgather).__name__ == "builtin_function_or_method",
        f"ringcc.allgather is {ringcc.allgather!r}, not the compiled path",
    )
    blocks = [np.full((q % 3 + 1, 2), q + 1, dtype=np.float32) for q in range(n)]
    want = np.concatenate(blocks)
    read_only = blocks[r].copy()
    read_only.flags.writeable = False
    wide = np.zeros((len(want) + 2, 2), dtype=np.float32)
    kinds = {
        "plain arrays": (blocks[r], np.empty_like(want)),
        "a read-only input": (read_only, np.empty_like(want)),
        "an offset view as out": (blocks[r], wide[1:-1]),
        "a subclass as input": (blocks[r].view(_SubArray), np.empty_like(want)),
        "a subclass as out": (blocks[r], np.empty_like(want).view(_SubArray)),
    }
    for what, (mine, out) in kinds.items():
        expect(ringcc.allgather(mine, out=out) is out, f"allgather(out=) with {what} returns out")
        check_equal(np.asarray(out), want, f"allgather(out=) with {what}")
    expect((wide[0] == 0).all() and (wide[-1] == 0).all(), "allgather wrote outside its offset view")
    check_equal(ringcc.allgather(blocks[r]), want, "allgather without out")
    scalars = np.empty(n)
    ringcc.allgather(np.array(r + 1.0), out=scalars)
    check_equal(scalars, np.arange(1.0, n + 1.0), "allgather(out=) of 0-d inputs")
    by_position = lambda: ringcc.allgather(blocks[r], np.empty_like(want))  # noqa: E731
    expect_error(TypeError, ["positional"], by_position, "allgather, out by position")
    expect_error(
        ringcc.InvalidArgumentError,
        ["out has dtype float64", "float32"],
        lambda: ringcc.allgather(blocks[r], out=np.empty(want.shape)),
        "allgather into an out of another dtype",
    )
    check_equal(ringcc.allgather(blocks[r], out=np.empty_like(want)), want, "allgather after the errors")


# --------------------------------------------------------------------------
# broadcast


def add_broadcast(dtype_name: str, count: int, shape=None, name: str = None, **options) -> None:
    """broadcast, broadcast_ and broadcast(out=) from every root."""
    if name is None:
        name = f"broadcast/{dtype_name}/n={count}"

    def run(ctx):
        dt = dtype_of(dtype_name)
        for root in range(ctx.size):
            want = make_input(ctx, root, dt, count, salt=root).reshape(shape or (count,))
            mine = want.copy() if ctx.rank == root else np.zeros_like(want)
            original = mine.copy()
            check_equal(ringcc.broadcast(mine, root), want, f"broadcast from root {root}")
            check_equal(mine, original, f"broadcast's input after the call (root {root})")
            out = np.zeros_like(want)
            returned = ringcc.broadcast(mine, root=root, out=out)
            expect(returned is out, "broadcast(out=) must return out")
            check_equal(out, want, f"broadcast(out=) from root {root}")
            returned = ringcc.broadcast_(mine, root)
            expect(returned is mine, "broadcast_ must return its argument")
            check_equal(mine, want, f"broadcast_ (in place) from root {root}")

    CASES.add(name, run, **options)


for _count in (0, 1, 1009, (3 << 20) // 4 + 1):  # the last: 3 MiB + 1 element
    add_broadcast("float32", _count)


@CASES.case("broadcast/root-overwrites-at-once")
def broadcast_root_overwrites_at_once(ctx):
    """The root writes into its buffer as soon as broadcast returns: the other
    ranks, which may read the root's memory directly (a message longer than a
    shared-memory area), must have the values of the call, not the new ones."""
    count = 2 * SHM_AREA_BYTES // 4 + 3
    for root in range(ctx.size):
        buf = np.arange(count, dtype=np.float32) + root if ctx.rank == root else np.zeros(count, np.float32)
        for round_ in range(3):
            got = ringcc.broadcast_(buf, root)
            check_equal(got, np.arange(count, dtype=np.float32) + root + round_, f"root {root}, round {round_}")
            if ctx.rank == root:
                buf.fill(-1.0)  # at once
                buf[:] = np.arange(count, dtype=np.float32) + root + round_ + 1


for _dtype in DTYPES:
    if _dtype != "float32":
        add_broadcast(_dtype, 1009)
add_broadcast("uint8", SHM_AREA_BYTES + 1)
add_broadcast("int64", 60, shape=(3, 4, 5), name="broadcast/int64/shape=(3,4,5)")


# --------------------------------------------------------------------------
# reduce_scatter

# Rows as a function of the world size: even, one extra row (rank 0 gets
# it), n-1 extra rows, fewer rows than ranks, none.
RS_ROWS = {
    "2n": lambda n: 2 * n,
    "2n+1": lambda n: 2 * n + 1,
    "3n-1": lambda n: 3 * n - 1,
    "1": lambda n: 1,
    "0": lambda n: 0,
}


def add_reduce_scatter(
    dtype_name: str,
    op: str,
    rows_label: str,
    row_shape=(3,),
    *,
    pre: float = 1.0,
    post: float = 1.0,
    name: str = None,
    rows_fn=None,
    **options,
) -> None:
    if name is None:
        name = f"reduce_scatter/{dtype_name}/{op}/rows={rows_label}"
        if pre != 1.0 or post != 1.0:
            name += f"/pre={pre:g},post={post:g}"
    rows_fn = rows_fn or RS_ROWS[rows_label]

    def run(ctx):
        dt = dtype_of(dtype_name)
        n = ctx.size
        rows = rows_fn(n)
        row_elems = int(np.prod(row_shape, dtype=np.int64))
        inputs = [
            make_input(ctx, r, dt, rows * row_elems, value_kind(op)).reshape((rows,) + tuple(row_shape))
            for r in range(n)
        ]
        first, count = block(rows, n, ctx.rank)
        mine_block = [x[first : first + count] for x in inputs]
        kwargs = scale_kwargs(pre, post)
        got = ringcc.reduce_scatter(inputs[ctx.rank], op_value(op), **kwargs)
        check_reduction(got, mine_block, op, f"reduce_scatter (rows {first}..{first + count - 1} of {rows})", pre, post)
        out = np.zeros_like(mine_block[0])
        returned = ringcc.reduce_scatter(inputs[ctx.rank], op_value(op), out=out, **kwargs)
        expect(returned is out, "reduce_scatter(out=) must return out")
        check_reduction(out, mine_block, op, "reduce_scatter(out=)", pre, post)
        # An output inside the input: over this rank's own block, over the
        # input's first rows, and one row past its own block (where a
        # reduction written as it reads would overwrite rows not yet read;
        # a spare row after the input keeps that in one buffer on every rank).
        places = (("its own block", first), ("the input's first rows", 0), ("one row past its own block", first + 1))
        for where, start in places:
            spare = np.zeros((1,) + tuple(row_shape), dt)
            inside = np.concatenate([inputs[ctx.rank], spare])
            view = inside[start : start + count]
            ringcc.reduce_scatter(inside[:rows], op_value(op), out=view, **kwargs)
            check_reduction(view, mine_block, op, f"reduce_scatter(out= {where} of the input)", pre, post)

    CASES.add(name, run, **options)


for _label in RS_ROWS:
    add_reduce_scatter("float32", "Sum", _label)
for _op in OPS:
    if _op != "Sum":
        add_reduce_scatter("float32", _op, "2n+1")
    add_reduce_scatter("int32", _op, "3n-1")
for _dtype in DTYPES:
    if _dtype not in ("float32", "int32"):
        add_reduce_scatter(_dtype, "Sum", "2n+1", row_shape=(2, 3))
add_reduce_scatter("float32", "Sum", "2n+1", pre=0.5, post=3.0)
add_reduce_scatter("int8", "Average", "2n+1", pre=2.0, post=0.5)
add_reduce_scatter(
    "float32", "Sum", "1048577", row_shape=(), rows_fn=lambda n: 1048577, name="reduce_scatter/float32/Sum/rows=1048577"
)


# --------------------------------------------------------------------------
# alltoall


def alltoall_expected(ctx, dt, splits_of, row_shape):
    """(my input, expected output, expected received splits) for this rank."""
    n, me = ctx.size, ctx.rank
    row_elems = int(np.prod(row_shape, dtype=np.int64))
    inputs = []
    for r in range(n):
        rows = sum(splits_of(r, n))
        inputs.append(make_input(ctx, r, dt, rows * row_elems).reshape((rows,) + tuple(row_shape)))
    pieces, received = [], []
    for src in range(n):
        splits = splits_of(src, n)
        start = sum(splits[:me])
        pieces.append(inputs[src][start : start + splits[me]])
        received.append(splits[me])
    return inputs[me], np.concatenate(pieces, axis=0), received


def equal_splits(k: int):
    return lambda r, n: [k] * n


def uneven_splits(r: int, n: int):
    """Different rows to each rank, zeros included."""
    return [(r + 2 * j + 1) % 4 for j in range(n)]


def add_alltoall(
    dtype_name: str, splits_of, label: str, row_shape=(2,), *, pass_splits: bool = True, **options
) -> None:
    name = f"alltoall/{dtype_name}/{label}"

    def run(ctx):
        dt = dtype_of(dtype_name)
        mine, want, want_received = alltoall_expected(ctx, dt, splits_of, row_shape)
        splits = splits_of(ctx.rank, ctx.size)
        if pass_splits:
            got, received = ringcc.alltoall(mine, splits)
            check_equal(got, want, "alltoall")
            expect(list(received) == want_received, f"alltoall received splits {received}, expected {want_received}")
            out = np.zeros_like(want)
            returned, received = ringcc.alltoall(mine, splits, out=out)
            expect(returned is out, "alltoall(out=) must return out")
            check_equal(out, want, "alltoall(out=)")
            expect(list(received) == want_received, f"alltoall(out=) received splits {received}")
        else:
            got = ringcc.alltoall(mine)
            check_equal(got, want, "alltoall with splits=None")
            out = np.zeros_like(want)
            expect(ringcc.alltoall(mine, out=out) is out, "alltoall(out=) must return out")
            check_equal(out, want, "alltoall(out=) with splits=None")

    CASES.add(name, run, **options)


add_alltoall("float32", equal_splits(3), "equal-splits=None", pass_splits=False)
add_alltoall("float32", equal_splits(3), "equal-splits-given")
add_alltoall("float32", equal_splits(0), "all-zero-splits")
for _dtype in DTYPES:
    add_alltoall(_dtype, uneven_splits, "uneven-splits")
add_alltoall("int64", uneven_splits, "uneven-splits/row=(2,3)", row_shape=(2, 3))
add_alltoall("float32", lambda r, n: [300_000 + 1000 * r + j for j in range(n)], "large", row_shape=())


# --------------------------------------------------------------------------
# barrier, asynchronous collectives, grouped allreduce


@CASES.case("barrier")
def barrier(ctx):
    for _ in range(3):
        expect(ringcc.barrier() is None, "barrier() returns None")
    handle = ringcc.barrier_async()
    poll_done(handle, "barrier_async")
    expect(handle.wait() is None, "barrier_async().wait() returns None")
    expect(handle.done(), "handle.done()")


def float_inputs(ctx, count, salt=0):
    return [make_input(ctx, r, np.dtype(np.float32), count, salt=salt) for r in range(ctx.size)]


@CASES.case("async/allreduce")
def async_allreduce(ctx):
    inputs = float_inputs(ctx, 1009)
    mine = inputs[ctx.rank]
    handle = ringcc.allreduce_async(mine, ringcc.Sum)
    poll_done(handle, "allreduce_async")
    got = handle.wait()
    check_reduction(got, inputs, "Sum", "allreduce_async().wait()")
    expect(handle.done(), "done() is True after wait()")
    expect(handle.wait() is got, "a second wait() returns the same result")

    out = np.zeros_like(mine)
    handle = ringcc.allreduce_async(mine, "avg", out=out)
    expect(handle.wait(timeout=60) is out, "allreduce_async(out=).wait() returns out")
    check_reduction(out, inputs, "Average", "allreduce_async(out=)")

    buffer = mine.copy()
    handle = ringcc.allreduce_async_(buffer, ringcc.Max, prescale_factor=2.0)
    expect(handle.wait() is buffer, "allreduce_async_().wait() returns the argument")
    check_reduction(buffer, inputs, "Max", "allreduce_async_", pre=2.0)


@CASES.case("async/broadcast")
def async_broadcast(ctx):
    root = ctx.size - 1
    want = make_input(ctx, root, np.dtype(np.int32), 1009)
    mine = want.copy() if ctx.rank == root else np.zeros_like(want)
    handle = ringcc.broadcast_async(mine, root)
    poll_done(handle, "broadcast_async")
    check_equal(handle.wait(), want, "broadcast_async")
    handle = ringcc.broadcast_async_(mine, root=root)
    expect(handle.wait() is mine, "broadcast_async_().wait() returns the argument")
    check_equal(mine, want, "broadcast_async_")


@CASES.case("async/allgather")
def async_allgather(ctx):
    inputs = [make_input(ctx, r, np.dtype(np.float64), rows_of(r) * 3).reshape(rows_of(r), 3) for r in range(ctx.size)]
    handle = ringcc.allgather_async(inputs[ctx.rank])
    poll_done(handle, "allgather_async")
    check_equal(handle.wait(), np.concatenate(inputs), "allgather_async")


@CASES.case("async/reduce_scatter")
def async_reduce_scatter(ctx):
    n = ctx.size
    rows = 2 * n + 1
    inputs = [x.reshape(rows, 2) for x in float_inputs(ctx, rows * 2)]
    first, count = block(rows, n, ctx.rank)
    handle = ringcc.reduce_scatter_async(inputs[ctx.rank], ringcc.Sum)
    poll_done(handle, "reduce_scatter_async")
    check_reduction(handle.wait(), [x[first : first + count] for x in inputs], "Sum", "reduce_scatter_async")


@CASES.case("async/alltoall")
def async_alltoall(ctx):
    dt = np.dtype(np.int32)
    mine, want, want_received = alltoall_expected(ctx, dt, uneven_splits, (2,))
    handle = ringcc.alltoall_async(mine, uneven_splits(ctx.rank, ctx.size))
    poll_done(handle, "alltoall_async")
    got, received = handle.wait()
    check_equal(got, want, "alltoall_async with splits")
    expect(list(received) == want_received, f"alltoall_async received splits {received}")
    mine, want, _ = alltoall_expected(ctx, dt, equal_splits(2), (2,))
    got = ringcc.alltoall_async(mine).wait()
    check_equal(got, want, "alltoall_async with splits=None")


def grouped_inputs(ctx, salt=0):
    """Mixed dtypes and sizes; some are larger than a 1 MiB fusion threshold, and the float32
    ones together span several shared-memory pieces (tensors cross piece boundaries)."""
    specs = [
        ("float32", 1000),
        ("int32", 7),
        ("float16", 300),
        ("float32", 400_000),
        ("int64", 0),
        ("float64", 300_000),
        ("uint8", 5),
        ("bfloat16", 50),
        ("float32", 1_100_001),
        ("float32", 12),
        ("int8", 3000),
    ]
    per_tensor = []
    for index, (dtype_name, count) in enumerate(specs):
        try:
            dt = dtype_of(dtype_name)
        except Skip:
            continue
        per_tensor.append([make_input(ctx, r, dt, count, salt=salt * 100 + index) for r in range(ctx.size)])
    per_tensor[-2] = [x.reshape(3, 4) for x in per_tensor[-2]]
    return per_tensor


@CASES.case("grouped_allreduce")
def grouped_allreduce(ctx):
    groups = grouped_inputs(ctx)
    mine = [inputs[ctx.rank] for inputs in groups]
    originals = [x.copy() for x in mine]
    got = ringcc.grouped_allreduce(mine)
    expect(
        isinstance(got, list) and len(got) == len(mine),
        f"grouped_allreduce returned {type(got).__name__} of {len(got)}",
    )
    for index, (result, inputs) in enumerate(zip(got, groups)):
        check_reduction(result, inputs, "Sum", f"grouped_allreduce tensor {index} ({inputs[0].dtype})")
    for index, (x, original) in enumerate(zip(mine, originals)):
        check_equal(x, original, f"grouped_allreduce input {index} after the call")
    got = ringcc.grouped_allreduce(mine, ringcc.Average, prescale_factor=2.0, postscale_factor=0.5)
    for index, (result, inputs) in enumerate(zip(got, groups)):
        check_reduction(result, inputs, "Average", f"grouped_allreduce(Average) tensor {index}", 2.0, 0.5)


@CASES.case("grouped_allreduce_")
def grouped_allreduce_inplace(ctx):
    groups = grouped_inputs(ctx, salt=1)
    buffers = [inputs[ctx.rank].copy() for inputs in groups]
    returned = ringcc.grouped_allreduce_(buffers, ringcc.Max)
    expect(
        len(returned) == len(buffers) and all(a is b for a, b in zip(returned, buffers)),
        "grouped_allreduce_ must return the arrays it was given",
    )
    for index, (result, inputs) in enumerate(zip(buffers, groups)):
        check_reduction(result, inputs, "Max", f"grouped_allreduce_ tensor {index} ({inputs[0].dtype})")


@CASES.case("grouped_allreduce/views-of-one-buffer")
def grouped_views(ctx):
    """Lists of views into shared buffers: neighbours in memory and in the list run as one
    buffer; gaps, reversed order, another buffer in between, and out-of-place results (whose
    outputs do not follow each other) must not be merged. Every view gets its own sum."""
    n = 300_000  # the float32 runs span several shared-memory pieces
    dt = np.dtype(np.float32)
    first = [make_input(ctx, r, dt, n, salt=41) for r in range(ctx.size)]
    second = [make_input(ctx, r, dt, 5000, salt=42) for r in range(ctx.size)]
    cuts = [0, 1, 1000, 1000, 70_001, 200_000, n]  # one empty view among them

    def views(buffers, spans):
        return [buffers[a:b] for a, b in spans]

    spans = list(zip(cuts, cuts[1:]))
    layouts = {
        "in order": spans,
        "with gaps": [(0, 10), (20, 30), (30, 1000), (2000, 250_000)],
        "reversed": list(reversed(spans)),
    }
    for label, chosen in layouts.items():
        mine = first[ctx.rank].copy()
        returned = ringcc.grouped_allreduce_(views(mine, chosen))
        for index, ((a, b), result) in enumerate(zip(chosen, returned)):
            check_reduction(result, [x[a:b] for x in first], "Sum", f"views {label}: view {index} [{a}:{b}]")
        untouched = np.ones(n, bool)
        for a, b in chosen:
            untouched[a:b] = False
        check_equal(mine[untouched], first[ctx.rank][untouched], f"views {label}: elements outside the views")
    # Another buffer in the middle of a run of neighbours; 2-D rows of one array.
    mine, other = first[ctx.rank].copy(), second[ctx.rank].copy()
    rows = first[ctx.rank][:6000].copy().reshape(6, 1000)
    listed = [mine[0:100], mine[100:200], other[:], mine[200:300], *rows]
    ringcc.grouped_allreduce_(listed)
    check_reduction(mine[:300], [x[:300] for x in first], "Sum", "views around another buffer")
    check_reduction(other, second, "Sum", "the other buffer between the views")
    check_reduction(rows.reshape(-1), [x[:6000] for x in first], "Sum", "rows of a 2-D array")
    # Out of place: the inputs follow each other, the new outputs need not.
    mine = first[ctx.rank].copy()
    got = ringcc.grouped_allreduce(views(mine, spans), ringcc.Average)
    for index, ((a, b), result) in enumerate(zip(spans, got)):
        check_reduction(result, [x[a:b] for x in first], "Average", f"out-of-place view {index} [{a}:{b}]")
    check_equal(mine, first[ctx.rank], "the inputs of the out-of-place grouped allreduce")


@CASES.case("async/grouped_allreduce")
def async_grouped(ctx):
    groups = grouped_inputs(ctx, salt=2)
    mine = [inputs[ctx.rank] for inputs in groups]
    handle = ringcc.grouped_allreduce_async(mine, "sum")
    poll_done(handle, "grouped_allreduce_async")
    for index, (result, inputs) in enumerate(zip(handle.wait(), groups)):
        check_reduction(result, inputs, "Sum", f"grouped_allreduce_async tensor {index}")
    buffers = [x.copy() for x in mine]
    handle = ringcc.grouped_allreduce_async_(buffers, ringcc.Min)
    returned = handle.wait()
    expect(all(a is b for a, b in zip(returned, buffers)), "grouped_allreduce_async_ returns its arrays")
    for index, (result, inputs) in enumerate(zip(buffers, groups)):
        check_reduction(result, inputs, "Min", f"grouped_allreduce_async_ tensor {index}")


@CASES.case("async/many-in-flight-waited-in-reverse")
def async_many(ctx):
    n, me = ctx.size, ctx.rank
    sums = [float_inputs(ctx, count, salt=k) for k, count in enumerate((7, 20_000, 1_100_000))]
    gather = [make_input(ctx, r, np.dtype(np.int8), rows_of(r)) for r in range(n)]
    root = n // 2
    bcast = make_input(ctx, root, np.dtype(np.float64), 5000)
    a2a_mine, a2a_want, a2a_received = alltoall_expected(ctx, np.dtype(np.uint8), uneven_splits, ())
    in_place = sums[0][me].copy()
    handles = [
        ("allreduce 7", ringcc.allreduce_async(sums[0][me])),
        ("allreduce 20000", ringcc.allreduce_async(sums[1][me])),
        ("barrier", ringcc.barrier_async()),
        ("allgather", ringcc.allgather_async(gather[me])),
        ("broadcast", ringcc.broadcast_async(bcast if me == root else np.zeros_like(bcast), root)),
        ("allreduce 1100000", ringcc.allreduce_async(sums[2][me], ringcc.Average)),
        ("alltoall", ringcc.alltoall_async(a2a_mine, uneven_splits(me, n))),
        ("allreduce_ 7", ringcc.allreduce_async_(in_place, ringcc.Min)),
    ]
    results = {}
    for label, handle in reversed(handles):
        results[label] = handle.wait(timeout=120)
    for label, handle in handles:
        expect(handle.done(), f"{label}: done() is False after wait()")
    check_reduction(results["allreduce 7"], sums[0], "Sum", "allreduce 7")
    check_reduction(results["allreduce 20000"], sums[1], "Sum", "allreduce 20000")
    expect(results["barrier"] is None, 'results["barrier"] is None')
    check_equal(results["allgather"], np.concatenate(gather), "allgather")
    check_equal(results["broadcast"], bcast, "broadcast")
    check_reduction(results["allreduce 1100000"], sums[2], "Average", "allreduce 1100000")
    got, received = results["alltoall"]
    check_equal(got, a2a_want, "alltoall")
    expect(list(received) == a2a_received, "list(received) == a2a_received")
    expect(results["allreduce_ 7"] is in_place, 'results["allreduce_ 7"] is in_place')
    check_reduction(in_place, sums[0], "Min", "allreduce_ 7")


@CASES.case("async/mixed-with-blocking")
def async_mixed(ctx):
    first = float_inputs(ctx, 50_000, salt=1)
    second = float_inputs(ctx, 1009, salt=2)
    handle = ringcc.allreduce_async(first[ctx.rank])
    check_reduction(ringcc.allreduce(second[ctx.rank]), second, "Sum", "blocking allreduce behind an async one")
    check_reduction(handle.wait(), first, "Sum", "async allreduce issued before a blocking one")


# --------------------------------------------------------------------------
# topology, and leaving and rejoining


@CASES.case("topology")
def topology(ctx):
    env = os.environ
    expect(ringcc.is_initialized(), "ringcc.is_initialized()")
    values = {
        "rank": (ringcc.rank(), int(env["RINGCC_RANK"])),
        "size": (ringcc.size(), int(env["RINGCC_SIZE"])),
        "local_rank": (ringcc.local_rank(), int(env["RINGCC_LOCAL_RANK"])),
        "local_size": (ringcc.local_size(), int(env["RINGCC_LOCAL_SIZE"])),
        "cross_rank": (ringcc.cross_rank(), int(env["RINGCC_CROSS_RANK"])),
        "cross_size": (ringcc.cross_size(), int(env["RINGCC_CROSS_SIZE"])),
    }
    wrong = {k: v for k, v in values.items() if v[0] != v[1]}
    expect(not wrong, f"ringcc disagrees with ringrun's environment (ringcc, ringrun): {wrong}")
    # The host algorithms the job chose, as one word (e.g. algorithms=hierarchical,p2p).
    described = ringcc._core.global_communicator().describe()
    algorithms = described.partition("host algorithms: ")[2].partition(";")[0].split()
    ctx.note(
        " ".join(f"{k}={v[0]}" for k, v in values.items())
        + f" host={env.get('RINGCC_HOSTNAME')} algorithms={','.join(algorithms)}"
    )

    if ctx.size == 1:
        expected_transport = "self"
    elif env.get("RINGCC_TRANSPORT") == "tcp" or ringcc.local_size() == 1:
        expected_transport = "tcp"
    elif ringcc.local_size() < ringcc.size():
        expected_transport = "shm+tcp"  # shared memory within the host, TCP between hosts
    else:
        expected_transport = "shm"
    expect(
        ringcc.transport_name() == expected_transport,
        f"transport_name() is {ringcc.transport_name()!r}, expected {expected_transport!r}",
    )

    # Consistency across ranks.
    host_id = zlib.crc32(env.get("RINGCC_HOSTNAME", "").encode())
    row = np.array(
        [[ringcc.rank(), ringcc.local_rank(), ringcc.local_size(), ringcc.cross_rank(), ringcc.cross_size(), host_id]],
        dtype=np.int64,
    )
    table = ringcc.allgather(row)
    expect(sorted(table[:, 0].tolist()) == list(range(ctx.size)), f"ranks: {table[:, 0]}")
    for host in set(table[:, 5].tolist()):
        on_host = table[table[:, 5] == host]
        expect(sorted(on_host[:, 1].tolist()) == list(range(len(on_host))), f"local ranks on a host: {on_host[:, 1]}")
        expect(set(on_host[:, 2].tolist()) == {len(on_host)}, f"local sizes on a host: {on_host[:, 2]}")
    for local_rank in set(table[:, 1].tolist()):
        same = table[table[:, 1] == local_rank]
        expect(sorted(same[:, 3].tolist()) == list(range(len(same))), f"cross ranks: {same[:, 3]}")
        expect(set(same[:, 4].tolist()) == {len(same)}, f"cross sizes: {same[:, 4]}")


@CASES.case("shutdown-then-init")
def shutdown_then_init(ctx):
    rank, size = ringcc.rank(), ringcc.size()
    inputs = float_inputs(ctx, 20_000)
    for cycle in range(3):
        ringcc.shutdown()
        expect(not ringcc.is_initialized(), f"cycle {cycle}: is_initialized() after shutdown()")
        try:
            ringcc.allreduce(np.ones(3, dtype=np.float32))
        except ringcc.NotInitializedError:
            pass
        else:
            fail(f"cycle {cycle}: allreduce after shutdown() did not raise NotInitializedError")
        ringcc.shutdown()  # a second shutdown is harmless
        ringcc.init()
        expect(ringcc.is_initialized(), f"cycle {cycle}: is_initialized() after init()")
        expect(
            (ringcc.rank(), ringcc.size()) == (rank, size),
            f"cycle {cycle}: after init() again: rank {ringcc.rank()} of {ringcc.size()}, was {rank} of {size}",
        )
        check_reduction(ringcc.allreduce(inputs[rank]), inputs, "Sum", f"cycle {cycle}: allreduce after init() again")
    ringcc.barrier()


# --------------------------------------------------------------------------
# 64-bit counts: run in a group of its own (tag "huge": 2 ranks x 3 GiB)

HUGE_COUNT = (3 << 30) + 1


@CASES.case("allreduce/uint8+int8/3GiB+1", tags=("huge",))
def allreduce_3gib(ctx):
    n = ctx.size
    period = 251 * 65536  # a multiple of the pattern's period, about 16 MiB
    template = ((np.arange(period, dtype=np.int64) % 251 + 3 * ctx.rank) % 256).astype(np.uint8)
    data = np.empty(HUGE_COUNT, dtype=np.uint8)
    for start in range(0, HUGE_COUNT, period):
        stop = min(start + period, HUGE_COUNT)
        data[start:stop] = template[: stop - start]
    del template

    rng = np.random.default_rng(7)
    samples = np.unique(
        np.concatenate(
            [
                np.array(
                    [
                        0,
                        1,
                        250,
                        251,
                        (1 << 31) - 1,
                        1 << 31,
                        (1 << 31) + 1,
                        (3 << 30) - 1,
                        3 << 30,
                        HUGE_COUNT - 2,
                        HUGE_COUNT - 1,
                    ],
                    dtype=np.int64,
                ),
                rng.integers(0, HUGE_COUNT, size=2000, dtype=np.int64),
            ]
        )
    )
    # sum over ranks of ((i % 251) + 3r) % 256, modulo 256
    want = ((n * (samples % 251) + 3 * n * (n - 1) // 2) % 256).astype(np.uint8)

    returned = ringcc.allreduce_(data)
    expect(returned is data, "returned is data")
    check_equal(data[samples], want, "allreduce_ of 3 GiB + 1 uint8 (sampled)")

    signed = data.view(np.int8)  # every rank now holds the same values
    ringcc.allreduce_(signed, ringcc.Sum)
    want_signed = (want.astype(np.int64) * n % 256).astype(np.uint8).view(np.int8)
    check_equal(signed[samples], want_signed, "allreduce_ of 3 GiB + 1 int8 (sampled)")


def _bind(module) -> None:
    global ringcc
    ringcc = module


def main(argv=None) -> int:
    return run_cases(CASES, argv, on_import=_bind)


if __name__ == "__main__":
    sys.exit(main())
