"""Error cases, run inside one group of ranks (at least 2):

    ringrun -np 2 python tests/ranks/rank_errors.py --out DIR

Each case provokes an error on some or all ranks, checks the exception class
and message on every rank, and then checks that the group still works.
tests/ranks/test_errors.py parametrizes its tests from CASES.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))  # tests/harness
from rank_harness import CaseList, Skip, check_equal, expect, expect_error, run_cases  # noqa: E402

ringcc = None  # imported by main(), so that pytest can read CASES without the compiled core

CASES = CaseList()

# Ranks must agree that a collective is wrong well before any timeout.
MISMATCH_SECONDS = 5.0


def still_works(ctx, after: str) -> None:
    n = ctx.size
    got = ringcc.allreduce(np.full(5, ctx.rank + 1, dtype=np.float32))
    check_equal(got, np.full(5, n * (n + 1) / 2, dtype=np.float32), f"allreduce after {after}")


def expect_quickly(error_class, fragments, call, what):
    error, seconds = expect_error(error_class, fragments, call, what)
    expect(seconds < MISMATCH_SECONDS, f"{what}: the error took {seconds:.2f} s (limit {MISMATCH_SECONDS:g} s)")
    return error


def every_rank_named(ctx, values) -> list:
    """Fragments "rank R: V" for every rank R, V = values(R)."""
    return [f"rank {r}: {values(r)}" for r in range(ctx.size)]


# --------------------------------------------------------------------------
# Arguments a rank cannot use


def add_unsupported_dtype(dtype_name: str) -> None:
    def run(ctx):
        x = np.zeros(6, dtype=dtype_name)
        error = expect_quickly(
            ringcc.UnsupportedTypeError,
            [np.dtype(dtype_name).name, "does not support"],
            lambda: ringcc.allreduce(x),
            f"allreduce of {dtype_name}",
        )
        expect(error is None or isinstance(error, TypeError), "UnsupportedTypeError is a TypeError")
        expect_quickly(
            ringcc.UnsupportedTypeError,
            [np.dtype(dtype_name).name],
            lambda: ringcc.broadcast_(x, 0),
            f"broadcast_ of {dtype_name}",
        )
        still_works(ctx, f"an unsupported {dtype_name}")

    CASES.add(f"unsupported-dtype/{dtype_name}", run, min_size=1)


for _dtype in ("int16", "uint16", "uint32", "uint64", "complex64", "bool", "longdouble"):
    add_unsupported_dtype(_dtype)


@CASES.case("unsupported-object/list")
def unsupported_object(ctx):
    expect_quickly(
        ringcc.UnsupportedTypeError,
        ["list", "neither DLPack nor the buffer protocol"],
        lambda: ringcc.allreduce([1.0, 2.0]),
        "allreduce of a list",
    )
    still_works(ctx, "a list")


@CASES.case("unsupported-dtype/one-rank")
def unsupported_dtype_one_rank(ctx):
    if ctx.rank == 0:
        expect_quickly(
            ringcc.UnsupportedTypeError,
            ["int16"],
            lambda: ringcc.allreduce(np.zeros(6, dtype=np.int16)),
            "allreduce of int16 on rank 0",
        )
    else:
        expect_quickly(
            ringcc.MismatchError,
            ["rank 0", "int16"],
            lambda: ringcc.allreduce(np.zeros(6, dtype=np.float32)),
            "allreduce of float32 while rank 0 passed int16",
        )
    still_works(ctx, "one rank's unsupported dtype")


@CASES.case("non-contiguous")
def non_contiguous(ctx):
    strided = np.arange(20, dtype=np.float32)[::2]
    fortran = np.asfortranarray(np.ones((3, 4), dtype=np.float64))
    calls = {
        "allreduce": lambda: ringcc.allreduce(strided),
        "allreduce_": lambda: ringcc.allreduce_(strided),
        "allgather": lambda: ringcc.allgather(strided),
        "broadcast": lambda: ringcc.broadcast(strided, 0),
        "broadcast_": lambda: ringcc.broadcast_(strided, 0),
        "reduce_scatter": lambda: ringcc.reduce_scatter(strided),
        "allreduce of a Fortran-order array": lambda: ringcc.allreduce(fortran),
        "allreduce_async": lambda: ringcc.allreduce_async(strided).wait(),
    }
    for what, call in calls.items():
        error = expect_quickly(ringcc.InvalidArgumentError, ["contiguous"], call, what)
        expect(error is None or isinstance(error, ValueError), "InvalidArgumentError is a ValueError")
    still_works(ctx, "non-contiguous arrays")


@CASES.case("non-contiguous/one-rank", min_size=2)
def non_contiguous_one_rank(ctx):
    x = np.arange(20, dtype=np.float32)
    if ctx.rank == 0:
        expect_quickly(
            ringcc.InvalidArgumentError,
            ["contiguous"],
            lambda: ringcc.allreduce(x[::2]),
            "allreduce of x[::2] on rank 0",
        )
    else:
        expect_quickly(
            ringcc.MismatchError,
            ["rank 0", "contiguous"],
            lambda: ringcc.allreduce(x[:10]),
            "allreduce while rank 0 passed a strided array",
        )
    still_works(ctx, "one rank's non-contiguous array")


@CASES.case("read-only")
def read_only(ctx):
    n = ctx.size
    x = np.full(7, ctx.rank + 1, dtype=np.int32)
    x.setflags(write=False)
    expect_quickly(
        ringcc.InvalidArgumentError, ["read-only"], lambda: ringcc.allreduce_(x), "allreduce_ of a read-only array"
    )
    expect_quickly(
        ringcc.InvalidArgumentError, ["read-only"], lambda: ringcc.broadcast_(x, 0), "broadcast_ of a read-only array"
    )
    expect_quickly(
        ringcc.InvalidArgumentError,
        ["read-only"],
        lambda: ringcc.allreduce_async_(x).wait(),
        "allreduce_async_ of a read-only array",
    )
    # Reading from a read-only array is fine.
    check_equal(ringcc.allreduce(x), np.full(7, n * (n + 1) // 2, dtype=np.int32), "allreduce of a read-only input")
    still_works(ctx, "read-only arrays")


@CASES.case("out/wrong-size-dtype-read-only")
def bad_out(ctx):
    x = np.ones(7, dtype=np.float32)
    read_only = np.empty(7, dtype=np.float32)
    read_only.setflags(write=False)
    n = ctx.size
    rows = 2 * n + 1
    calls = [
        (
            "allreduce, out too large",
            ringcc.InvalidArgumentError,
            ["out holds 8 elements", "7"],
            lambda: ringcc.allreduce(x, out=np.empty(8, dtype=np.float32)),
        ),
        (
            "allreduce, out too small",
            ringcc.InvalidArgumentError,
            ["out holds 6 elements"],
            lambda: ringcc.allreduce(x, out=np.empty(6, dtype=np.float32)),
        ),
        (
            "allreduce, out float64",
            ringcc.InvalidArgumentError,
            ["dtype float64", "float32"],
            lambda: ringcc.allreduce(x, out=np.empty(7, dtype=np.float64)),
        ),
        (
            "allreduce, out read-only",
            ringcc.InvalidArgumentError,
            ["read-only"],
            lambda: ringcc.allreduce(x, out=read_only),
        ),
        (
            "broadcast, out too small",
            ringcc.InvalidArgumentError,
            ["out holds 3 elements"],
            lambda: ringcc.broadcast(x, 0, out=np.empty(3, dtype=np.float32)),
        ),
        (
            "reduce_scatter, out of the whole size",
            ringcc.InvalidArgumentError,
            ["out holds"],
            lambda: ringcc.reduce_scatter(
                np.ones((rows, 2), dtype=np.float32), out=np.empty((rows, 2), dtype=np.float32)
            ),
        ),
        (
            "allgather, out int32",
            ringcc.InvalidArgumentError,
            ["dtype int32"],
            lambda: ringcc.allgather(x, out=np.empty(7 * n, dtype=np.int32)),
        ),
    ]
    for what, error_class, fragments, call in calls:
        expect_quickly(error_class, fragments, call, what)
    still_works(ctx, "bad out= arrays")


@CASES.case("out/allgather-wrong-size")
def allgather_bad_out(ctx):
    # The size allgather needs is known only once every rank has said how
    # many rows it brings, so this is caught after the header exchange.
    x = np.ones(7, dtype=np.float32)
    out = np.empty(7 * ctx.size + 1, dtype=np.float32)
    error = expect_quickly(
        ringcc.RingccError,
        ["holds", str(7 * ctx.size + 1), str(7 * ctx.size)],
        lambda: ringcc.allgather(x, out=out),
        "allgather with an out one element too large",
    )
    expect(
        error is None or isinstance(error, ValueError), f"expected a ValueError subclass, got {type(error).__name__}"
    )
    still_works(ctx, "allgather with a wrong out")


@CASES.case("unknown-op")
def unknown_op(ctx):
    x = np.ones(4, dtype=np.float32)
    for bad in ("median", "", "summ"):
        expect_quickly(
            ringcc.InvalidArgumentError,
            ["unknown reduction", repr(bad)],
            lambda: ringcc.allreduce(x, bad),
            f"allreduce(op={bad!r})",
        )
    for bad in (7, -1, True, 1.5, None):
        expect_quickly(
            ringcc.InvalidArgumentError,
            ["unknown reduction"],
            lambda: ringcc.allreduce(x, bad),
            f"allreduce(op={bad!r})",
        )
    expect_quickly(
        ringcc.InvalidArgumentError,
        ["unknown reduction"],
        lambda: ringcc.reduce_scatter(x, "nope"),
        "reduce_scatter(op='nope')",
    )
    expect_quickly(
        ringcc.InvalidArgumentError,
        ["unknown reduction"],
        lambda: ringcc.grouped_allreduce([x], "nope"),
        "grouped_allreduce(op='nope')",
    )
    expect_quickly(
        ringcc.InvalidArgumentError,
        ["unknown reduction"],
        lambda: ringcc.allreduce_async(x, "nope"),
        "allreduce_async(op='nope')",
    )
    still_works(ctx, "unknown reductions")


@CASES.case("scale-factor/not-finite")
def bad_scale(ctx):
    x = np.ones(4, dtype=np.float32)
    expect_quickly(
        ringcc.InvalidArgumentError,
        ["finite"],
        lambda: ringcc.allreduce(x, prescale_factor=float("nan")),
        "allreduce(prescale_factor=nan)",
    )
    expect_quickly(
        ringcc.InvalidArgumentError,
        ["finite"],
        lambda: ringcc.allreduce(x, postscale_factor=float("inf")),
        "allreduce(postscale_factor=inf)",
    )
    still_works(ctx, "non-finite scale factors")


@CASES.case("alltoall/bad-splits", min_size=2)
def alltoall_bad_splits(ctx):
    n = ctx.size
    x = np.ones((2 * n, 3), dtype=np.float32)
    cases = [
        ("splits with one entry too many", [2] * n + [0], ["one entry per rank", str(n)]),
        ("negative splits", [-1, 2 * n + 1] + [0] * (n - 2), ["negative"]),
        ("splits adding up to more rows", [2 * n + 1] + [0] * (n - 1), ["add up to", str(2 * n + 1)]),
    ]
    for what, splits, fragments in cases:
        expect_quickly(ringcc.InvalidArgumentError, fragments, lambda: ringcc.alltoall(x, splits), what)
    expect_quickly(
        ringcc.InvalidArgumentError,
        ["divide evenly"],
        lambda: ringcc.alltoall(np.ones((2 * n + 1, 3), dtype=np.float32)),
        "alltoall without splits of rows that do not divide evenly",
    )
    still_works(ctx, "bad alltoall splits")


@CASES.case("alltoall/bad-splits/one-rank", min_size=2)
def alltoall_bad_splits_one_rank(ctx):
    n = ctx.size
    x = np.ones((n, 3), dtype=np.float32)
    if ctx.rank == 0:
        expect_quickly(
            ringcc.InvalidArgumentError,
            ["negative"],
            lambda: ringcc.alltoall(x, [-1, n + 1] + [0] * (n - 2)),
            "negative splits on rank 0",
        )
    else:
        expect_quickly(
            ringcc.MismatchError,
            ["rank 0", "negative"],
            lambda: ringcc.alltoall(x, [1] * n),
            "alltoall while rank 0 passed negative splits",
        )
    still_works(ctx, "one rank's bad splits")


@CASES.case("grouped/one-bad-tensor")
def grouped_bad_tensor(ctx):
    good = np.ones(5, dtype=np.float32)
    expect_quickly(
        ringcc.UnsupportedTypeError,
        ["int16"],
        lambda: ringcc.grouped_allreduce([good, np.ones(3, dtype=np.int16)]),
        "grouped_allreduce with an int16 tensor",
    )
    expect_quickly(
        ringcc.InvalidArgumentError,
        ["contiguous"],
        lambda: ringcc.grouped_allreduce_([good.copy(), np.ones(10, dtype=np.float32)[::2]]),
        "grouped_allreduce_ with a strided tensor",
    )
    still_works(ctx, "grouped_allreduce with a bad tensor")


@CASES.case("dlpack/non-contiguous-torch", tags=("torch",))
def torch_non_contiguous(ctx):
    try:
        import torch
    except ImportError:
        raise Skip("torch is not installed") from None
    transposed = torch.ones(4, 3).t()
    expect_quickly(
        ringcc.InvalidArgumentError,
        ["contiguous"],
        lambda: ringcc.allreduce(transposed),
        "allreduce of a transposed torch tensor",
    )
    # Named as torch names them, with the adapter that takes them.
    for dtype in (torch.int16, torch.complex64, torch.bool):
        expect_quickly(
            ringcc.UnsupportedTypeError,
            [f"has dtype {dtype}", "ringcc.torch", "supported: float16"],
            lambda dtype=dtype: ringcc.allreduce(torch.ones(3, dtype=dtype)),
            f"allreduce of a {dtype} tensor",
        )
    expect_quickly(
        ringcc.InvalidArgumentError,
        ["requires grad", "t.detach()"],
        lambda: ringcc.allreduce_(torch.ones(3, requires_grad=True)),
        "allreduce_ of a tensor that requires grad",
    )
    still_works(ctx, "a non-contiguous torch tensor")


# --------------------------------------------------------------------------
# Ranks that disagree: MismatchError on every rank, quickly


def add_mismatch(name: str, call_for_rank, fragments_for, *, min_size: int = 2) -> None:
    """Every rank runs call_for_rank(ctx) and must get a MismatchError naming fragments_for(ctx)."""

    def run(ctx):
        expect_quickly(ringcc.MismatchError, fragments_for(ctx), lambda: call_for_rank(ctx), name)
        still_works(ctx, name)

    CASES.add(f"mismatch/{name}", run, min_size=min_size)


add_mismatch(
    "size",
    lambda ctx: ringcc.allreduce(np.ones(10 + ctx.rank, dtype=np.float32)),
    lambda ctx: ["number of elements"] + every_rank_named(ctx, lambda r: 10 + r),
)
add_mismatch(
    "size/large",
    lambda ctx: ringcc.allreduce(np.ones((1 << 20) + ctx.rank, dtype=np.float32)),
    lambda ctx: ["number of elements"] + every_rank_named(ctx, lambda r: (1 << 20) + r),
)
_DTYPE_BY_RANK = ["float32", "float64", "int32", "int8"]
add_mismatch(
    "dtype",
    lambda ctx: ringcc.allreduce(np.ones(6, dtype=_DTYPE_BY_RANK[ctx.rank % 4])),
    lambda ctx: ["dtype"] + every_rank_named(ctx, lambda r: _DTYPE_BY_RANK[r % 4]),
)
_OP_BY_RANK = [("Sum", "sum"), ("Max", "max"), ("Min", "min"), ("Product", "product")]
add_mismatch(
    "op",
    lambda ctx: ringcc.allreduce(np.ones(6, dtype=np.float32), getattr(ringcc, _OP_BY_RANK[ctx.rank % 4][0])),
    lambda ctx: ["reduction"] + every_rank_named(ctx, lambda r: _OP_BY_RANK[r % 4][1]),
)
add_mismatch(
    "op/reduce_scatter",
    lambda ctx: ringcc.reduce_scatter(np.ones((4, 2), dtype=np.float32), getattr(ringcc, _OP_BY_RANK[ctx.rank % 4][0])),
    lambda ctx: ["reduction"] + every_rank_named(ctx, lambda r: _OP_BY_RANK[r % 4][1]),
)
add_mismatch(
    "root",
    lambda ctx: ringcc.broadcast(np.ones(6, dtype=np.float32), ctx.rank),
    lambda ctx: ["root"] + every_rank_named(ctx, lambda r: r),
)
add_mismatch(
    "broadcast-size",
    lambda ctx: ringcc.broadcast(np.ones(6 + ctx.rank, dtype=np.float32), 0),
    lambda ctx: ["number of elements"] + every_rank_named(ctx, lambda r: 6 + r),
)
add_mismatch(
    "allgather-row-shape",
    lambda ctx: ringcc.allgather(np.ones((2, 3 + ctx.rank), dtype=np.float32)),
    lambda ctx: ["shape after the first dimension"] + every_rank_named(ctx, lambda r: f"[2, {3 + r}]"),
)
add_mismatch(
    "reduce_scatter-row-shape",
    lambda ctx: ringcc.reduce_scatter(np.ones((4, 2 + ctx.rank), dtype=np.float32)),
    lambda ctx: ["number of elements"] + every_rank_named(ctx, lambda r: 4 * (2 + r)),
)
add_mismatch(
    "async/size",
    lambda ctx: ringcc.allreduce_async(np.ones(10 + ctx.rank, dtype=np.float32)).wait(),
    lambda ctx: ["number of elements"] + every_rank_named(ctx, lambda r: 10 + r),
)


def _dims(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


@CASES.case("mismatch/shape-same-count", min_size=2)
def shape_same_count(ctx):
    # As many elements on every rank, in different shapes: every rank raises
    # MismatchError naming each rank's shape and which call it was (its place
    # in issue order and this rank's shape), for every collective; only
    # allgather and alltoall compare the dimensions after the first.
    n = ctx.size

    def check(what, shape_of, call, fragments):
        mine = shape_of(ctx.rank)
        x = np.ones(mine, dtype=np.float32)
        listed = every_rank_named(ctx, lambda r: _dims(shape_of(r)))
        expect_quickly(
            ringcc.MismatchError,
            fragments + listed + ["collective #", f"shape {_dims(mine)}"],
            lambda: call(x),
            what,
        )

    def swapped(a, b):
        return lambda r: a if r % 2 == 0 else b

    same = ["disagree on the shape ("]
    for what, call in {
        "allreduce": lambda x: ringcc.allreduce(x),
        "allreduce_": lambda x: ringcc.allreduce_(x),
        "allreduce_async": lambda x: ringcc.allreduce_async(x).wait(),
        "broadcast": lambda x: ringcc.broadcast(x, 0),
        "broadcast_async_": lambda x: ringcc.broadcast_async_(x, 0).wait(),
    }.items():
        check(f"{what} of (2, 3) against (3, 2)", swapped((2, 3), (3, 2)), call, same)
    check(
        "reduce_scatter of (2n, 3) against (3, 2n)",
        swapped((2 * n, 3), (3, 2 * n)),
        lambda x: ringcc.reduce_scatter(x),
        same,
    )
    trailing = ["shape after the first dimension"]
    check("allgather of (2, 6) against (2, 3, 2)", swapped((2, 6), (2, 3, 2)), lambda x: ringcc.allgather(x), trailing)
    check(
        "allgather_async of (3, 4) against (3, 2, 2)",
        swapped((3, 4), (3, 2, 2)),
        lambda x: ringcc.allgather_async(x).wait(),
        trailing,
    )
    check(
        "alltoall of (n, 6) against (n, 3, 2)",
        swapped((n, 6), (n, 3, 2)),
        lambda x: ringcc.alltoall(x),
        trailing,
    )
    # A grouped allreduce fuses its tensors: the ranks compare a hash of
    # their shapes, and every rank names its own.
    mine = (2, 3) if ctx.rank % 2 == 0 else (3, 2)
    for what, call in {
        "grouped_allreduce": lambda ts: ringcc.grouped_allreduce(ts),
        "grouped_allreduce_async_": lambda ts: ringcc.grouped_allreduce_async_(ts).wait(),
    }.items():
        tensors = [np.ones(4, dtype=np.float32), np.ones(mine, dtype=np.float32)]
        expect_quickly(
            ringcc.MismatchError,
            ["shapes of the tensors fused into it", f"this rank's tensors: [4], {_dims(mine)}"],
            lambda: call(tensors),
            f"{what} of [4] and (2, 3) against [4] and (3, 2)",
        )
    # First dimensions may differ where the collective allows it.
    got = ringcc.allgather(np.full((ctx.rank + 1, 3, 2), ctx.rank, dtype=np.float32))
    want = np.concatenate([np.full((r + 1, 3, 2), r, dtype=np.float32) for r in range(n)])
    check_equal(got, want, "allgather whose first dimensions differ")
    still_works(ctx, "shapes that differ with the same element count")


@CASES.case("mismatch/several-in-a-row", min_size=2)
def several_mismatches(ctx):
    for attempt in range(5):
        expect_quickly(
            ringcc.MismatchError,
            ["number of elements"],
            lambda: ringcc.allreduce(np.ones(3 + (ctx.rank + attempt) % ctx.size, dtype=np.float32)),
            f"mismatch {attempt}",
        )
    still_works(ctx, "five mismatches in a row")


# --------------------------------------------------------------------------
# Roots out of range


@CASES.case("root-out-of-range/all-ranks")
def root_out_of_range(ctx):
    n = ctx.size
    x = np.ones(6, dtype=np.float32)
    for root in (n, n + 5, -1):
        expect_quickly(
            ringcc.InvalidArgumentError,
            ["root", str(root), "out of range"],
            lambda: ringcc.broadcast(x, root),
            f"broadcast(root={root})",
        )
        expect_quickly(
            ringcc.InvalidArgumentError,
            ["out of range"],
            lambda: ringcc.broadcast_(x.copy(), root),
            f"broadcast_(root={root})",
        )
    still_works(ctx, "roots out of range")


@CASES.case("root-out-of-range/one-rank", min_size=2)
def root_out_of_range_one_rank(ctx):
    n = ctx.size
    x = np.ones(6, dtype=np.float32)
    if ctx.rank == 0:
        expect_quickly(
            ringcc.InvalidArgumentError,
            ["root", str(n), "out of range"],
            lambda: ringcc.broadcast(x, n),
            f"broadcast(root={n}) on rank 0",
        )
    else:
        expect_quickly(
            ringcc.MismatchError,
            ["rank 0", "out of range"],
            lambda: ringcc.broadcast(x, 0),
            "broadcast(root=0) while rank 0 passed a root out of range",
        )
    still_works(ctx, "one rank's root out of range")


# --------------------------------------------------------------------------
# One rank's bad argument, in every form of every collective: that rank
# raises its own error at once, every other rank a MismatchError naming it
# and why, for the same call (issue order for unnamed calls, the name for
# named ones); and the next call is in step, with the right result.


def _last(ctx) -> int:
    return ctx.size - 1


def one_rank_bad(ctx, what, bad_call, good_call, own_error, fragments):
    """The last rank runs bad_call(), the others good_call(). own_error: an
    exception class, or the name of one of ringcc's."""
    if isinstance(own_error, str):
        own_error = getattr(ringcc, own_error)
    last = _last(ctx)
    if ctx.rank == last:
        expect_quickly(own_error, fragments, bad_call, f"{what} (rank {last}'s own error)")
    else:
        expect_quickly(
            ringcc.MismatchError,
            [f"rank {last} could not start"] + fragments,
            good_call,
            f"{what} (rank {last}'s bad argument)",
        )


def _named(ctx, stem):
    """A name no earlier call used (every rank makes the same ones)."""
    ctx.counter = getattr(ctx, "counter", 0) + 1
    return f"{ctx.case}/{stem}/{ctx.counter}"


def _wait(handle):
    return handle.wait()


# Forms of a call: form(ctx, x, **arguments) -> the result (waited for).
def _allreduce_forms(ctx):
    return {
        "allreduce": lambda x, **kw: ringcc.allreduce(x, **kw),
        "allreduce_": lambda x, **kw: ringcc.allreduce_(x, **kw),
        "allreduce_async": lambda x, **kw: ringcc.allreduce_async(x, **kw).wait(),
        "allreduce_async_": lambda x, **kw: ringcc.allreduce_async_(x, **kw).wait(),
        "allreduce_async, named": lambda x, **kw: ringcc.allreduce_async(x, name=_named(ctx, "ar"), **kw).wait(),
        "allreduce_async_, named": lambda x, **kw: ringcc.allreduce_async_(x, name=_named(ctx, "ar_"), **kw).wait(),
        "grouped_allreduce": lambda x, **kw: ringcc.grouped_allreduce([x], **kw)[0],
        "grouped_allreduce_async_": lambda x, **kw: ringcc.grouped_allreduce_async_([x], **kw).wait()[0],
    }


def _check_sum(ctx, got, what):
    n = ctx.size
    check_equal(np.asarray(got), np.full(6, n * (n + 1) / 2, dtype=np.float32), what)


def add_one_rank_allreduce(label, bad_kwargs, own_error, fragments, bad_input=None, forms=None):
    def run(ctx):
        for form_name, form in _allreduce_forms(ctx).items():
            if forms is not None and form_name not in forms:
                continue
            good = np.full(6, ctx.rank + 1, dtype=np.float32)
            bad = bad_input() if bad_input else good.copy()
            one_rank_bad(
                ctx,
                f"{form_name} with {label}",
                lambda: form(bad, **bad_kwargs),
                lambda: form(good.copy()),
                own_error,
                fragments,
            )
            _check_sum(ctx, form(np.full(6, ctx.rank + 1, dtype=np.float32)), f"{form_name} after {label}")
        still_works(ctx, label)

    CASES.add(f"one-rank/allreduce/{label}", run, min_size=2)


add_one_rank_allreduce("unknown op string", {"op": "median"}, "InvalidArgumentError", ["unknown reduction", "'median'"])
add_one_rank_allreduce("op None", {"op": None}, "InvalidArgumentError", ["unknown reduction", "None"])
add_one_rank_allreduce("op 7", {"op": 7}, "InvalidArgumentError", ["unknown reduction", "7"])
add_one_rank_allreduce(
    "prescale_factor a string", {"prescale_factor": "x"}, TypeError, ["prescale_factor must be a real number", "'x'"]
)
add_one_rank_allreduce(
    "postscale_factor a list", {"postscale_factor": [2.0]}, TypeError, ["postscale_factor must be a real number"]
)
add_one_rank_allreduce(
    "a strided array", {}, "InvalidArgumentError", ["contiguous"], bad_input=lambda: np.ones(12, dtype=np.float32)[::2]
)
add_one_rank_allreduce(
    "an int16 array", {}, "UnsupportedTypeError", ["int16"], bad_input=lambda: np.ones(6, dtype=np.int16)
)
add_one_rank_allreduce("a list", {}, "UnsupportedTypeError", ["list"], bad_input=lambda: [1.0] * 6)


def _read_only():
    x = np.ones(6, dtype=np.float32)
    x.setflags(write=False)
    return x


add_one_rank_allreduce(
    "a read-only array",
    {},
    "InvalidArgumentError",
    ["read-only"],
    bad_input=_read_only,
    forms={"allreduce_", "allreduce_async_", "allreduce_async_, named", "grouped_allreduce_async_"},
)
add_one_rank_allreduce(
    "an out of the wrong size",
    {"out": np.empty(5, dtype=np.float32)},
    "InvalidArgumentError",
    ["out holds 5 elements"],
    forms={"allreduce", "allreduce_async", "allreduce_async, named"},
)


@CASES.case("one-rank/broadcast", min_size=2)
def one_rank_broadcast(ctx):
    n = ctx.size
    forms = {
        "broadcast": lambda x, root: ringcc.broadcast(x, root),
        "broadcast_": lambda x, root: ringcc.broadcast_(x, root),
        "broadcast_async": lambda x, root: ringcc.broadcast_async(x, root).wait(),
        "broadcast_async_": lambda x, root: ringcc.broadcast_async_(x, root).wait(),
        "broadcast_async, named": lambda x, root: ringcc.broadcast_async(x, root, name=_named(ctx, "b")).wait(),
        "broadcast_async_, named": lambda x, root: ringcc.broadcast_async_(x, root, name=_named(ctx, "b_")).wait(),
    }
    bad_roots = [
        ("root 2**40", 2**40, "InvalidArgumentError", ["root rank 1099511627776 is out of range"]),
        ("root a string", "0", TypeError, ["root must be an int", "'0'"]),
        ("root None", None, TypeError, ["root must be an int", "None"]),
    ]
    for label, root, own_error, fragments in bad_roots:
        for form_name, form in forms.items():
            x = np.full(4, ctx.rank + 1, dtype=np.float64)
            one_rank_bad(
                ctx,
                f"{form_name} with {label}",
                lambda: form(x.copy(), root),
                lambda: form(x.copy(), 0),
                own_error,
                fragments,
            )
            got = form(np.full(4, ctx.rank + 1, dtype=np.float64), n - 1)
            check_equal(np.asarray(got), np.full(4, n, dtype=np.float64), f"{form_name} after {label}")
    still_works(ctx, "bad roots")


@CASES.case("one-rank/allgather-reduce_scatter", min_size=2)
def one_rank_allgather_reduce_scatter(ctx):
    n = ctx.size
    rows = 2 * n
    ag = {
        "allgather": lambda x, **kw: ringcc.allgather(x, **kw),
        "allgather_async": lambda x, **kw: ringcc.allgather_async(x, **kw).wait(),
        "allgather_async, named": lambda x, **kw: ringcc.allgather_async(x, name=_named(ctx, "ag"), **kw).wait(),
    }
    for form_name, form in ag.items():
        x = np.full((2, 3), ctx.rank, dtype=np.float32)
        bads = [
            (
                "an out of int32",
                lambda: form(x, out=np.empty((2 * n, 3), dtype=np.int32)),
                "InvalidArgumentError",
                ["dtype int32"],
            ),
            ("a bool array", lambda: form(np.ones((2, 3), dtype=bool)), "UnsupportedTypeError", ["bool"]),
        ]
        for label, bad_call, own_error, fragments in bads:
            one_rank_bad(ctx, f"{form_name} with {label}", bad_call, lambda: form(x), own_error, fragments)
            want = np.repeat(np.arange(n, dtype=np.float32), 2)[:, None] * np.ones((1, 3), np.float32)
            check_equal(form(x), want, f"{form_name} after {label}")
    rs = {
        "reduce_scatter": lambda x, **kw: ringcc.reduce_scatter(x, **kw),
        "reduce_scatter_async": lambda x, **kw: ringcc.reduce_scatter_async(x, **kw).wait(),
        "reduce_scatter_async, named": lambda x, **kw: ringcc.reduce_scatter_async(
            x, name=_named(ctx, "rs"), **kw
        ).wait(),
    }
    for form_name, form in rs.items():
        x = np.ones((rows, 2), dtype=np.float32)
        bads = [
            ("an unknown op", {"op": "nope"}, "InvalidArgumentError", ["unknown reduction"]),
            ("prescale_factor a string", {"prescale_factor": "x"}, TypeError, ["prescale_factor"]),
            (
                "an out of the whole size",
                {"out": np.empty((rows, 2), dtype=np.float32)},
                "InvalidArgumentError",
                ["out holds"],
            ),
        ]
        for label, kwargs, own_error, fragments in bads:
            one_rank_bad(
                ctx, f"{form_name} with {label}", lambda: form(x, **kwargs), lambda: form(x), own_error, fragments
            )
            check_equal(form(x), np.full((2, 2), n, dtype=np.float32), f"{form_name} after {label}")
    still_works(ctx, "bad allgather and reduce_scatter arguments")


@CASES.case("one-rank/alltoall", min_size=2)
def one_rank_alltoall(ctx):
    n = ctx.size
    forms = {
        "alltoall": lambda x, splits: ringcc.alltoall(x, splits),
        "alltoall_async": lambda x, splits: ringcc.alltoall_async(x, splits).wait(),
        "alltoall_async, named": lambda x, splits: ringcc.alltoall_async(x, splits, name=_named(ctx, "a2a")).wait(),
    }
    good = [1] * n
    bads = [
        ("a split that is not a number", ["a"] + [1] * (n - 1), ValueError, ["invalid literal"]),
        ("splits that are not a list", 5, TypeError, ["not iterable"]),
        ("one split too many", [1] * (n + 1), "InvalidArgumentError", ["one entry per rank"]),
        ("a negative split", [-1, 2] + [1] * (n - 2), "InvalidArgumentError", ["negative"]),
    ]
    for form_name, form in forms.items():
        x = np.full((n, 2), ctx.rank, dtype=np.int64)
        for label, splits, own_error, fragments in bads:
            one_rank_bad(
                ctx, f"{form_name} with {label}", lambda: form(x, splits), lambda: form(x, good), own_error, fragments
            )
            out, received = form(x, good)
            check_equal(out, np.repeat(np.arange(n, dtype=np.int64), 2).reshape(n, 2), f"{form_name} after {label}")
            expect(list(received) == good, f"{form_name} after {label}: received {received}")
        # Rows that do not divide over the ranks, without splits.
        uneven = np.ones((n + 1, 2), dtype=np.int64)
        one_rank_bad(
            ctx,
            f"{form_name} of uneven rows without splits",
            lambda: form(uneven, None),
            lambda: form(x, None),
            "InvalidArgumentError",
            ["divide evenly"],
        )
    still_works(ctx, "bad alltoall arguments")


@CASES.case("one-rank/grouped", min_size=2)
def one_rank_grouped(ctx):
    n = ctx.size
    good = [np.full(3, ctx.rank + 1, dtype=np.float32), np.full(5, ctx.rank + 1, dtype=np.float64)]
    forms = {
        "grouped_allreduce": lambda ts, **kw: ringcc.grouped_allreduce(ts, **kw),
        "grouped_allreduce_": lambda ts, **kw: ringcc.grouped_allreduce_(ts, **kw),
        "grouped_allreduce_async": lambda ts, **kw: ringcc.grouped_allreduce_async(ts, **kw).wait(),
        "grouped_allreduce_async_": lambda ts, **kw: ringcc.grouped_allreduce_async_(ts, **kw).wait(),
    }
    bads = [
        ("tensors that are not a list", lambda: (5, {}), TypeError, ["not iterable"]),
        ("a string in the list", lambda: ([good[0].copy(), "s"], {}), "UnsupportedTypeError", ["str"]),
        (
            "an unknown op",
            lambda: ([t.copy() for t in good], {"op": "nope"}),
            "InvalidArgumentError",
            ["unknown reduction"],
        ),
    ]
    for form_name, form in forms.items():
        for label, make, own_error, fragments in bads:
            tensors, kwargs = make()
            one_rank_bad(
                ctx,
                f"{form_name} with {label}",
                lambda: form(tensors, **kwargs),
                lambda: form([t.copy() for t in good]),
                own_error,
                fragments,
            )
            got = form([t.copy() for t in good])
            check_equal(got[0], np.full(3, n * (n + 1) / 2, dtype=np.float32), f"{form_name} after {label}")
            check_equal(got[1], np.full(5, n * (n + 1) / 2, dtype=np.float64), f"{form_name} after {label}")
    still_works(ctx, "bad grouped arguments")


@CASES.case("one-rank/name", min_size=2)
def one_rank_name(ctx):
    # A name that is not one cannot be matched by name: the call fails in
    # issue order, where an unnamed call runs.
    x = np.full(6, ctx.rank + 1, dtype=np.float32)
    for bad_name, fragments in (
        ("", ["name must be a non-empty string", "''"]),
        (5, ["name must be a non-empty string", "5"]),
    ):
        calls = {
            "allreduce_async": lambda name: ringcc.allreduce_async(x, name=name),
            "allreduce_async_": lambda name: ringcc.allreduce_async_(x.copy(), name=name),
            "allgather_async": lambda name: ringcc.allgather_async(x, name=name),
            "broadcast_async": lambda name: ringcc.broadcast_async(x, 0, name=name),
        }
        for what, call in calls.items():
            one_rank_bad(
                ctx,
                f"{what}(name={bad_name!r})",
                lambda: call(bad_name).wait(),
                lambda: call(None).wait(),
                "InvalidArgumentError",
                fragments,
            )
            _check_sum(ctx, ringcc.allreduce_async(x).wait(), f"allreduce_async after {what}(name={bad_name!r})")
    still_works(ctx, "bad names")


@CASES.case("one-rank/named-call-again-at-once", min_size=2)
def one_rank_named_again(ctx):
    # The rank whose named call failed calls again under the same name at
    # once (its failure may not have reached the engine's peers yet): the
    # new call waits for the failed one and pairs with the peers' next call.
    # Both for a name the engine has cached (a repeated training step) and
    # a new one.
    last = ctx.size - 1
    x = np.full(6, ctx.rank + 1, dtype=np.float32)
    for round_ in range(6):
        for name in (f"{ctx.case}/cached", f"{ctx.case}/new/{round_}"):
            op = "median" if ctx.rank == last and round_ % 2 else "sum"
            if round_ % 2:
                one_rank_bad(
                    ctx,
                    f"round {round_}, {name}",
                    lambda: ringcc.allreduce_async(x, op, name=name).wait(),
                    lambda: ringcc.allreduce_async(x, op, name=name).wait(),
                    "InvalidArgumentError",
                    ["unknown reduction"],
                )
            else:
                _check_sum(ctx, ringcc.allreduce_async(x, op, name=name).wait(), f"round {round_}, {name}")
            _check_sum(ctx, ringcc.allreduce_async(x, name=name).wait(), f"round {round_}, {name} again")
    still_works(ctx, "named calls again at once")


# --------------------------------------------------------------------------
# Settings that must be the same on every rank: init() compares them and
# every rank raises MismatchError naming the variable, each rank's value and
# where it came from; after that, init() with agreeing settings works.

_SHARED_SETTINGS = [
    ("RINGCC_SHM_SMALL_BYTES", "0", "0 (RINGCC_SHM_SMALL_BYTES=0)"),
    ("RINGCC_SHM_AREA_BYTES", "1000000", "1003520 (RINGCC_SHM_AREA_BYTES=1000000)"),
    ("RINGCC_SHM_ALLREDUCE_PIECE_BYTES", "300000", "303104 (RINGCC_SHM_ALLREDUCE_PIECE_BYTES=300000)"),
    ("RINGCC_TCP_SOCKETS", "3", "3 (RINGCC_TCP_SOCKETS=3)"),
    ("RINGCC_TCP_STRIPE_BYTES", "4096", "4096 (RINGCC_TCP_STRIPE_BYTES=4096)"),
    ("RINGCC_TCP_ONE_WAY_BYTES", "1000", "1000 (RINGCC_TCP_ONE_WAY_BYTES=1000)"),
    ("RINGCC_CHUNK_BYTES", "8192", "8192 (RINGCC_CHUNK_BYTES=8192)"),
    ("RINGCC_FUSION_THRESHOLD", "1024", "1024 (RINGCC_FUSION_THRESHOLD=1024)"),
    ("RINGCC_CACHE_CAPACITY", "16", "16 (RINGCC_CACHE_CAPACITY=16)"),
    ("RINGCC_HIERARCHICAL_ALLREDUCE", "0", "0 (RINGCC_HIERARCHICAL_ALLREDUCE=0)"),
    ("RINGCC_HIERARCHICAL_PIPELINE_BYTES", "1048576", "1048576 (RINGCC_HIERARCHICAL_PIPELINE_BYTES=1048576)"),
]
# Horovod's names count as ours (shown as the variable that was read).
_HOROVOD_SETTINGS = [
    ("HOROVOD_FUSION_THRESHOLD", "RINGCC_FUSION_THRESHOLD", "2048", "2048 (HOROVOD_FUSION_THRESHOLD=2048)"),
    ("HOROVOD_CACHE_CAPACITY", "RINGCC_CACHE_CAPACITY", "32", "32 (HOROVOD_CACHE_CAPACITY=32)"),
]


@CASES.case("settings/one-rank-differs", min_size=2)
def shared_settings_differ(ctx):
    import os

    last = ctx.size - 1
    transport = os.environ.get("RINGCC_TRANSPORT", "auto")
    other = "tcp" if transport != "tcp" else "shm"
    cases = [(var, var, value, shown) for var, value, shown in _SHARED_SETTINGS]
    cases += [(var, ours, value, shown) for var, ours, value, shown in _HOROVOD_SETTINGS]
    cases.append(("RINGCC_TRANSPORT", "RINGCC_TRANSPORT", other, f"{other} (RINGCC_TRANSPORT={other})"))
    ringcc.shutdown()
    try:
        for var, named, value, shown in cases:
            before = os.environ.get(var)
            if ctx.rank == last:
                os.environ[var] = value
            try:
                expect_quickly(
                    ringcc.MismatchError,
                    [named, f"rank {last}: {shown}", "rank 0: "],
                    ringcc.init,
                    f"init() with {var}={value} on rank {last} only",
                )
            finally:
                if before is None:
                    os.environ.pop(var, None)
                else:
                    os.environ[var] = before
            if ringcc.is_initialized():  # the error did not come: leave as the others do
                ringcc.shutdown()
        # A value rank `last` cannot parse: its own error, a mismatch for the others.
        if ctx.rank == last:
            os.environ["RINGCC_TCP_SOCKETS"] = "many"
            try:
                expect_quickly(
                    ringcc.InvalidArgumentError,
                    ["RINGCC_TCP_SOCKETS", "many"],
                    ringcc.init,
                    "init() with RINGCC_TCP_SOCKETS=many",
                )
            finally:
                os.environ.pop("RINGCC_TCP_SOCKETS", None)
        else:
            expect_quickly(
                ringcc.MismatchError,
                ["RINGCC_TCP_SOCKETS", f"rank {last}: invalid", "many"],
                ringcc.init,
                f"init() while rank {last} has RINGCC_TCP_SOCKETS=many",
            )
        if ringcc.is_initialized():
            ringcc.shutdown()
    finally:
        ringcc.init()
    still_works(ctx, "settings that differed at earlier init() calls")


# --------------------------------------------------------------------------
# A long broadcast whose root cannot write into a rank


def _peers_memory_readable(ctx) -> bool:
    """Whether this host lets each rank read the next one's memory
    (process_vm_readv, the check ringcc makes before it copies between
    ranks directly); the same answer on every rank."""
    import ctypes
    import os

    libc = ctypes.CDLL(None, use_errno=True)
    mine = ctypes.c_uint64(0x5EED0000 + ctx.rank)
    here = np.array([os.getpid(), ctypes.addressof(mine)], dtype=np.int64)
    every = ringcc.allgather(here).reshape(ctx.size, 2)
    peer = (ctx.rank + 1) % ctx.size
    got = ctypes.c_uint64(0)

    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    local = IoVec(ctypes.addressof(got), 8)
    remote = IoVec(int(every[peer, 1]), 8)
    libc.process_vm_readv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p]
    libc.process_vm_readv.argtypes += [ctypes.c_ulong, ctypes.c_ulong]
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    done = libc.process_vm_readv(int(every[peer, 0]), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    readable = done == 8 and got.value == 0x5EED0000 + peer and os.environ.get("RINGCC_SHM_CMA", "1") != "0"
    return bool(ringcc.allreduce(np.array([readable], dtype=np.int32), op=ringcc.Min)[0])


@CASES.case("broadcast/root-cannot-write-into-a-rank", min_size=2)
def broadcast_root_cannot_write(ctx):
    """Over the shared-memory area, an in-place broadcast's root writes one
    block into each other rank (process_vm_writev) while it reads the rest.
    Where the kernel refuses a write (here: rank 1's first page read-only),
    every rank raises, naming rank 1, rather than rank 1 returning with its
    block unwritten; the ranks stay in step and the next broadcast works."""
    import ctypes
    import mmap

    if ringcc.transport_name() != "shm":
        raise Skip(f"the transport is {ringcc.transport_name()}: no shared-memory broadcast")
    if not _peers_memory_readable(ctx):
        raise Skip("ranks cannot read each other's memory here: broadcasts are staged")
    nbytes = 8 << 20  # twice the area
    region = mmap.mmap(-1, nbytes)
    buf = np.frombuffer(region, dtype=np.uint8)
    want = (np.arange(nbytes, dtype=np.uint64) % 251).astype(np.uint8)
    if ctx.rank == 0:
        buf[:] = want
    libc = ctypes.CDLL(None, use_errno=True)
    page = ctypes.c_char.from_buffer(region)
    address = ctypes.c_void_p(ctypes.addressof(page))
    if ctx.rank == 1:
        expect(libc.mprotect(address, mmap.PAGESIZE, mmap.PROT_READ) == 0, "mprotect of rank 1's first page")
    try:
        fragments = ["writing the broadcast output of rank 1", "process_vm_writev", "Bad address"]
        expect_quickly(ringcc.InternalError, fragments, lambda: ringcc.broadcast_(buf, 0), "broadcast_ into rank 1")
    finally:
        if ctx.rank == 1:
            libc.mprotect(address, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE)
        del page
    still_works(ctx, "a refused write of a broadcast")
    got = ringcc.broadcast_(buf, 0)
    check_equal(got, want, "the same broadcast_ once the page is writable")


# --------------------------------------------------------------------------
# Different collectives on different ranks (last: should a transport hang on
# them instead of raising, the cases before still ran)

_COLLECTIVE_BY_RANK = [
    ("allreduce", lambda: ringcc.allreduce(np.ones(6, dtype=np.float32))),
    ("allgather", lambda: ringcc.allgather(np.ones(6, dtype=np.float32))),
    ("broadcast", lambda: ringcc.broadcast(np.ones(6, dtype=np.float32), 0)),
    ("barrier", lambda: ringcc.barrier()),
]
add_mismatch(
    "collective",
    lambda ctx: _COLLECTIVE_BY_RANK[ctx.rank % 4][1](),
    lambda ctx: ["different collectives"] + every_rank_named(ctx, lambda r: _COLLECTIVE_BY_RANK[r % 4][0]),
)
add_mismatch(
    "collective/barrier-vs-alltoall",
    lambda ctx: ringcc.barrier() if ctx.rank == 0 else ringcc.alltoall(np.ones(ctx.size, dtype=np.int64)),
    lambda ctx: ["different collectives", "rank 0: barrier", "rank 1: alltoall"],
)


def _bind(module) -> None:
    global ringcc
    ringcc = module


def main(argv=None) -> int:
    return run_cases(CASES, argv, on_import=_bind)


if __name__ == "__main__":
    sys.exit(main())
