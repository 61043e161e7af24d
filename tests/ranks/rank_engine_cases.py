"""The background engine's cases (named collectives), run inside one group of ranks:

    ringrun -np N python tests/ranks/rank_engine_cases.py --out DIR [--tags stall] [--cases PATTERNS]

Every rank enqueues the same names in an order of its own; the engine must
match them by name, fuse what it can and give every rank the result NumPy
computes. Cases read the engine's settings from the environment the group
was started with (RINGCC_* first, then Horovod's names), so that one case
checks what it should in every group. Some cases record figures with
ctx.note("key=value") for tests/ranks/test_engine.py to compare across groups.
Cases tagged "stall" need a group started with short stall times, those
tagged "deadlock" one with a short RINGCC_TIMEOUT_S.

Case order matters for one thing: the response cache keeps the first
RINGCC_CACHE_CAPACITY names it sees, so "cache/reused-names" comes first,
before other cases fill it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))  # tests/harness
from rank_cases import block, check_reduction, dtype_of, make_input, scale_kwargs, value_kind  # noqa: E402
from rank_harness import CaseList, Skip, check_equal, expect, expect_error, fail, run_cases  # noqa: E402

ringcc = None  # imported by main(), so that pytest can read CASES without the compiled core

CASES = CaseList()

# How long a case waits for one handle before it records a failure.
WAIT_S = 30.0
# Ranks must learn that a named collective is wrong well before any timeout.
MISMATCH_SECONDS = 5.0

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64"]
OPS = ["Sum", "Average", "Min", "Max", "Product"]

# The engine's defaults (core/engine/engine.h).
DEFAULT_FUSION_THRESHOLD = 64 << 20
DEFAULT_CACHE_CAPACITY = 1024
DEFAULT_CYCLE_TIME_MS = 1.0

STATS_KEYS = (
    "cycles",
    "cached_cycles",
    "negotiation_us",
    "cached_negotiation_us",
    "cached_decide_us",
    "cached_exchange_us",
    "cached_peer_wait_us",
    "cached_overhead_us",
    "fused_collectives",
    "tensors",
)


# --------------------------------------------------------------------------
# Helpers


def setting(name: str, horovod_name: str, default: float) -> float:
    """The engine setting the ranks were started with: RINGCC_*, else Horovod's, else the default."""
    for variable in (name, horovod_name):
        value = os.environ.get(variable, "").strip()
        if value:
            return float(value)
    return float(default)


def fusion_threshold() -> int:
    return int(setting("RINGCC_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD", DEFAULT_FUSION_THRESHOLD))


def cache_capacity() -> int:
    return int(setting("RINGCC_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY", DEFAULT_CACHE_CAPACITY))


def cycle_time_ms() -> float:
    return setting("RINGCC_CYCLE_TIME_MS", "HOROVOD_CYCLE_TIME", DEFAULT_CYCLE_TIME_MS)


def stall_check_s() -> float:
    return setting("RINGCC_STALL_CHECK_S", "HOROVOD_STALL_CHECK_TIME_SECONDS", 60.0)


def stall_shutdown_s() -> float:
    return setting("RINGCC_STALL_SHUTDOWN_S", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", 600.0)


def timeout_s() -> float:
    return setting("RINGCC_TIMEOUT_S", "HOROVOD_GLOO_TIMEOUT_SECONDS", 60.0)


def env_timeline() -> str:
    return os.environ.get("RINGCC_TIMELINE") or os.environ.get("HOROVOD_TIMELINE") or ""


def shuffled(ctx, n: int, salt: int = 0) -> list[int]:
    """0..n-1 in an order of this rank's own (every rank a different one)."""
    return [int(i) for i in ctx.rng(salt=1_000_003 + salt).permutation(n)]


def finish(handle, what: str, timeout: float = WAIT_S):
    """synchronize(handle), recording (not raising) an error; None when it failed."""
    try:
        return ringcc.synchronize(handle, timeout)
    except ringcc.RingccError as error:
        fail(f"{what}: {type(error).__name__}: {error}")
        return None


def stats() -> dict:
    return ringcc.engine_stats()


def grown(before: dict, after: dict, key: str):
    return after[key] - before[key]


def check_allreduced(got, inputs, op: str, what: str, pre: float = 1.0, post: float = 1.0) -> None:
    if got is not None:
        check_reduction(got, inputs, op, what, pre, post)


def dtype_or_none(name: str):
    try:
        return dtype_of(name)
    except Skip:
        return None


def read_timeline(path: str):
    """The timeline file as a list of events, or None (recorded as a failure)."""
    try:
        with open(path, encoding="utf-8") as file:
            events = json.load(file)
    except (OSError, ValueError) as error:
        fail(f"timeline {path} is not valid JSON: {error}")
        return None
    if not expect(isinstance(events, list), f"timeline {path}: expected a JSON array, got {type(events).__name__}"):
        return None
    return events


def timeline_streams(events) -> dict[str, list[dict]]:
    """{tensor name: its "X" events}, from the per-tensor "process_name" metadata."""
    names: dict[int, str] = {}
    for event in events:
        if event.get("ph") == "M" and event.get("name") == "process_name":
            pid = event.get("pid")
            expect(pid not in names, f"timeline: two process_name events for pid {pid}")
            names[pid] = event.get("args", {}).get("name")
    seen = list(names.values())
    expect(len(seen) == len(set(seen)), f"timeline: a tensor has more than one stream: {sorted(seen)}")
    streams: dict[str, list[dict]] = {name: [] for name in names.values()}
    for event in events:
        if event.get("ph") != "X":
            continue
        pid = event.get("pid")
        if not expect(pid in names, f"timeline: event {event} belongs to no tensor stream"):
            continue
        expect(
            isinstance(event.get("ts"), int) and isinstance(event.get("dur"), int) and event["dur"] >= 0,
            f"timeline: event without a valid ts/dur: {event}",
        )
        streams[names[pid]].append(event)
    return streams


def fused_batches(streams: dict[str, list[dict]]) -> dict[tuple, list[str]]:
    """{(fusion id, start): tensor names} of the ALLREDUCE events that ran fused (tensors > 1)."""
    batches: dict[tuple, list[str]] = {}
    for name, events in streams.items():
        for event in events:
            args = event.get("args", {})
            if event["name"] == "ALLREDUCE" and args.get("tensors", 1) > 1:
                batches.setdefault((args.get("fusion"), event["ts"]), []).append(name)
    return batches


# --------------------------------------------------------------------------
# The response cache (first: the cache keeps the first names it sees)


@CASES.case("cache/reused-names")
def cache_reused_names(ctx):
    """The same names every iteration: after the first, they go through the response cache."""
    n = ctx.size
    count = max(2, min(24, cache_capacity() // 2))
    iterations = 30
    before = stats()
    for iteration in range(iterations):
        values = [np.full(16, i * 10 + ctx.rank + iteration, dtype=np.float32) for i in range(count)]
        handles = {}
        for i in shuffled(ctx, count, salt=iteration):
            handles[i] = ringcc.allreduce_async_(values[i], name=f"cache/grad.{i}")
        for i in shuffled(ctx, count, salt=1000 + iteration):
            got = finish(handles[i], f"iteration {iteration}, cache/grad.{i}")
            want = np.full(16, n * (i * 10 + iteration) + n * (n - 1) // 2, dtype=np.float32)
            if got is not None:
                expect(got is values[i], "allreduce_async_ must return its argument")
                check_equal(got, want, f"iteration {iteration}, cache/grad.{i}")
    after = stats()
    cached = grown(before, after, "cached_cycles")
    ctx.note(f"cached_cycles=+{cached}")
    expect(
        cached > 0,
        f"cached_cycles did not grow over {iterations} iterations of the same {count} names: {before} -> {after}",
    )
    expect(
        grown(before, after, "tensors") == iterations * count,
        f"tensors grew by {grown(before, after, 'tensors')}, expected {iterations * count}",
    )
    if cached > 0:
        expect(after["cached_negotiation_us"] > 0, f"cached_negotiation_us is 0 after cache hits: {after}")
        expect(after["cached_decide_us"] >= 0 and after["cached_exchange_us"] >= 0, f"negative parts: {after}")
        # The wait for the other ranks is part of the exchange; the overhead is the rest.
        wait, overhead = after["cached_peer_wait_us"], after["cached_overhead_us"]
        expect(
            0 <= wait <= after["cached_exchange_us"] * (1 + 1e-9) + 1e-9,
            f"cached_peer_wait_us {wait} outside [0, cached_exchange_us]: {after}",
        )
        expect(
            abs(overhead - (after["cached_negotiation_us"] - wait)) <= 1e-6 * max(1.0, overhead),
            f"cached_overhead_us is not cached_negotiation_us less cached_peer_wait_us: {after}",
        )
        if ringcc.transport_name() == "tcp":
            expect(wait == 0, f"over TCP the wait cannot be told apart, yet cached_peer_wait_us={wait}")


@CASES.case("cache/changed-description")
def cache_changed_description(ctx):
    """A cached name used with a new shape (the same on every rank) is negotiated again, not refused."""
    n = ctx.size
    for iteration, length in enumerate([8, 8, 13, 13, 8, 1, 8]):
        x = np.arange(length, dtype=np.float64) + ctx.rank + iteration
        got = finish(ringcc.allreduce_async(x, name="cache/changing"), f"length {length}")
        want = n * (np.arange(length, dtype=np.float64) + iteration) + n * (n - 1) / 2
        if got is not None:
            check_equal(got, want, f"iteration {iteration} (length {length})")


@CASES.case("cache/beyond-capacity")
def cache_beyond_capacity(ctx):
    """More names than the cache holds, reused: the ones past capacity keep working."""
    n = ctx.size
    count = min(cache_capacity() + 40, 3000)
    for iteration in range(3):
        values = [np.full(2, (i % 50) + ctx.rank + iteration, dtype=np.int32) for i in range(count)]
        handles = {
            i: ringcc.allreduce_async_(values[i], name=f"overflow/{i}") for i in shuffled(ctx, count, salt=iteration)
        }
        wrong = []
        for i in range(count):
            got = finish(handles[i], f"overflow/{i}")
            if got is not None and not np.all(got == n * ((i % 50) + iteration) + n * (n - 1) // 2):
                wrong.append(i)
        expect(not wrong, f"iteration {iteration}: {len(wrong)} of {count} tensors wrong, first {wrong[:5]}")


@CASES.case("cache/new-names-after-full")
def cache_new_names_after_full(ctx):
    """Once the cache has held RINGCC_CACHE_CAPACITY names, a new set of names reused
    over many iterations should still be served by the cache (as Horovod's LRU cache
    does, evicting names not used for longest)."""
    count, iterations = 8, 10
    filler = cache_capacity() + 1
    handles = [ringcc.allreduce_async(np.ones(1, dtype=np.float32), name=f"cache-filler/{i}") for i in range(filler)]
    for i, handle in enumerate(handles):
        finish(handle, f"cache-filler/{i}")
    before = stats()
    for iteration in range(iterations):
        handles = [ringcc.allreduce_async(np.ones(4, dtype=np.float32), name=f"cache-late/{i}") for i in range(count)]
        for i, handle in enumerate(handles):
            finish(handle, f"cache-late/{i}")
    cached = grown(before, stats(), "cached_cycles")
    ctx.note(f"cached_cycles=+{cached}")
    expect(
        cached > 0,
        f"{iterations} iterations of the same {count} new names gave no cache-hit cycle "
        f"once {filler} other names had been used (RINGCC_CACHE_CAPACITY {cache_capacity()})",
    )


# --------------------------------------------------------------------------
# allreduce by name


@CASES.case("engine/stats-keys")
def engine_stats_keys(ctx):
    st = stats()
    expect(set(STATS_KEYS) <= set(st), f"engine_stats() lacks {sorted(set(STATS_KEYS) - set(st))}: {st}")
    for key in STATS_KEYS:
        value = st.get(key)
        expect(isinstance(value, (int, float)) and value >= 0, f"engine_stats()[{key!r}] = {value!r}")
    for key in ("cycles", "cached_cycles", "fused_collectives", "tensors"):
        expect(isinstance(st.get(key), int), f"engine_stats()[{key!r}] should be an int: {st.get(key)!r}")
    x = np.ones(3, dtype=np.float32)
    finish(ringcc.allreduce_async_(x, name="stats/one"), "stats/one")
    later = stats()
    expect(later["cycles"] > st["cycles"], f"cycles did not grow: {st} -> {later}")
    expect(later["tensors"] == st["tensors"] + 1, f"tensors grew by {later['tensors'] - st['tensors']}, expected 1")


@CASES.case("allreduce/shuffled-order")
def allreduce_shuffled(ctx):
    """Every rank enqueues the same 48 names in its own order and waits in yet another."""
    count = 48
    dt = np.dtype(np.float32)
    inputs = {}
    for i in range(count):
        shape = (1 + (i * 37) % 300,) if i % 5 else (3, 1 + i)
        inputs[i] = [make_input(ctx, r, dt, int(np.prod(shape)), salt=i).reshape(shape) for r in range(ctx.size)]
    originals = {i: x[ctx.rank].copy() for i, x in inputs.items()}
    handles, buffers = {}, {}
    for i in shuffled(ctx, count):
        name = f"grad/layer{i}.weight"
        if i % 2:
            buffers[i] = inputs[i][ctx.rank].copy()
            handles[i] = ringcc.allreduce_async_(buffers[i], name=name)
        else:
            handles[i] = ringcc.allreduce_async(inputs[i][ctx.rank], ringcc.Sum, name=name)
    for i in shuffled(ctx, count, salt=1):
        got = finish(handles[i], f"grad/layer{i}.weight")
        if got is None:
            continue
        if i % 2:
            expect(got is buffers[i], f"allreduce_async_ of grad/layer{i}.weight must return its argument")
        else:
            check_equal(inputs[i][ctx.rank], originals[i], f"input of grad/layer{i}.weight after the call")
        check_reduction(got, inputs[i], "Sum", f"grad/layer{i}.weight")


@CASES.case("allreduce/fusion-of-views")
def allreduce_fusion_of_views(ctx):
    """Named in-place allreduces of views into one buffer (a flat gradient bucket), enqueued in
    every rank's own order, with views of a second buffer and an empty view among them: the
    engine may run neighbours as one buffer, and every view gets its own sum."""
    n_views, per = 60, 1500
    dt = np.dtype(np.float32)
    bucket = [make_input(ctx, r, dt, n_views * per, salt=300) for r in range(ctx.size)]
    other = [make_input(ctx, r, dt, 7 * 11, salt=301) for r in range(ctx.size)]
    for round_ in range(2):  # the second round goes through the response cache
        mine, theirs = bucket[ctx.rank].copy(), other[ctx.rank].copy()
        spans = {f"bucket/{i}": (mine, i * per, (i + 1) * per) for i in range(n_views)}
        spans["bucket/empty"] = (mine, 5 * per, 5 * per)
        spans.update({f"other/{j}": (theirs, j * 11, (j + 1) * 11) for j in range(7)})
        names = sorted(spans)
        handles = {}
        for k in shuffled(ctx, len(names), salt=round_):
            buf, a, b = spans[names[k]]
            handles[names[k]] = ringcc.allreduce_async_(buf[a:b], name=f"views/{names[k]}")
        for name, handle in handles.items():
            finish(handle, f"views/{name} (round {round_})")
        check_reduction(mine, bucket, "Sum", f"the bucket's views (round {round_})")
        check_reduction(theirs, other, "Sum", f"the other buffer's views (round {round_})")


@CASES.case("allreduce/views-in-enqueue-order")
def allreduce_views_in_enqueue_order(ctx):
    """Views of one buffer enqueued in address order on every rank, as a flat gradient bucket's
    hooks enqueue them: the engine runs them in that order from the first step on (the table and
    the response cache number names in the order the ranks enqueued them), so that a fused batch
    of them is one run of the buffer. Over TCP, where scattered segments go through the fusion
    buffer, the timeline must show no copies. With a small response cache (RINGCC_CACHE_CAPACITY
    <= 256) the views' names are evicted between steps by other names, used so that eviction
    hands the views' names bits in descending order: they must still run in enqueue order."""
    n_views, per = 48, 256
    dt = np.dtype(np.float32)
    bucket = [make_input(ctx, r, dt, n_views * per, salt=310) for r in range(ctx.size)]
    capacity = cache_capacity()
    evict = n_views < capacity <= 256
    # Not while RINGCC_TIMELINE records: starting another timeline would end that file.
    record = not env_timeline()
    directory = tempfile.mkdtemp(prefix="ringcc-timeline-") if record and ctx.rank == 0 else None
    path = os.path.join(directory, "timeline.json") if directory else os.devnull

    def step(round_):
        mine = bucket[ctx.rank].copy()
        handles = [ringcc.allreduce_async_(mine[i * per : (i + 1) * per], name=f"inorder/{i}") for i in range(n_views)]
        for i, handle in enumerate(handles):
            finish(handle, f"inorder/{i} (round {round_})")
        check_reduction(mine, bucket, "Sum", f"views enqueued in address order (round {round_})")

    try:
        if record:
            ringcc.start_timeline(path)
        step(0)  # by name
        if evict:
            # A cache's worth of other names in one step (they take the views' bits), then one
            # at a time from the last to the first: the least recently used bit is then the
            # highest, and the views' names come back on bits in descending order.
            other = np.ones(4, dtype=np.float32)
            names = [f"inorder-evict/{j}" for j in range(capacity)]
            handles = [ringcc.allreduce_async(other, name=name) for name in names]
            for name, handle in zip(names, handles):
                finish(handle, name)
            for name in reversed(names):
                finish(ringcc.allreduce_async(other, name=name), name)
        step(1)  # by name again after an eviction, else through the response cache
        step(2)  # through the response cache
        if record:
            ringcc.stop_timeline()
        if directory is None or ringcc.transport_name() != "tcp":
            return
        events = read_timeline(path)
        if events is None:
            return
        streams = timeline_streams(events)
        views = {name: stream for name, stream in streams.items() if name.startswith("inorder/")}
        expect(len(views) == n_views, f"timeline: {len(views)} streams of the {n_views} views")
        fused = [
            e
            for stream in views.values()
            for e in stream
            if e["name"] == "ALLREDUCE" and e["args"].get("tensors", 1) > 1
        ]
        expect(fused, "the views never ran fused")
        copies = sorted({name for name, stream in views.items() if any(e["name"].startswith("MEMCPY") for e in stream)})
        expect(
            not copies,
            f"views enqueued in address order went through the fusion buffer, so the "
            f"engine ran them out of that order: {copies[:8]}",
        )
    finally:
        if directory:
            shutil.rmtree(directory, ignore_errors=True)


@CASES.case("allreduce/poll")
def allreduce_poll(ctx):
    """poll() is False while a peer has not enqueued the name, True once it has run."""
    n = ctx.size
    x = np.full(5, ctx.rank + 1.0, dtype=np.float64)
    if ctx.rank == 0:
        handle = ringcc.allreduce_async(x, name="poll/late")
        deadline = time.monotonic() + 0.1
        while time.monotonic() < deadline:
            if ringcc.poll(handle):
                fail("poll() turned True before the other ranks enqueued poll/late")
                break
            time.sleep(0.005)
        ringcc.barrier()
    else:
        ringcc.barrier()
        handle = ringcc.allreduce_async(x, name="poll/late")
    deadline = time.monotonic() + WAIT_S
    while not ringcc.poll(handle) and time.monotonic() < deadline:
        time.sleep(0.001)
    expect(ringcc.poll(handle), f"poll() stayed False for {WAIT_S:g} s")
    got = finish(handle, "poll/late")
    if got is not None:
        check_equal(got, np.full(5, n * (n + 1) / 2), "poll/late")


def engine_thread_cpu_s() -> float:
    """CPU seconds the engine thread (named ringcc-engine) has used."""
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm", encoding="utf-8") as comm:
                if comm.read().strip() != "ringcc-engine":
                    continue
            with open(f"/proc/self/task/{task}/stat", encoding="utf-8") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
        except OSError:
            continue
    raise Skip("no thread named ringcc-engine")


@CASES.case("engine/quiet-after-work")
def engine_quiet_after_work(ctx):
    """After a named collective and while the caller computes, the engine
    thread looks for a follow-up briefly (RINGCC_ENGINE_POLL_US), then
    sleeps: over half a second it uses a fraction of a CPU."""
    x = np.full(16, ctx.rank + 1.0)
    got = finish(ringcc.allreduce_async(x, name="quiet/after"), "quiet/after")
    if got is not None:
        check_equal(got, np.full(16, ctx.size * (ctx.size + 1) / 2), "quiet/after")
    before, start = engine_thread_cpu_s(), time.monotonic()
    time.sleep(0.5)
    used, spent = engine_thread_cpu_s() - before, time.monotonic() - start
    expect(used < 0.25 * spent, f"the engine thread used {used:.3f} s of CPU in {spent:.3f} s of its rank's sleep")
    ringcc.barrier()


@CASES.case("allreduce/in-place-named-inputs")
def allreduce_in_place_named_inputs(ctx):
    """allreduce_async_ by name (the per-tensor path of training loops): bad
    inputs raise on the calling rank before anything is enqueued, and the
    handle's result is the caller's own array, reduced in place."""
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    expect_error(
        ringcc.InvalidArgumentError,
        ["not C-contiguous"],
        lambda: ringcc.allreduce_async_(base[:, ::2], name="inplace/strided"),
        "strided view",
    )
    frozen = np.ones(4, dtype=np.float32)
    frozen.setflags(write=False)
    expect_error(
        ringcc.InvalidArgumentError,
        ["read-only"],
        lambda: ringcc.allreduce_async_(frozen, name="inplace/read-only"),
        "read-only array",
    )
    expect_error(
        ringcc.UnsupportedTypeError,
        ["complex64", "supported"],
        lambda: ringcc.allreduce_async_(np.ones(4, np.complex64), name="inplace/complex"),
        "complex64 array",
    )
    expect_error(
        ringcc.InvalidArgumentError,
        ["name must be a non-empty string"],
        lambda: ringcc.allreduce_async_(np.ones(4, np.float32), name=7),
        "name=7",
    )
    # Every rank gets here having enqueued nothing: the named tensor below
    # is the first one the others see.
    x = np.full((2, 3), ctx.rank + 1.0, dtype=np.float64)
    handle = ringcc.allreduce_async_(x, name="inplace/ok", op=ringcc.Sum, postscale_factor=0.5)
    got = finish(handle, "inplace/ok")
    expect(got is x, f"the handle's result should be the input array itself, got {type(got).__name__}")
    n = ctx.size
    check_equal(x, np.full((2, 3), n * (n + 1) / 2 * 0.5), "inplace/ok")
    # Once waited on, the handle lets go of the core's work (the engine reuses it for
    # later tensors) and still answers as a finished handle.
    expect(ringcc.poll(handle) and handle.done(), "a synchronized handle reports done")
    expect("done" in repr(handle), f"repr of a synchronized handle: {handle!r}")
    expect(ringcc.synchronize(handle) is x and handle.wait() is x, "waiting again returns the same result")
    y = np.full((2, 3), ctx.rank + 2.0, dtype=np.float64)
    expect(ringcc.synchronize(ringcc.allreduce_async_(y, name="inplace/ok", op=ringcc.Sum)) is y, "inplace/ok again")
    check_equal(y, np.full((2, 3), n * (n + 3) / 2), "inplace/ok again (a reused work)")
    check_equal(x, np.full((2, 3), n * (n + 1) / 2 * 0.5), "inplace/ok: the first result is untouched")


class _SubArray(np.ndarray):
    """An ndarray subclass: the compiled fast path leaves it to the general one."""


@CASES.case("allreduce/in-place-named-array-kinds")
def allreduce_in_place_named_array_kinds(ctx):
    """allreduce_async_ by name over every kind of NumPy array its compiled path meets: each
    core dtype (C int, long and long long alike), 0-d, empty, 9-d (past the inline shape),
    a subclass, a view at an offset; a foreign byte order and an unsupported dtype raise."""
    n = ctx.size
    arrays = {}
    for name in ("float16", "float32", "float64", "int8", "uint8", "intc", "int_", "longlong"):
        dt = np.dtype(getattr(np, name))
        sign = -1 if dt.kind == "i" else 1  # negative integers: a wrong width shows in every element
        arrays[name] = np.full((2, 3), sign * (ctx.rank + 1), dtype=dt)
    try:
        arrays["bfloat16"] = np.full(4, ctx.rank + 1, dtype=dtype_of("bfloat16"))
    except Skip:
        pass
    arrays["0-d"] = np.array(ctx.rank + 1.0, dtype=np.float32)
    arrays["empty"] = np.zeros((0, 4), dtype=np.float32)
    arrays["9-d"] = np.full((1, 2, 1, 2, 1, 2, 1, 2, 3), ctx.rank + 1.0, dtype=np.float64)
    arrays["subclass"] = np.full(5, ctx.rank + 1.0, dtype=np.float32).view(_SubArray)
    arrays["offset view"] = np.full(10, ctx.rank + 1.0, dtype=np.float32)[3:8]
    handles = {key: ringcc.allreduce_async_(x, name=f"kinds/{key}") for key, x in arrays.items()}
    for key, x in arrays.items():
        got = finish(handles[key], f"kinds/{key}")
        if got is None:
            continue
        expect(got is x, f"kinds/{key}: the handle's result is the array itself")
        sign = -1 if x.dtype.kind == "i" else 1
        check_equal(x, np.full(x.shape, sign * n * (n + 1) // 2, dtype=x.dtype), f"kinds/{key}")
    big_endian = np.ones(4, dtype=">f4")
    expect_error(
        ringcc.InvalidArgumentError,
        [">f4", "byte order"],
        lambda: ringcc.allreduce_async_(big_endian, name="kinds/big-endian"),
        "a big-endian array",
    )
    expect_error(
        ringcc.UnsupportedTypeError,
        ["int16", "supported"],
        lambda: ringcc.allreduce_async_(np.ones(4, np.int16), name="kinds/int16"),
        "an int16 array",
    )
    expect_error(
        ringcc.InvalidArgumentError,
        [">f8", "byte order"],
        lambda: ringcc.allreduce_(np.ones(4, dtype=">f8")),
        "a big-endian array, blocking",
    )


@CASES.case("allreduce/in-place-failed-handle", min_size=2)
def allreduce_in_place_failed_handle(ctx):
    """An in-place named allreduce that failed (ranks disagree on its dtype) raises from
    synchronize(handle) once it is done, every time it is waited on, and from poll-then-wait;
    the same name works again afterwards."""
    dt = np.float64 if ctx.rank == ctx.size - 1 else np.float32
    x = np.ones(6, dtype=dt)
    handle = ringcc.allreduce_async_(x, name="failed/dtype")
    deadline = time.monotonic() + WAIT_S
    while not ringcc.poll(handle) and time.monotonic() < deadline:
        time.sleep(0.001)
    expect(ringcc.poll(handle), "the mismatched allreduce never completed")
    for attempt in ("first", "second"):
        expect_error(
            ringcc.MismatchError,
            ["failed/dtype", "dtype"],
            lambda: ringcc.synchronize(handle),
            f"synchronize(handle) of a failed in-place allreduce ({attempt} time)",
        )
    expect_error(
        ringcc.MismatchError, ["failed/dtype"], lambda: handle.wait(), "handle.wait() of a failed in-place allreduce"
    )
    y = np.full(6, ctx.rank + 1.0, dtype=np.float32)
    expect(ringcc.synchronize(ringcc.allreduce_async_(y, name="failed/dtype")) is y, "the name again")
    check_equal(y, np.full(6, ctx.size * (ctx.size + 1) / 2, dtype=np.float32), "failed/dtype again")


class _DuckHandle:
    """A handle of another kind (an adapter's): synchronize and poll call its methods."""

    def __init__(self):
        self.timeouts = []

    def wait(self, timeout=None):
        self.timeouts.append(timeout)
        return "duck result"

    def done(self):
        return "duck done"


@CASES.case("allreduce/in-place-named-arguments")
def allreduce_in_place_named_arguments(ctx):
    """The compiled allreduce_async_ takes the common arguments itself and
    hands the rest (a str op, no name, bad arguments) to the general path:
    every form gives the same results and errors; synchronize and poll work
    on other handles too; a handle dropped before its tensor ran keeps the
    tensor alive until it has."""
    import weakref

    n = ctx.size
    x = np.full(5, ctx.rank + 1.0, dtype=np.float32)
    y = np.full(5, ctx.rank + 1.0, dtype=np.float32)
    z = np.full(5, ctx.rank + 1.0, dtype=np.float32)
    u = np.full(5, ctx.rank + 1.0, dtype=np.float32)
    handles = [
        ringcc.allreduce_async_(x, "max", name="args/str-op"),  # general path
        ringcc.allreduce_async_(y, ringcc.Max, name="args/positional-op"),
        ringcc.allreduce_async_(z, name="args/int-scale", prescale_factor=2, postscale_factor=0.25),
        ringcc.allreduce_async_(u, ringcc.Sum),  # unnamed: issue order
    ]
    got = [finish(h, f"args/{i}") for i, h in enumerate(handles)]
    expect(
        got[0] is x and got[1] is y and got[2] is z and got[3] is u,
        "every allreduce_async_ form returns the input array",
    )
    check_equal(x, np.full(5, float(n), dtype=np.float32), "str op 'max'")
    check_equal(y, np.full(5, float(n), dtype=np.float32), "positional ringcc.Max")
    check_equal(z, np.full(5, n * (n + 1) / 2 * 2 * 0.25, dtype=np.float32), "int prescale_factor")
    check_equal(u, np.full(5, n * (n + 1) / 2, dtype=np.float32), "unnamed allreduce_async_")
    expect_error(
        ringcc.InvalidArgumentError,
        ["unknown reduction"],
        lambda: ringcc.allreduce_async_(x, True, name="args/bool-op"),
        "op=True",
    )
    expect_error(
        ringcc.InvalidArgumentError,
        ["unknown reduction"],
        lambda: ringcc.allreduce_async_(x, 9, name="args/op-9"),
        "op=9",
    )
    expect_error(TypeError, ["colour"], lambda: ringcc.allreduce_async_(x, name="args/kw", colour=1), "unknown keyword")
    expect_error(TypeError, ["positional"], lambda: ringcc.allreduce_async_(x, 0, "args/pos"), "name given by position")
    expect_error(TypeError, ["op"], lambda: ringcc.allreduce_async_(x, 0, op=0, name="args/twice"), "op given twice")
    expect_error(TypeError, ["cannot be created directly"], lambda: ringcc.Handle(), "ringcc.Handle()")
    expect_error(TypeError, ["str"], lambda: ringcc.synchronize(handles[0], "soon"), "timeout='soon'")
    expect_error(TypeError, ["handle"], lambda: ringcc.synchronize(), "synchronize()")
    duck = _DuckHandle()
    expect(
        ringcc.synchronize(duck, 3) == "duck result" and duck.timeouts == [3],
        f"synchronize(other handle) calls its wait(timeout): {duck.timeouts}",
    )
    expect(ringcc.poll(duck) == "duck done", "poll(other handle) calls its done()")
    expect("done" in repr(handles[0]), f"repr of a finished handle: {handles[0]!r}")

    # Rank 0 drops its handle while rank 1 has not enqueued the tensor yet.
    if ctx.rank == 0:
        dropped = np.full(4, 1.0, dtype=np.float32)
        alive = weakref.ref(dropped)
        ringcc.allreduce_async_(dropped, name="args/dropped")  # the handle goes at once
        del dropped
        if n > 1:
            expect(alive() is not None, "a dropped handle's pending tensor was freed before it ran")
        ringcc.barrier()
    else:
        ringcc.barrier()
        finish(ringcc.allreduce_async_(np.full(4, 1.0, dtype=np.float32), name="args/dropped"), "args/dropped")
    # The next named tensor runs after "args/dropped" on every rank; a handle
    # made after it releases what the dropped handle kept.
    finish(ringcc.allreduce_async_(np.ones(2, np.float32), name="args/after-dropped"), "args/after-dropped")
    finish(ringcc.allreduce_async_(np.ones(2, np.float32), name="args/sweep"), "args/sweep")
    if ctx.rank == 0:
        expect(alive() is None, "the dropped handle's tensor is still alive after it ran")


@CASES.case("allreduce/synchronize-timeout")
def allreduce_synchronize_timeout(ctx):
    """synchronize(h, timeout) raises TimeoutError while peers lag; the handle completes later."""
    n = ctx.size
    x = np.full(3, float(ctx.rank), dtype=np.float32)
    if ctx.rank == 0:
        handle = ringcc.allreduce_async(x, name="sync/late")
        _, seconds = expect_error(
            ringcc.TimeoutError,
            ["timeout"],
            lambda: ringcc.synchronize(handle, 0.05),
            "synchronize(handle, 0.05) while rank 1 has not enqueued",
        )
        expect(seconds < 2.0, f"synchronize(handle, 0.05) took {seconds:.2f} s")
        expect(not ringcc.poll(handle), "the handle completed although rank 1 has not enqueued")
        ringcc.barrier()
    else:
        ringcc.barrier()
        handle = ringcc.allreduce_async(x, name="sync/late")
    got = finish(handle, "sync/late")
    if got is not None:
        check_equal(got, np.full(3, n * (n - 1) / 2, dtype=np.float32), "sync/late after the timeout")


@CASES.case("allreduce/out-of-place-named")
def allreduce_out_of_place_named(ctx):
    """allreduce_async and broadcast_async by name, out of place (their
    compiled path): the result is a new array of the input's dtype and
    shape, the input is untouched, many small tensors fuse, names are reused
    with new values, a handle dropped before its wait still gets its result
    (the input kept alive), and what the compiled path does not take (`out`,
    a subclass, a read-only array) still works through the general one."""
    n, r = ctx.size, ctx.rank
    before = stats()
    for round_ in range(2):  # the second round reuses every name (response cache)
        inputs, handles = {}, {}
        for k, dt in enumerate([np.float32, np.float64, np.int32, np.int64, np.float16, np.uint8, np.int8]):
            for shape in [(), (5,), (3, 4), (0,), (2, 0, 3)]:
                key = (np.dtype(dt).name, shape)
                inputs[key] = np.full(shape, (r + 1) * (round_ + 1), dtype=dt)
        for key in [list(inputs)[i] for i in shuffled(ctx, len(inputs), salt=round_)]:
            handles[key] = ringcc.allreduce_async(inputs[key], name=f"oop/{key[0]}/{key[1]}")
        for key, handle in handles.items():
            got = finish(handle, f"oop/{key}")
            x = inputs[key]
            if got is None:
                continue
            expect(isinstance(got, np.ndarray) and got is not x, f"oop/{key}: a new array")
            expect(
                got.dtype == x.dtype and got.shape == x.shape,
                f"oop/{key}: dtype/shape {got.dtype}{got.shape} for {x.dtype}{x.shape}",
            )
            want = (round_ + 1) * n * (n + 1) // 2
            check_equal(got, np.full(x.shape, want, dtype=x.dtype), f"oop/{key} round {round_}")
            check_equal(x, np.full(x.shape, (r + 1) * (round_ + 1), dtype=x.dtype), f"oop/{key}: input untouched")
    # Many small ones: they fuse.
    xs = [np.full(256, float(r + i), np.float32) for i in range(64)]
    hs = [
        ringcc.allreduce_async(x, name=f"oop/fuse/{i}", op=ringcc.Average, prescale_factor=2.0)
        for i, x in enumerate(xs)
    ]
    for i, h in enumerate(hs):
        got = finish(h, f"oop/fuse/{i}")
        if got is not None:
            check_equal(got, np.full(256, 2.0 * (i + (n - 1) / 2), np.float32), f"oop/fuse/{i}")
    expect(grown(before, stats(), "fused_collectives") > 0, "the small out-of-place tensors fused")
    # A handle dropped before the collective ran: the input must stay alive
    # (the engine reads it later), and the name is free again afterwards.
    h = ringcc.allreduce_async(np.full(1000, r + 1.0), name="oop/dropped")
    del h
    time.sleep(0.05)
    again = finish(ringcc.allreduce_async(np.full(1000, r + 1.0), name="oop/dropped-next"), "oop/dropped-next")
    if again is not None:
        check_equal(again, np.full(1000, n * (n + 1) / 2), "oop/dropped-next")
    # What the compiled path leaves to the general one.
    out = np.empty(6, np.float32)
    got = finish(ringcc.allreduce_async(np.ones(6, np.float32), name="oop/out", out=out), "oop/out")
    expect(got is out, "oop/out: the result is the given out")
    check_equal(out, np.full(6, n, np.float32), "oop/out")
    sub = np.full(4, r + 1.0).view(_SubArray)
    got = finish(ringcc.allreduce_async(sub, name="oop/subclass"), "oop/subclass")
    if got is not None:
        check_equal(np.asarray(got), np.full(4, n * (n + 1) / 2), "oop/subclass")
    frozen = np.full(3, r + 1.0)
    frozen.setflags(write=False)
    got = finish(ringcc.allreduce_async(frozen, name="oop/read-only"), "oop/read-only")
    if got is not None:
        check_equal(got, np.full(3, n * (n + 1) / 2), "oop/read-only input")
    expect_error(
        ringcc.InvalidArgumentError,
        ["name must be a non-empty string"],
        lambda: ringcc.allreduce_async(np.ones(4, np.float32), name=""),
        "name=''",
    )
    # Broadcast, out of place and in place.
    for root in range(n):
        src = np.full((2, 3), 10.0 * (r + 1), np.float64)
        got = finish(ringcc.broadcast_async(src, root, name=f"oop/bcast/{root}"), f"oop/bcast/{root}")
        if got is not None:
            expect(got is not src, "broadcast_async returns a new array")
            check_equal(got, np.full((2, 3), 10.0 * (root + 1)), f"oop/bcast/{root}")
            check_equal(src, np.full((2, 3), 10.0 * (r + 1)), f"oop/bcast/{root}: input untouched")
        mine = np.full(5, r, np.int32)
        got = finish(ringcc.broadcast_async_(mine, root=root, name=f"oop/bcast_/{root}"), f"oop/bcast_/{root}")
        expect(got is mine, "broadcast_async_ returns its argument")
        check_equal(mine, np.full(5, root, np.int32), f"oop/bcast_/{root}")


@CASES.case("allreduce/out-of-place-output-memory")
def allreduce_out_of_place_output_memory(ctx):
    """The outputs of the compiled out-of-place path take memory that dead
    outputs of the same size gave back: an output still referenced, or a
    view of it, keeps its memory (a later step does not write into it); a
    dead one's memory is reused; the arrays are ordinary arrays (writable,
    picklable, resizable through copies)."""
    import pickle

    n, r = ctx.size, ctx.rank
    want = n * (n + 1) // 2

    def step(tag, value, count=1024):
        xs = [np.full(count, (r + 1) * value, np.float32) for _ in range(8)]
        hs = [ringcc.allreduce_async(x, name=f"oopmem/{tag}/{i}") for i, x in enumerate(xs)]
        return [finish(h, f"oopmem/{tag}/{i}") for i, h in enumerate(hs)]

    kept = step("a", 1.0)
    views = [k[10:20] for k in step("b", 2.0)]  # the arrays die, their views live
    for round_ in range(3):
        got = step(f"c{round_}", 3.0 + round_)
        for i, g in enumerate(got):
            if g is None:
                continue
            check_equal(g, np.full(1024, want * (3.0 + round_), np.float32), f"oopmem/c{round_}/{i}")
        del got  # back to the free lists before the next round
    for i, k in enumerate(kept):
        if k is not None:
            check_equal(k, np.full(1024, want * 1.0, np.float32), f"oopmem/a/{i} kept while later steps ran")
    for i, v in enumerate(views):
        check_equal(v, np.full(10, want * 2.0, np.float32), f"oopmem/b/{i}: a view kept while later steps ran")
    # Dead outputs wait for reuse: in the free lists, or kept under their name.
    waiting = ringcc._core._pooled_output_bytes() + ringcc._core._named_output_bytes()
    expect(waiting >= 8 * 4096, f"the last step's dead outputs wait for reuse: {waiting} bytes")
    g = kept[0]
    if g is not None:
        expect(g.flags.writeable and g.flags.c_contiguous and g.flags.aligned, f"oopmem: flags {g.flags}")
        g += 1
        check_equal(pickle.loads(pickle.dumps(g)), np.full(1024, want + 1.0, np.float32), "oopmem: pickled")
        grown = np.resize(g, 2048)
        check_equal(grown[:1024], g, "oopmem: np.resize")


@CASES.case("allreduce/out-of-place-output-by-name")
def allreduce_out_of_place_output_by_name(ctx):
    """A named out-of-place call gets the array its name's last call
    returned when nothing refers to that array any more; an array still
    held (directly, through a view, a weak reference or a buffer export)
    or changed in shape, dtype or flags is left as it is and a new one
    made; what is kept by name stays bounded."""
    import weakref

    n, r = ctx.size, ctx.rank
    want = n * (n + 1) // 2
    names = [f"oopname/{i}" for i in range(4)]

    def step(value, tag="oopname"):
        xs = [np.full(256, (r + 1) * value, np.float32) for _ in names]
        hs = [ringcc.allreduce_async(x, name=nm) for x, nm in zip(xs, names)]
        got = [finish(h, f"{tag}/{i}") for i, h in enumerate(hs)]
        for i, g in enumerate(got):
            if g is not None:
                check_equal(g, np.full(256, want * value, np.float32), f"{tag}/{i} at {value}")
        return got

    step(1.0)  # the outputs die at once: their names keep them
    reuses = ringcc._core._named_output_reuses()
    got = step(2.0)
    expect(
        ringcc._core._named_output_reuses() - reuses == len(names),
        f"dead outputs given again: {ringcc._core._named_output_reuses() - reuses} of {len(names)}",
    )
    # Held in every way the array can be held: each must keep its values.
    held = got[0]
    view = got[1][:10]
    weak = weakref.ref(got[2])
    exported = memoryview(got[3])
    ids = [id(g) for g in got]
    del got
    reuses = ringcc._core._named_output_reuses()
    fresh = step(3.0)
    expect(ringcc._core._named_output_reuses() == reuses, "an output still held was given again")
    expect(all(id(f) != i for f, i in zip(fresh[:2], ids[:2])), "a held output came back as a new result")
    check_equal(held, np.full(256, want * 2.0, np.float32), "oopname: a held result kept its values")
    check_equal(view, np.full(10, want * 2.0, np.float32), "oopname: a view kept its values")
    if weak() is not None:
        check_equal(weak(), np.full(256, want * 2.0, np.float32), "oopname: a weakly held result kept its values")
    check_equal(np.asarray(exported), np.full(256, want * 2.0, np.float32), "oopname: an exported buffer")
    del held, view, exported, fresh
    # Changed in place by its user, then dropped: not what the next call wants.
    got = step(4.0)
    got[0].shape = (16, 16)
    got[1].dtype = np.int32
    got[2].flags.writeable = False
    del got
    reuses = ringcc._core._named_output_reuses()
    got = step(5.0)
    expect(
        ringcc._core._named_output_reuses() - reuses == 1,
        f"only the unchanged output is given again: {ringcc._core._named_output_reuses() - reuses}",
    )
    for g in got:
        if g is not None:
            expect(g.shape == (256,) and g.dtype == np.float32 and g.flags.writeable, f"oopname: {g.shape} {g.dtype}")
    del got
    # Names new every step fill what is kept only up to its bound.
    for k in range(600):
        x = np.full(16384, float(r), np.float32)  # 64 KiB
        finish(ringcc.allreduce_async(x, name=f"oopname/unique/{k}"), f"oopname/unique/{k}")
    kept = ringcc._core._named_output_bytes()
    expect(kept <= 32 << 20, f"outputs kept by name: {kept} bytes")


@CASES.case("allreduce/mixed-dtypes-and-ops")
def allreduce_mixed(ctx):
    """Every dtype with every reduction (and scaled variants), all enqueued in one burst."""
    specs = []
    for dtype_name in DTYPES:
        dt = dtype_or_none(dtype_name)
        if dt is None:
            ctx.note(f"{dtype_name} skipped: ml_dtypes is not installed")
            continue
        for op in OPS:
            for copy in range(2):  # two of a kind, so that some of them can fuse
                specs.append((dtype_name, dt, op, 1.0, 1.0, copy))
        specs.append((dtype_name, dt, "Sum", 0.5, 3.0, 0))
        specs.append((dtype_name, dt, "Average", 2.0, 0.5, 0))
    inputs, handles = {}, {}
    for k, (dtype_name, dt, op, pre, post, copy) in enumerate(specs):
        count = 7 + 13 * k % 90
        inputs[k] = [make_input(ctx, r, dt, count, value_kind(op), salt=k) for r in range(ctx.size)]
    for k in shuffled(ctx, len(specs)):
        dtype_name, dt, op, pre, post, copy = specs[k]
        name = f"mixed/{dtype_name}/{op}/pre={pre:g},post={post:g}/{copy}"
        handles[k] = ringcc.allreduce_async(
            inputs[k][ctx.rank], getattr(ringcc, op), name=name, **scale_kwargs(pre, post)
        )
    for k in shuffled(ctx, len(specs), salt=1):
        dtype_name, dt, op, pre, post, copy = specs[k]
        name = f"mixed/{dtype_name}/{op}/pre={pre:g},post={post:g}/{copy}"
        check_allreduced(finish(handles[k], name), inputs[k], op, name, pre, post)


@CASES.case("allreduce/fusion")
def allreduce_fusion(ctx):
    """64 allreduces of 1 KiB made ready together are fused up to the fusion threshold.

    Rank 0 enqueues them first; once it has, the other ranks enqueue theirs
    in one burst, so that they become ready in one or two cycles."""
    n = ctx.size
    count, elements = 64, 256
    threshold = fusion_threshold()
    per_batch = threshold // (elements * 4)
    values = [np.full(elements, i + ctx.rank, dtype=np.float32) for i in range(count)]
    before = stats()
    if ctx.rank == 0:
        handles = {i: ringcc.allreduce_async_(values[i], name=f"fusion/{i}") for i in range(count)}
        ringcc.barrier()
    else:
        ringcc.barrier()
        handles = {i: ringcc.allreduce_async_(values[i], name=f"fusion/{i}") for i in shuffled(ctx, count)}
    for i in range(count):
        got = finish(handles[i], f"fusion/{i}")
        if got is not None:
            check_equal(got, np.full(elements, n * i + n * (n - 1) / 2, dtype=np.float32), f"fusion/{i}")
    after = stats()
    fused = grown(before, after, "fused_collectives")
    ctx.note(f"fused_collectives=+{fused}")
    ctx.note(f"threshold={threshold}")
    expect(grown(before, after, "tensors") == count, f"tensors grew by {grown(before, after, 'tensors')}")
    if per_batch >= 2:
        expect(fused >= 1, f"none of {count} tensors made ready together was fused (threshold {threshold} B)")
    # At most per_batch tensors fit one fused collective.
    if 2 <= per_batch <= count // 4:
        expect(
            fused >= count // per_batch // 2,
            f"{fused} fused collectives for {count} tensors of {elements * 4} B under a {threshold} B threshold",
        )


@CASES.case("allreduce/larger-than-fusion-threshold")
def allreduce_larger_than_threshold(ctx):
    """A tensor larger than the fusion threshold, between small ones: it runs on its own, the
    small ones still fuse (checked on rank 0's timeline), and every result is right."""
    n = ctx.size
    threshold = fusion_threshold()
    big_count = threshold // 4 + 3
    pattern = (np.arange(big_count, dtype=np.int32) % 251).astype(np.float32)
    big = pattern + ctx.rank
    want_big = pattern * n + n * (n - 1) / 2
    small = [np.full(100, i + ctx.rank, dtype=np.float32) for i in range(12)]
    # Not while RINGCC_TIMELINE records: starting another timeline would end that file.
    record = not env_timeline()
    directory = tempfile.mkdtemp(prefix="ringcc-timeline-") if record and ctx.rank == 0 else None
    path = os.path.join(directory, "timeline.json") if directory else os.devnull
    try:
        if record:
            ringcc.start_timeline(path)
        order = [
            "small/0",
            "small/1",
            "small/2",
            "small/3",
            "small/4",
            "small/5",
            "big",
            "small/6",
            "small/7",
            "small/8",
            "small/9",
            "small/10",
            "small/11",
        ]
        handles = {}
        for name in order:
            x = big if name == "big" else small[int(name.split("/")[1])]
            handles[name] = ringcc.allreduce_async_(x, name=f"threshold/{name}")
        for name in order:
            got = finish(handles[name], f"threshold/{name}")
            if got is None:
                continue
            if name == "big":
                check_equal(got, want_big, f"threshold/big ({big_count} float32, threshold {threshold} B)")
            else:
                i = int(name.split("/")[1])
                check_equal(got, np.full(100, n * i + n * (n - 1) / 2, dtype=np.float32), f"threshold/{name}")
        if record:
            ringcc.stop_timeline()
        if directory:
            events = read_timeline(path)
            if events is not None:
                streams = timeline_streams(events)
                big_events = streams.get("threshold/big", [])
                runs = [e for e in big_events if e["name"] == "ALLREDUCE"]
                expect(
                    len(runs) == 1 and runs[0]["args"].get("tensors") == 1,
                    f"threshold/big should run alone in one ALLREDUCE: {big_events}",
                )
                expect(
                    not any(e["name"].startswith("MEMCPY") for e in big_events),
                    f"threshold/big went through the fusion buffer: {big_events}",
                )
                batches = fused_batches(streams)
                expect(
                    any(all(nm.startswith("threshold/small/") for nm in names) for names in batches.values()),
                    f"the small tensors around threshold/big were not fused: {sorted(batches.values())}",
                )
                for (fusion, _), names in batches.items():
                    expect("threshold/big" not in names, f"threshold/big was fused with {names}")
                    for event in streams[names[0]]:
                        if event["name"] == "ALLREDUCE" and event["args"].get("fusion") == fusion:
                            expect(
                                event["args"].get("bytes", 0) <= threshold,
                                f"a fused batch of {event['args'].get('bytes')} B exceeds the threshold "
                                f"{threshold} B: {names}",
                            )
    finally:
        if directory:
            shutil.rmtree(directory, ignore_errors=True)


@CASES.case("allreduce/10000-small-tensors")
def allreduce_10000(ctx):
    """10,000 small named tensors, enqueued in a different order on every rank."""
    n = ctx.size
    count = 10_000
    start = time.monotonic()
    values = [np.full(4, (i % 97) + ctx.rank, dtype=np.float32) for i in range(count)]
    handles: list[object | None] = [None] * count
    for i in shuffled(ctx, count):
        handles[i] = ringcc.allreduce_async_(values[i], name=f"many/{i}")
    wrong = []
    for i in range(count):
        got = finish(handles[i], f"many/{i}")
        if got is not None and not np.all(got == n * (i % 97) + n * (n - 1) / 2):
            wrong.append(i)
    seconds = time.monotonic() - start
    ctx.note(f"seconds={seconds:.3f}")
    expect(not wrong, f"{len(wrong)} of {count} tensors wrong, first {wrong[:5]}")
    expect(seconds < 30.0, f"10,000 named allreduces took {seconds:.1f} s")


# --------------------------------------------------------------------------
# The other collectives by name


def ragged_rows(r: int, i: int) -> int:
    return (r + i) % 4  # zero rows included


@CASES.case("allgather/shuffled-order")
def allgather_shuffled(ctx):
    count = 16
    inputs = {}
    for i in range(count):
        dt = np.dtype(np.int64 if i % 2 else np.float32)
        inputs[i] = [make_input(ctx, r, dt, ragged_rows(r, i) * 3, salt=i).reshape(-1, 3) for r in range(ctx.size)]
    handles, outs = {}, {}
    for i in shuffled(ctx, count):
        if i % 3 == 0:
            total = sum(x.shape[0] for x in inputs[i])
            outs[i] = np.zeros((total, 3), dtype=inputs[i][0].dtype)
            handles[i] = ringcc.allgather_async(inputs[i][ctx.rank], name=f"gather/{i}", out=outs[i])
        else:
            handles[i] = ringcc.allgather_async(inputs[i][ctx.rank], name=f"gather/{i}")
    for i in shuffled(ctx, count, salt=1):
        got = finish(handles[i], f"gather/{i}")
        if got is None:
            continue
        if i in outs:
            expect(got is outs[i], f"allgather_async(out=) of gather/{i} must return out")
        check_equal(got, np.concatenate(inputs[i], axis=0), f"gather/{i}")


@CASES.case("broadcast/shuffled-order")
def broadcast_shuffled(ctx):
    n = ctx.size
    count = 16
    dt = np.dtype(np.float64)
    handles, buffers, wants = {}, {}, {}
    for i in shuffled(ctx, count):
        root = i % n
        wants[i] = make_input(ctx, root, dt, 5 + i, salt=i).reshape(-1)
        mine = wants[i].copy() if ctx.rank == root else np.full_like(wants[i], -1.0)
        if i % 2:
            buffers[i] = mine
            handles[i] = ringcc.broadcast_async_(mine, root, name=f"bcast/{i}")
        else:
            handles[i] = ringcc.broadcast_async(mine, root=root, name=f"bcast/{i}")
    for i in shuffled(ctx, count, salt=1):
        got = finish(handles[i], f"bcast/{i}")
        if got is None:
            continue
        if i in buffers:
            expect(got is buffers[i], f"broadcast_async_ of bcast/{i} must return its argument")
        check_equal(got, wants[i], f"bcast/{i} from root {i % n}")


@CASES.case("reduce_scatter/shuffled-order")
def reduce_scatter_shuffled(ctx):
    n = ctx.size
    count = 15
    ops = ["Sum", "Max", "Average"]
    inputs, handles = {}, {}
    for i in range(count):
        op = ops[i % 3]
        rows = 2 * n + 1 + i
        inputs[i] = [
            make_input(ctx, r, np.dtype(np.float32), rows * 2, value_kind(op), salt=i).reshape(rows, 2)
            for r in range(n)
        ]
    for i in shuffled(ctx, count):
        handles[i] = ringcc.reduce_scatter_async(inputs[i][ctx.rank], getattr(ringcc, ops[i % 3]), name=f"rs/{i}")
    for i in shuffled(ctx, count, salt=1):
        got = finish(handles[i], f"rs/{i}")
        first, rows = block(inputs[i][0].shape[0], n, ctx.rank)
        check_allreduced(got, [x[first : first + rows] for x in inputs[i]], ops[i % 3], f"rs/{i} ({ops[i % 3]})")


def alltoall_case_data(ctx, i: int, with_splits: bool):
    """(my input, splits or None, expected output, expected received splits) of tensor i."""
    n, me = ctx.size, ctx.rank

    def splits_of(r):
        return [(r + 2 * j + 1 + i) % 4 for j in range(n)] if with_splits else [2] * n

    inputs = [make_input(ctx, r, np.dtype(np.int32), sum(splits_of(r)) * 2, salt=i).reshape(-1, 2) for r in range(n)]
    pieces, received = [], []
    for src in range(n):
        splits = splits_of(src)
        start = sum(splits[:me])
        pieces.append(inputs[src][start : start + splits[me]])
        received.append(splits[me])
    return inputs[me], (splits_of(me) if with_splits else None), np.concatenate(pieces, axis=0), received


@CASES.case("alltoall/shuffled-order")
def alltoall_shuffled(ctx):
    count = 12
    data = {i: alltoall_case_data(ctx, i, with_splits=i % 2 == 0) for i in range(count)}
    handles = {}
    for i in shuffled(ctx, count):
        mine, splits, _, _ = data[i]
        handles[i] = ringcc.alltoall_async(mine, splits, name=f"a2a/{i}")
    for i in shuffled(ctx, count, salt=1):
        _, splits, want, want_received = data[i]
        got = finish(handles[i], f"a2a/{i}")
        if got is None:
            continue
        if splits is None:
            check_equal(got, want, f"a2a/{i} (equal splits)")
        else:
            output, received = got
            check_equal(output, want, f"a2a/{i}")
            expect(
                list(received) == want_received, f"a2a/{i}: received splits {list(received)}, expected {want_received}"
            )


def mixed_jobs(ctx, i: int):
    """The five named collectives of round i: [(name, start(name) -> handle, expected result)]."""
    n, me = ctx.size, ctx.rank
    ar = [make_input(ctx, r, np.dtype(np.float64), 9 + i, salt=100 + i) for r in range(n)]
    ag = [make_input(ctx, r, np.dtype(np.int32), ragged_rows(r, i), salt=200 + i) for r in range(n)]
    root = (i + 1) % n
    bc = make_input(ctx, root, np.dtype(np.uint8), 33, salt=300 + i)
    bc_mine = bc.copy() if me == root else np.zeros_like(bc)
    rows = n + i
    rs = [make_input(ctx, r, np.dtype(np.int64), rows, salt=400 + i) for r in range(n)]
    first, count = block(rows, n, me)
    a2a_mine, _, a2a_want, _ = alltoall_case_data(ctx, 500 + i, with_splits=False)
    return [
        (f"mix/ar/{i}", lambda name: ringcc.allreduce_async(ar[me], name=name), ("Sum", ar)),
        (f"mix/ag/{i}", lambda name: ringcc.allgather_async(ag[me], name=name), np.concatenate(ag)),
        (f"mix/bc/{i}", lambda name: ringcc.broadcast_async_(bc_mine, root, name=name), bc),
        (
            f"mix/rs/{i}",
            lambda name: ringcc.reduce_scatter_async(rs[me], name=name),
            ("Sum", [x[first : first + count] for x in rs]),
        ),
        (f"mix/a2a/{i}", lambda name: ringcc.alltoall_async(a2a_mine, name=name), a2a_want),
    ]


@CASES.case("mixed-kinds/shuffled-order")
def mixed_kinds_shuffled(ctx):
    """All five collectives by name, interleaved, in a different order on every rank."""
    jobs = [job for i in range(6) for job in mixed_jobs(ctx, i)]
    handles = {}
    for k in shuffled(ctx, len(jobs)):
        name, start, _ = jobs[k]
        handles[k] = start(name)
    for k in shuffled(ctx, len(jobs), salt=1):
        name, _, want = jobs[k]
        got = finish(handles[k], name)
        if got is None:
            continue
        if isinstance(want, tuple):  # a reduction: (op, every rank's input)
            check_reduction(got, want[1], want[0], name)
        else:
            check_equal(got, want, name)


# --------------------------------------------------------------------------
# Errors


def still_works(ctx, name: str) -> None:
    """The same name, used consistently, still works after an error."""
    n = ctx.size
    got = finish(ringcc.allreduce_async(np.full(4, ctx.rank + 1, dtype=np.float32), name=name), f"{name} again")
    if got is not None:
        check_equal(got, np.full(4, n * (n + 1) / 2, dtype=np.float32), f"{name} used again after the error")


def expect_mismatch(ctx, name: str, start, fragments, others: dict | None = None) -> None:
    """start() enqueues `name` (described differently on some rank); every rank must get
    MismatchError naming the tensor and the fragments within MISMATCH_SECONDS, while the
    tensors in `others` ({name: (handle, check)}) complete normally."""
    t0 = time.monotonic()
    handle = start()
    error, _ = expect_error(
        ringcc.MismatchError, [name, *fragments], lambda: ringcc.synchronize(handle, WAIT_S), f"{name}"
    )
    seconds = time.monotonic() - t0
    expect(seconds < MISMATCH_SECONDS, f"{name}: the MismatchError took {seconds:.2f} s (limit {MISMATCH_SECONDS:g} s)")
    expect(error is None or isinstance(error, ValueError), "MismatchError is a ValueError")
    for other, (other_handle, check) in (others or {}).items():
        got = finish(other_handle, f"{other} (enqueued with the mismatched {name})")
        if got is not None:
            check(got)


@CASES.case("mismatch/shape")
def mismatch_shape(ctx):
    n = ctx.size
    length = 4 if ctx.rank == 0 else 5
    good = [np.full(6, ctx.rank + k, dtype=np.float32) for k in range(2)]
    others = {}

    def start():
        h0 = ringcc.allreduce_async(good[0], name="mismatch/shape/before")
        handle = ringcc.allreduce_async(np.ones(length, dtype=np.float32), name="mismatch/shape")
        h1 = ringcc.allreduce_async(good[1], name="mismatch/shape/after")
        for k, h in enumerate((h0, h1)):
            want = np.full(6, n * k + n * (n - 1) / 2, dtype=np.float32)
            name = f"mismatch/shape/{['before', 'after'][k]}"
            others[name] = (h, lambda got, want=want, name=name: check_equal(got, want, name))
        return handle

    expect_mismatch(ctx, "mismatch/shape", start, ["shape", "rank 0: [4]", "rank 1: [5]"], others)
    still_works(ctx, "mismatch/shape")


@CASES.case("mismatch/shape-same-count")
def mismatch_shape_same_count(ctx):
    # As many elements on every rank, in different shapes: the named path
    # compares shapes (allgather and alltoall: after the first dimension).
    n = ctx.size

    def swapped(a, b):
        return lambda r: a if r % 2 == 0 else b

    def dims(shape):
        return "[" + ", ".join(str(d) for d in shape) + "]"

    same, trailing = "disagree on the shape (", "shape after the first dimension"
    calls = [
        ("allreduce", swapped((2, 3), (3, 2)), same, lambda x, name: ringcc.allreduce_async(x, name=name)),
        ("allreduce_", swapped((2, 3), (3, 2)), same, lambda x, name: ringcc.allreduce_async_(x, name=name)),
        ("broadcast", swapped((2, 3), (3, 2)), same, lambda x, name: ringcc.broadcast_async(x, 0, name=name)),
        (
            "reduce_scatter",
            swapped((2 * n, 3), (3, 2 * n)),
            same,
            lambda x, name: ringcc.reduce_scatter_async(x, name=name),
        ),
        ("allgather", swapped((2, 6), (2, 3, 2)), trailing, lambda x, name: ringcc.allgather_async(x, name=name)),
        ("alltoall", swapped((n, 6), (n, 3, 2)), trailing, lambda x, name: ringcc.alltoall_async(x, name=name)),
    ]
    for what, shape_of, phrase, start in calls:
        name = f"mismatch/shape-same-count/{what}"
        x = np.ones(shape_of(ctx.rank), dtype=np.float32)
        listed = [f"rank {r}: {dims(shape_of(r))}" for r in range(n)]
        expect_mismatch(ctx, name, lambda: start(x, name), [phrase, *listed])
    still_works(ctx, "mismatch/shape-same-count")


@CASES.case("mismatch/dtype")
def mismatch_dtype(ctx):
    dt = np.float64 if ctx.rank == 0 else np.float32
    expect_mismatch(
        ctx,
        "mismatch/dtype",
        lambda: ringcc.allreduce_async(np.ones(8, dtype=dt), name="mismatch/dtype"),
        ["dtype", "rank 0: float64", "rank 1: float32"],
    )
    still_works(ctx, "mismatch/dtype")


@CASES.case("mismatch/reduction")
def mismatch_reduction(ctx):
    op = ringcc.Max if ctx.rank == ctx.size - 1 else ringcc.Sum
    expect_mismatch(
        ctx,
        "mismatch/op",
        lambda: ringcc.allreduce_async(np.ones(8, dtype=np.int32), op, name="mismatch/op"),
        ["reduction"],
    )
    still_works(ctx, "mismatch/op")


@CASES.case("mismatch/collective")
def mismatch_collective(ctx):
    x = np.ones(8, dtype=np.float32)

    def start():
        if ctx.rank == 0:
            return ringcc.broadcast_async(x, 0, name="mismatch/kind")
        return ringcc.allreduce_async(x, name="mismatch/kind")

    expect_mismatch(ctx, "mismatch/kind", start, ["collective"])
    still_works(ctx, "mismatch/kind")


@CASES.case("mismatch/broadcast-root")
def mismatch_root(ctx):
    root = 0 if ctx.rank == 0 else 1
    expect_mismatch(
        ctx,
        "mismatch/root",
        lambda: ringcc.broadcast_async(np.ones(8, dtype=np.float32), root, name="mismatch/root"),
        ["root"],
    )


@CASES.case("mismatch/cached-name")
def mismatch_cached_name(ctx):
    """A name the response cache knows, then described differently by one rank."""
    for _ in range(3):
        finish(ringcc.allreduce_async(np.ones((2, 3), dtype=np.float32), name="mismatch/cached"), "mismatch/cached")
    shape = (3, 2) if ctx.rank == ctx.size - 1 else (2, 3)
    expect_mismatch(
        ctx,
        "mismatch/cached",
        lambda: ringcc.allreduce_async(np.ones(shape, dtype=np.float32), name="mismatch/cached"),
        ["shape", "[2, 3]", "[3, 2]"],
    )
    still_works(ctx, "mismatch/cached-then-agreed")


@CASES.case("duplicate-name/in-flight")
def duplicate_in_flight(ctx):
    """A name enqueued twice on one rank before it completed: the second call raises
    InvalidArgumentError at once (as Horovod's enqueue does), whatever the engine did meanwhile;
    the first goes on. For every kind of named collective, each rank in turn enqueues its two
    calls while the others have not enqueued the name yet (so the first cannot have completed)."""
    n = ctx.size
    x = np.full(4, ctx.rank + 1.0, dtype=np.float32)
    starts = {
        "allreduce": lambda name: ringcc.allreduce_async(x, name=name),
        "allgather": lambda name: ringcc.allgather_async(x, name=name),
        "broadcast": lambda name: ringcc.broadcast_async(x, 0, name=name),
        "reduce_scatter": lambda name: ringcc.reduce_scatter_async(np.ones(2 * n, np.float32), name=name),
        "alltoall": lambda name: ringcc.alltoall_async(np.ones(2 * n, np.float32), name=name),
    }
    for kind, start in starts.items():
        for early in range(n):
            name = f"dup/{kind}.{early}"
            if ctx.rank == early:
                first = start(name)
                error, seconds = expect_error(
                    ringcc.InvalidArgumentError, [name, "already in flight"], lambda: start(name), f"the second {name}"
                )
                expect(seconds < MISMATCH_SECONDS, f"{name}: the duplicate's error took {seconds:.2f} s")
                expect(error is None or isinstance(error, ValueError), "InvalidArgumentError is a ValueError")
                ringcc.barrier()
            else:
                ringcc.barrier()
                first = start(name)
            got = finish(first, f"the first {name}")
            if got is not None and kind == "allreduce":
                check_equal(got, np.full(4, n * (n + 1) / 2, dtype=np.float32), f"the first {name}")
    # A name is free again as soon as its collective is seen to be done, however that is seen.
    for i in range(100):
        h = ringcc.allreduce_async(x, name="dup/reuse")
        if i % 2:
            while not h.done():
                pass
        else:
            ringcc.synchronize(h, WAIT_S)
        got = h.wait(WAIT_S)
        if not check_equal(got, np.full(4, n * (n + 1) / 2, dtype=np.float32), f"dup/reuse round {i}"):
            break
    still_works(ctx, "dup/one")


@CASES.case("name/invalid")
def name_invalid(ctx):
    x = np.ones(2, dtype=np.float32)
    expect_error(ringcc.InvalidArgumentError, ["name"], lambda: ringcc.allreduce_async(x, name=""), "name=''")
    expect_error(ringcc.InvalidArgumentError, ["name"], lambda: ringcc.allgather_async(x, name=7), "name=7")


# --------------------------------------------------------------------------
# join


def join_batches(rank: int) -> int:
    return 2 + 2 * rank  # every rank a different number; the last rank has the most


@CASES.case("join/uneven-batches")
def join_uneven(ctx):
    """Ranks run out of batches at different times and join; the others' allreduces go on
    with zeros from the joined ranks, their allgathers fail naming the joined ranks (as in
    Horovod: a joined rank has no rows to give), and join() returns the last rank to join."""
    n = ctx.size
    # The third gradient makes the fused allreduce longer than one shared-memory phase,
    # so the joined ranks' zeros also travel the piecewise path.
    lengths = (10, 10, 40_000)
    start = time.monotonic()
    for b in range(join_batches(ctx.rank)):
        active = [r for r in range(n) if b < join_batches(r)]
        handles = []
        for k in shuffled(ctx, 3, salt=b):
            x = np.arange(lengths[k], dtype=np.float32) + ctx.rank + b + k
            handles.append((k, ringcc.allreduce_async(x, name=f"join/batch{b}/grad{k}")))
        rows = np.full((ctx.rank + 1, 2), 100 * b + ctx.rank, dtype=np.int64)
        gather = ringcc.allgather_async(rows, name=f"join/batch{b}/rows")
        for k, handle in handles:
            got = finish(handle, f"join/batch{b}/grad{k}")
            want = sum(np.arange(lengths[k], dtype=np.float32) + r + b + k for r in active)
            if got is not None:
                check_equal(got, want.astype(np.float32), f"join/batch{b}/grad{k} (ranks {active} active)")
        joined = [r for r in range(n) if r not in active]
        if joined:
            what = f"join/batch{b}/rows (ranks {joined} joined)"
            fragments = [f"tensor 'join/batch{b}/rows': allgather cannot run while rank(s) {joined} have joined"]
            expect_error(ringcc.MismatchError, fragments, lambda: ringcc.synchronize(gather, WAIT_S), what)
        elif (got := finish(gather, f"join/batch{b}/rows")) is not None:
            want = np.concatenate([np.full((r + 1, 2), 100 * b + r, dtype=np.int64) for r in range(n)])
            check_equal(got, want, f"join/batch{b}/rows (every rank active)")
    last = ringcc.join()
    expect(last == n - 1, f"join() returned {last}, expected the last rank to join, {n - 1}")
    expect(time.monotonic() - start < WAIT_S, "join/uneven-batches took too long")
    # After the join everything is back to normal.
    got = finish(ringcc.allreduce_async(np.full(3, ctx.rank + 1, dtype=np.int32), name="join/after"), "join/after")
    if got is not None:
        check_equal(got, np.full(3, n * (n + 1) // 2, dtype=np.int32), "join/after")


@CASES.case("join/nothing-pending")
def join_nothing_pending(ctx):
    """Every rank joins with nothing to do; all get the same valid rank back, twice in a row."""
    for attempt in range(2):
        last = ringcc.join()
        everyone = ringcc.allgather(np.array([last], dtype=np.int64))
        expect(0 <= last < ctx.size, f"join() returned {last}")
        expect(
            len(set(everyone.tolist())) == 1, f"join #{attempt + 1}: the ranks disagree on the last rank: {everyone}"
        )


# --------------------------------------------------------------------------
# timeline


@CASES.case("timeline/start-stop")
def timeline_start_stop(ctx):
    """start_timeline/stop_timeline: rank 0 writes a JSON array with one stream per tensor
    name (a process_name event), the engine's phases, and the fusion of allreduces."""
    n = ctx.size
    if env_timeline():
        raise Skip("RINGCC_TIMELINE is recording in this group")
    directory = tempfile.mkdtemp(prefix="ringcc-timeline-") if ctx.rank == 0 else None
    path = os.path.join(directory, "timeline.json") if directory else os.path.join(tempfile.gettempdir(), "unused")
    try:
        ringcc.start_timeline(path)
        names = [f"tl/grad.{i}" for i in range(12)]
        values = [np.full(64, i + ctx.rank, dtype=np.float32) for i in range(len(names))]
        if ctx.rank == 0:
            handles = [ringcc.allreduce_async_(v, name=nm) for v, nm in zip(values, names)]
            ringcc.barrier()
        else:
            ringcc.barrier()
            handles = [ringcc.allreduce_async_(v, name=nm) for v, nm in zip(values, names)]
        gather = ringcc.allgather_async(np.full((1, 2), ctx.rank, dtype=np.int32), name="tl/gather")
        bcast = ringcc.broadcast_async(np.full(3, ctx.rank, dtype=np.int32), 0, name="tl/bcast")
        for i, h in enumerate(handles):
            got = finish(h, names[i])
            if got is not None:
                check_equal(got, np.full(64, n * i + n * (n - 1) / 2, dtype=np.float32), names[i])
        finish(gather, "tl/gather")
        finish(bcast, "tl/bcast")
        ringcc.stop_timeline()
        # Not recorded: the timeline has stopped.
        finish(ringcc.allreduce_async(np.ones(2, dtype=np.float32), name="tl/after-stop"), "tl/after-stop")
        if directory is None:
            return
        events = read_timeline(path)
        if events is None:
            return
        streams = timeline_streams(events)
        expected = set(names) | {"tl/gather", "tl/bcast"}
        expect(set(streams) == expected, f"timeline streams {sorted(streams)}, expected {sorted(expected)}")
        kinds = {**{nm: "ALLREDUCE" for nm in names}, "tl/gather": "ALLGATHER", "tl/bcast": "BROADCAST"}
        for name, phase in kinds.items():
            phases = [e["name"] for e in streams.get(name, [])]
            expect("NEGOTIATING" in phases and phase in phases, f"timeline of {name}: phases {phases}")
        batches = fused_batches(streams)
        expect(batches, "no fused allreduce on the timeline (12 allreduces of 256 B made ready together)")
        for (fusion, ts), members in batches.items():
            event = next(e for e in streams[members[0]] if e["name"] == "ALLREDUCE" and e["ts"] == ts)
            expect(
                event["args"]["tensors"] == len(members),
                f"fused batch {fusion}: args say {event['args']['tensors']} tensors, {len(members)} streams show it",
            )
            # Over shared memory the batch is reduced in place; elsewhere it is
            # copied into and out of the fusion buffer.
            in_place = ringcc.transport_name() == "shm"
            for member in members:
                phases = [e["name"] for e in streams[member]]
                copies = "MEMCPY_IN_FUSION_BUFFER" in phases and "MEMCPY_OUT_FUSION_BUFFER" in phases
                expect(copies != in_place, f"fused {member} over {ringcc.transport_name()}: phases {phases}")
    finally:
        if directory:
            shutil.rmtree(directory, ignore_errors=True)


@CASES.case("timeline/bad-path")
def timeline_bad_path(ctx):
    if env_timeline():
        raise Skip("RINGCC_TIMELINE is recording in this group")
    path = os.path.join(tempfile.gettempdir(), "ringcc-no-such-directory", "sub", "timeline.json")
    if ctx.rank == 0:
        expect_error(
            ringcc.InvalidArgumentError,
            ["timeline", path],
            lambda: ringcc.start_timeline(path),
            "start_timeline into a missing directory",
        )
    else:
        ringcc.start_timeline(path)  # only rank 0 writes
    ringcc.stop_timeline()
    still_works(ctx, "timeline/after-bad-path")


@CASES.case("timeline/restart", tags=("timeline-restart",))
def timeline_restart(ctx):
    """start_timeline() while RINGCC_TIMELINE records: the first file is closed as a
    complete JSON array, and the new one records what follows."""
    first = env_timeline()
    if not first:
        raise Skip("needs RINGCC_TIMELINE")
    second = first + ".restarted.json"
    still_works(ctx, "restart/before")
    ringcc.start_timeline(second)
    still_works(ctx, "restart/after")
    ringcc.stop_timeline()
    if ctx.rank != 0:
        return
    for path, name in ((first, "restart/before"), (second, "restart/after")):
        events = read_timeline(path)
        if events is not None:
            streams = timeline_streams(events)
            expect(name in streams, f"{path}: no stream for {name}: {sorted(streams)}")


# --------------------------------------------------------------------------
# Settings


@CASES.case("engine/cycle-time")
def engine_cycle_time(ctx):
    """While a tensor that rank 0 enqueued waits for the others to enqueue it, every engine
    cycles once per cycle time: about WAIT_S / cycle time cycles (noted), no more."""
    wait_s = 0.4
    n = ctx.size
    x = np.full(4, ctx.rank + 1, np.float32)
    ringcc.barrier()
    before = stats()["cycles"]
    held = ringcc.allreduce_async(x, name="cycle/held") if ctx.rank == 0 else None
    time.sleep(wait_s)
    cycles = stats()["cycles"] - before
    if held is None:
        held = ringcc.allreduce_async(x, name="cycle/held")
    got = finish(held, "cycle/held")
    if got is not None:
        check_equal(got, np.full(4, n * (n + 1) / 2, np.float32), "cycle/held")
    ctx.note(f"waiting_cycles={cycles}")
    ms = cycle_time_ms()
    expect(cycles <= 1.25 * wait_s * 1000.0 / ms + 5, f"{cycles} cycles in {wait_s} s with a {ms:g} ms cycle time")
    expect(cycles >= 1, f"no cycle in {wait_s} s")


@CASES.case("engine/rests-while-nothing-is-pending")
def engine_rests(ctx):
    """With nothing pending on any rank, the engines do not meet every cycle time: at most once
    per 10 ms (between a training step's rounds, meeting would take the CPUs for nothing). A
    call after the rest wakes its rank's engine and completes at once."""
    still_works(ctx, "rest/before")
    time.sleep(0.05)
    before = stats()["cycles"]
    idle_s = 0.4
    time.sleep(idle_s)
    cycles = stats()["cycles"] - before
    ctx.note(f"idle_cycles={cycles}")
    period_ms = max(10.0, cycle_time_ms())
    expect(cycles <= 1.25 * idle_s * 1000.0 / period_ms + 3, f"{cycles} cycles in {idle_s} s with nothing pending")
    ringcc.barrier()
    t = time.monotonic()
    x = np.full(4, ctx.rank + 1, np.float32)
    h = ringcc.allreduce_async(x, name="rest/after")
    time.sleep(0.2)  # not waiting on it: the call alone must start the cycle
    expect(h.done(), "the call after the rest was not done 0.2 s later without a wait")
    finish(h, "rest/after")
    took = time.monotonic() - t
    expect(took < 0.5, f"a call after the rest took {took:.3f} s")


# --------------------------------------------------------------------------
# A caller that blocks starts the cycle it needs (a group started with a cycle
# time far longer than these cases may take: RINGCC_CYCLE_TIME_MS=2000)


def engine_round(ctx, buffer, count: int, prefix: str):
    """Enqueues `count` named in-place allreduces of views of `buffer`; returns the handles."""
    per = buffer.size // count
    return [ringcc.allreduce_async_(buffer[i * per : (i + 1) * per], name=f"{prefix}/{i}") for i in range(count)]


@CASES.case("nudge/skewed-ranks", tags=("slow-cycle",), min_size=2)
def nudge_skewed_ranks(ctx):
    """Ranks enqueue the same 300 tensors 0.2 s apart and wait on them: each completes once the
    last rank has enqueued, without waiting for the next cycle period (the engines of ranks
    that announced their tensors early meet the late rank's engine at once)."""
    skew_s, count = 0.2, 300
    base = np.arange(count * 16, dtype=np.float32)
    for round_ in range(3):
        ringcc.barrier()
        time.sleep(skew_s * ctx.rank)
        x = base + ctx.rank
        handles = engine_round(ctx, x, count, "nudge/skewed")
        enqueued = time.monotonic()
        for i, handle in enumerate(handles):
            finish(handle, f"nudge/skewed/{i} (round {round_})")
        waited = time.monotonic() - enqueued
        limit = skew_s * (ctx.size - 1 - ctx.rank) + 0.8
        expect(
            waited < limit,
            f"round {round_}: waited {waited:.2f} s after enqueuing (limit {limit:.2f} s, "
            f"cycle time {cycle_time_ms():g} ms)",
        )
        check_equal(x, base * ctx.size + ctx.size * (ctx.size - 1) / 2, f"nudge/skewed results (round {round_})")


@CASES.case("nudge/stale-message", tags=("slow-cycle",), min_size=2)
def nudge_stale_message(ctx):
    """Rank 0's engine waits in a cycle that announced only A while rank 0 has enqueued nothing
    else yet; the others enqueue A and B 0.2 s later and wait on B. The cycle runs A alone;
    rank 0 then enqueues B. Engines whose callers still wait, and that announced something new
    in that cycle, start the next one at once, so B completes without waiting for the next
    cycle period."""
    limit = 0.8
    for round_ in range(3):
        ringcc.barrier()
        x = {name: np.full(5, float(ctx.rank + i), dtype=np.float32) for i, name in enumerate("AB")}
        if ctx.rank == 0:
            finish(ringcc.allreduce_async_(x["A"], name="nudge/stale/A"), f"nudge/stale/A (round {round_})")
            t0 = time.monotonic()
            finish(ringcc.allreduce_async_(x["B"], name="nudge/stale/B"), f"nudge/stale/B (round {round_})")
        else:
            time.sleep(0.2)
            ha = ringcc.allreduce_async_(x["A"], name="nudge/stale/A")
            hb = ringcc.allreduce_async_(x["B"], name="nudge/stale/B")
            t0 = time.monotonic()
            finish(hb, f"nudge/stale/B (round {round_})")
            finish(ha, f"nudge/stale/A (round {round_})")
        waited = time.monotonic() - t0
        expect(waited < limit, f"round {round_}: B took {waited:.2f} s (cycle time {cycle_time_ms():g} ms)")
        n = ctx.size
        for i, name in enumerate("AB"):
            check_equal(x[name], np.full(5, n * (n - 1) / 2 + n * i, dtype=np.float32), f"nudge/stale/{name}")


@CASES.case("nudge/gil-released-while-waiting", tags=("slow-cycle",), min_size=2)
def nudge_gil_released(ctx):
    """Rank 0 waits with no time limit on a tensor the others enqueue 0.3 s later; another
    Python thread of rank 0 keeps running meanwhile (the wait lets go of the GIL)."""
    import threading

    x = np.full(3, float(ctx.rank), dtype=np.float32)
    ringcc.barrier()
    if ctx.rank == 0:
        ticks, stop = [0], threading.Event()

        def tick():
            while not stop.is_set():
                ticks[0] += 1
                time.sleep(0.001)

        ticker = threading.Thread(target=tick, daemon=True)
        handle = ringcc.allreduce_async_(x, name="nudge/gil")
        ticker.start()
        t0 = time.monotonic()
        ringcc.synchronize(handle)
        waited = time.monotonic() - t0
        stop.set()
        ticker.join(5)
        expect(ticks[0] >= 50, f"another thread ran {ticks[0]} times in the {waited:.2f} s of waiting")
    else:
        time.sleep(0.3)
        finish(ringcc.allreduce_async_(x, name="nudge/gil"), "nudge/gil")
    check_equal(x, np.full(3, ctx.size * (ctx.size - 1) / 2, dtype=np.float32), "nudge/gil")


@CASES.case("nudge/first-wait-completes-batch", tags=("slow-cycle",))
def nudge_first_wait_completes_batch(ctx):
    """When one fused collective ran a round's tensors, waiting on the first handle returns
    only once every handle of the round is done (the engine finishes a batch last to first), so
    a loop over the handles blocks once."""
    count = 1000
    x = np.ones(count * 8, dtype=np.float32)
    checked = 0
    for round_ in range(4):
        ringcc.barrier()
        before = stats()["fused_collectives"]
        handles = engine_round(ctx, x, count, "nudge/batch")
        ringcc.synchronize(handles[0], WAIT_S)
        done = sum(1 for h in handles if ringcc.poll(h))
        for i, handle in enumerate(handles):
            finish(handle, f"nudge/batch/{i} (round {round_})")
        if stats()["fused_collectives"] - before == 1:
            checked += 1
            expect(done == count, f"round {round_}: {done} of {count} handles done after the first one")
        x.fill(1.0)
    ctx.note(f"single_batch_rounds={checked}")
    expect(checked > 0, "no round ran its tensors in one fused collective")


@CASES.case("nudge/no-busy-cycles-while-stalled", tags=("slow-cycle",), min_size=2)
def nudge_no_busy_cycles(ctx):
    """Rank 0 waits on X, which the others have not enqueued; they wait on Y, which rank 0 has
    not enqueued. For 0.5 s nothing can run: the engines do not cycle back to back meanwhile
    (each cycle is a rendezvous of all engines; nothing new would come of it). Then every rank
    enqueues the other name and both complete."""
    mine, other = ("X", "Y") if ctx.rank == 0 else ("Y", "X")
    x = {name: np.full(4, float(ctx.rank), dtype=np.float32) for name in "XY"}
    for name in "XY":  # cached, as in steady-state training
        finish(ringcc.allreduce_async(x[name], name=f"nudge/withheld/{name}"), f"nudge/withheld/{name} (first)")
    ringcc.barrier()
    before = stats()["cycles"]
    first = ringcc.allreduce_async(x[mine], name=f"nudge/withheld/{mine}")
    expect_error(
        ringcc.TimeoutError,
        ["timeout"],
        lambda: ringcc.synchronize(first, 0.5),
        f"synchronize on {mine} while the other ranks withhold it",
    )
    cycles = stats()["cycles"] - before
    expect(cycles <= 4, f"{cycles} engine cycles in 0.5 s of waiting (cycle time {cycle_time_ms():g} ms)")
    second = ringcc.allreduce_async(x[other], name=f"nudge/withheld/{other}")
    want = np.full(4, ctx.size * (ctx.size - 1) / 2, dtype=np.float32)
    for name, handle in ((mine, first), (other, second)):
        got = finish(handle, f"nudge/withheld/{name}")
        if got is not None:
            check_equal(got, want, f"nudge/withheld/{name}")


# --------------------------------------------------------------------------
# Stalls (groups started with small RINGCC_STALL_CHECK_S / RINGCC_STALL_SHUTDOWN_S)


@CASES.case("stall/warning", tags=("stall",), min_size=2)
def stall_warning(ctx):
    """The last rank withholds a tensor for a while: rank 0 logs a stall warning naming it
    (checked by test_engine.py in the group's stderr), then the tensor completes."""
    n = ctx.size
    withhold_s = 2 * stall_check_s() + 0.5
    if stall_shutdown_s() and withhold_s >= stall_shutdown_s():
        raise Skip("the stall shutdown time is too short to withhold a tensor without failing it")
    x = np.full(4, ctx.rank + 1, dtype=np.float32)
    # "stall/withheld-cached" ran once before, so its second round is
    # announced through the response cache's bit: stalls are seen there too.
    finish(ringcc.allreduce_async(x, name="stall/withheld-cached"), "stall/withheld-cached")
    if ctx.rank == n - 1:
        time.sleep(withhold_s)
    handles = {name: ringcc.allreduce_async(x, name=name) for name in ("stall/withheld", "stall/withheld-cached")}
    for name, handle in handles.items():
        got = finish(handle, name, timeout=WAIT_S + withhold_s)
        if got is not None:
            check_equal(got, np.full(4, n * (n + 1) / 2, dtype=np.float32), name)


@CASES.case("stall/shutdown", tags=("stall",), min_size=2)
def stall_shutdown(ctx):
    """A tensor the last rank never enqueues fails with TimeoutError, after the stall shutdown
    time, on every rank that enqueued it; the name can be used again afterwards."""
    n = ctx.size
    limit = stall_shutdown_s()
    if limit <= 0:
        raise Skip("RINGCC_STALL_SHUTDOWN_S is not set in this group")
    # The cached name ran once before: its abandoned round is announced by
    # the response cache's bit and must fail the same way.
    finish(
        ringcc.allreduce_async(np.ones(4, dtype=np.float32), name="stall/abandoned-cached"), "stall/abandoned-cached"
    )
    if ctx.rank < n - 1:
        enqueued = time.monotonic()
        handles = {
            name: ringcc.allreduce_async(np.ones(4, dtype=np.float32), name=name)
            for name in ("stall/abandoned", "stall/abandoned-cached")
        }
        for name, handle in handles.items():
            expect_error(
                ringcc.TimeoutError, [name, f"[{n - 1}]"], lambda: ringcc.synchronize(handle, limit + WAIT_S), name
            )
            seconds = time.monotonic() - enqueued
            if name == "stall/abandoned":
                ctx.note(f"failed_after_s={seconds:.2f}")
            expect(
                limit - 0.5 <= seconds <= limit + 5.0,
                f"{name} failed after {seconds:.2f} s; the stall shutdown time is {limit:g} s",
            )
    ringcc.barrier()
    still_works(ctx, "stall/abandoned")
    still_works(ctx, "stall/abandoned-cached")


# --------------------------------------------------------------------------
# Deadlocks (groups started with a short RINGCC_TIMEOUT_S and the default
# stall shutdown time): every rank waits on names that no other rank will
# enqueue. Each wait is bounded a few seconds past RINGCC_TIMEOUT_S, so that
# an engine that does not see the deadlock fails the case quickly.

DEADLOCK_PREFIX = "deadlock: every rank waits for named collectives"


def deadlock_wait_s() -> float:
    return timeout_s() + 5.0


def expect_deadlock(ctx, call, fragments, what: str) -> None:
    """call() waits on the engine; it must raise TimeoutError saying deadlock, with every fragment,
    about RINGCC_TIMEOUT_S after the case started."""
    start = time.monotonic()
    error, _ = expect_error(ringcc.TimeoutError, [DEADLOCK_PREFIX, *fragments], call, what)
    seconds = time.monotonic() - start
    ctx.note(f"failed_after_s={seconds:.2f}")
    limit = timeout_s()
    expect(
        error is None or limit - 0.5 <= seconds <= limit + 3.0,
        f"{what} failed after {seconds:.2f} s; RINGCC_TIMEOUT_S is {limit:g} s",
    )
    if error is not None:
        expect(str(error).startswith(DEADLOCK_PREFIX), f"{what}: the message does not start with the deadlock: {error}")


def join_within(seconds: float):
    """ringcc.join(), ended by SIGALRM after `seconds` (join() takes no timeout): an engine that
    misses the deadlock fails the case instead of waiting for the stall shutdown time."""
    import signal

    class JoinBound(Exception):
        pass

    def expire(signum, frame):
        raise JoinBound(f"join() did not return within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return ringcc.join()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@CASES.case("deadlock/different-names", tags=("deadlock",), min_size=2)
def deadlock_different_names(ctx):
    """Each rank waits on a name of its own: every rank raises TimeoutError after
    RINGCC_TIMEOUT_S, listing each rank's name as enqueued on that rank only; the engine
    goes on."""
    name = f"deadlock/names/r{ctx.rank}"
    handle = ringcc.allreduce_async(np.ones(4, dtype=np.float32), name=name)
    fragments = [f"rank {r}: 'deadlock/names/r{r}' (enqueued on rank {r} only)" for r in range(ctx.size)]
    expect_deadlock(ctx, lambda: ringcc.synchronize(handle, deadlock_wait_s()), fragments, name)
    expect("noname" not in str(fragments), "no automatic name is pending")
    ringcc.barrier()
    still_works(ctx, "deadlock/names/after")


@CASES.case("deadlock/cached-names", tags=("deadlock",), min_size=2)
def deadlock_cached_names(ctx):
    """As deadlock/different-names, with names that ran before: their second round is
    announced by the response cache's bit, and the deadlock is seen there too."""
    names = [f"deadlock/cached/r{r}" for r in range(ctx.size)]
    for name in names:
        finish(ringcc.allreduce_async(np.ones(4, dtype=np.float32), name=name), f"{name} (first round)")
    ringcc.barrier()
    mine = names[ctx.rank]
    handle = ringcc.allreduce_async(np.ones(4, dtype=np.float32), name=mine)
    fragments = [f"rank {r}: '{names[r]}' (enqueued on rank {r} only)" for r in range(ctx.size)]
    expect_deadlock(ctx, lambda: ringcc.synchronize(handle, deadlock_wait_s()), fragments, mine)
    ringcc.barrier()
    still_works(ctx, names[0])


@CASES.case("deadlock/name-some-ranks-lack", tags=("deadlock",), min_size=3)
def deadlock_name_some_ranks_lack(ctx):
    """All ranks but the last wait on X, the last on Y: the message says which ranks lack X
    and that Y is enqueued on the last rank only."""
    last = ctx.size - 1
    name = "deadlock/partial/Y" if ctx.rank == last else "deadlock/partial/X"
    handle = ringcc.allreduce_async(np.ones(4, dtype=np.float32), name=name)
    fragments = [
        f"rank 0: 'deadlock/partial/X' (not enqueued on rank(s) [{last}])",
        f"rank {last}: 'deadlock/partial/Y' (enqueued on rank {last} only)",
    ]
    expect_deadlock(ctx, lambda: ringcc.synchronize(handle, deadlock_wait_s()), fragments, name)
    ringcc.barrier()
    still_works(ctx, "deadlock/partial/X")


@CASES.case("deadlock/joined-rank-fails-too", tags=("deadlock",), min_size=3)
def deadlock_joined_rank_fails_too(ctx):
    """The last rank joined; the others wait on names of their own, which its zeros cannot
    make ready (each lacks the other ranks): every rank raises, the joined one from join()."""
    last = ctx.size - 1
    fragments = [f"rank {last}: joined"]
    fragments += [f"rank {r}: 'deadlock/joined/r{r}' (enqueued on rank {r} only)" for r in range(last)]
    if ctx.rank == last:
        expect_deadlock(ctx, lambda: join_within(deadlock_wait_s()), fragments, "join()")
    else:
        name = f"deadlock/joined/r{ctx.rank}"
        handle = ringcc.allreduce_async(np.ones(4, dtype=np.float32), name=name)
        expect_deadlock(ctx, lambda: ringcc.synchronize(handle, deadlock_wait_s()), fragments, name)
    ringcc.barrier()
    still_works(ctx, "deadlock/joined/after")


@CASES.case("deadlock/late-enqueue-from-a-thread", tags=("deadlock",), min_size=2)
def deadlock_late_enqueue_from_a_thread(ctx):
    """Not a deadlock: rank 0 waits on LATE, then AFTER; the others wait on AFTER while a
    thread of theirs enqueues LATE half of RINGCC_TIMEOUT_S later. For that long every rank
    waits on names none can run; then both complete on every rank."""
    import threading

    delay = timeout_s() / 2
    n = ctx.size
    want = np.full(4, n * (n + 1) / 2, dtype=np.float32)
    x = {name: np.full(4, ctx.rank + 1, dtype=np.float32) for name in ("late", "after")}
    start = time.monotonic()
    if ctx.rank == 0:
        got = {"late": finish(ringcc.allreduce_async(x["late"], name="deadlock/late"), "late", deadlock_wait_s())}
        waited = time.monotonic() - start
        got["after"] = finish(ringcc.allreduce_async(x["after"], name="deadlock/after"), "after", deadlock_wait_s())
        expect(waited >= delay - 0.2, f"LATE completed after {waited:.2f} s, before the thread enqueued it")
        ctx.note(f"waited_s={waited:.2f}")
    else:
        got = {}

        def enqueue_late():
            time.sleep(delay)
            got["late"] = finish(ringcc.allreduce_async(x["late"], name="deadlock/late"), "late", deadlock_wait_s())

        thread = threading.Thread(target=enqueue_late)
        thread.start()
        got["after"] = finish(ringcc.allreduce_async(x["after"], name="deadlock/after"), "after", deadlock_wait_s())
        thread.join(deadlock_wait_s() + delay)
        expect(not thread.is_alive(), "the thread that enqueued LATE did not finish")
    for name in ("late", "after"):
        if got.get(name) is not None:
            check_equal(got[name], want, name)


@CASES.case("deadlock/joined-rank-stands-in", tags=("deadlock",), min_size=2)
def deadlock_joined_rank_stands_in(ctx):
    """Not a deadlock: the last rank joins at once and waits in join() for longer than
    RINGCC_TIMEOUT_S while the others run named allreduces it never enqueues, each waited on
    after a pause; they complete with the joined rank's zeros, and every join returns."""
    last = ctx.size - 1
    rounds = 4
    pause = timeout_s() / rounds + 0.2
    start = time.monotonic()
    if ctx.rank != last:
        want = np.full(4, sum(r + 1 for r in range(last)), dtype=np.float32)
        for i in range(rounds):
            time.sleep(pause)
            name = f"deadlock/stands-in/{i}"
            got = finish(ringcc.allreduce_async(np.full(4, ctx.rank + 1, dtype=np.float32), name=name), name)
            if got is not None:
                check_equal(got, want, f"{name} (rank {last} joined)")
    try:
        result = join_within(deadlock_wait_s() + timeout_s())
        expect(0 <= result < ctx.size, f"join() returned {result}")
    except Exception as error:  # noqa: BLE001 - recorded as the case's failure
        fail(f"join(): {type(error).__name__}: {error}")
    if ctx.rank == last:
        waited = time.monotonic() - start
        expect(waited > timeout_s(), f"join() returned after {waited:.2f} s, before the others were done")
    ringcc.barrier()
    still_works(ctx, "deadlock/stands-in/after")


# --------------------------------------------------------------------------


def _bind(module) -> None:
    global ringcc
    ringcc = module


def main(argv=None) -> int:
    return run_cases(CASES, argv, on_import=_bind)


if __name__ == "__main__":
    sys.exit(main())
