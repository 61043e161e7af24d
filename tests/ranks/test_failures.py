"""Failures: a rank killed in the middle of an allreduce, a rank that never
joins a barrier, and strangers connecting to a running job's ports. Each is
its own small job (tests/ranks/rank_failures.py) with a short RINGCC_TIMEOUT_S and
a hard time limit."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import struct
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

FAILURE_TIMEOUT_S = 10  # RINGCC_TIMEOUT_S of these jobs
JOB_LIMIT_S = 90  # ringrun --timeout; the hard limit adds a margin
HARD_LIMIT_S = JOB_LIMIT_S + 30
RANK_NAMED = re.compile(r"\brank \d+\b")


def transport_env(transport: str) -> dict:
    return {"RINGCC_TRANSPORT": "tcp"} if transport == "tcp" else {}


def failure_job(ranks, num_ranks, out_dir: Path, args, env, launcher_options=()):
    command = ranks.command(
        num_ranks,
        [str(HERE / "rank_failures.py"), *args, "--out", str(out_dir)],
        ["--timeout", str(JOB_LIMIT_S), *launcher_options],
    )
    return command, ranks.environment({"RINGCC_TIMEOUT_S": str(FAILURE_TIMEOUT_S), **env})


def read_outcome(out_dir: Path, rank: int, completed) -> dict:
    path = out_dir / f"outcome{rank}.json"
    if not path.exists():
        pytest.fail(f"rank {rank} reported no outcome\n{completed.describe()}", pytrace=False)
    return json.loads(path.read_text())


# --------------------------------------------------------------------------
# A rank dies


@pytest.mark.parametrize(
    "transport,victim,named",
    [("shm", 1, False), ("tcp", 1, False), ("shm", 0, False), ("tcp", 0, False), ("shm", 2, True), ("tcp", 2, True)],
    ids=[
        "shm-victim1",
        "tcp-victim1",
        "shm-victim0-store-host",
        "tcp-victim0-store-host",
        "shm-victim2-named",
        "tcp-victim2-named",
    ],
)
def test_killed_rank_fails_the_others_quickly(ranks, transport, victim, named):
    """The survivors get an error naming a rank soon after the kill, never a wrong result, and
    their shutdown() then returns at once (it does not wait for the dead rank to check out),
    whether the failure showed in a direct collective or in the engine's (named)."""
    out_dir = ranks.scratch_dir(f"kill-{transport}-{victim}{'-named' if named else ''}")
    command, env = failure_job(
        ranks,
        3,
        out_dir,
        ["kill", "--victim", str(victim), *(["--named"] if named else [])],
        transport_env(transport),
        launcher_options=["--grace-period", "30"],
    )
    completed = ranks.run(command, env, HARD_LIMIT_S)
    assert completed.returncode not in (0, None), f"ringrun should report the killed rank\n{completed.describe()}"
    killed_path = out_dir / "killed.json"
    assert killed_path.exists(), f"the victim never killed itself\n{completed.describe()}"
    killed_at = json.loads(killed_path.read_text())["time"]
    for rank in (r for r in range(3) if r != victim):
        outcome = read_outcome(out_dir, rank, completed)
        context = f"rank {rank}: {outcome}\n{completed.describe()}"
        assert outcome["class"] in ("PeerFailureError", "TimeoutError"), context
        assert RANK_NAMED.search(outcome["message"]), f"the error should name a rank; {context}"
        delay = outcome["time"] - killed_at
        assert delay < 10, f"the error came {delay:.1f} s after the kill; {context}"
        assert outcome["wrong_results"] == 0, context
        assert outcome["shutdown_error"] is None, context
        assert outcome["shutdown_s"] < 2.0, (
            f"shutdown() took {outcome['shutdown_s']:.1f} s after the failure; {context}"
        )
        assert f'OUTCOME {{"rank": {rank}' in completed.stdout, f"rank {rank}'s report is not in ringrun's output"


# --------------------------------------------------------------------------
# A rank does not turn up


@pytest.fixture(scope="module", params=["shm", "tcp"])
def late_rank_job(request, ranks):
    """Rank 1 arrives 5 s late at a barrier, with RINGCC_TIMEOUT_S=2."""
    transport = request.param
    out_dir = ranks.scratch_dir(f"timeout-{transport}")
    command, env = failure_job(
        ranks, 2, out_dir, ["timeout", "--timeout-s", "2", "--sleep-s", "5"], transport_env(transport)
    )
    completed = ranks.run(command, env, HARD_LIMIT_S)
    assert completed.returncode is not None, completed.describe()
    return out_dir, completed


def test_barrier_times_out_after_ringcc_timeout_s(late_rank_job):
    out_dir, completed = late_rank_job
    waiting = read_outcome(out_dir, 0, completed)
    context = f"rank 0: {waiting}\n{completed.describe()}"
    assert waiting["class"] == "TimeoutError", context
    assert waiting["is_builtin_timeout"], "ringcc.TimeoutError should be a TimeoutError"
    assert "RINGCC_TIMEOUT_S" in waiting["message"], context
    assert 1.8 <= waiting["seconds"] <= 4.5, f"timed out after {waiting['seconds']:.2f} s; {context}"


def test_late_rank_gets_peer_failure_not_stale_data(late_rank_job):
    out_dir, completed = late_rank_job
    late = read_outcome(out_dir, 1, completed)
    context = f"rank 1 (late): {late}\n{completed.describe()}"
    # Rank 0 arrived at the barrier before giving up, so the late barrier may
    # still complete; the allreduce after it cannot, and must say why.
    first_allreduce = late["later_allreduces"][0]
    assert late["class"] == "PeerFailureError" or first_allreduce.get("class") == "PeerFailureError", (
        f"the late rank should get PeerFailureError by its first allreduce; {context}"
    )
    wrong = [r for r in late["later_allreduces"] if "result" in r and r["result"] != r["expected"]]
    assert not wrong, f"allreduces after the peer aborted returned wrong results: {wrong}; {context}"


# --------------------------------------------------------------------------
# Strangers connect to the job's ports

WRONG_SECRET = b"this is not the job's secret"
GARBAGE = b"GET / HTTP/1.1\r\nHost: ringcc\r\n\r\n" + bytes(range(64))


def recv_exact(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise AssertionError(f"the connection closed after {len(data)} of {count} bytes")
        data += chunk
    return data


def recv_until_closed(sock: socket.socket, limit: int = 1 << 16) -> bytes:
    data = b""
    while len(data) < limit:
        try:
            chunk = sock.recv(4096)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.settimeout(10)
    return sock


def store_garbage(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(GARBAGE)
        rest = recv_until_closed(sock)
    assert rest.startswith(b"RCST"), f"store greeting: {rest[:8]!r}"


def store_wrong_secret(port: int) -> None:
    """The store's handshake (tcp_store.h) answered with an HMAC under the wrong secret."""
    with connect(port) as sock:
        greeting = recv_exact(sock, 6)
        assert greeting[:4] == b"RCST" and greeting[5] == 1, f"store greeting {greeting!r}"
        server_nonce = recv_exact(sock, 32)
        client_nonce = bytes(32)
        proof = hmac.new(WRONG_SECRET, b"ringcc-store-client" + server_nonce + client_nonce, hashlib.sha256).digest()
        sock.sendall(client_nonce + proof)
        verdict = recv_until_closed(sock)
    assert verdict == b"\x00", f"the store should refuse (0) and close, it sent {verdict!r}"


LINK_GREETING_BYTES = 40  # "RCC2", the acceptor's rank, its nonce


def link_claim(secret: bytes, job_id: bytes, greeting: bytes, claimed: int, index: int = 0) -> bytes:
    """The connector's half of the link handshake (tcp_transport.cc) under `secret`."""
    (acceptor,) = struct.unpack("<i", greeting[4:8])
    acceptor_nonce, connector_nonce = greeting[8:40], bytes(range(32))
    message = (
        b"ringcc-link-connector\0"
        + struct.pack("<i", len(job_id))
        + job_id
        + struct.pack("<iii", acceptor, claimed, index)
        + acceptor_nonce
        + connector_nonce
    )
    proof = hmac.new(secret, message, hashlib.sha256).digest()
    return b"RCC2" + struct.pack("<ii", claimed, index) + connector_nonce + proof


def data_garbage(port: int) -> None:
    with connect(port) as sock:
        greeting = recv_exact(sock, LINK_GREETING_BYTES)
        assert greeting[:4] == b"RCC2", f"data port greeting {greeting[:4]!r}"
        sock.sendall(GARBAGE)
        assert recv_until_closed(sock) == b"", "a rank answered garbage"


def data_wrong_secret(port: int, size: int) -> None:
    """The link handshake, claiming a real rank, with a proof under the wrong secret."""
    with connect(port) as sock:
        greeting = recv_exact(sock, LINK_GREETING_BYTES)
        assert greeting[:4] == b"RCC2", f"data port greeting {greeting[:4]!r}"
        (acceptor,) = struct.unpack("<i", greeting[4:8])
        assert 0 <= acceptor < size
        sock.sendall(link_claim(WRONG_SECRET, b"", greeting, (acceptor + 1) % size))
        assert recv_until_closed(sock) == b"", "a rank accepted a link proven with the wrong secret"


def data_silent(port: int) -> None:
    with connect(port) as sock:
        recv_exact(sock, LINK_GREETING_BYTES)


def wait_for_files(paths, process, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not all(p.exists() for p in paths):
        if process.poll() is not None or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def test_strangers_are_refused_and_the_job_goes_on(ranks):
    out_dir = ranks.scratch_dir("stranger")
    command, env = failure_job(ranks, 2, out_dir, ["stranger"], {"RINGCC_TRANSPORT": "tcp"})
    stdout_path, stderr_path = out_dir / "stdout.txt", out_dir / "stderr.txt"
    started = time.monotonic()
    process = ranks.start(command, env, stdout_path, stderr_path)
    try:
        port_files = [out_dir / f"ports{rank}.json" for rank in range(2)]
        wait_for_files(port_files, process, 60)
        if not all(p.exists() for p in port_files):
            raise AssertionError("the ranks did not report their ports")
        ports = [json.loads(p.read_text()) for p in port_files]
        store_port = ports[0]["store_port"]
        data_ports = ports[0]["data_ports"] + ports[1]["data_ports"]
        assert ports[0]["transport"] == "tcp", ports
        assert ports[0]["data_ports"] and ports[1]["data_ports"], f"a rank listens on no data port: {ports}"

        store_garbage(store_port)
        store_wrong_secret(store_port)
        for port in data_ports:
            data_garbage(port)
            data_wrong_secret(port, 2)
            data_silent(port)
    finally:
        (out_dir / "stop").touch()
        completed = ranks.finish(process, command, stdout_path, stderr_path, HARD_LIMIT_S, started)

    assert completed.returncode == 0, completed.describe()
    for rank in range(2):
        outcome = read_outcome(out_dir, rank, completed)
        context = f"rank {rank}: {outcome}\n{completed.describe()}"
        assert outcome["errors"] == [] and outcome["wrong_results"] == 0, context
        assert outcome["iterations"] > 0 and outcome["stopped_by_test"], context
    refusals = [line for line in completed.stderr.splitlines() if "refused a connection" in line]
    # Strangers may connect as often as they like: each rank logs each kind
    # of refusal from one address once every few seconds, not each one.
    kinds = ("authentication failed", "wrong job secret", "bad greeting", "no answer to the handshake")
    assert len(refusals) <= 2 * 2 * len(kinds), completed.describe()
    # The log line names the rank that refused ("[ringcc <time> <host> rank 0 pid <pid>] WARNING: ...").
    assert any("authentication failed" in line and re.search(r" rank 0 pid \d+\] ", line) for line in refusals), (
        completed.describe()
    )
    assert any("wrong job secret" in line for line in refusals), completed.describe()
    assert any("bad greeting" in line for line in refusals), completed.describe()
