"""The agreement over a transport (recursive doubling, with small
allreduces, allgathers and broadcasts riding along), run inside one group
of ranks over TCP:

    RINGCC_TRANSPORT=tcp ringrun -np N python tests/ranks/rank_agreement_cases.py --out DIR

With RINGCC_TEST_NOT_INLINE_RANK=R, rank R sets RINGCC_INLINE_BYTES=0
before ringcc reads it: it never rides along while the others do, and
every collective must still be right (the ranks fall back to the ring
together). tests/ranks/test_agreement.py runs it at 3 ranks (the rank
above the power of two hands its part to rank 0) and at 4.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))  # tests/harness
from rank_harness import CaseList, check_equal, exact_inputs, expect, expect_error, run_cases  # noqa: E402

ringcc = None  # imported by main(), so that pytest can read CASES without the compiled core

CASES = CaseList()

# Element counts around the default RINGCC_INLINE_BYTES (64 KiB) in float32.
COUNTS = [1, 2, 7, 1000, 16384, 16385, 100000]


def _bind(module) -> None:
    global ringcc
    ringcc = module


def _same_everywhere(ctx, got: np.ndarray, what: str) -> None:
    """Every rank holds the same bytes (recursive doubling reduces in
    different orders on different ranks: commutativity keeps them equal)."""
    rows = ringcc.allgather(np.frombuffer(got.tobytes(), dtype=np.uint8).reshape(1, -1))
    expect(bool(np.all(rows == rows[0:1])), f"{what}: ranks hold different results")


@CASES.case("allreduce/sizes")
def allreduce_sizes(ctx):
    for count in COUNTS:
        for dtype in ("float32", "int64", "float16"):
            inputs = exact_inputs(ctx, (count,), dtype)
            want = np.sum(np.stack(inputs).astype(np.float64), axis=0).astype(dtype)
            got = ringcc.allreduce(inputs[ctx.rank])
            check_equal(got, want, f"allreduce of {count} {dtype}")
            _same_everywhere(ctx, got, f"allreduce of {count} {dtype}")


@CASES.case("allreduce/ops-and-scaling")
def allreduce_ops(ctx):
    inputs = exact_inputs(ctx, (33,), "float64", op="product")
    stacked = np.stack(inputs)
    for op, want in (("Min", stacked.min(0)), ("Max", stacked.max(0)), ("Product", stacked.prod(0))):
        check_equal(ringcc.allreduce(inputs[ctx.rank], op=op), want, f"allreduce {op}")
    x = np.full(5, float(ctx.rank + 1), dtype=np.float64)
    total = sum(range(1, ctx.size + 1))
    got = ringcc.allreduce(x, op="Average")
    check_equal(got, np.full(5, total / ctx.size), "allreduce Average")
    got = ringcc.allreduce(x, prescale_factor=2.0, postscale_factor=0.5)
    check_equal(got, np.full(5, float(total)), "allreduce with pre- and postscale")
    inplace = x.copy()
    ringcc.allreduce_(inplace)
    check_equal(inplace, np.full(5, float(total)), "allreduce_ in place")


@CASES.case("mixed-kinds")
def mixed_kinds(ctx):
    for step in range(3):
        ringcc.barrier()
        got = ringcc.allreduce(np.full(3, step + ctx.rank, dtype=np.int32))
        check_equal(got, np.full(3, ctx.size * step + sum(range(ctx.size)), dtype=np.int32), "allreduce")
        rows = ringcc.allgather(np.full((ctx.rank + 1, 2), ctx.rank, dtype=np.int64))
        want = np.concatenate([np.full((r + 1, 2), r, dtype=np.int64) for r in range(ctx.size)])
        check_equal(rows, want, "allgather of different lengths")
        root = step % ctx.size
        got = ringcc.broadcast(np.full(4, ctx.rank, dtype=np.float32), root)
        check_equal(got, np.full(4, root, dtype=np.float32), "broadcast")
        send = np.arange(ctx.size, dtype=np.int64) + 10 * ctx.rank
        got = ringcc.alltoall(send)
        check_equal(got, np.arange(ctx.size, dtype=np.int64) * 10 + ctx.rank, "alltoall")


INLINE_BYTES = 64 << 10  # RINGCC_INLINE_BYTES's default


def _allgather_counts(ctx) -> list[int]:
    """Block lengths (float32 elements) around the bound: together at most
    INLINE_BYTES rides along, one element more does not."""
    bound = INLINE_BYTES // 4 // ctx.size
    return [0, 1, 7, 1000, bound - 1, bound, bound + 1, 40000]


@CASES.case("allgather/sizes")
def allgather_sizes(ctx):
    for count in _allgather_counts(ctx):
        for dtype in ("float32", "int64", "float16"):
            blocks = exact_inputs(ctx, (count, 1), dtype)
            got = ringcc.allgather(blocks[ctx.rank])
            check_equal(got, np.concatenate(blocks), f"allgather of {count} {dtype} rows")
    # Into the caller's buffer.
    blocks = exact_inputs(ctx, (33,), "float64")
    out = np.full(33 * ctx.size, -1.0)
    ringcc.allgather(blocks[ctx.rank], out=out)
    check_equal(out, np.concatenate(blocks), "allgather into out=")


@CASES.case("allgather/blocks-of-different-lengths")
def allgather_uneven(ctx):
    """Ranks' blocks differ, some empty, some past the bound where the
    others' are under it (those ranks do not ride along, so none do)."""
    bound = INLINE_BYTES // 4 // ctx.size
    for lengths in (
        [r + 1 for r in range(ctx.size)],
        [0 if r % 2 else 3 for r in range(ctx.size)],
        [bound + 5 if r == ctx.size - 1 else 2 for r in range(ctx.size)],
    ):
        blocks = [np.arange(n, dtype=np.int32).reshape(n, 1) + 1000 * r for r, n in enumerate(lengths)]
        got = ringcc.allgather(blocks[ctx.rank])
        check_equal(got, np.concatenate(blocks), f"allgather of blocks {lengths}")


@CASES.case("broadcast/sizes-and-roots")
def broadcast_sizes(ctx):
    for count in COUNTS:
        for root in range(ctx.size):
            data = exact_inputs(ctx, (count,), "float32", salt=root)[root]
            mine = data.copy() if ctx.rank == root else np.zeros(count, np.float32)
            check_equal(ringcc.broadcast(mine, root), data, f"broadcast of {count} from {root}")
    for dtype in ("int64", "float16", "uint8"):
        x = np.full(5, ctx.rank, dtype=dtype)
        ringcc.broadcast_(x, ctx.size - 1)
        check_equal(x, np.full(5, ctx.size - 1, dtype=dtype), f"broadcast_ of {dtype} in place")


def _still_works(ctx, after: str) -> None:
    got = ringcc.allreduce(np.ones(3, dtype=np.float32))
    check_equal(got, np.full(3, ctx.size, dtype=np.float32), f"allreduce after {after}")


@CASES.case("mismatch/kinds")
def mismatch_kinds(ctx):
    """One rank calls allgather while the others ride an allreduce along."""
    x = np.arange(8, dtype=np.float32)
    before = x.copy()
    if ctx.rank == 1:
        call = lambda: ringcc.allgather(x)  # noqa: E731
    else:
        call = lambda: ringcc.allreduce_(x)  # noqa: E731
    expect_error(ringcc.MismatchError, ["different collectives", "allgather", "allreduce"], call, "allgather/allreduce")
    check_equal(x, before, "allreduce_'s tensor after a mismatch")
    _still_works(ctx, "different collectives")


@CASES.case("mismatch/sizes-across-the-inline-bound")
def mismatch_sizes(ctx):
    """Rank 0's allreduce rides along, the others' is too long to."""
    count = 8 if ctx.rank == 0 else 100000
    expect_error(ringcc.MismatchError, ["8", "100000"], lambda: ringcc.allreduce(np.ones(count, np.float32)), "sizes")
    _still_works(ctx, "different sizes")


@CASES.case("mismatch/dtype-of-the-same-width")
def mismatch_dtype(ctx):
    """The same number of bytes ride along from every rank, as different dtypes."""
    x = np.ones(16, dtype=np.int32 if ctx.rank == ctx.size - 1 else np.float32)
    before = x.copy()
    expect_error(ringcc.MismatchError, ["dtype", "int32", "float32"], lambda: ringcc.allreduce_(x), "dtypes")
    check_equal(x, before, "allreduce_'s tensor after a dtype mismatch")
    _still_works(ctx, "different dtypes")


@CASES.case("mismatch/broadcast-roots")
def mismatch_roots(ctx):
    """Ranks name different roots of a broadcast small enough to ride along."""
    x = np.arange(4, dtype=np.float32) + ctx.rank
    before = x.copy()
    root = 0 if ctx.rank == 0 else 1
    expect_error(ringcc.MismatchError, ["root"], lambda: ringcc.broadcast_(x, root), "roots")
    check_equal(x, before, "broadcast_'s tensor after a mismatch")
    _still_works(ctx, "different roots")


@CASES.case("mismatch/broadcast-sizes-across-the-inline-bound")
def mismatch_broadcast_sizes(ctx):
    count = 8 if ctx.rank == 0 else 100000
    expect_error(
        ringcc.MismatchError, ["8", "100000"], lambda: ringcc.broadcast(np.ones(count, np.float32), 0), "sizes"
    )
    _still_works(ctx, "broadcasts of different sizes")


@CASES.case("mismatch/allgather-dtypes-and-rows")
def mismatch_allgather(ctx):
    """Blocks of one width as different dtypes; then rows of different lengths."""
    x = np.ones((2, 4), dtype=np.int32 if ctx.rank == ctx.size - 1 else np.float32)
    expect_error(ringcc.MismatchError, ["dtype", "int32", "float32"], lambda: ringcc.allgather(x), "dtypes")
    y = np.ones((2, 4 if ctx.rank == 0 else 3), dtype=np.float32)
    expect_error(ringcc.MismatchError, ["shape after the first dimension"], lambda: ringcc.allgather(y), "rows")
    _still_works(ctx, "allgathers that disagree")


@CASES.case("mismatch/one-rank-failed")
def one_rank_failed(ctx):
    """A rank that cannot start (an unsupported dtype) still takes part."""
    if ctx.rank == 0:
        expect_error(
            ringcc.UnsupportedTypeError, ["int16"], lambda: ringcc.allreduce(np.zeros(4, np.int16)), "int16 on rank 0"
        )
    else:
        expect_error(
            ringcc.MismatchError, ["rank 0", "int16"], lambda: ringcc.allreduce(np.zeros(4, np.float32)), "float32"
        )
    _still_works(ctx, "a rank that could not start")
    # A broadcast whose root cannot start: the others, riding along, must not take its data.
    if ctx.rank == 0:
        expect_error(ringcc.InvalidArgumentError, ["root"], lambda: ringcc.broadcast(np.zeros(4), ctx.size), "bad root")
    else:
        expect_error(ringcc.MismatchError, ["rank 0"], lambda: ringcc.broadcast(np.zeros(4), 0), "a good root")
    _still_works(ctx, "a broadcast that could not start")


def main(argv=None) -> int:
    not_inline = os.environ.get("RINGCC_TEST_NOT_INLINE_RANK")
    if not_inline is not None and os.environ.get("RINGCC_RANK") == not_inline:
        os.environ["RINGCC_INLINE_BYTES"] = "0"
    return run_cases(CASES, argv, on_import=_bind)


if __name__ == "__main__":
    sys.exit(main())
