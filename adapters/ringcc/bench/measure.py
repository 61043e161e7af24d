"""Measurement core shared by every implementation the bench times.

Nothing here imports ringcc, torch or mpi4py: an implementation is a
`Backend` (rank, size, a max-reduction, a barrier, and one loop per
collective), so ringcc, gloo and MPI are all timed by the same code.

Timing of one (op, size) point:
  1. warm up: batches of 1, 1, 4, 16, ... iterations until a batch after
     the first takes WARMUP_BATCH_S (or a fixed --warmup count);
  2. iterations: fixed --iters, or enough for about --target-s seconds
     (at least MIN_ITERS, fewer only when MIN_ITERS would take more than
     MAX_POINT_S, and never fewer than 1);
  3. barrier, then a barrier-free loop of the collective timed on every
     rank; time per iteration = (t_end - t_start) / iters, and the value
     reported is the maximum over ranks (reduced with the backend itself).
     The loop is timed in up to SAMPLE_BATCHES consecutive batches as well
     (no barrier between them): each batch's time per iteration, maximum
     over ranks, is one sample of the point's spread (ringcc.bench.table.spread).
     The machine's busy CPU time is read around the loop too
     (ringcc.bench.machine_cpu): how many CPUs the point kept busy.
"""

import re
import time

import numpy as np

from . import machine_cpu

OPS = ("allreduce", "allgather", "broadcast", "reduce_scatter")
# What a sweep runs unless --ops says otherwise.
DEFAULT_OPS = ("allreduce", "allgather", "broadcast")

# nccl-tests PERFORMANCE.md: busbw = algbw * factor(n).
BUS_FACTOR = {
    "allreduce": lambda n: 2.0 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce_scatter": lambda n: (n - 1) / n,
}

# The sizes of the summary's key figures; always part of a sweep whose range
# holds them, whatever the step factor.
KEY_SIZES = (8, 1 << 20, 64 << 20)

WARMUP_BATCH_S = 0.025
WARMUP_MAX_S = 0.1
MIN_ITERS = 5
MAX_POINT_S = 2.0
MAX_ITERS = 1_000_000
SAMPLE_BATCHES = 5

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    """'8', '64K', '256M', '1G', '4MiB' -> bytes (binary units, as nccl-tests)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ValueError(f"bad size {text!r} (examples: 8, 64K, 256M, 1G)")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def format_size(nbytes):
    """1048576 -> '1 MiB', 8 -> '8 B'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def size_sweep(minbytes, maxbytes, stepfactor):
    """minbytes * stepfactor**k up to maxbytes; maxbytes and KEY_SIZES in range are added."""
    if minbytes < 1 or maxbytes < minbytes:
        raise ValueError("need 1 <= minbytes <= maxbytes")
    if stepfactor < 2:
        raise ValueError("stepfactor must be >= 2")
    sizes = set()
    s = minbytes
    while s <= maxbytes:
        sizes.add(s)
        s *= stepfactor
    sizes.add(maxbytes)
    sizes.update(k for k in KEY_SIZES if minbytes <= k <= maxbytes)
    return sorted(sizes)


def resolve_dtype(name):
    """A NumPy dtype from its name; bfloat16 comes from ml_dtypes."""
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError as e:
            raise ValueError("bfloat16 needs the ml_dtypes package") from e
        return np.dtype(ml_dtypes.bfloat16)
    try:
        dt = np.dtype(name)
    except TypeError as e:
        raise ValueError(f"unknown dtype {name!r}") from e
    if dt.kind not in "fiu":
        raise ValueError(f"unsupported dtype {name!r}")
    return dt


class Case:
    """One point of a sweep.

    nbytes is the S of nccl-tests: the per-rank buffer for allreduce and
    broadcast, the total output (count * size * itemsize) for allgather,
    the per-rank input (size * the output's count) for reduce_scatter.
    count is the element count of the per-rank buffer (the input).
    """

    def __init__(self, op, nominal, dtype, world):
        self.op, self.dtype, self.world = op, np.dtype(dtype), world
        per_rank = nominal // world if op == "allgather" else nominal
        self.count = max(1, per_rank // self.dtype.itemsize)
        if op == "reduce_scatter":  # one block per rank, all alike
            self.count = max(world, self.count // world * world)
        self.nbytes = self.count * self.dtype.itemsize * (world if op == "allgather" else 1)

    @property
    def out_count(self):
        """Elements of the output buffer; 0 when the op works in place."""
        return {"allgather": self.count * self.world, "reduce_scatter": self.count // self.world}.get(self.op, 0)

    def algbw(self, seconds):
        return self.nbytes / seconds / 1e9

    def busbw(self, seconds):
        return self.algbw(seconds) * BUS_FACTOR[self.op](self.world)


def make_cases(op, sizes, dtype, world):
    """The sweep of one op; sizes that round to the same buffer are kept once."""
    cases, seen = [], set()
    for s in sizes:
        c = Case(op, s, dtype, world)
        if c.nbytes not in seen:
            seen.add(c.nbytes)
            cases.append(c)
    return cases


# ---------------------------------------------------------------------------
# Buffers and result checks


def alloc_buffers(case, rank):
    """(input, output or None) for one case, filled for timing."""
    x = np.empty(case.count, case.dtype)
    out = np.empty(case.out_count, case.dtype) if case.out_count else None
    timing_fill(case, rank, x, out)
    return x, out


def timing_fill(case, rank, x, out):
    """Writes every page, so that no buffer reads the shared zero page.

    allreduce and reduce_scatter reduce zeros (a fixed point of Sum, so
    repeated iterations neither overflow nor reach inf or denormals);
    allgather and broadcast move rank-dependent constants.
    """
    if case.op in ("allreduce", "reduce_scatter"):
        x.fill(0)
    else:
        x.fill(rank % 100 + 1)
    if out is not None:
        out.fill(0)


_PATTERN = (1, 2, 3)


def _fill_pattern(a, scale):
    for k, v in enumerate(_PATTERN):
        a[k::3] = v * scale


def _count_wrong(a, scale, start=0):
    """Elements of `a` that differ from the pattern times scale, `a`
    starting at element `start` of the pattern's array."""
    wrong = 0
    for k, v in enumerate(_PATTERN):
        expected = np.array(v * scale).astype(a.dtype)
        wrong += int(np.count_nonzero(a[(k - start) % 3 :: 3] != expected))
    return wrong


def _once(backend, op, x, out):
    """Runs the collective once; a loop over device copies of the buffers
    (its `fetch`) brings the results back into x and out."""
    run = backend.loop(op, x, out)
    run(1)
    fetch = getattr(run, "fetch", None)
    if fetch is not None:
        fetch()


def check_once(case, backend, x, out):
    """Runs the collective once on known data; returns the number of wrong
    elements (the maximum over ranks).

    The buffers are restored to the timing fill afterwards.
    """
    r, n = backend.rank, backend.size
    if case.op == "allreduce":
        _fill_pattern(x, 1 + r % 2)
        _once(backend, case.op, x, out)
        wrong = _count_wrong(x, sum(1 + q % 2 for q in range(n)))
    elif case.op == "reduce_scatter":
        _fill_pattern(x, 1 + r % 2)
        out.fill(0)
        _once(backend, case.op, x, out)
        wrong = _count_wrong(out, sum(1 + q % 2 for q in range(n)), start=r * case.out_count)
    elif case.op == "allgather":
        _fill_pattern(x, r % 40 + 1)
        out.fill(0)
        _once(backend, case.op, x, out)
        wrong = sum(_count_wrong(out[q * case.count : (q + 1) * case.count], q % 40 + 1) for q in range(n))
    else:
        if r == 0:
            _fill_pattern(x, 7)
        else:
            x.fill(0)
        _once(backend, case.op, x, out)
        wrong = _count_wrong(x, 7)
    timing_fill(case, r, x, out)
    return int(backend.max_over_ranks(float(wrong)))


# ---------------------------------------------------------------------------
# Timing


class Backend:
    """What an implementation provides. `loop(op, x, out)` returns a function
    running the collective n times in a plain Python loop (over x and out,
    or over device copies of them: then the function has a `fetch()` that
    copies the results back)."""

    name = "?"
    rank = 0
    size = 1

    def max_over_ranks(self, value):
        raise NotImplementedError

    def barrier(self):
        raise NotImplementedError

    def loop(self, op, x, out):
        raise NotImplementedError

    def unsupported(self, op, dtype):
        """A reason string when this backend cannot run op on dtype, else None."""
        return None


def _timed(run, n):
    t0 = time.perf_counter()
    run(n)
    return time.perf_counter() - t0


def warm_up(backend, run, warmup):
    """Warm up; returns an estimate of one iteration's time (max over ranks).

    Adaptive warm-up runs batches of 1, 1, 4, 16, ... iterations; the first
    batch only pays one-time costs (connections, page faults) and is never
    used as the estimate.
    """
    if warmup is not None:
        n = max(warmup, 1)
        return backend.max_over_ranks(_timed(run, n)) / n
    batches = 0
    n, spent = 1, 0.0
    while True:
        # The max-reduction makes every rank take the same decision.
        elapsed = backend.max_over_ranks(_timed(run, n))
        spent += elapsed
        batches += 1
        if batches >= 2 and (elapsed >= WARMUP_BATCH_S or spent >= WARMUP_MAX_S):
            return elapsed / n
        if batches >= 2:
            n *= 4


def choose_iters(estimate, target_s):
    estimate = max(estimate, 1e-9)
    lo = MIN_ITERS
    if MIN_ITERS * estimate > MAX_POINT_S:
        lo = max(1, int(MAX_POINT_S / estimate))
    return int(min(MAX_ITERS, max(lo, round(target_s / estimate))))


def batch_sizes(n, batches=SAMPLE_BATCHES):
    """n iterations as up to `batches` consecutive batches of (nearly) equal size."""
    k = max(1, min(batches, n))
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


def _timed_batches(run, sizes):
    """Runs the batches back to back; returns (total seconds, seconds of each)."""
    stamps = [time.perf_counter()]
    for n in sizes:
        run(n)
        stamps.append(time.perf_counter())
    return stamps[-1] - stamps[0], [b - a for a, b in zip(stamps, stamps[1:])]


def measure(backend, case, iters=None, warmup=None, target_s=0.25, check=False):
    """Times one case; returns a dict: time (seconds per iteration of the whole
    loop, max over ranks), samples (the same per batch), iters, cpus_busy
    (how many of the machine's CPUs were busy over this rank's timed loop,
    whatever ran on them; None where it cannot be read)."""
    x, out = alloc_buffers(case, backend.rank)
    result = {}
    if check:
        result["wrong"] = check_once(case, backend, x, out)
    run = backend.loop(case.op, x, out)
    estimate = warm_up(backend, run, warmup)
    n = iters if iters is not None else choose_iters(estimate, target_s)
    sizes = batch_sizes(n)
    backend.barrier()
    busy = machine_cpu.busy_seconds()
    total, each = _timed_batches(run, sizes)
    cpus = machine_cpu.cpus_busy(busy, machine_cpu.busy_seconds(), total)
    t = backend.max_over_ranks(total / n)
    samples = [backend.max_over_ranks(s / k) for s, k in zip(each, sizes)]
    result.update(time=t, samples=samples, iters=n, cpus_busy=cpus)
    return result


def sweep(
    backend, ops, sizes, dtype, iters=None, warmup=None, target_s=0.25, check=False, progress=None, on_point=None
):
    """Every op over every size. Returns {"results": [...], "skipped": {op: reason}}.

    on_point(op, case, index, total) is called before each point is measured
    (index counts from 1 over the whole sweep); progress(op, seconds) after
    each op."""
    results, skipped = [], {}
    plan = []
    for op in ops:
        reason = backend.unsupported(op, dtype)
        if reason:
            skipped[op] = reason
            continue
        plan.append((op, make_cases(op, sizes, dtype, backend.size)))
    total = sum(len(cases) for _, cases in plan)
    index = 0
    for op, cases in plan:
        t0 = time.perf_counter()
        for case in cases:
            index += 1
            if on_point:
                on_point(op, case, index, total)
            r = measure(backend, case, iters, warmup, target_s, check)
            r.update(op=op, nbytes=case.nbytes, count=case.count)
            results.append(r)
        if progress:
            progress(op, time.perf_counter() - t0)
    return {"results": results, "skipped": skipped}
