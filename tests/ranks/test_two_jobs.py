"""Two jobs of one user given the same port (two SLURM jobs with a hard-coded
MASTER_PORT sharing a node, two scripts started by hand) never pair up: the
launcher's name for each job keeps them apart, and without one, ranks that
meet a rank of the other job fail with "two jobs met on port P" instead of
computing with it. No rank ever prints a wrong result.

Ranks are plain processes with a launcher's variables set by the test, each
job's ranks holding their own values; every wait is bounded.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from rank_groups import rank_environment, ringcc
from test_security import DictStore, finish, free_port_pair

_core = ringcc._core

LIMIT_S = 60

# A rank of job JOB: allreduces its value (JOB_VALUE + rank) and prints the
# sum, or the error that stopped it.
RANK = textwrap.dedent(
    """
    import os
    import numpy as np
    import ringcc
    try:
        ringcc.init()
        value = float(os.environ["JOB_VALUE"]) + ringcc.rank()
        print("SUM", float(ringcc.allreduce(np.array([value]))[0]), flush=True)
        ringcc.shutdown()
    except ringcc.RingccError as error:
        print("ERROR", type(error).__name__, error, flush=True)
    """
)


def start(tmp_path: Path, name: str, env: dict) -> subprocess.Popen:
    out = open(tmp_path / f"{name}.out", "wb")
    with out:
        return subprocess.Popen(
            [sys.executable, "-c", RANK], env=rank_environment(env), stdout=out, stderr=subprocess.STDOUT
        )


def wait_listening(port: int, limit: float = 20) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise AssertionError(f"nothing listens at port {port}")


def outcome(process: subprocess.Popen, tmp_path: Path, name: str) -> str:
    return finish(process, tmp_path, name, LIMIT_S)


def sums(text: str) -> list:
    return [float(s) for s in re.findall(r"^SUM (\S+)$", text, re.M)]


def job_env(port: int, rank: int, value: float, **extra) -> dict:
    return {
        "RANK": str(rank),
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RINGCC_TIMEOUT_S": "6",
        "JOB_VALUE": str(value),
        **extra,
    }


def test_jobs_started_interleaved_on_one_port_fail_rather_than_pair(tmp_path):
    """No launcher names the jobs. Job A's rank 0 serves the store and waits;
    job B's rank 0 finds the port served and says so in A's store, which
    ends A's wait at once. Every rank either computes its own job's sum or
    fails; none computes a mixed one."""
    port = free_port_pair()
    a0 = start(tmp_path, "a0", job_env(port, 0, 10))
    wait_listening(port + 1)
    b0 = start(tmp_path, "b0", job_env(port, 0, 100))
    b0_out = outcome(b0, tmp_path, "b0")
    b1 = start(tmp_path, "b1", job_env(port, 1, 100))
    time.sleep(0.5)
    a1 = start(tmp_path, "a1", job_env(port, 1, 10))
    outputs = {name: outcome(p, tmp_path, name) for name, p in (("a0", a0), ("b1", b1), ("a1", a1))}
    outputs["b0"] = b0_out
    everything = "\n".join(f"{name}: {text}" for name, text in outputs.items())
    for name, text in outputs.items():
        right = 21.0 if name.startswith("a") else 201.0
        assert all(s == right for s in sums(text)), f"{name} computed with the other job:\n{everything}"
        assert sums(text) or "ERROR" in text, everything
    assert "another job's rank 0 already serves" in outputs["b0"], everything
    for name in ("b0", "a0"):
        assert f"two jobs met on port {port + 1}" in outputs[name], everything


def test_a_rank_number_taken_twice_fails_both_jobs_ranks():
    """A rank 1 of another job took rank 1's place first: the real rank 1
    says two jobs met, and so do the two that met, before any data moves."""
    shared = DictStore()
    second_claimed = threading.Event()

    def hold_rank0(key):
        # Rank 0 reads rank 1's record only once the second rank 1 has claimed.
        if key.endswith("ringcc/host/1"):
            second_claimed.wait(20)

    stores = [shared.view(hold_rank0), shared.view(), shared.view()]
    outcome = {}

    def join(slot, rank):
        try:
            outcome[slot] = _core.Communicator(rank, 2, stores[slot], 20)
        except Exception as error:  # noqa: BLE001 - reported to the test
            outcome[slot] = error

    first = [threading.Thread(target=join, args=(slot, rank), daemon=True) for slot, rank in ((0, 0), (1, 1))]
    for t in first:
        t.start()
    deadline = time.monotonic() + 20
    while "ringcc/claims/1" not in shared.data and time.monotonic() < deadline:
        time.sleep(0.01)
    late = threading.Thread(target=join, args=(2, 1), daemon=True)
    late.start()
    while shared.data.get("ringcc/claims/1") != b"2" and time.monotonic() < deadline:
        time.sleep(0.01)
    second_claimed.set()
    for t in (*first, late):
        t.join(40)
    assert sorted(outcome) == [0, 1, 2], outcome
    described = "\n".join(f"{slot}: {type(e).__name__}: {e}" for slot, e in sorted(outcome.items()))
    # The late rank 1 and rank 0 see the claims; the first rank 1, already
    # further on, fails through the record the late one left.
    for slot in range(3):
        assert isinstance(outcome[slot], (_core.InvalidArgumentError, _core.PeerFailureError)), described
        assert "two jobs met on the rendezvous store" in str(outcome[slot]), described
    assert isinstance(outcome[2], _core.InvalidArgumentError), described
    assert "rank 1 of this job has already joined" in str(outcome[2]), described


def test_jobs_their_launcher_names_never_meet(tmp_path):
    """SLURM names each job: the jobs hold different secrets, so job B's ranks
    cannot reach job A's store, and job A finishes as if B were not there."""
    port = free_port_pair()

    def slurm(rank: int, job: int, value: float) -> dict:
        env = job_env(port, rank, value, SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_JOB_ID=str(job))
        return {**env, "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "1"}

    a0 = start(tmp_path, "a0", slurm(0, 700, 10))
    wait_listening(port + 1)
    b0 = start(tmp_path, "b0", slurm(0, 701, 100))
    b1 = start(tmp_path, "b1", slurm(1, 701, 100))
    time.sleep(0.5)
    a1 = start(tmp_path, "a1", slurm(1, 700, 10))
    outputs = {name: outcome(p, tmp_path, name) for name, p in (("a0", a0), ("a1", a1), ("b0", b0), ("b1", b1))}
    everything = "\n".join(f"{name}: {text}" for name, text in outputs.items())
    assert sums(outputs["a0"]) == [21.0] and sums(outputs["a1"]) == [21.0], everything
    assert not sums(outputs["b0"]) and not sums(outputs["b1"]), everything
    assert "is another job or program using that port?" in outputs["b0"], everything
    assert "ERROR" in outputs["b1"], everything


def test_a_rank_that_fails_while_the_ranks_meet_fails_the_others_at_once(tmp_path):
    """Rank 1 names an interface this host lacks and fails while setting up
    its links: rank 0, waiting for rank 1's address, fails at once naming
    it and why, long before its 30 s timeout. (Two "hosts" by name on this
    machine, so that the ranks connect over TCP and need the interface.)"""
    port = free_port_pair()
    base = {
        "WORLD_SIZE": "2",
        "MASTER_ADDR": socket.gethostname(),
        "MASTER_PORT": str(port),
        "RINGCC_SECRET": "a secret of the test's",
        "RINGCC_TIMEOUT_S": "30",
        "JOB_VALUE": "0",
    }
    started = time.monotonic()
    rank0 = start(tmp_path, "r0", {**base, "RANK": "0", "RINGCC_HOSTNAME": "host-a"})
    rank1 = start(
        tmp_path, "r1", {**base, "RANK": "1", "RINGCC_HOSTNAME": "host-b", "RINGCC_SOCKET_IFNAME": "=nosuchif0"}
    )
    outputs = [outcome(rank0, tmp_path, "r0"), outcome(rank1, tmp_path, "r1")]
    took = time.monotonic() - started
    assert "ERROR InvalidArgumentError" in outputs[1] and "nosuchif0" in outputs[1], outputs
    assert "ERROR PeerFailureError" in outputs[0], outputs
    assert "rank 1 failed while the ranks met" in outputs[0] and "nosuchif0" in outputs[0], outputs
    assert took < 15, f"rank 0 took {took:.1f} s\n{outputs}"
