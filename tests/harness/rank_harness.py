"""Runs a list of test cases inside one group of ringcc ranks.

A rank script (rank_cases.py, rank_errors.py) builds a CaseList and calls
run_cases(). Every rank runs every selected case in the same order. A case
that fails on a rank is recorded, not raised; before each case the ranks meet
in a synchronisation step that realigns them even when a failing case left
some ranks with collectives the others never issued. Each rank appends one
JSON line per case to OUT/rank<R>.jsonl, so a crash still leaves the results
so far.

The module imports neither ringcc nor anything heavy, so pytest can read the
case lists to parametrize its tests without starting any rank.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

# Row that the ranks allgather to check that they have reached the same case.
SYNC_MAGIC = 0x52494E47  # "RING"
SYNC_ROW = 5
SYNC_MAX_ATTEMPTS = 200
MAX_MESSAGES = 5  # failed checks kept per case and rank


class Skip(Exception):
    """Raised by a case that cannot run here (e.g. an optional module is missing)."""


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[[Context], None]
    min_size: int = 1
    max_size: int | None = None
    # Tags a group must enable for the case to run there (e.g. "torch").
    tags: frozenset[str] = frozenset()

    def applies(self, size: int, tags: Iterable[str]) -> bool:
        if size < self.min_size or (self.max_size is not None and size > self.max_size):
            return False
        return self.tags <= frozenset(tags)


class CaseList:
    """An ordered, name-unique list of cases."""

    def __init__(self) -> None:
        self._cases: list[Case] = []
        self._names: set = set()

    def add(
        self,
        name: str,
        fn: Callable[[Context], None],
        *,
        min_size: int = 1,
        max_size: int | None = None,
        tags: Iterable[str] = (),
    ) -> Case:
        if name in self._names:
            raise ValueError(f"duplicate case name {name!r}")
        case = Case(name, fn, min_size, max_size, frozenset(tags))
        self._cases.append(case)
        self._names.add(name)
        return case

    def case(self, name: str, **options):
        """Decorator form of add()."""

        def register(fn):
            self.add(name, fn, **options)
            return fn

        return register

    def __iter__(self):
        return iter(self._cases)

    def __len__(self) -> int:
        return len(self._cases)

    def select(self, size: int, tags: Iterable[str], patterns: list[str] | None = None) -> list[Case]:
        tags = frozenset(tags)
        chosen = [c for c in self._cases if c.applies(size, tags)]
        if patterns:
            chosen = [c for c in chosen if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]
        return chosen


@dataclass
class Context:
    """What a case knows about the group it runs in."""

    rank: int
    size: int
    case: str
    seed: int = 0
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def rng(self, rank: int | None = None, salt: int = 0) -> np.random.Generator:
        """A generator that every rank can recreate for any rank's data."""
        return np.random.default_rng([self.seed, self.rank if rank is None else rank, salt])

    def note(self, text: str) -> None:
        """Adds a line to the case's recorded message (kept for passing cases too)."""
        self.notes.append(text)


def case_seed(name: str) -> int:
    return zlib.crc32(name.encode())


# --------------------------------------------------------------------------
# Checks. Inside a running case a failed check is recorded and the case goes
# on, so that every rank still issues the same collectives; the case fails
# at its end. Outside a case a failed check raises AssertionError.

_active: list[Context] = []  # the case now running, if any


def fail(message: str) -> None:
    """Records a failed check (or raises it, outside a case)."""
    if _active:
        _active[-1].failures.append(message)
    else:
        raise AssertionError(message)


def expect(condition, message: str) -> bool:
    """A check that does not stop the case: records `message` when condition is false."""
    if not condition:
        fail(message)
    return bool(condition)


def _first_difference(got: np.ndarray, want: np.ndarray, bad: np.ndarray) -> str:
    index = np.unravel_index(int(np.argmax(bad)), bad.shape) if bad.ndim else ()
    count = int(np.count_nonzero(bad))
    return (
        f"{count} of {bad.size} elements differ; first at index {tuple(int(i) for i in index)}: "
        f"got {got[index]!r}, expected {want[index]!r}"
    )


def check_shape_dtype(got, want_shape, want_dtype, what: str) -> bool:
    if not isinstance(got, np.ndarray):
        return expect(False, f"{what}: expected a NumPy array, got {type(got).__name__}")
    return expect(
        got.shape == tuple(want_shape), f"{what}: shape {got.shape}, expected {tuple(want_shape)}"
    ) and expect(got.dtype == np.dtype(want_dtype), f"{what}: dtype {got.dtype}, expected {np.dtype(want_dtype)}")


def check_equal(got, want, what: str) -> bool:
    """Exact equality, shape and dtype included."""
    want = np.asarray(want)
    if not check_shape_dtype(got, want.shape, want.dtype, what):
        return False
    if want.dtype.kind not in "biuf":
        # bfloat16 (ml_dtypes): compare through float32, which holds every value exactly.
        got_cmp, want_cmp = got.astype(np.float32), want.astype(np.float32)
    else:
        got_cmp, want_cmp = got, want
    bad = got_cmp != want_cmp
    if np.any(bad):
        return expect(False, f"{what}: {_first_difference(got_cmp, want_cmp, bad)}")
    return True


def check_close(got, want64: np.ndarray, scale64: np.ndarray, rtol: float, what: str, want_dtype=None) -> bool:
    """|got - want| <= rtol * scale (+ a tiny absolute slack), computed in float64."""
    if want_dtype is not None and not check_shape_dtype(got, want64.shape, want_dtype, what):
        return False
    got64 = got.astype(np.float64)
    bound = rtol * scale64 + 1e-30
    bad = ~(np.abs(got64 - want64) <= bound)
    if np.any(bad):
        return expect(False, f"{what} (rtol {rtol:g}): {_first_difference(got64, want64, bad)}")
    return True


def exact_input(ctx: Context, rank: int, shape, dtype, salt: int = 0, op: str = "sum") -> np.ndarray:
    """Rank `rank`'s input for a reduction case: small integers, exact in every dtype and for every
    op (sums of all ranks stay in range; products of +-1 and 2). `dtype`: anything np.dtype takes."""
    rng = ctx.rng(rank, salt)
    dt = np.dtype(dtype)
    if op == "product":
        values = rng.integers(1, 3, size=shape)
        if dt.kind == "i" or dt.kind == "f":
            values = values * rng.choice([-1, 1], size=shape)
    elif dt.kind == "u":
        values = rng.integers(0, 256 // (2 * ctx.size), size=shape)
    elif dt.itemsize == 1:
        values = rng.integers(-128 // (2 * ctx.size), 128 // (2 * ctx.size), size=shape)
    else:
        values = rng.integers(-50, 50, size=shape)
    return np.asarray(values).astype(dt)


def exact_inputs(ctx: Context, shape, dtype, salt: int = 0, op: str = "sum") -> list[np.ndarray]:
    """exact_input of every rank, in rank order."""
    return [exact_input(ctx, r, shape, dtype, salt, op) for r in range(ctx.size)]


def expect_error(error_class, fragments: Iterable[str], call: Callable[[], object], what: str):
    """Runs call(), which must raise error_class with every fragment in its message.

    Returns (the exception or None, seconds the call took)."""
    start = time.monotonic()
    try:
        result = call()
    except error_class as error:
        elapsed = time.monotonic() - start
        message = str(error)
        for fragment in fragments:
            expect(fragment in message, f"{what}: {type(error).__name__} message lacks {fragment!r}: {message!r}")
        return error, elapsed
    except Exception as error:
        fail(f"{what}: expected {error_class.__name__}, got {type(error).__module__}.{type(error).__name__}: {error}")
        return None, time.monotonic() - start
    fail(f"{what}: expected {error_class.__name__}, but the call returned {result!r}")
    return None, time.monotonic() - start


# --------------------------------------------------------------------------
# The runner


def expect_threads_agree(work: Callable[[int], None], count: int = 2, timeout_s: float = 60.0) -> bool:
    """Runs work(k) for k in range(count) at once, each on a thread named
    case-worker-<k> (threads named alike on every rank); a thread whose
    work raises (AssertionError for a wrong result) or runs past
    `timeout_s` fails the case, naming it."""
    failures: list[str] = []

    def run(k: int) -> None:
        try:
            work(k)
        except Exception as error:  # noqa: BLE001 - reported below
            failures.append(f"thread {k}: {type(error).__name__}: {error}")

    threads = [threading.Thread(target=run, args=(k,), name=f"case-worker-{k}") for k in range(count)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if not expect(not any(t.is_alive() for t in threads), f"a thread's work did not finish in {timeout_s:g} s"):
        return False
    return expect(not failures, "; ".join(failures[:4]))


def _write(path: str, record: dict) -> None:
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")
        file.flush()


class _Runner:
    def __init__(self, ringcc, out_path: str) -> None:
        self.ringcc = ringcc
        self.out_path = out_path
        self.broken: str | None = None

    def sync(self, index: int) -> None:
        """Returns once every rank has reached case `index`.

        Each attempt is an allgather of a marked row. A rank that is still
        inside a failing case meets it with some other collective: both get
        an error (or unmarked data), and the ranks that arrived try again,
        each attempt absorbing one stray collective, until all are here."""
        ringcc = self.ringcc
        row = np.zeros((1, SYNC_ROW), dtype=np.int64)
        row[0, 0], row[0, 1] = SYNC_MAGIC, index
        for _ in range(SYNC_MAX_ATTEMPTS):
            try:
                rows = ringcc.allgather(row)
            except (ringcc.PeerFailureError, ringcc.TimeoutError, ringcc.NotInitializedError) as error:
                raise _Broken(f"synchronisation before case {index}: {type(error).__name__}: {error}")
            except ringcc.RingccError:
                continue
            if (
                rows.shape == (ringcc.size(), SYNC_ROW)
                and np.all(rows[:, 0] == SYNC_MAGIC)
                and np.all(rows[:, 1] == index)
            ):
                return
        raise _Broken(f"the ranks could not realign before case {index}")

    def run(self, cases: list[Case], rank: int, size: int) -> int:
        ringcc = self.ringcc
        failures = 0
        for index, case in enumerate(cases):
            if self.broken is None:
                try:
                    self.sync(index)
                except _Broken as error:
                    self.broken = str(error)
            record = {"kind": "case", "name": case.name}
            if self.broken is not None:
                record.update(status="fail", message=f"not run: {self.broken}", seconds=0.0)
                _write(self.out_path, record)
                failures += 1
                continue
            context = Context(rank=rank, size=size, case=case.name, seed=case_seed(case.name))
            start = time.monotonic()
            _active.append(context)
            try:
                case.fn(context)
                if context.failures:
                    failures += 1
                    record.update(status="fail", message="\n".join(context.failures[:MAX_MESSAGES]))
                else:
                    record.update(status="pass", message="\n".join(context.notes))
            except Skip as reason:
                record.update(status="skip", message=str(reason))
            except BaseException as error:  # recorded; the sync step realigns the ranks
                failures += 1
                lines = traceback.format_exception(type(error), error, error.__traceback__)
                message = "\n".join(context.failures[:MAX_MESSAGES] + [f"{type(error).__name__}: {error}"])
                record.update(status="fail", message=message, traceback="".join(lines[-6:]))
                if isinstance(error, (ringcc.PeerFailureError, ringcc.TimeoutError)):
                    self.broken = f"case {case.name} broke the communicator: {type(error).__name__}: {error}"
                elif not ringcc.is_initialized():
                    self.broken = f"case {case.name} left ringcc shut down"
                if isinstance(error, KeyboardInterrupt):
                    raise
            finally:
                _active.pop()
            record["seconds"] = round(time.monotonic() - start, 4)
            _write(self.out_path, record)
        if self.broken is None:
            try:
                self.sync(len(cases))
            except _Broken as error:
                self.broken = str(error)
        _write(self.out_path, {"kind": "end", "failures": failures, "broken": self.broken})
        return failures

    def exit_status(self) -> int:
        """0 when the ranks stayed usable: failed cases are in the records, and a
        non-zero status would make ringrun stop ranks still writing theirs. 1
        when the communicator broke, so that ringrun stops ranks stuck in it."""
        return 0 if self.broken is None else 1


class _Broken(Exception):
    pass


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run test cases inside a group of ringcc ranks.")
    parser.add_argument("--out", required=True, help="directory for the per-rank result files")
    parser.add_argument("--tags", default="", help="comma-separated tags this group enables")
    parser.add_argument("--cases", default="", help="comma-separated name patterns (fnmatch) to run")
    parser.add_argument("--list", action="store_true", help="print the selected case names and exit")
    return parser.parse_args(argv)


def run_cases(cases: CaseList, argv: list[str] | None = None, on_import: Callable | None = None) -> int:
    """The rank script's main: initialises ringcc, runs the cases, records results.

    on_import(ringcc) runs once ringcc is imported, before init()."""
    args = parse_args(argv)
    tags = [t for t in args.tags.split(",") if t]
    patterns = [p for p in args.cases.split(",") if p]
    size_hint = int(os.environ.get("RINGCC_SIZE", "1"))
    if args.list:
        for case in cases.select(size_hint, tags, patterns):
            print(case.name)
        return 0

    import ringcc

    if on_import is not None:
        on_import(ringcc)
    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    selected = cases.select(size, tags, patterns)
    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, f"rank{rank}.jsonl")
    if os.path.exists(out_path):
        os.remove(out_path)
    _write(
        out_path,
        {
            "kind": "start",
            "rank": rank,
            "size": size,
            "pid": os.getpid(),
            "transport": ringcc.transport_name(),
            "cases": len(selected),
            "ringcc_file": ringcc.__file__,
        },
    )
    runner = _Runner(ringcc, out_path)
    runner.run(selected, rank, size)
    if runner.broken is None:
        ringcc.shutdown()
    sys.stdout.flush()
    return runner.exit_status()


# --------------------------------------------------------------------------
# Reading results (used by the pytest side)


def read_results(out_dir: str, size: int) -> dict[int, dict]:
    """{rank: {"start": {...}, "end": {...} or None, "cases": {name: record}}} for the files found."""
    results: dict[int, dict] = {}
    for rank in range(size):
        path = os.path.join(out_dir, f"rank{rank}.jsonl")
        if not os.path.exists(path):
            continue
        entry: dict = {"start": None, "end": None, "cases": {}}
        with open(path, encoding="utf-8") as file:
            for line in file:
                line = line.strip()
                if not line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a crash
                kind = record.get("kind")
                if kind == "case":
                    entry["cases"][record["name"]] = record
                elif kind in ("start", "end"):
                    entry[kind] = record
        results[rank] = entry
    return results
