"""Who may join a job: the job secret, the store's and the links' mutual
authentication, where ringcc listens, and what it leaves in /dev/shm.

Strangers here are Python socket clients that know the wire protocols
(core/rendezvous/tcp_store.h, core/transport/tcp_transport.cc) but not the job secret. Ranks run
as plain processes with a launcher's variables (torchrun's, ringrun's) set
by the test, or as communicators on threads of this process that meet
through a store the test controls. Every wait is bounded.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from rank_groups import rank_environment, ringcc

_core = ringcc._core

WRONG_SECRET = b"not the job secret"
PROCESS_LIMIT_S = 60
SHM_DIR = Path("/dev/shm")

# A rank: waits for the file TEST_WAIT_FOR when set, joins the job, runs a
# direct and a named allreduce and records them in OUT/result<rank>.json.
RANK_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    import numpy as np
    import ringcc
    out = sys.argv[1]
    go = os.environ.get("TEST_WAIT_FOR")
    deadline = time.monotonic() + 30
    while go and not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        ringcc.init()
    except ringcc.RingccError as error:
        print("INIT-ERROR", type(error).__name__, error, flush=True)
        sys.exit(3)
    rank = ringcc.rank()
    total = float(ringcc.allreduce(np.full(4, rank + 1.0))[0])
    named = float(ringcc.allreduce_async(np.ones(3), name="n").wait()[0])
    with open(os.path.join(out, "result%d.json" % rank), "w") as file:
        json.dump({"sum": total, "named": named, "transport": ringcc.transport_name()}, file)
    ringcc.shutdown()
    """
)


# --------------------------------------------------------------------------
# Helpers


def free_port_pair() -> int:
    """A port P such that P and P + 1 are free (MASTER_PORT and ringcc's store port)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        if port >= 65535:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("", port))
                b.bind(("", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("no two free consecutive ports")


def start_rank(tmp_path: Path, name: str, env: dict) -> subprocess.Popen:
    out = open(tmp_path / f"{name}.out", "wb")
    with out:
        return subprocess.Popen(
            [sys.executable, "-c", RANK_SCRIPT, str(tmp_path)],
            env=rank_environment(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def finish(process: subprocess.Popen, tmp_path: Path, name: str, limit: float = PROCESS_LIMIT_S) -> str:
    try:
        process.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return (tmp_path / f"{name}.out").read_text(errors="replace")


def results(tmp_path: Path, size: int) -> list:
    found = []
    for rank in range(size):
        path = tmp_path / f"result{rank}.json"
        found.append(json.loads(path.read_text()) if path.exists() else None)
    return found


def connect_when_listening(port: int, limit: float = 20) -> socket.socket:
    deadline = time.monotonic() + limit
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.settimeout(10)
            return sock
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


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
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
    return data


def listen_addresses(port: int) -> set:
    """The IPv4 addresses (dotted) on which some socket of this network namespace listens at `port`."""
    addresses = set()
    with open("/proc/net/tcp", encoding="ascii") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            address, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:
                addresses.add(socket.inet_ntoa(struct.pack("<I", int(address, 16))))
    return addresses


def store_request(sock: socket.socket, op: int, key: bytes, value: bytes) -> tuple:
    """One request of the store protocol on an authenticated (or open) connection."""
    sock.sendall(struct.pack("<BQQ", op, len(key), len(value)) + key + value)
    status, size = struct.unpack("<BQ", recv_exact(sock, 9))
    return status, recv_exact(sock, size)


def stranger_at_store(port: int) -> str:
    """Tries what a stranger who reaches the store can do without the secret.

    Returns what it got: "refused" when the store demanded a proof and
    refused a wrong one, else raises AssertionError describing what leaked."""
    with connect_when_listening(port) as sock:
        greeting = recv_exact(sock, 6)
        assert greeting[:4] == b"RCST", greeting
        if greeting[5] == 0:  # an open store: read what rank 0 put there
            leaked = {}
            for key in (b"ringcc/secret", b"ringcc/job", b"engine/ringcc/secret"):
                status, value = store_request(sock, 2, key, struct.pack("<q", 3000))
                if status == 0:
                    leaked[key.decode()] = value.decode(errors="replace")
            raise AssertionError(f"the store let a stranger in without a secret and it read {leaked}")
        server_nonce = recv_exact(sock, 32)
        client_nonce = os.urandom(32)
        proof = hmac.new(WRONG_SECRET, b"ringcc-store-client" + server_nonce + client_nonce, hashlib.sha256).digest()
        sock.sendall(client_nonce + proof)
        verdict = recv_until_closed(sock)
    assert verdict == b"\x00", f"the store answered a wrong proof with {verdict!r}"
    return "refused"


LINK_GREETING_BYTES = 40  # "RCC2", the acceptor's rank, its nonce


def link_claim(secret: bytes, job_id: bytes, greeting: bytes, claimed: int, index: int = 0) -> bytes:
    """The connector's half of the link handshake under `secret`."""
    (acceptor,) = struct.unpack("<i", greeting[4:8])
    acceptor_nonce, connector_nonce = greeting[8:40], os.urandom(32)
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


def our_shm_entries(*needles: str) -> list:
    """Entries of /dev/shm whose names contain any of `needles`."""
    try:
        names = os.listdir(SHM_DIR)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if any(needle in n for needle in needles))


SECRET_DIR = SHM_DIR / f"ringcc-u{os.geteuid()}"


def host_secret_path(store_port: int) -> Path:
    return SECRET_DIR / f"ringcc-secret-port{store_port}"


# --------------------------------------------------------------------------
# A job under torchrun's variables, no RINGCC_SECRET: a stranger tries the store


def test_torchrun_style_job_without_secret_keeps_strangers_out(tmp_path):
    port = free_port_pair()
    go = tmp_path / "go"
    base = {
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": socket.gethostname(),
        "MASTER_PORT": str(port),
        "RINGCC_TRANSPORT": "tcp",
        "RINGCC_TIMEOUT_S": "30",
    }
    rank0 = start_rank(tmp_path, "rank0", {**base, "RANK": "0", "LOCAL_RANK": "0"})
    rank1 = start_rank(tmp_path, "rank1", {**base, "RANK": "1", "LOCAL_RANK": "1", "TEST_WAIT_FOR": str(go)})
    try:
        # Rank 0 serves the store and waits for rank 1, which waits for us.
        assert stranger_at_store(port + 1) == "refused"
        assert listen_addresses(port + 1) == {"127.0.0.1"}, (
            "every rank is on this host: the store should listen on 127.0.0.1 only"
        )
    finally:
        go.touch()
        outputs = [finish(rank0, tmp_path, "rank0"), finish(rank1, tmp_path, "rank1")]
    assert [rank0.returncode, rank1.returncode] == [0, 0], outputs
    assert [r and (r["sum"], r["named"]) for r in results(tmp_path, 2)] == [(3.0, 2.0)] * 2, outputs
    assert "refused a connection from 127.0.0.1" in outputs[0], outputs[0]
    assert not host_secret_path(port + 1).exists(), "the job's secret file outlived its start"


# --------------------------------------------------------------------------
# Communicators on threads of this process, meeting through a store we control


class DictStore:
    """A store (set/get/add/check) over a dict shared by several views; a
    view may run `hook(key)` whenever its rank checks for a key."""

    def __init__(self, shared=None, lock=None, hook=None):
        self.data = {} if shared is None else shared
        self.lock = threading.Lock() if lock is None else lock
        self.hook = hook

    def view(self, hook=None) -> DictStore:
        return DictStore(self.data, self.lock, hook)

    def set(self, key, value):
        with self.lock:
            self.data[key] = bytes(value)

    def get(self, key):
        with self.lock:
            return self.data[key]

    def add(self, key, delta):
        with self.lock:
            value = int(self.data.get(key, b"0")) + delta
            self.data[key] = str(value).encode()
            return value

    def check(self, keys):
        for key in keys:
            if self.hook is not None:
                self.hook(key)
        with self.lock:
            return all(k in self.data for k in keys)


def join_on_threads(stores, timeout_s: float):
    """Creates one communicator per store (rank = index) on its own thread.
    Returns {rank: communicator or exception}."""
    outcome = {}

    def join(rank):
        try:
            outcome[rank] = _core.Communicator(rank, len(stores), stores[rank], timeout_s)
        except Exception as error:  # noqa: BLE001 - reported to the test
            outcome[rank] = error

    threads = [threading.Thread(target=join, args=(r,), daemon=True) for r in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s + 15)
    assert all(not t.is_alive() for t in threads), f"a communicator did not finish joining: {outcome}"
    return outcome


def link_address(store: DictStore, rank: int) -> tuple:
    host, port = store.get(f"ringcc/tcp/{rank}").decode().split("\n")[:2]
    return host, int(port)


def test_link_strangers_are_refused_and_real_peers_still_connect(monkeypatch):
    """Silent, garbage and wrong-secret connections to rank 0's link port,
    made just before rank 1 connects, neither get in nor hold rank 1 up."""
    monkeypatch.setenv("RINGCC_TRANSPORT", "tcp")
    monkeypatch.delenv("RINGCC_SECRET", raising=False)
    shared = DictStore()
    strangers = []
    seen = {}

    def before_rank1_reads_address(key):
        if key != "ringcc/tcp/0" or "port" in seen or "ringcc/tcp/0" not in shared.data:
            return
        host, port = link_address(shared, 0)
        seen["port"] = port
        seen["listening"] = listen_addresses(port)
        for _ in range(3):  # each would hold a one-at-a-time acceptor for its 5 s timeout
            sock = socket.create_connection((host, port), timeout=5)
            strangers.append(sock)
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.settimeout(10)
            sock.sendall(b"GET / HTTP/1.1\r\n\r\n" + bytes(range(80)))
            seen["garbage"] = recv_until_closed(sock)
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.settimeout(10)
            greeting = recv_exact(sock, LINK_GREETING_BYTES)
            sock.sendall(link_claim(WRONG_SECRET, shared.get("ringcc/job"), greeting, claimed=1))
            seen["wrong_secret"] = recv_until_closed(sock)

    try:
        started = time.monotonic()
        comms = join_on_threads([shared.view(), shared.view(before_rank1_reads_address)], timeout_s=20)
        joined_s = time.monotonic() - started
        assert all(isinstance(c, _core.Communicator) for c in comms.values()), comms
        assert "port" in seen, "rank 1 never looked up rank 0's address"
        assert joined_s < 8, f"rank 1 took {joined_s:.1f} s to connect past silent strangers"
        assert seen["listening"] == {"127.0.0.1"}, (
            f"every rank is on this host: links should listen on 127.0.0.1 only, not {seen['listening']}"
        )
        assert seen["garbage"].startswith(b"RCC2") and len(seen["garbage"]) == LINK_GREETING_BYTES, seen
        assert seen["wrong_secret"] == b"", "a rank accepted a link proven with the wrong secret"
        how = shared.get("ringcc/secret-how").decode()
        assert how.startswith("file "), f"same-host ranks should share a private secret file, not {how!r}"
        assert not Path(how[5:]).exists(), "the secret file outlived the ranks' start"
        assert b"ringcc/secret" not in {k.encode() for k in shared.data}, "the secret travelled in the store"

        sums = {}

        def reduce(rank):
            sums[rank] = comms[rank].allreduce(np.full(5, rank + 1.0))

        threads = [threading.Thread(target=reduce, args=(r,)) for r in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert [list(sums[r]) for r in range(2)] == [[3.0] * 5] * 2
    finally:
        for sock in strangers:
            sock.close()
        leaving = [
            threading.Thread(target=c.shutdown, daemon=True)
            for c in locals().get("comms", {}).values()
            if isinstance(c, _core.Communicator)
        ]
        for t in leaving:
            t.start()
        for t in leaving:
            t.join(30)


def test_connecting_rank_refuses_an_impostor_and_replays_fail(monkeypatch):
    """Rank 1 is sent to an impostor that listens where rank 0 should be.
    The impostor relays rank 0's real greeting but does not know the secret:
    rank 1 must not take it for rank 0. Replaying the claim rank 1 made, on a
    new connection to the real rank 0, must fail too."""
    monkeypatch.setenv("RINGCC_TRANSPORT", "tcp")
    monkeypatch.setenv("RINGCC_SECRET", "the secret both real ranks know")
    shared = DictStore()
    impostor = socket.socket()
    impostor.bind(("127.0.0.1", 0))
    impostor.listen(4)
    impostor.settimeout(20)
    seen = {}

    def impersonate():
        try:
            while "ringcc/tcp/0" not in shared.data:
                time.sleep(0.01)
            real = socket.create_connection(link_address(shared, 0), timeout=10)
            real.settimeout(10)
            greeting = recv_exact(real, 40)
            victim, _ = impostor.accept()
            victim.settimeout(10)
            victim.sendall(greeting)
            claim_bytes = 76 if greeting[:4] == b"RCC2" else 44
            claim = recv_exact(victim, claim_bytes)
            seen["claim"] = claim
            # The claim, replayed on a new connection to rank 0, meets a fresh nonce.
            with socket.create_connection(link_address(shared, 0), timeout=10) as again:
                again.settimeout(10)
                recv_exact(again, 40)
                again.sendall(claim)
                seen["replay"] = recv_until_closed(again)
            victim.sendall(b"\x01" + (os.urandom(32) if claim_bytes == 76 else b""))
            seen["victim_after"] = recv_until_closed(victim)
            victim.close()
            real.close()
        except Exception as error:  # noqa: BLE001 - reported to the test
            seen["error"] = repr(error)

    def misdirect(key):
        if key == "ringcc/tcp/0" and key in shared.data and "misdirected" not in seen:
            seen["misdirected"] = True
            with shared.lock:
                seen["real"] = shared.data[key]
            # Rank 1 reads the impostor's address; rank 0 keeps its own.
            rank1_view.overrides[key] = f"127.0.0.1\n{impostor.getsockname()[1]}".encode()

    class OverridingView(DictStore):
        overrides = {}

        def get(self, key):
            return self.overrides.get(key) or super().get(key)

    rank1_view = OverridingView(shared.data, shared.lock, misdirect)
    thread = threading.Thread(target=impersonate, daemon=True)
    thread.start()
    try:
        comms = join_on_threads([shared.view(), rank1_view], timeout_s=3)
    finally:
        thread.join(20)
        impostor.close()
    assert "claim" in seen, f"rank 1 never reached the impostor: {comms} {seen.get('error')}"
    rank1 = comms[1]
    assert not isinstance(rank1, _core.Communicator), (
        "rank 1 accepted a link from an impostor that does not know the job secret"
    )
    assert isinstance(rank1, ringcc.PeerFailureError) and "could not prove" in str(rank1), repr(rank1)
    assert "error" not in seen, seen.get("error")
    assert seen["replay"] == b"", "rank 0 accepted a replayed handshake"
    for c in comms.values():
        if isinstance(c, _core.Communicator):
            c.shutdown()


def test_store_client_refuses_a_store_that_cannot_prove_the_secret():
    """A process listening where rank 0's store should be, that accepts any
    answer, is not taken for the store."""
    fake = socket.socket()
    fake.bind(("127.0.0.1", 0))
    fake.listen(1)
    fake.settimeout(10)
    seen = {}

    def serve():
        try:
            conn, _ = fake.accept()
            with conn:
                conn.settimeout(10)
                conn.sendall(b"RCST\x02\x01" + os.urandom(32))
                seen["answer"] = recv_exact(conn, 64)
                conn.sendall(b"\x01" + os.urandom(32))  # "accepted", with a proof it cannot make
                seen["after"] = recv_until_closed(conn)
        except Exception as error:  # noqa: BLE001 - reported to the test
            seen["error"] = repr(error)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with pytest.raises(ringcc.PeerFailureError, match="could not prove that it knows the job secret"):
            _core.TcpStore("127.0.0.1", fake.getsockname()[1], "the job secret", timeout=5)
    finally:
        thread.join(15)
        fake.close()
    assert "error" not in seen, seen
    assert seen["after"] == b"", "the client sent a request to a store that did not prove the secret"


# --------------------------------------------------------------------------
# Jobs that may span hosts


def test_job_that_may_span_hosts_needs_a_secret(tmp_path):
    port = free_port_pair()
    spread = {"WORLD_SIZE": "2", "MASTER_ADDR": socket.gethostname(), "MASTER_PORT": str(port), "RINGCC_TIMEOUT_S": "5"}
    # Nothing says the ranks share a host and there is no secret: refused at once.
    started = time.monotonic()
    alone = start_rank(tmp_path, "alone", {**spread, "RANK": "0"})
    output = finish(alone, tmp_path, "alone")
    assert alone.returncode == 3 and "INIT-ERROR InvalidArgumentError" in output, output
    assert "RINGCC_SECRET" in output and "RINGCC_INSECURE=1" in output, output
    assert time.monotonic() - started < 4.5, "the refusal should come at once, not after a timeout"

    # RINGCC_INSECURE=1: starts, with a warning.
    ranks = [start_rank(tmp_path, f"insecure{r}", {**spread, "RANK": str(r), "RINGCC_INSECURE": "1"}) for r in range(2)]
    outputs = [finish(p, tmp_path, f"insecure{r}") for r, p in enumerate(ranks)]
    assert [p.returncode for p in ranks] == [0, 0], outputs
    assert all("WARNING: RINGCC_INSECURE=1" in out for out in outputs), outputs
    assert [r["sum"] for r in results(tmp_path, 2)] == [3.0, 3.0]

    # RINGCC_SECRET_FILE: starts, and the store authenticates.
    secret_file = tmp_path / "secret"
    secret_file.write_text("a secret from a file\n")
    secret_file.chmod(0o600)
    for r in range(2):
        (tmp_path / f"result{r}.json").unlink()
    port = free_port_pair()
    go = tmp_path / "go"
    with_secret = {
        **spread,
        "MASTER_PORT": str(port),
        "RINGCC_SECRET_FILE": str(secret_file),
        "RINGCC_TRANSPORT": "tcp",
    }
    ranks = [
        start_rank(tmp_path, f"file{r}", {**with_secret, "RANK": str(r), **({"TEST_WAIT_FOR": str(go)} if r else {})})
        for r in range(2)
    ]
    try:
        assert stranger_at_store(port + 1) == "refused"
    finally:
        go.touch()
        outputs = [finish(p, tmp_path, f"file{r}") for r, p in enumerate(ranks)]
    assert [p.returncode for p in ranks] == [0, 0], outputs
    assert [r["sum"] for r in results(tmp_path, 2)] == [3.0, 3.0]


# --------------------------------------------------------------------------
# Strangers while a job runs: its store and its links keep them out, and
# the collectives' results stay right

# A rank that runs checked allreduces (direct and named) until the file STOP
# exists (or 40 s pass), after writing READY<rank>; it records how many ran
# and how many came out wrong.
RUNNING_RANK_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    import numpy as np
    import ringcc
    out = sys.argv[1]
    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    open(os.path.join(out, "ready%d" % rank), "w").close()
    ran = wrong = 0
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        # Both ranks stop at the same step: rank 0 decides and tells rank 1.
        stop = ringcc.broadcast(np.array([os.path.exists(os.path.join(out, "stop"))], dtype=np.int32), root=0)
        if stop[0]:
            break
        base = np.arange(50000, dtype=np.float64) * (ran + 1)
        total = ringcc.allreduce(base + rank)
        wrong += int(not np.array_equal(total, 2 * base + sum(range(size))))
        named = ringcc.allreduce_async(np.full(1000, float(rank + ran)), name="step").wait()
        wrong += int(not np.array_equal(named, np.full(1000, float(2 * ran + 1))))
        ran += 1
    with open(os.path.join(out, "result%d.json" % rank), "w") as file:
        json.dump({"ran": ran, "wrong": wrong, "transport": ringcc.transport_name()}, file)
    ringcc.shutdown()
    """
)

SECRET = b"the secret of the running job"


def store_answer(secret: bytes, server_nonce: bytes) -> bytes:
    """The client's half of the store handshake under `secret`."""
    client_nonce = os.urandom(32)
    proof = hmac.new(secret, b"ringcc-store-client" + server_nonce + client_nonce, hashlib.sha256).digest()
    return client_nonce + proof


def store_greeting(port: int) -> tuple:
    sock = connect_when_listening(port)
    greeting = recv_exact(sock, 6 + 32)
    assert greeting[:4] == b"RCST" and greeting[5] == 1, greeting
    return sock, greeting[6:]


def attack_store(port: int) -> dict:
    """Garbage, a wrong secret and a replayed handshake at the store.
    Returns what each got back before the store closed the connection."""
    seen = {}
    sock, _ = store_greeting(port)
    with sock:
        sock.sendall(os.urandom(64))  # as long as an answer: nothing is left unread
        seen["garbage"] = recv_until_closed(sock)
    sock, nonce = store_greeting(port)
    with sock:
        sock.sendall(store_answer(WRONG_SECRET, nonce))
        seen["wrong_secret"] = recv_until_closed(sock)
    # A handshake recorded from a real client (made with the secret for one
    # connection's nonce), replayed on another connection, with a request.
    sock, nonce = store_greeting(port)
    with sock:
        recorded = store_answer(SECRET, nonce)
        sock.sendall(recorded)
        seen["recorded"] = recv_exact(sock, 33)[:1]
    sock, _ = store_greeting(port)
    with sock:
        sock.sendall(recorded)
        seen["replayed"] = recv_until_closed(sock)
    return seen


def attack_link(address: tuple, job_id: bytes, claimed: int) -> dict:
    """Garbage, a wrong secret, a replayed claim and a fresh claim to a
    link that is already connected, at one rank's listening port."""
    seen = {}
    with socket.create_connection(address, timeout=10) as sock:
        sock.settimeout(10)
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n" + os.urandom(62))  # a claim's length
        seen["garbage"] = recv_until_closed(sock)[LINK_GREETING_BYTES:]
    with socket.create_connection(address, timeout=10) as sock:
        sock.settimeout(10)
        greeting = recv_exact(sock, LINK_GREETING_BYTES)
        sock.sendall(link_claim(WRONG_SECRET, job_id, greeting, claimed=claimed))
        seen["wrong_secret"] = recv_until_closed(sock)
    # A claim made with the secret (what a recording of the real handshake
    # would hold) for one connection's nonce ...
    with socket.create_connection(address, timeout=10) as sock:
        sock.settimeout(10)
        greeting = recv_exact(sock, LINK_GREETING_BYTES)
        recorded = link_claim(SECRET, job_id, greeting, claimed=claimed)
        sock.sendall(recorded)
        # ... is refused all the same: the real rank holds that link.
        seen["duplicate"] = recv_until_closed(sock)
    # ... and replayed on a new connection meets a fresh nonce.
    with socket.create_connection(address, timeout=10) as sock:
        sock.settimeout(10)
        recv_exact(sock, LINK_GREETING_BYTES)
        sock.sendall(recorded)
        seen["replayed"] = recv_until_closed(sock)
    return seen


def test_strangers_during_a_run_are_refused_and_results_stay_right(tmp_path):
    port = free_port_pair()
    env = {
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RINGCC_TRANSPORT": "tcp",
        "RINGCC_SECRET": SECRET.decode(),
        "RINGCC_TIMEOUT_S": "30",
    }
    procs = []
    for rank in range(2):
        with open(tmp_path / f"rank{rank}.out", "wb") as out:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", RUNNING_RANK_SCRIPT, str(tmp_path)],
                    env=rank_environment({**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
    silent = []
    try:
        deadline = time.monotonic() + 30
        while not all((tmp_path / f"ready{r}").exists() for r in range(2)):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), [
                finish(p, tmp_path, f"rank{r}", 1) for r, p in enumerate(procs)
            ]
            time.sleep(0.02)
        # An insider's look at where the links listen (strangers would scan).
        store = _core.TcpStore("127.0.0.1", port + 1, SECRET, timeout=10)
        job_id = store.get("ringcc/job", timeout=10)
        links = [link_address(store, r) for r in range(2)]
        # Silent connections, held for the whole attack.
        for address in [("127.0.0.1", port + 1), *links]:
            for _ in range(5):
                silent.append(socket.create_connection(address, timeout=10))
        # Rounds spread over a second or so of collectives.
        rounds = []
        for _ in range(3):
            rounds.append(
                (
                    attack_store(port + 1),
                    [attack_link(links[0], job_id, claimed=1), attack_link(links[1], job_id, claimed=0)],
                )
            )
            time.sleep(0.3)
    finally:
        (tmp_path / "stop").touch()
        outputs = [finish(p, tmp_path, f"rank{r}") for r, p in enumerate(procs)]
        for sock in silent:
            sock.close()
    assert [p.returncode for p in procs] == [0, 0], outputs
    found = results(tmp_path, 2)
    assert all(r and r["transport"] == "tcp" for r in found), found
    assert found[0]["ran"] == found[1]["ran"] > 0 and [r["wrong"] for r in found] == [0, 0], found

    for store_seen, link_seen in rounds:
        assert store_seen["garbage"] == b"\x00", store_seen
        assert store_seen["wrong_secret"] == b"\x00", store_seen
        assert store_seen["recorded"] == b"\x01", "the real handshake should have been accepted"
        assert store_seen["replayed"] == b"\x00", "the store accepted a replayed handshake"
        for rank, seen in enumerate(link_seen):
            assert seen == {"garbage": b"", "wrong_secret": b"", "duplicate": b"", "replayed": b""}, (rank, seen)
    # Each kind of refusal was logged with its reason (rank 0 serves the
    # store), once per source and reason every few seconds: the rounds
    # came within a few seconds, from one address, so each kind once (the
    # store's refusals and the link's wrong secret).
    assert 2 <= outputs[0].count("authentication failed") <= 3, outputs[0]
    assert "unexpected or duplicate connection claiming rank 1" in outputs[0], outputs[0]
    assert "unexpected or duplicate connection claiming rank 0" in outputs[1], outputs[1]
    assert "not a ringcc peer (bad greeting)" in outputs[1], outputs[1]


# --------------------------------------------------------------------------
# /dev/shm after failures during shared-memory setup


def rank0_in_shm_setup(tmp_path: Path, name: str, env: dict, secret_of) -> tuple:
    """Starts rank 0 of a 2-rank ringrun-style job and plays rank 1 far enough
    (through the store) that rank 0 creates its segment and waits for ours.
    Returns (process, job id)."""
    port = free_port_pair()
    process = start_rank(
        tmp_path,
        name,
        {
            "RINGCC_RANK": "0",
            "RINGCC_SIZE": "2",
            "RINGCC_MASTER_ADDR": "127.0.0.1",
            "RINGCC_MASTER_PORT": str(port),
            "RINGCC_HOSTNAME": "shm-test-host",
            "RINGCC_TIMEOUT_S": "3",
            **env,
        },
    )
    deadline = time.monotonic() + 20
    while True:  # the store is up once rank 0 listens (and, without a secret, has made its file)
        try:
            store = _core.TcpStore("127.0.0.1", port, secret_of(port), timeout=1)
            break
        except (ringcc.RingccError, OSError, IndexError):
            if time.monotonic() > deadline or process.poll() is not None:
                raise
            time.sleep(0.05)
    job = store.get("ringcc/job", timeout=10).decode()
    # What rank 1 would publish: its host and the settings the ranks compare
    # (the same environment as rank 0's, so the same text).
    store.set("ringcc/host/1", store.get("ringcc/host/0", timeout=10))
    return process, job


def test_nothing_left_in_dev_shm_after_setup_failures(tmp_path):
    if not SHM_DIR.is_dir():
        pytest.skip("no /dev/shm")
    # 1. Killed (SIGKILL) while waiting for its peer during shared-memory
    #    setup: its segment (and its job's secret file) cannot be removed
    #    by the process itself.
    secret_port = {}

    def host_secret(port):
        secret_port["port"] = port
        lines = host_secret_path(port).read_text().splitlines()
        return lines[1]

    killed, killed_job = rank0_in_shm_setup(tmp_path, "killed", {}, host_secret)
    deadline = time.monotonic() + 20
    while not our_shm_entries(killed_job) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert our_shm_entries(killed_job), "rank 0 never created its segment"
    killed.send_signal(signal.SIGKILL)
    killed.wait(10)

    # 2. Fails (its peer never maps its segment) during shared-memory setup;
    #    setting up also clears what the killed job left.
    failing, failing_job = rank0_in_shm_setup(tmp_path, "failing", {"RINGCC_SECRET": "s3"}, lambda port: "s3")
    output = finish(failing, tmp_path, "failing", limit=30)
    assert failing.returncode == 3 and "TimeoutError" in output, output
    left = our_shm_entries(killed_job, failing_job)
    assert not left, f"left in /dev/shm after failed setups: {left}"
    assert not host_secret_path(secret_port["port"]).exists(), "the killed job's secret file is still there"


def test_a_rank_stopped_by_sigterm_during_setup_leaves_nothing(tmp_path):
    """SIGTERM (how ringrun, torchrun and SLURM stop ranks) while rank 0
    waits in shared-memory setup: it leaves through Python's exit path at
    once and removes its segment itself."""
    if not SHM_DIR.is_dir():
        pytest.skip("no /dev/shm")
    stopped, job = rank0_in_shm_setup(
        tmp_path, "stopped", {"RINGCC_SECRET": "s4", "RINGCC_TIMEOUT_S": "30"}, lambda port: "s4"
    )
    deadline = time.monotonic() + 20
    while not our_shm_entries(job) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert our_shm_entries(job), "rank 0 never created its segment"
    sent = time.monotonic()
    stopped.send_signal(signal.SIGTERM)
    output = finish(stopped, tmp_path, "stopped", limit=20)
    assert time.monotonic() - sent < 5, f"rank 0 took {time.monotonic() - sent:.1f} s to stop\n{output}"
    assert stopped.returncode == 128 + signal.SIGTERM, output
    assert not our_shm_entries(job), f"left in /dev/shm: {our_shm_entries(job)}"


def test_a_flood_of_refused_connections_is_logged_in_a_few_lines(capfd):
    """Strangers may connect as often as they like: the store logs one line
    per source address and reason every few seconds, not one per refusal."""
    server = _core.TcpStoreServer("127.0.0.1", 0, "the secret")
    for _ in range(300):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.settimeout(10)
            recv_exact(sock, 6 + 32)
            sock.sendall(os.urandom(64))
            assert recv_until_closed(sock) == b"\x00"
    del server
    err = capfd.readouterr().err
    assert 1 <= err.count("refused a connection from 127.0.0.1:") <= 2, err
