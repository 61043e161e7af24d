"""The collective cases under an MPI launcher, with the MPI transport:

    mpirun -np N python tests/ranks/rank_mpi_cases.py --out DIR [--tags mpi4py-first] [--cases PATTERNS]

Runs every case of rank_cases.py that does not depend on ringrun (its
"topology" case reads ringrun's variables; "mpi/topology" here checks
against MPI instead), plus cases of ringcc beside mpi4py in the same
process. With the tag "mpi4py-first", mpi4py initialises MPI before
ringcc.init(); without it ringcc initialises MPI and mpi4py comes later.
test_mpi.py runs it and parametrizes its tests from CASES.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))  # tests/harness
import rank_cases  # noqa: E402
from rank_harness import CaseList, Skip, check_equal, expect, expect_error, fail, run_cases  # noqa: E402

ringcc = None  # imported by main()

# rank_cases' cases that need ringrun (its variables) or a group of their own.
NOT_UNDER_MPI = {"topology"}

CASES = CaseList()
for _case in rank_cases.CASES:
    if _case.name in NOT_UNDER_MPI or "huge" in _case.tags or "torch" in _case.tags:
        continue
    CASES.add(_case.name, _case.fn, min_size=_case.min_size, max_size=_case.max_size, tags=_case.tags)


def mpi():
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise Skip(f"mpi4py is not installed: {error}")
    return MPI


@CASES.case("mpi/topology")
def mpi_topology(ctx):
    MPI = mpi()
    world = MPI.COMM_WORLD
    expect(
        (ringcc.rank(), ringcc.size()) == (world.Get_rank(), world.Get_size()),
        f"ringcc says rank {ringcc.rank()} of {ringcc.size()}, MPI {world.Get_rank()} of {world.Get_size()}",
    )
    expect(
        ringcc.transport_name() == os.environ.get("RINGCC_TRANSPORT", "shm"),
        f"transport_name() is {ringcc.transport_name()!r}",
    )
    expect(ringcc.local_size() == ringcc.size(), f"local_size {ringcc.local_size()} on one host")
    expect(
        "MASTER_ADDR" not in os.environ and "RINGCC_MASTER_ADDR" not in os.environ,
        "the job must bootstrap without a store address",
    )
    expect(ringcc.mpi_built(), "mpi_built() is False inside an MPI job that uses MPI")


@CASES.case("mpi/mpi4py-beside")
def mpi4py_beside(ctx):
    """mpi4py's own collectives and ringcc's, interleaved, in the same process."""
    MPI = mpi()
    comm = MPI.COMM_WORLD
    first = os.environ.get("RINGCC_TEST_MPI4PY_FIRST") == "1"
    level = MPI.Query_thread()
    expect(level == MPI.THREAD_MULTIPLE, f"MPI thread level {level}, expected MPI_THREAD_MULTIPLE")
    ctx.note(f"MPI initialised by {'mpi4py' if first else 'ringcc'}; {MPI.Get_library_version().splitlines()[0]}")
    for i in range(20):
        x = np.full(1000 + i, ctx.rank + i, dtype=np.float64)
        mine = ringcc.allreduce(x)
        theirs = np.empty_like(x)
        comm.Allreduce(x, theirs)
        check_equal(mine, theirs, f"round {i}: ringcc.allreduce vs mpi4py Allreduce")
        got = comm.allgather(ringcc.rank())
        expect(got == list(range(ctx.size)), f"round {i}: mpi4py allgather {got}")


@CASES.case("mpi/mismatched-size")
def mismatched_size(ctx):
    """Different element counts on different ranks: MismatchError on every rank, then the ranks go on."""
    x = np.ones(5 + ctx.rank, dtype=np.float32)
    expect_error(
        ringcc.MismatchError,
        ["disagree on the number of elements"],
        lambda: ringcc.allreduce(x),
        "allreduce with a size per rank",
    )
    big = np.ones((1 << 20) + ctx.rank, dtype=np.float32)  # past the inline size: the data path
    expect_error(
        ringcc.MismatchError,
        ["disagree on the number of elements"],
        lambda: ringcc.allreduce(big),
        "4 MiB allreduce with a size per rank",
    )
    check_equal(
        ringcc.allreduce(np.ones(3, np.int32)), np.full(3, ctx.size, np.int32), "allreduce after the mismatches"
    )


@CASES.case("mpi/mismatched-shape", min_size=2)
def mismatched_shape(ctx):
    """As many elements in different shapes: the headers MPI exchanges carry the shapes."""
    shape = (2, 3) if ctx.rank % 2 == 0 else (3, 2)
    expect_error(
        ringcc.MismatchError,
        ["disagree on the shape (", "rank 0: [2, 3]", "rank 1: [3, 2]", "collective #"],
        lambda: ringcc.allreduce(np.ones(shape, dtype=np.float32)),
        "allreduce of (2, 3) against (3, 2)",
    )
    check_equal(ringcc.allreduce(np.ones(3, np.int32)), np.full(3, ctx.size, np.int32), "allreduce after the mismatch")


@CASES.case("mpi/init-with-comm", min_size=2)
def init_with_comm(ctx):
    """ringcc.init(comm=...) with a split communicator, as the mpi4py object and as its
    integer py2f() handle (docs/api.md): groups of the even and of the odd ranks."""
    MPI = mpi()
    world = MPI.COMM_WORLD
    sub = world.Split(world.Get_rank() % 2, world.Get_rank())
    ringcc.shutdown()
    try:
        for how, comm in (("the split communicator", sub), ("its py2f() handle", sub.py2f())):
            ringcc.init(comm=comm)
            expect(
                (ringcc.rank(), ringcc.size()) == (sub.Get_rank(), sub.Get_size()),
                f"with {how}: rank {ringcc.rank()} of {ringcc.size()}",
            )
            got = ringcc.allreduce(np.array([world.Get_rank()], dtype=np.int64))
            want = sum(r for r in range(ctx.size) if r % 2 == ctx.rank % 2)
            check_equal(got, np.array([want], dtype=np.int64), f"allreduce within the split group ({how})")
            ringcc.shutdown()
    finally:
        ringcc.shutdown()
        sub.Free()
        ringcc.init()
    expect(ringcc.size() == ctx.size, "init() again takes MPI_COMM_WORLD")


@CASES.case("mpi/reinit-leaks-nothing")
def reinit_leaks_nothing(ctx):
    """20 cycles of shutdown(), init() through MPI, collectives and a mismatch: the
    process ends each cycle with no descriptor it did not have after the first
    two and no more of ringcc's threads (all named "ringcc-..."). MPI's own
    threads come and go as its progress engine pleases: more than two over the
    first count fails, fewer or one or two more is MPI's business."""

    def held():
        names = []
        for task in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{task}/comm", encoding="utf-8") as comm:
                    names.append(comm.read().strip())
            except OSError:  # the thread ended meanwhile (ENOENT, or ESRCH on reading)
                pass
        return sorted(os.listdir("/proc/self/fd")), sorted(names)

    def grown(now, base):  # a descriptor MPI closed later is no leak: only new ones count
        ours = [sum(name.startswith("ringcc-") for name in names) for names in (now[1], base[1])]
        return not set(now[0]) <= set(base[0]) or ours[0] > ours[1] or len(now[1]) > len(base[1]) + 2

    first = None
    for cycle in range(20):
        ringcc.shutdown()
        ringcc.init()
        check_equal(
            ringcc.allreduce(np.full(100, ctx.rank + 1.0)),
            np.full(100, ctx.size * (ctx.size + 1) / 2),
            f"cycle {cycle}: allreduce",
        )
        expect_error(
            ringcc.MismatchError,
            [],
            lambda: ringcc.allreduce(np.ones(3 + ctx.rank)),
            f"cycle {cycle}: allreduce with a size per rank",
        )
        got = ringcc.allreduce_async(np.ones(4, np.int32), name=f"reinit/{cycle}").wait(30)
        check_equal(got, np.full(4, ctx.size, np.int32), f"cycle {cycle}: named allreduce")
        if cycle < 2:
            # The baseline: what the first two cycles held, together (a
            # thread of ringcc's that a first sample missed, still starting
            # or not yet named, is not a leak of the later cycles).
            now = held()
            if first is None:
                first = now
            else:
                ours = [sum(name.startswith("ringcc-") for name in names) for names in (now[1], first[1])]
                first = (sorted(set(first[0]) | set(now[0])), now[1] if ours[0] > ours[1] else first[1])
            continue
        # A thread or descriptor still on its way out gets a moment.
        deadline = time.monotonic() + 2.0
        while grown(held(), first) and time.monotonic() < deadline:
            time.sleep(0.05)
        if grown(held(), first):
            fail(f"cycle {cycle}: holds {held()}, after the first cycle {first}")
            return


def _on_import(module):
    global ringcc
    ringcc = module
    rank_cases._bind(module)
    if os.environ.get("RINGCC_TEST_MPI4PY_FIRST") == "1":
        from mpi4py import MPI  # initialises MPI before ringcc.init()

        assert MPI.Is_initialized()


def main(argv=None) -> int:
    return run_cases(CASES, argv, on_import=_on_import)


if __name__ == "__main__":
    sys.exit(main())
