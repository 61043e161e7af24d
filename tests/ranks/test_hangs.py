"""No wait outlives its bound, and signals end waits at once.

- The stress group (tests/ranks/rank_stress.py): hundreds of init() ... work ...
  barrier(), shutdown() cycles in one job of 2 ranks, with duplicate names,
  joins after uneven work, skipped collectives, abandoned tests and random
  sleeps. RINGCC_STRESS_CYCLES sets the number of cycles (500 by default);
  a watchdog in each rank prints every stack rather than hang.
- Waits that hung past every timeout (tests/ranks/rank_hangs.py) end with the
  right error within their bound on every rank.
- SIGINT and SIGALRM interrupt every kind of blocking wait within a second
  (tests/ranks/rank_interrupts.py), and what the interruption leaves behind works.
- A rank that raises after init() (NumPy API, Horovod API, torch backend
  "ring", JAX; MXNet in test_mxnet.py) makes the others raise
  PeerFailureError naming it within a few seconds, and ringrun names it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_JAX = importlib.util.find_spec("jax") is not None

STRESS_CYCLES = int(os.environ.get("RINGCC_STRESS_CYCLES", "500"))
# Over TCP a cycle costs about 0.3 s (connection set-up and tear-down): fewer.
STRESS_TCP_CYCLES = max(1, STRESS_CYCLES // 25)
STRESS_TIMEOUT_S = 120 + STRESS_CYCLES * 0.25


def read_json(path: Path, completed):
    if not path.exists():
        pytest.fail(f"{path.name} was not written\n{completed.describe()}", pytrace=False)
    return json.loads(path.read_text())


# --------------------------------------------------------------------------
# The stress group


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_init_work_barrier_shutdown_cycles(ranks, transport):
    cycles = STRESS_CYCLES if transport == "shm" else STRESS_TCP_CYCLES
    out = ranks.scratch_dir(f"stress-{transport}")
    options = ["--cycles", str(cycles), "--cycle-limit-s", "30"]
    if not HAVE_TORCH:
        options.append("--no-torch")
    command = ranks.command(
        2, [str(HERE / "rank_stress.py"), "--out", str(out), *options], ["--timeout", str(STRESS_TIMEOUT_S)]
    )
    env = {"RINGCC_TIMEOUT_S": "10", "OPENBLAS_NUM_THREADS": "1"}
    if transport == "tcp":
        env["RINGCC_TRANSPORT"] = "tcp"
    completed = ranks.run(command, ranks.environment(env), STRESS_TIMEOUT_S + 20)
    assert completed.returncode == 0, completed.describe()
    for rank in range(2):
        record = read_json(out / f"rank{rank}.json", completed)
        assert record["cycles"] == cycles, f"rank {rank}: {record}\n{completed.describe()}"
        assert record["failures"] == [], f"rank {rank}: {record['failures']}"
        assert record["horovod_api"] == HAVE_TORCH, record
    print(f"\n{cycles} cycles over {transport}: {record['seconds']:.1f} s")


# --------------------------------------------------------------------------
# Waits that hung


STALL_SHUTDOWN_S = 2.0
HANG_ENV = {"RINGCC_TIMEOUT_S": "5", "RINGCC_STALL_SHUTDOWN_S": str(STALL_SHUTDOWN_S), "RINGCC_STALL_CHECK_S": "1"}


@pytest.fixture(scope="module")
def hang_records(ranks):
    out = ranks.scratch_dir("hangs")
    script = [str(HERE / "rank_hangs.py"), "--out", str(out)]
    if not HAVE_TORCH:
        script.append("--no-torch")
    command = ranks.command(2, script, ["--timeout", "90"])
    completed = ranks.run(command, ranks.environment(HANG_ENV), 110)
    assert completed.returncode == 0, completed.describe()
    return [read_json(out / f"rank{rank}.json", completed) for rank in range(2)], completed


def test_peer_shutdown_fails_a_collective_it_skipped(hang_records):
    (rank0, rank1), completed = hang_records
    wait = rank0["skip-then-shutdown"]["wait"]
    assert wait["peer_failure"] and "[1]" in wait["message"] and "shut ringcc down" in wait["message"], wait
    assert wait["seconds"] < 1.5, wait
    for record in (rank0, rank1):
        assert record["skip-then-shutdown"]["shutdown"]["seconds"] < 1.0, record


def test_named_collectives_nobody_matches_time_out_on_every_rank(hang_records):
    records, _ = hang_records
    for rank, record in enumerate(records):
        wait = record["skip-then-other"]["wait"]
        assert wait["timeout"] and f"wanted-by-{rank}" in wait["message"], wait
        assert f"waiting on rank(s) [{1 - rank}]" in wait["message"] and "RINGCC_STALL_SHUTDOWN_S" in wait["message"]
        assert STALL_SHUTDOWN_S - 0.1 <= wait["seconds"] <= STALL_SHUTDOWN_S + 3, wait


def test_join_fails_when_a_peer_shuts_down(hang_records):
    (rank0, rank1), _ = hang_records
    join = rank0["join-vs-shutdown"]["join"]
    assert join["peer_failure"] and "[1]" in join["message"], join
    assert join["seconds"] < 1.5, join
    assert rank1["join-vs-shutdown"]["shutdown"]["seconds"] < 1.0, rank1


def test_join_times_out_when_a_peer_never_joins(hang_records):
    (rank0, _), _ = hang_records
    join = rank0["join-stalls"]["join"]
    assert join["timeout"] and "join()" in join["message"] and "[1]" in join["message"], join
    assert STALL_SHUTDOWN_S - 0.1 <= join["seconds"] <= STALL_SHUTDOWN_S + 3, join


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
def test_horovod_generated_names_that_differ_time_out(hang_records):
    records, _ = hang_records
    for record in records:
        example = record["horovod-generated-names"]["example"]
        assert example["timeout"] and "noname" in example["message"], example
        assert example["seconds"] <= STALL_SHUTDOWN_S + 3, example
        assert record["horovod-generated-names"]["shutdown"]["seconds"] < 1.0, record


# --------------------------------------------------------------------------
# Signals

INTERRUPT_KINDS = ["handle_wait", "synchronize", "join", "barrier", "allreduce", "shutdown", "init", "torch_work_wait"]
RESUMABLE = ("handle_wait", "synchronize", "join", "torch_work_wait")


@pytest.fixture(scope="module")
def interrupt_records(ranks):
    out = ranks.scratch_dir("interrupts")
    options = [] if HAVE_TORCH else ["--no-torch"]
    command = ranks.command(2, [str(HERE / "rank_interrupts.py"), "--out", str(out), *options], ["--timeout", "150"])
    completed = ranks.run(command, ranks.environment({"RINGCC_TIMEOUT_S": "20"}), 170)
    assert completed.returncode == 0, completed.describe()
    records = [{r["case"]: r for r in read_json(out / f"rank{rank}.json", completed)} for rank in range(2)]
    return records, completed


@pytest.mark.parametrize("which", ["SIGINT", "alarm"])
@pytest.mark.parametrize("kind", INTERRUPT_KINDS)
def test_signal_interrupts_a_blocked_wait(interrupt_records, kind, which):
    if kind == "torch_work_wait" and not HAVE_TORCH:
        pytest.skip("torch is not installed")
    (rank0, rank1), completed = interrupt_records
    case = f"{kind}-{which}"
    waiter, peer = rank0[case], rank1[case]
    context = f"rank 0: {waiter}\nrank 1: {peer}"
    assert waiter.get("right_exception"), f"the wait did not raise the handler's exception: {context}"
    assert waiter["latency_s"] < 1.0, f"interrupted {waiter['latency_s']:.2f} s after the signal: {context}"
    assert peer["marker_seen"], context
    if kind in RESUMABLE:
        # The collective went on: waiting again returns its result, on both ranks.
        assert waiter["again"][0] == "ok", context
        assert peer["peer_call"][0] == "ok", context
        if kind != "join":
            assert waiter["again"][1] == peer["peer_call"][1] == "[3.0, 3.0, 3.0, 3.0]", context
        else:
            # Taken up after the peer's join returned: the same join's result.
            assert waiter["peer_done_seen"], context
            assert waiter["again"][1] == peer["peer_call"][1], context
    elif kind == "init":
        assert waiter["init_again"][0] == "ok" and peer["peer_call"][0] == "ok", context
    else:
        # Abandoned halfway: the peer fails naming rank 0, rank 0's next call says why.
        status, message = peer["peer_call"]
        assert status == "error" and "PeerFailureError" in message and "rank 0" in message, context
        if kind == "shutdown":
            assert waiter["initialized_after"] is False, context
            assert waiter["queued"][0] == "error", context
        else:
            status, message = waiter["later_call"]
            assert status == "error" and "PeerFailureError" in message and "interrupted" in message, context
    for record in (waiter, peer):
        assert record["shutdown"][0] == "ok" and record["shutdown_s"] < 2.0, context


def test_signal_handler_cannot_block_in_ringcc(interrupt_records):
    """A handler that calls shutdown() during a barrier raises instead of waiting for the barrier
    it interrupted; that ends the barrier, and shutdown() afterwards works on both ranks."""
    (rank0, rank1), _ = interrupt_records
    waiter, peer = rank0["handler-calls-shutdown"], rank1["handler-calls-shutdown"]
    context = f"rank 0: {waiter}\nrank 1: {peer}"
    assert waiter.get("invalid_argument") and "signal handler" in waiter["outcome"], context
    assert waiter["blocked_s"] < 1.5, context
    assert peer["peer_call"][0] == "error" and "rank 0" in peer["peer_call"][1], context
    for record in (waiter, peer):
        assert record["shutdown"][0] == "ok" and record["shutdown_s"] < 2.0, context


# --------------------------------------------------------------------------
# A rank that raises after init()

RAISE_APIS = [
    pytest.param("numpy", (), id="numpy"),
    pytest.param("numpy", ("--exit",), id="numpy-sys-exit"),
    pytest.param("numpy", ("--signal",), id="numpy-sigint"),
    pytest.param("horovod", (), id="horovod", marks=pytest.mark.skipif(not HAVE_TORCH, reason="no torch")),
    pytest.param("torch", (), id="torch-backend", marks=pytest.mark.skipif(not HAVE_TORCH, reason="no torch")),
    pytest.param("jax", (), id="jax", marks=pytest.mark.skipif(not HAVE_JAX, reason="no jax")),
]
RAISE_DELAY_LIMIT_S = 5.0


def check_raise_outcome(out: Path, completed, options) -> None:
    """Rank 0 got PeerFailureError naming rank 1 soon after rank 1 failed, and
    ringrun's message names rank 1 as the rank that failed (first)."""
    outcome = read_json(out / "outcome0.json", completed)
    failed = read_json(out / "failed1.json", completed)
    context = f"rank 0: {outcome}\n{completed.describe()}"
    assert outcome["is_peer_failure"] and "rank 1" in outcome["message"], context
    assert outcome["time"] - failed["time"] < RAISE_DELAY_LIMIT_S, context
    assert completed.returncode not in (0, None), context
    lines = [line for line in completed.stderr.splitlines() if line.startswith("ringrun: ")]
    assert lines, context
    first = re.match(r"ringrun: rank (\d+) (?:failed first|exited|was killed)", lines[0])
    assert first and first.group(1) == "1", f"ringrun named another rank first: {lines[0]}\n{context}"


@pytest.mark.parametrize("api,options", RAISE_APIS)
def test_rank_that_raises_fails_the_others_at_once(ranks, api, options):
    out = ranks.scratch_dir(f"raises-{api}{''.join(options)}")
    command = ranks.command(
        2,
        [str(HERE / "rank_raises.py"), "--api", api, "--out", str(out), *options],
        ["--timeout", "90", "--grace-period", "20"],
    )
    env = {"RINGCC_TIMEOUT_S": "30", "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}
    completed = ranks.run(command, ranks.environment(env), 110)
    check_raise_outcome(out, completed, options)
