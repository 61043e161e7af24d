"""Fault injection, bounded: a rank killed (SIGKILL) at a random moment of a
mix of collectives (mid-transfer, inside a fused batch, in the engine's
negotiation) or during the rendezvous, a rank stopped (SIGSTOP), and a full
/dev/shm. Every survivor must raise within the timeout naming the culprit,
no process of the job may be left, nor a shared-memory segment of a rank
that exited (tests/ranks/rank_faults.py). A stranger during a run:
tests/ranks/test_failures.py and tests/ranks/test_security.py; faults under elastic
mode: tests/launch/test_elastic.py and tests/launch/test_elastic_netns.py."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from rank_groups import rank_environment, ringrun_command, tail

HERE = Path(__file__).resolve().parent

FAULT_TIMEOUT_S = 5  # RINGCC_TIMEOUT_S of these jobs
MARGIN_S = 3.0
JOB_LIMIT_S = 90
SIZE = 3


def outcome(out: Path, rank: int) -> dict:
    path = out / f"outcome{rank}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def progress(out: Path, rank: int) -> int:
    try:
        return int((out / f"progress{rank}").read_text() or 0)
    except (OSError, ValueError):
        return 0


def start_job(tmp_path: Path, script_args, env=None, ranks=SIZE, prefix=(), launcher=()):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    command = [
        *prefix,
        *ringrun_command(
            ranks,
            [str(HERE / "rank_faults.py"), "--out", str(out), *script_args],
            ["--timeout", str(JOB_LIMIT_S), "--grace-period", "30", *launcher],
        ),
    ]
    env = rank_environment({"RINGCC_TIMEOUT_S": str(FAULT_TIMEOUT_S), **(env or {})})
    log_path = tmp_path / "ringrun.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(tmp_path)
        )
    return process, out, log_path


def finish(process, log_path) -> str:
    try:
        process.wait(timeout=JOB_LIMIT_S + 30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return tail(log_path.read_text(errors="replace"), 6000)


def names(record: dict, rank: int) -> bool:
    return bool(re.search(rf"\brank {rank}\b", record.get("message", "")))


def check_aftermath(out: Path, log: str, culprit: int, fault_time: float, ranks=SIZE, bound_s=FAULT_TIMEOUT_S):
    """Every survivor raised within the bound, naming the culprit, or naming a rank that had
    raised before it naming the culprit (over TCP, when the rank that serves the store is
    the one lost, a rank may hear of it first from a peer that left because of it)."""
    records = {rank: outcome(out, rank) for rank in range(ranks)}
    pids = [record.get("pid") for record in records.values()]
    for rank, record in records.items():
        if rank == culprit:
            continue
        assert record.get("state") == "raised", f"rank {rank}: {record}\n{log}"
        relayed = [
            other
            for other, r in records.items()
            if other not in (rank, culprit)
            and names(record, other)
            and r.get("state") == "raised"
            and names(r, culprit)
            and r["t"] <= record["t"] + 0.5
        ]
        assert names(record, culprit) or relayed, f"rank {rank} does not name rank {culprit}: {records}"
        assert record["class"] in ("PeerFailureError", "TimeoutError"), record
        assert record["t"] - fault_time < bound_s + MARGIN_S, (
            f"rank {rank} raised {record['t'] - fault_time:.1f} s after"
        )
    for pid in pids:
        assert (
            pid is None or not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
        ), f"process {pid} is still running"
    # The culprit's too: ringrun removes what a rank killed mid-set-up left.
    ended = [str(pid) for pid in pids if pid]
    left = [name for name in os.listdir("/dev/shm") if any(f"-p{pid}-" in name for pid in ended)]
    assert not left, f"left in /dev/shm by ranks that exited: {left}"


def wait_until(condition, seconds, process, log_path, what):
    deadline = time.monotonic() + seconds
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"ringrun ended while waiting for {what}\n{finish(process, log_path)}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"timed out waiting for {what}\n{finish(process, log_path)}")
        time.sleep(0.01)


# Two made-up hosts of 2 ranks each on this machine (ringrun names each
# rank's host; the agent runs the ranks here): the hierarchical backend,
# with its 16 MiB allreduces pipelined (a helper thread per rank).
PIPELINED_ENV = {"RINGCC_HIERARCHICAL_PIPELINE_BYTES": "1048576"}


def two_made_up_hosts(env) -> list[str]:
    exported = []
    for name in ["PYTHONPATH", "RINGCC_TIMEOUT_S", *env]:
        exported += ["-x", name]  # an agent's ranks get only the job's variables and these
    return [
        "-H",
        "fault-a:2,fault-b:2",
        "--agent",
        "env RINGCC_TEST_HOST={host}",
        "--master-addr",
        "127.0.0.1",
        *exported,
    ]


@pytest.mark.parametrize(
    "transport,seed", [("shm", 11), ("shm", 12), ("tcp", 13), ("tcp", 14), ("pipelined", 15), ("pipelined", 16)]
)
def test_a_rank_killed_at_a_random_moment(tmp_path, transport, seed):
    rng = random.Random(seed)
    ranks = 4 if transport == "pipelined" else SIZE
    victim, after, extra = rng.randrange(ranks), rng.randint(1, 3), rng.uniform(0.0, 0.4)
    env = {"shm": {}, "tcp": {"RINGCC_TRANSPORT": "tcp"}, "pipelined": PIPELINED_ENV}[transport]
    launcher = two_made_up_hosts(env) if transport == "pipelined" else []
    process, out, log_path = start_job(
        tmp_path, ["--seconds", "60", "--seed", str(seed)], env, ranks=ranks, launcher=launcher
    )
    wait_until(lambda: progress(out, victim) >= after, 60, process, log_path, f"{after} iterations")
    time.sleep(extra)
    os.kill(outcome(out, victim)["pid"], signal.SIGKILL)
    killed = time.time()
    log = finish(process, log_path)
    assert process.returncode not in (0, None), log
    assert f"ringrun: rank {victim} failed first (killed by signal SIGKILL, host " in log, log
    check_aftermath(out, log, victim, killed, ranks=ranks)
    if transport == "pipelined":
        assert outcome(out, victim).get("hosts") == 2, outcome(out, victim)


@pytest.mark.parametrize("victim", [0, 1])
def test_a_rank_killed_during_the_rendezvous(tmp_path, victim):
    """The victim kills itself a few milliseconds into init(): the others' init raises
    within RINGCC_TIMEOUT_S of its death, naming it (rank 0 serves the store)."""
    process, out, log_path = start_job(
        tmp_path, ["--seconds", "5", "--die-in-init", str(victim), "--seed", str(victim)]
    )
    log = finish(process, log_path)
    assert process.returncode not in (0, None), log
    killed = out / f"killed{victim}.json"
    assert killed.exists(), f"rank {victim} did not record its death\n{log}"
    check_aftermath(out, log, victim, json.loads(killed.read_text())["t"], bound_s=FAULT_TIMEOUT_S + 2)


def test_a_stopped_rank_times_the_others_out(tmp_path):
    """SIGSTOP at a random moment: the others raise within RINGCC_TIMEOUT_S (and the time a
    collective may take), naming the stopped rank; ringrun's stop escalates to SIGKILL."""
    rng = random.Random(21)
    victim = rng.randrange(SIZE)
    process, out, log_path = start_job(tmp_path, ["--seconds", "60", "--seed", "21"])
    wait_until(lambda: progress(out, victim) >= 2, 60, process, log_path, "2 iterations")
    time.sleep(rng.uniform(0.0, 0.3))
    pid = outcome(out, victim)["pid"]
    os.kill(pid, signal.SIGSTOP)
    stopped = time.time()
    try:
        wait_until(
            lambda: all(outcome(out, r).get("state") == "raised" for r in range(SIZE) if r != victim),
            FAULT_TIMEOUT_S * 3 + 10,
            process,
            log_path,
            "the others to raise",
        )
    finally:
        os.kill(pid, signal.SIGKILL)
    log = finish(process, log_path)
    check_aftermath(out, log, victim, stopped, bound_s=2 * FAULT_TIMEOUT_S)


def test_a_full_dev_shm_is_an_error_not_a_crash(tmp_path):
    """/dev/shm (a private tmpfs of 12 MiB) holds one rank's segment but not the other's:
    that rank raises naming /dev/shm and RINGCC_TRANSPORT=tcp, nobody dies of SIGBUS; once
    /dev/shm is larger the next job runs and removes what the first left."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private /dev/shm")
    jobs = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        jobs.append(
            " ".join(
                ringrun_command(
                    2,
                    [str(HERE / "rank_faults.py"), "--out", str(tmp_path / name), "--seconds", "1"],
                    ["--timeout", "60"],
                )
            )
        )
    script = (
        f"mount -t tmpfs -o size=12M tmpfs /dev/shm || exit 77; {jobs[0]} > {tmp_path}/first.log 2>&1; "
        f"echo first=$?; mount -o remount,size=64M /dev/shm; {jobs[1]} > {tmp_path}/second.log 2>&1; "
        "echo second=$?; ls /dev/shm"
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        env=rank_environment({"RINGCC_TIMEOUT_S": str(FAULT_TIMEOUT_S)}),
        capture_output=True,
        text=True,
        timeout=180,
    )
    if "first=" not in done.stdout:
        pytest.skip(f"cannot mount a private /dev/shm here: {done.stderr.strip()}")
    first = (tmp_path / "first.log").read_text(errors="replace")
    assert "first=0" not in done.stdout and "SIGBUS" not in first, first
    messages = [outcome(tmp_path / "first", rank).get("message", "") for rank in range(2)]
    assert any("cannot reserve" in m and "RINGCC_TRANSPORT=tcp" in m for m in messages), (messages, first)
    assert "second=0" in done.stdout, (tmp_path / "second.log").read_text(errors="replace")
    assert done.stdout.strip().endswith("second=0"), f"left in /dev/shm: {done.stdout}"
