"""The background engine (named collectives), in groups of 2 and 3 ranks.

Each group in GROUPS starts once (ringrun ... tests/ranks/rank_engine_cases.py) and
runs the cases of rank_engine_cases.CASES that suit it; each test_engine_case
asserts on what the ranks recorded for one case in one group. The other tests
read what a whole group left behind: its stderr (the stall inspector's
warnings), the timeline file that RINGCC_TIMELINE / HOROVOD_TIMELINE wrote,
and figures the cases noted, compared across groups (Horovod's variables
must act like ours). Shutdown runs in its own short jobs
(rank_engine_shutdown.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rank_engine_cases import CASES, fused_batches, timeline_streams

HERE = Path(__file__).resolve().parent

# A stuck collective fails within this bound instead of the default 60 s.
GROUP_ENV = {"RINGCC_TIMEOUT_S": "30", "OPENBLAS_NUM_THREADS": "1"}
GROUP_TIMEOUT_S = 120

STALL_CHECK_S = 0.5
STALL_SHUTDOWN_S = 2.5
HOROVOD_FUSION_THRESHOLD = 4096
HOROVOD_CYCLE_TIME_MS = 20
DEADLOCK_TIMEOUT_S = 3


@dataclass(frozen=True)
class Group:
    size: int
    env: dict[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    cases: tuple[str, ...] = ()  # name patterns; all cases when empty
    timeline_variable: str = ""  # the variable that points the engine's timeline at a file


GROUPS = {
    "engine-shm-2": Group(2),
    "engine-tcp-2": Group(2, env={"RINGCC_TRANSPORT": "tcp", "RINGCC_FUSION_THRESHOLD": str(1 << 20)}),
    "engine-shm-3": Group(3, env={"RINGCC_FUSION_THRESHOLD": str(64 << 10), "RINGCC_CACHE_CAPACITY": "64"}),
    # Our stall settings, with Horovod's set to values that would hide the stalls:
    # RINGCC_* come first.
    "engine-stall-3": Group(
        3,
        env={
            "RINGCC_STALL_CHECK_S": str(STALL_CHECK_S),
            "RINGCC_STALL_SHUTDOWN_S": str(STALL_SHUTDOWN_S),
            "HOROVOD_STALL_CHECK_TIME_SECONDS": "600",
            "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "600",
            # Fused batches over TCP go through the fusion buffer (copy phases in the timeline).
            "RINGCC_TRANSPORT": "tcp",
        },
        tags=("stall",),
        cases=("allreduce/shuffled-order", "allreduce/fusion", "stall/*"),
        timeline_variable="RINGCC_TIMELINE",
    ),
    # Horovod's names only.
    "engine-horovod-2": Group(
        2,
        env={
            "HOROVOD_FUSION_THRESHOLD": str(HOROVOD_FUSION_THRESHOLD),
            "HOROVOD_CYCLE_TIME": str(HOROVOD_CYCLE_TIME_MS),
            "HOROVOD_CACHE_CAPACITY": "32",
            "HOROVOD_STALL_CHECK_TIME_SECONDS": str(STALL_CHECK_S),
            "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": str(STALL_SHUTDOWN_S),
        },
        tags=("stall",),
        cases=(
            "cache/reused-names",
            "allreduce/shuffled-order",
            "allreduce/fusion",
            "allreduce/larger-than-fusion-threshold",
            "engine/cycle-time",
            "stall/*",
        ),
        timeline_variable="HOROVOD_TIMELINE",
    ),
    # A cycle period far longer than a case: callers that block must start the cycles they need.
    "engine-slow-cycle-2": Group(
        2,
        env={"RINGCC_CYCLE_TIME_MS": "2000"},
        tags=("slow-cycle",),
        cases=("nudge/*", "allreduce/shuffled-order", "allreduce/fusion-of-views"),
    ),
    "engine-timeline-2": Group(
        2, tags=("timeline-restart",), cases=("timeline/restart",), timeline_variable="RINGCC_TIMELINE"
    ),
    # A response cache smaller than a step's names: evicted names come back on other bits.
    "engine-tcp-cache-2": Group(
        2, env={"RINGCC_TRANSPORT": "tcp", "RINGCC_CACHE_CAPACITY": "64"}, cases=("allreduce/views-in-enqueue-order",)
    ),
    # The response cache off (as HOROVOD_CACHE_CAPACITY=0): every name announced in full.
    "engine-nocache-3": Group(
        3, env={"RINGCC_CACHE_CAPACITY": "0"}, cases=("allreduce/shuffled-order", "allreduce/fusion", "join/*")
    ),
    # A short RINGCC_TIMEOUT_S and the default stall shutdown time (600 s):
    # deadlocks must fail after the former.
    "engine-deadlock-2": Group(
        2, env={"RINGCC_TIMEOUT_S": str(DEADLOCK_TIMEOUT_S)}, tags=("deadlock",), cases=("deadlock/*",)
    ),
    "engine-deadlock-3": Group(
        3,
        env={"RINGCC_TIMEOUT_S": str(DEADLOCK_TIMEOUT_S), "RINGCC_TRANSPORT": "tcp"},
        tags=("deadlock",),
        cases=("deadlock/*",),
    ),
}
STALL_GROUPS = ["engine-stall-3", "engine-horovod-2"]

# Known limitations of the core, reported; the tests stay to show when they are fixed.


def timeline_path(ranks, name: str):
    return ranks.scratch_dir(f"{name}-timeline") / "timeline.json"


def engine_run(ranks, name: str):
    spec = GROUPS[name]
    env = {**GROUP_ENV, **spec.env}
    if spec.timeline_variable:
        env[spec.timeline_variable] = str(timeline_path(ranks, name))
    return ranks.group(
        name,
        spec.size,
        "ranks/rank_engine_cases.py",
        env=env,
        tags=spec.tags,
        cases=spec.cases,
        timeout=GROUP_TIMEOUT_S,
    )


def selected(spec: Group):
    return CASES.select(spec.size, spec.tags, list(spec.cases) or None)


def _param(name: str, case_name: str):
    return pytest.param(name, case_name, id=f"{name}:{case_name}")


CASE_PARAMS = [_param(name, case.name) for name, spec in GROUPS.items() for case in selected(spec)]


@pytest.mark.parametrize("group,case_name", CASE_PARAMS)
def test_engine_case(ranks, group, case_name):
    engine_run(ranks, group).assert_case(case_name)


@pytest.mark.parametrize("group", list(GROUPS))
def test_engine_group_finished_cleanly(ranks, group):
    """Every rank ran its cases to the end over the transport asked for, and nothing escaped to stderr
    but the stall warnings that the stall groups provoke."""
    run = engine_run(ranks, group)
    run.assert_clean_exit()
    spec = GROUPS[group]
    for rank in range(spec.size):
        start = run.start_record(rank)
        assert start["transport"] == spec.env.get("RINGCC_TRANSPORT", "shm"), start
        assert start["cases"] == len(selected(spec))
    assert "Traceback" not in run.completed.stderr, run.completed.describe()
    if group not in STALL_GROUPS:
        assert "stall:" not in run.completed.stderr, run.completed.describe()


def noted(run, case_name: str, key: str, rank: int = 0) -> float:
    """A figure a case recorded with ctx.note(f"{key}=value") on `rank`."""
    record = run.results[rank]["cases"][case_name]
    match = re.search(rf"^{re.escape(key)}=\+?(-?[\d.]+)$", record["message"], re.MULTILINE)
    assert match, f"{case_name} on rank {rank} noted no {key}: {record}"
    return float(match.group(1))


# --------------------------------------------------------------------------
# The stall inspector


def stderr_lines(run, rank: int):
    prefix = f"[{rank}]<stderr>: "
    return [line[len(prefix) :] for line in run.completed.stderr.splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize("group", STALL_GROUPS)
def test_stall_warning_names_tensor_and_ranks(ranks, group):
    """Rank 0 warns about a tensor the last rank withholds for longer than the stall check time,
    naming the tensor and the rank it waits on; the other ranks log nothing."""
    run = engine_run(ranks, group)
    run.assert_case("stall/warning")
    last = GROUPS[group].size - 1
    lines = stderr_lines(run, 0)
    assert any("WARNING" in line and "stall:" in line for line in lines), run.completed.describe()
    for tensor in ("stall/withheld", "stall/abandoned", "stall/withheld-cached", "stall/abandoned-cached"):
        assert any(f"{tensor}: waiting on rank(s) [{last}]" in line for line in lines), (
            f"no stall warning for {tensor}\n{run.completed.describe()}"
        )
    for rank in range(1, GROUPS[group].size):
        assert not any("stall" in line for line in stderr_lines(run, rank)), run.completed.describe()


# --------------------------------------------------------------------------
# The timeline that RINGCC_TIMELINE / HOROVOD_TIMELINE write


@pytest.mark.parametrize("group", STALL_GROUPS)
def test_timeline_from_environment(ranks, group):
    """A valid Chrome-trace JSON array with one stream per tensor name that ran, their phases,
    and fused allreduces no larger than the fusion threshold."""
    run = engine_run(ranks, group)
    run.assert_clean_exit()
    path = timeline_path(ranks, group)
    assert path.exists(), f"{GROUPS[group].timeline_variable} wrote no {path}\n{run.completed.describe()}"
    events = json.loads(path.read_text())
    assert isinstance(events, list) and events
    streams = timeline_streams(events)
    expected = {f"grad/layer{i}.weight" for i in range(48)} | {f"fusion/{i}" for i in range(64)}
    expected |= {"stall/withheld", "stall/abandoned"}
    assert expected <= set(streams), f"missing streams: {sorted(expected - set(streams))[:10]}"
    for name in expected:
        phases = {event["name"] for event in streams[name]}
        assert {"NEGOTIATING", "ALLREDUCE"} <= phases, f"{name}: phases {sorted(phases)}"
    batches = fused_batches(streams)
    assert batches, "the timeline shows no fused allreduce"
    threshold = HOROVOD_FUSION_THRESHOLD if group == "engine-horovod-2" else 64 << 20
    for name, stream in streams.items():
        for event in stream:
            args = event.get("args", {})
            if event["name"] == "ALLREDUCE" and args.get("tensors", 1) > 1:
                assert {"fusion", "tensors", "bytes"} <= set(args), event
                assert args["bytes"] <= threshold, f"{name}: fused {args['bytes']} B > {threshold} B"
                phases = {e["name"] for e in stream if e.get("args", {}).get("fusion") == args["fusion"]}
                copies = {"MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER"}
                if GROUPS[group].env.get("RINGCC_TRANSPORT") == "tcp":
                    assert copies <= phases, f"{name}: {phases}"
                else:  # shared memory reduces the tensors in place: no fusion-buffer copies
                    assert not copies & phases, f"{name}: {phases}"


# --------------------------------------------------------------------------
# Horovod's variables


def test_horovod_fusion_threshold_gives_more_fused_collectives(ranks):
    """64 ready tensors of 1 KiB: one or two fused collectives under the default threshold,
    about 16 under HOROVOD_FUSION_THRESHOLD=4096."""
    default = noted(engine_run(ranks, "engine-shm-2"), "allreduce/fusion", "fused_collectives")
    small = noted(engine_run(ranks, "engine-horovod-2"), "allreduce/fusion", "fused_collectives")
    assert small >= 64 * 1024 // HOROVOD_FUSION_THRESHOLD // 2
    assert small > default, (
        f"HOROVOD_FUSION_THRESHOLD={HOROVOD_FUSION_THRESHOLD}: {small} fused collectives, default threshold: {default}"
    )


def test_horovod_cycle_time_paces_cycles(ranks):
    """Cycles over 0.4 s while a tensor waits for a rank: about 20 with HOROVOD_CYCLE_TIME=20,
    far more with the default 1 ms."""
    default = noted(engine_run(ranks, "engine-shm-2"), "engine/cycle-time", "waiting_cycles")
    slow = noted(engine_run(ranks, "engine-horovod-2"), "engine/cycle-time", "waiting_cycles")
    assert slow <= 1.25 * 0.4 * 1000 / HOROVOD_CYCLE_TIME_MS + 5
    assert default >= 4 * slow, f"cycles in 0.4 s: {default} (1 ms), {slow} ({HOROVOD_CYCLE_TIME_MS} ms)"


def test_horovod_stall_shutdown_time(ranks):
    run = engine_run(ranks, "engine-horovod-2")
    run.assert_case("stall/shutdown")
    seconds = noted(run, "stall/shutdown", "failed_after_s")
    assert STALL_SHUTDOWN_S - 0.5 <= seconds <= STALL_SHUTDOWN_S + 5


# --------------------------------------------------------------------------
# Shutdown

SHUTDOWN_TIMEOUT_S = 60
SHUTDOWN_LIMIT_S = 2.0


def shutdown_run(ranks, name: str, options=()):
    out = ranks.scratch_dir(name)
    script = [str(HERE / "rank_engine_shutdown.py"), "--out", str(out), *options]
    command = ranks.command(2, script, ["--timeout", str(SHUTDOWN_TIMEOUT_S)])
    completed = ranks.run(command, ranks.environment(GROUP_ENV), SHUTDOWN_TIMEOUT_S + 10)
    assert completed.returncode == 0, completed.describe()
    records = {}
    for rank in range(2):
        path = out / f"rank{rank}.json"
        assert path.exists(), f"rank {rank} wrote no record\n{completed.describe()}"
        records[rank] = json.loads(path.read_text())
    return completed, records


def check_after_shutdown(record):
    assert record["results_ok"], record
    for call, (error, message) in record["after"].items():
        assert error == "NotInitializedError", f"{call} after shutdown: {error}: {message}"
    assert record["reinit_ok"], record
    assert record["reinit_stats"]["tensors"] == 1, record["reinit_stats"]
    assert record["second_shutdown_s"] < SHUTDOWN_LIMIT_S, record


def test_shutdown_with_nothing_pending_is_clean(ranks):
    completed, records = shutdown_run(ranks, "shutdown-idle")
    assert "WARNING" not in completed.stderr and "ERROR" not in completed.stderr, completed.describe()
    for record in records.values():
        assert record["shutdown_s"] < SHUTDOWN_LIMIT_S, record
        check_after_shutdown(record)


def shut_down_error(error, message) -> bool:
    """The error of a named collective left pending at shutdown: this rank's shutdown, or the
    peer's, which came first (every engine stops in the cycle that carries a rank's shutdown)."""
    return (error == "NotInitializedError" and "shut down" in message) or (
        error == "PeerFailureError" and "rank(s) [1] shut ringcc down" in message
    )


def test_shutdown_fails_a_collective_no_peer_enqueued(ranks):
    _, records = shutdown_run(ranks, "shutdown-pending", ["--pending"])
    assert records[0]["pending_done"], records[0]
    error, message = records[0]["pending_error"]
    assert shut_down_error(error, message), records[0]
    for record in records.values():
        assert record["shutdown_s"] < SHUTDOWN_LIMIT_S, record
        check_after_shutdown(record)


def test_shutdown_fails_a_collective_a_thread_waits_on(ranks):
    _, records = shutdown_run(ranks, "shutdown-waiting", ["--pending", "--waiting"])
    record = records[0]
    assert record["waiter_finished"], record
    error, message = record["waiter_error"]
    assert shut_down_error(error, message), record
    for record in records.values():
        assert record["shutdown_s"] < SHUTDOWN_LIMIT_S, record
        check_after_shutdown(record)


# --------------------------------------------------------------------------
# Settings that must agree across ranks

CACHE_CAPACITY_PROBE = """
import os, numpy as np, ringcc

try:
    ringcc.init()
    ringcc.synchronize(ringcc.allreduce_async_(np.ones(4, np.float32), name="x"), 20)
    print("OUTCOME none")
except ringcc.RingccError as error:
    print("OUTCOME", type(error).__name__, error)
"""


def test_different_cache_capacities_fail_every_rank_with_the_setting_named(tmp_path):
    """Ranks whose response caches differ in size cannot agree on cache bits: every rank gets a
    MismatchError naming RINGCC_CACHE_CAPACITY (from init(), where the ranks compare their shared
    settings), instead of a hang or wrong tensors."""
    import subprocess
    import sys

    from rank_groups import rank_environment, ringrun_command

    script = tmp_path / "probe.py"
    script.write_text(CACHE_CAPACITY_PROBE)
    # Rank 1 runs with a smaller cache than rank 0.
    wrapper = f'if [ "$RINGCC_RANK" = 1 ]; then export RINGCC_CACHE_CAPACITY=16; fi; exec "{sys.executable}" "{script}"'
    command = ringrun_command(2, [], ["--timeout", "60"])[:-1] + ["sh", "-c", wrapper]
    completed = subprocess.run(
        command, env=rank_environment({"RINGCC_TIMEOUT_S": "20"}), capture_output=True, text=True, timeout=90
    )
    outcomes = [line.split("OUTCOME ", 1)[1] for line in completed.stdout.splitlines() if "OUTCOME " in line]
    assert len(outcomes) == 2, completed.stdout + completed.stderr
    for outcome in outcomes:
        assert outcome.startswith("MismatchError") and "RINGCC_CACHE_CAPACITY" in outcome, outcome
