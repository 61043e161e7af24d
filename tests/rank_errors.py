"""Error cases, run inside one group of ranks (at least 2):

    ringrun -np 2 python tests/rank_errors.py --out DIR

Each case provokes an error on some or all ranks, checks the exception class
and message on every rank, and then checks that the group still works.
tests/test_errors.py parametrizes its tests from CASES.
"""

from __future__ import annotations

import sys

import numpy as np

from rank_harness import CaseList, Skip, check_equal, expect, expect_error, run_cases

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
        error = expect_quickly(ringcc.UnsupportedTypeError, [np.dtype(dtype_name).name, "does not support"],
                               lambda: ringcc.allreduce(x), f"allreduce of {dtype_name}")
        expect(error is None or isinstance(error, TypeError), "UnsupportedTypeError is a TypeError")
        expect_quickly(ringcc.UnsupportedTypeError, [np.dtype(dtype_name).name],
                       lambda: ringcc.broadcast_(x, 0), f"broadcast_ of {dtype_name}")
        still_works(ctx, f"an unsupported {dtype_name}")

    CASES.add(f"unsupported-dtype/{dtype_name}", run, min_size=1)


for _dtype in ("int16", "uint16", "uint32", "uint64", "complex64", "bool", "longdouble"):
    add_unsupported_dtype(_dtype)


@CASES.case("unsupported-object/list")
def unsupported_object(ctx):
    expect_quickly(ringcc.UnsupportedTypeError, ["list", "neither DLPack nor the buffer protocol"],
                   lambda: ringcc.allreduce([1.0, 2.0]), "allreduce of a list")
    still_works(ctx, "a list")


@CASES.case("unsupported-dtype/one-rank")
def unsupported_dtype_one_rank(ctx):
    if ctx.rank == 0:
        expect_quickly(ringcc.UnsupportedTypeError, ["int16"],
                       lambda: ringcc.allreduce(np.zeros(6, dtype=np.int16)), "allreduce of int16 on rank 0")
    else:
        expect_quickly(ringcc.MismatchError, ["rank 0", "int16"],
                       lambda: ringcc.allreduce(np.zeros(6, dtype=np.float32)),
                       "allreduce of float32 while rank 0 passed int16")
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
        expect_quickly(ringcc.InvalidArgumentError, ["contiguous"], lambda: ringcc.allreduce(x[::2]),
                       "allreduce of x[::2] on rank 0")
    else:
        expect_quickly(ringcc.MismatchError, ["rank 0", "contiguous"], lambda: ringcc.allreduce(x[:10]),
                       "allreduce while rank 0 passed a strided array")
    still_works(ctx, "one rank's non-contiguous array")


@CASES.case("read-only")
def read_only(ctx):
    n = ctx.size
    x = np.full(7, ctx.rank + 1, dtype=np.int32)
    x.setflags(write=False)
    expect_quickly(ringcc.InvalidArgumentError, ["read-only"], lambda: ringcc.allreduce_(x),
                   "allreduce_ of a read-only array")
    expect_quickly(ringcc.InvalidArgumentError, ["read-only"], lambda: ringcc.broadcast_(x, 0),
                   "broadcast_ of a read-only array")
    expect_quickly(ringcc.InvalidArgumentError, ["read-only"], lambda: ringcc.allreduce_async_(x).wait(),
                   "allreduce_async_ of a read-only array")
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
        ("allreduce, out too large", ringcc.InvalidArgumentError, ["out holds 8 elements", "7"],
         lambda: ringcc.allreduce(x, out=np.empty(8, dtype=np.float32))),
        ("allreduce, out too small", ringcc.InvalidArgumentError, ["out holds 6 elements"],
         lambda: ringcc.allreduce(x, out=np.empty(6, dtype=np.float32))),
        ("allreduce, out float64", ringcc.InvalidArgumentError, ["dtype float64", "float32"],
         lambda: ringcc.allreduce(x, out=np.empty(7, dtype=np.float64))),
        ("allreduce, out read-only", ringcc.InvalidArgumentError, ["read-only"],
         lambda: ringcc.allreduce(x, out=read_only)),
        ("broadcast, out too small", ringcc.InvalidArgumentError, ["out holds 3 elements"],
         lambda: ringcc.broadcast(x, 0, out=np.empty(3, dtype=np.float32))),
        ("reduce_scatter, out of the whole size", ringcc.InvalidArgumentError, ["out holds"],
         lambda: ringcc.reduce_scatter(np.ones((rows, 2), dtype=np.float32),
                                       out=np.empty((rows, 2), dtype=np.float32))),
        ("allgather, out int32", ringcc.InvalidArgumentError, ["dtype int32"],
         lambda: ringcc.allgather(x, out=np.empty(7 * n, dtype=np.int32))),
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
    error = expect_quickly(ringcc.RingccError, ["holds", str(7 * ctx.size + 1), str(7 * ctx.size)],
                           lambda: ringcc.allgather(x, out=out), "allgather with an out one element too large")
    expect(error is None or isinstance(error, ValueError),
           f"expected a ValueError subclass, got {type(error).__name__}")
    still_works(ctx, "allgather with a wrong out")


@CASES.case("unknown-op")
def unknown_op(ctx):
    x = np.ones(4, dtype=np.float32)
    for bad in ("median", "", "summ"):
        expect_quickly(ringcc.InvalidArgumentError, ["unknown reduction", repr(bad)],
                       lambda: ringcc.allreduce(x, bad), f"allreduce(op={bad!r})")
    for bad in (7, -1, True, 1.5, None):
        expect_quickly(ringcc.InvalidArgumentError, ["unknown reduction"],
                       lambda: ringcc.allreduce(x, bad), f"allreduce(op={bad!r})")
    expect_quickly(ringcc.InvalidArgumentError, ["unknown reduction"],
                   lambda: ringcc.reduce_scatter(x, "nope"), "reduce_scatter(op='nope')")
    expect_quickly(ringcc.InvalidArgumentError, ["unknown reduction"],
                   lambda: ringcc.grouped_allreduce([x], "nope"), "grouped_allreduce(op='nope')")
    expect_quickly(ringcc.InvalidArgumentError, ["unknown reduction"],
                   lambda: ringcc.allreduce_async(x, "nope"), "allreduce_async(op='nope')")
    still_works(ctx, "unknown reductions")


@CASES.case("scale-factor/not-finite")
def bad_scale(ctx):
    x = np.ones(4, dtype=np.float32)
    expect_quickly(ringcc.InvalidArgumentError, ["finite"],
                   lambda: ringcc.allreduce(x, prescale_factor=float("nan")), "allreduce(prescale_factor=nan)")
    expect_quickly(ringcc.InvalidArgumentError, ["finite"],
                   lambda: ringcc.allreduce(x, postscale_factor=float("inf")), "allreduce(postscale_factor=inf)")
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
    expect_quickly(ringcc.InvalidArgumentError, ["divide evenly"],
                   lambda: ringcc.alltoall(np.ones((2 * n + 1, 3), dtype=np.float32)),
                   "alltoall without splits of rows that do not divide evenly")
    still_works(ctx, "bad alltoall splits")


@CASES.case("alltoall/bad-splits/one-rank", min_size=2)
def alltoall_bad_splits_one_rank(ctx):
    n = ctx.size
    x = np.ones((n, 3), dtype=np.float32)
    if ctx.rank == 0:
        expect_quickly(ringcc.InvalidArgumentError, ["negative"],
                       lambda: ringcc.alltoall(x, [-1, n + 1] + [0] * (n - 2)), "negative splits on rank 0")
    else:
        expect_quickly(ringcc.MismatchError, ["rank 0", "negative"],
                       lambda: ringcc.alltoall(x, [1] * n), "alltoall while rank 0 passed negative splits")
    still_works(ctx, "one rank's bad splits")


@CASES.case("grouped/one-bad-tensor")
def grouped_bad_tensor(ctx):
    good = np.ones(5, dtype=np.float32)
    expect_quickly(ringcc.UnsupportedTypeError, ["int16"],
                   lambda: ringcc.grouped_allreduce([good, np.ones(3, dtype=np.int16)]),
                   "grouped_allreduce with an int16 tensor")
    expect_quickly(ringcc.InvalidArgumentError, ["contiguous"],
                   lambda: ringcc.grouped_allreduce_([good.copy(), np.ones(10, dtype=np.float32)[::2]]),
                   "grouped_allreduce_ with a strided tensor")
    still_works(ctx, "grouped_allreduce with a bad tensor")


@CASES.case("dlpack/non-contiguous-torch", tags=("torch",))
def torch_non_contiguous(ctx):
    try:
        import torch
    except ImportError:
        raise Skip("torch is not installed") from None
    transposed = torch.ones(4, 3).t()
    expect_quickly(ringcc.InvalidArgumentError, ["contiguous"], lambda: ringcc.allreduce(transposed),
                   "allreduce of a transposed torch tensor")
    expect_quickly(ringcc.UnsupportedTypeError, ["DLPack"], lambda: ringcc.allreduce(torch.ones(3, dtype=torch.int16)),
                   "allreduce of an int16 torch tensor")
    still_works(ctx, "a non-contiguous torch tensor")


# --------------------------------------------------------------------------
# Ranks that disagree: MismatchError on every rank, quickly


def add_mismatch(name: str, call_for_rank, fragments_for, *, min_size: int = 2) -> None:
    """Every rank runs call_for_rank(ctx) and must get a MismatchError naming fragments_for(ctx)."""

    def run(ctx):
        expect_quickly(ringcc.MismatchError, fragments_for(ctx), lambda: call_for_rank(ctx), name)
        still_works(ctx, name)

    CASES.add(f"mismatch/{name}", run, min_size=min_size)


add_mismatch("size", lambda ctx: ringcc.allreduce(np.ones(10 + ctx.rank, dtype=np.float32)),
             lambda ctx: ["number of elements"] + every_rank_named(ctx, lambda r: 10 + r))
add_mismatch("size/large", lambda ctx: ringcc.allreduce(np.ones((1 << 20) + ctx.rank, dtype=np.float32)),
             lambda ctx: ["number of elements"] + every_rank_named(ctx, lambda r: (1 << 20) + r))
_DTYPE_BY_RANK = ["float32", "float64", "int32", "int8"]
add_mismatch("dtype", lambda ctx: ringcc.allreduce(np.ones(6, dtype=_DTYPE_BY_RANK[ctx.rank % 4])),
             lambda ctx: ["dtype"] + every_rank_named(ctx, lambda r: _DTYPE_BY_RANK[r % 4]))
_OP_BY_RANK = [("Sum", "sum"), ("Max", "max"), ("Min", "min"), ("Product", "product")]
add_mismatch("op", lambda ctx: ringcc.allreduce(np.ones(6, dtype=np.float32),
                                                getattr(ringcc, _OP_BY_RANK[ctx.rank % 4][0])),
             lambda ctx: ["reduction"] + every_rank_named(ctx, lambda r: _OP_BY_RANK[r % 4][1]))
add_mismatch("op/reduce_scatter", lambda ctx: ringcc.reduce_scatter(np.ones((4, 2), dtype=np.float32),
                                                                   getattr(ringcc, _OP_BY_RANK[ctx.rank % 4][0])),
             lambda ctx: ["reduction"] + every_rank_named(ctx, lambda r: _OP_BY_RANK[r % 4][1]))
add_mismatch("root", lambda ctx: ringcc.broadcast(np.ones(6, dtype=np.float32), ctx.rank),
             lambda ctx: ["root"] + every_rank_named(ctx, lambda r: r))
add_mismatch("broadcast-size", lambda ctx: ringcc.broadcast(np.ones(6 + ctx.rank, dtype=np.float32), 0),
             lambda ctx: ["number of elements"] + every_rank_named(ctx, lambda r: 6 + r))
add_mismatch("allgather-row-shape",
             lambda ctx: ringcc.allgather(np.ones((2, 3 + ctx.rank), dtype=np.float32)),
             lambda ctx: ["shape"] + every_rank_named(ctx, lambda r: 3 + r))
add_mismatch("reduce_scatter-row-shape",
             lambda ctx: ringcc.reduce_scatter(np.ones((4, 2 + ctx.rank), dtype=np.float32)),
             lambda ctx: ["number of elements"] + every_rank_named(ctx, lambda r: 4 * (2 + r)))
add_mismatch("async/size", lambda ctx: ringcc.allreduce_async(np.ones(10 + ctx.rank, dtype=np.float32)).wait(),
             lambda ctx: ["number of elements"] + every_rank_named(ctx, lambda r: 10 + r))


@CASES.case("mismatch/several-in-a-row", min_size=2)
def several_mismatches(ctx):
    for attempt in range(5):
        expect_quickly(ringcc.MismatchError, ["number of elements"],
                       lambda: ringcc.allreduce(np.ones(3 + (ctx.rank + attempt) % ctx.size, dtype=np.float32)),
                       f"mismatch {attempt}")
    still_works(ctx, "five mismatches in a row")


# --------------------------------------------------------------------------
# Roots out of range


@CASES.case("root-out-of-range/all-ranks")
def root_out_of_range(ctx):
    n = ctx.size
    x = np.ones(6, dtype=np.float32)
    for root in (n, n + 5, -1):
        expect_quickly(ringcc.InvalidArgumentError, ["root", str(root), "out of range"],
                       lambda: ringcc.broadcast(x, root), f"broadcast(root={root})")
        expect_quickly(ringcc.InvalidArgumentError, ["out of range"],
                       lambda: ringcc.broadcast_(x.copy(), root), f"broadcast_(root={root})")
    still_works(ctx, "roots out of range")


@CASES.case("root-out-of-range/one-rank", min_size=2)
def root_out_of_range_one_rank(ctx):
    n = ctx.size
    x = np.ones(6, dtype=np.float32)
    if ctx.rank == 0:
        expect_quickly(ringcc.InvalidArgumentError, ["root", str(n), "out of range"],
                       lambda: ringcc.broadcast(x, n), f"broadcast(root={n}) on rank 0")
    else:
        expect_quickly(ringcc.MismatchError, ["rank 0", "out of range"], lambda: ringcc.broadcast(x, 0),
                       "broadcast(root=0) while rank 0 passed a root out of range")
    still_works(ctx, "one rank's root out of range")


# --------------------------------------------------------------------------
# Different collectives on different ranks (last: should a transport hang on
# them instead of raising, the cases before still ran)

_COLLECTIVE_BY_RANK = [
    ("allreduce", lambda: ringcc.allreduce(np.ones(6, dtype=np.float32))),
    ("allgather", lambda: ringcc.allgather(np.ones(6, dtype=np.float32))),
    ("broadcast", lambda: ringcc.broadcast(np.ones(6, dtype=np.float32), 0)),
    ("barrier", lambda: ringcc.barrier()),
]
add_mismatch("collective", lambda ctx: _COLLECTIVE_BY_RANK[ctx.rank % 4][1](),
             lambda ctx: ["different collectives"] + every_rank_named(ctx, lambda r: _COLLECTIVE_BY_RANK[r % 4][0]))
add_mismatch("collective/barrier-vs-alltoall",
             lambda ctx: ringcc.barrier() if ctx.rank == 0 else ringcc.alltoall(np.ones(ctx.size, dtype=np.int64)),
             lambda ctx: ["different collectives", "rank 0: barrier", "rank 1: alltoall"])


def _bind(module) -> None:
    global ringcc
    ringcc = module


def main(argv=None) -> int:
    return run_cases(CASES, argv, on_import=_bind)


if __name__ == "__main__":
    sys.exit(main())
