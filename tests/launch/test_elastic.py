"""Elastic training: Horovod's elastic API (ringcc.elastic, hvd.elastic) and
ringrun's elastic mode (ringcc/launch/elastic_driver.py).

Units first (no processes): State and run_fn as Horovod defines them, the
sampler, TorchState, the driver's pieces and its authenticated protocol.
Then jobs: a framework-free job through a killed worker and a refill after
the blacklist's cooldown, through a stopped (SIGSTOP) worker, against the
reset limit and --min-np; and PyTorch training through 2 workers, then 1
(killed, or its host removed from discovery), then 2 again (a host added to
discovery), whose parameters must equal, bit for bit, a replay of the same
memberships at the same steps (tests/launch/elastic_scenario.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rank_groups import finish_command, rank_environment, ringrun_command, run_command, start_command

import ringcc
import ringcc.elastic as elastic
from ringcc.elastic import protocol
from ringcc.launch import blacklist, cli, discovery, rpc_server

HERE = Path(__file__).resolve().parent

JOB_LIMIT_S = 120
STEPS = 200  # enough for a worker to start and join before the end


# --------------------------------------------------------------------------
# State and run_fn


class Recorder(elastic.ObjectState):
    def __init__(self, **kwargs):
        self.calls = []
        super().__init__(lambda obj: obj, lambda: 0, **kwargs)

    def sync(self):
        self.calls.append("sync")
        super().sync()

    def restore(self):
        self.calls.append("restore")
        super().restore()

    def reset(self):
        self.calls.append("reset")


def test_commit_raises_hosts_updated_interrupt_once_per_update():
    state = Recorder(x=1)
    state.commit()  # nothing new
    state.on_hosts_updated(10.0, elastic.HostUpdateResult.added)
    with pytest.raises(elastic.HostsUpdatedInterrupt) as raised:
        state.commit()
    assert raised.value.skip_sync is False
    state.commit()  # already seen
    state.on_hosts_updated(5.0, elastic.HostUpdateResult.removed)  # older than the last one seen
    state.check_host_updates()
    state.on_hosts_updated(11.0, elastic.HostUpdateResult.removed)
    with pytest.raises(elastic.HostsUpdatedInterrupt) as raised:
        state.check_host_updates()
    assert raised.value.skip_sync is True  # only removals: the remaining workers share the state
    state.on_hosts_updated(12.0, elastic.HostUpdateResult.removed)
    state.on_hosts_updated(13.0, elastic.HostUpdateResult.added)
    with pytest.raises(elastic.HostsUpdatedInterrupt) as raised:
        state.check_host_updates()
    assert raised.value.skip_sync is False


def test_run_restores_after_a_failure_and_keeps_the_state_after_an_interrupt():
    state = Recorder(x=0)
    resets, callbacks = [], []
    state.register_reset_callbacks([lambda: callbacks.append(state.x)])
    attempts = []

    def reset():
        resets.append(len(attempts))

    def train(state):
        attempts.append(state.x)
        if len(attempts) == 1:
            state.x = 5
            state.commit()
            state.x = 6  # not committed: undone by the failure
            raise ringcc.PeerFailureError("rank 1 exited or crashed during allreduce")
        if len(attempts) == 2:
            state.x = 7
            state.commit()
            raise elastic.HostsUpdatedInterrupt(skip_sync=True)
        if len(attempts) == 3:
            raise elastic.HorovodInternalError("a collective failed")
        return state.x

    assert elastic.run_fn(train, reset)(state) == 7
    assert attempts == [0, 5, 7, 7]
    assert resets == [1, 2, 3]
    assert callbacks == [5, 7, 7]
    # sync before the first call, none after the interrupt that skips it, and after the failures
    assert state.calls == ["sync", "restore", "reset", "sync", "reset", "restore", "reset", "sync"]


def test_run_raises_what_is_not_a_failure_of_the_job():
    def train(state):
        raise ringcc.MismatchError("ranks disagree on the number of elements")

    with pytest.raises(ringcc.MismatchError):
        elastic.run_fn(train, lambda: None)(Recorder())
    with pytest.raises(ZeroDivisionError):
        elastic.run_fn(lambda state: 1 / 0, lambda: None)(Recorder())


def test_object_state_save_restore_sync():
    state = elastic.ObjectState(lambda obj: {**obj, "epoch": 9}, lambda: 0, epoch=1, batch=2)
    state.epoch = 3
    state.restore()
    assert (state.epoch, state.batch) == (1, 2)
    state.epoch = 4
    state.save()
    state.epoch = 5
    state.restore()
    assert state.epoch == 4
    state.sync()
    assert state.epoch == 9


# --------------------------------------------------------------------------
# PyTorch: ElasticSampler and TorchState


@pytest.fixture
def hvd_of_size(monkeypatch):
    torch = pytest.importorskip("torch")
    from ringcc.torch import horovod

    def set_size(size, rank):
        monkeypatch.setattr(horovod, "size", lambda: size)
        monkeypatch.setattr(horovod, "rank", lambda: rank)

    return torch, set_size


def test_elastic_sampler_shares_out_what_is_left(hvd_of_size):
    _, set_size = hvd_of_size
    from ringcc.torch.elastic import ElasticSampler

    set_size(3, 1)
    sampler = ElasticSampler(range(10), shuffle=False)
    assert list(sampler) == [1, 4, 7, 0] and len(sampler) == 4  # padded with the first samples
    sampler.record_batch(0, 2)  # every rank did 2: 6 processed
    saved = sampler.state_dict()
    assert saved == {"epoch": 0, "processed_num": 6}
    set_size(2, 0)
    sampler.load_state_dict(saved)
    assert list(sampler) == [6, 8]
    set_size(2, 1)
    sampler.reset()
    assert list(sampler) == [7, 9]
    sampler.set_epoch(1)
    assert len(sampler) == 5
    shuffled = ElasticSampler(range(10), shuffle=True, seed=3)
    again = ElasticSampler(range(10), shuffle=True, seed=3)
    assert list(shuffled) == list(again) and sorted(list(shuffled)) != list(shuffled)


def test_replay_deals_out_samples_as_the_sampler_does(hvd_of_size):
    """tests/launch/elastic_train.py's replay against ElasticSampler itself, driven as the training
    drives it: 2, 3, 1 and 3 workers, the changes in mid-epoch, one reset without a change of
    size; the sampler pads once per deal, from the start of what it deals out."""
    _, set_size = hvd_of_size
    from ringcc.torch.elastic import ElasticSampler

    sys.path.insert(0, str(HERE))
    import elastic_train

    sizes = [2] * 5 + [3] * 7 + [1] * 3 + [3] * 30
    resets = [5, 12, 15, 25]
    batch = elastic_train.BATCH
    saved = {"epoch": 0, "processed_num": 0}
    want = []
    while len(want) < len(sizes):
        n = sizes[len(want)]
        dealt = []
        for rank in range(n):
            set_size(n, rank)
            sampler = ElasticSampler(range(elastic_train.SAMPLES), shuffle=True, seed=0)
            sampler.load_state_dict(saved)
            dealt.append(list(sampler))
        for start in range(0, len(dealt[0]), batch):
            want.append([indices[start : start + batch] for indices in dealt])
            saved["processed_num"] += batch * n
            if len(want) == len(sizes) or len(want) in resets:
                break
        else:
            saved = {"epoch": saved["epoch"] + 1, "processed_num": 0}
    assert list(elastic_train.dealt_batches(sizes, resets)) == want


def test_torch_state_commits_and_restores_models_optimizers_samplers_and_objects(hvd_of_size):
    torch, set_size = hvd_of_size
    from ringcc.torch.elastic import ElasticSampler, TorchState

    set_size(1, 0)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sampler = ElasticSampler(range(8))
    state = TorchState(model, optimizer, sampler=sampler, epoch=0)
    weight = model.weight.detach().clone()
    model(torch.ones(4, 3)).sum().backward()
    optimizer.step()
    sampler.record_batch(0, 2)
    state.epoch = 1
    state.restore()
    assert torch.equal(model.weight, weight) and not optimizer.state_dict()["state"]
    assert sampler.processed_num == 0 and state.epoch == 0
    optimizer.step()
    sampler.record_batch(0, 2)
    state.epoch = 2
    state.save()  # commit() without the check for host updates (a broadcast)
    committed = model.weight.detach().clone()
    optimizer.step()
    state.restore()
    assert torch.equal(model.weight, committed) and sampler.processed_num == 2 and state.epoch == 2
    other = torch.nn.Linear(3, 2)
    state.model = other  # a handled attribute replaced: committed at once
    assert state.model is other and torch.equal(state._handlers["model"]._saved_model_state["weight"], other.weight)


def test_hvd_elastic_is_ringcc_torch_elastic():
    pytest.importorskip("torch")
    import ringcc.torch as hvd

    assert hvd.elastic.run and hvd.elastic.TorchState and hvd.elastic.ElasticSampler
    assert hvd.HostsUpdatedInterrupt is elastic.HostsUpdatedInterrupt
    assert hvd.HorovodInternalError is hvd.elastic.HorovodInternalError is elastic.HorovodInternalError


# --------------------------------------------------------------------------
# The driver's pieces


def test_discovery_output_and_slots():
    text = "host-1:4\nhost-2\n\n[fd00::1]:2\nfd00::2\n"
    assert discovery.parse_discovery_output(text, 3) == {"host-1": 4, "host-2": 3, "fd00::1": 2, "fd00::2": 3}
    with pytest.raises(Exception, match="slot count"):
        discovery.parse_discovery_output("host:x\n", 1)


def test_blacklist_cooldown_doubles_within_the_range(monkeypatch):
    monkeypatch.setattr(blacklist.random, "uniform", lambda a, b: 0.5)
    state = blacklist.HostState((10, 100))
    assert state.blacklist(1000.0) == 25.0 and not state.available(1010.0)
    assert state.available(1025.0)
    assert state.blacklist(2000.0) == 45.0
    assert state.blacklist(2001.0) == 44.0  # still cooling down: the same end
    for start in (3000.0, 4000.0, 5000.0):
        seconds = state.blacklist(start)
    assert seconds == 100.0
    forever = blacklist.HostState(None)
    assert forever.blacklist(0.0) == float("inf") and not forever.available(1e12)


def test_ringrun_parses_elastic_options(tmp_path):
    parser = cli.build_parser()
    options, command = parser.split_command(
        ["-np", "2", "--blacklist-cooldown-range", "1", "5", "--min-np", "1", "python", "train.py", "--min-np", "7"]
    )
    assert command == ["python", "train.py", "--min-np", "7"]
    args = parser.parse_args(options)
    assert args.blacklist_cooldown_range == [1, 5] and args.min_np == 1 and cli.is_elastic(args)
    for argv, message in (
        (["--min-np", "3", "-np", "2"], "--min-np (3) <= -np (2)"),
        (["-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "0", "5"], "MIN >= 1"),
        (["-np", "2", "--reset-limit", "3"], "--reset-limit applies to elastic mode"),
        (["-np", "2", "--host-discovery-script", "x.sh", "-H", "a:2"], "not both"),
        (["-np", "2", "--min-np", "1", "--output-filename", "logs"], "--output-filename is not available in elastic"),
        (["-np", "2", "--min-np", "1", "--mpi"], "elastic mode does not start workers through mpirun (--mpi)"),
    ):
        completed = run_command([sys.executable, "-m", "ringcc.launcher", *argv, "true"], rank_environment(), 30)
        assert completed.returncode == 2 and message in completed.stderr, completed.describe()
    # Timeouts that are no number of seconds stop the launch rather than being ignored.
    elastic = ["-np", "2", "--min-np", "1"]
    for argv, env, message in (
        (["--elastic-timeout", "-1"], {}, "--elastic-timeout must be a number of seconds >= 0"),
        ([], {"HOROVOD_ELASTIC_TIMEOUT": "ten"}, "HOROVOD_ELASTIC_TIMEOUT='ten' is not a number of seconds"),
        ([], {"RINGCC_ELASTIC_TIMEOUT_S": "-5"}, "RINGCC_ELASTIC_TIMEOUT_S='-5' is not a number of seconds"),
        ([], {"RINGCC_ELASTIC_DISCOVERY_INTERVAL_S": "0"}, "must be more than 0 seconds"),
    ):
        command = [sys.executable, "-m", "ringcc.launcher", *elastic, *argv, "true"]
        completed = run_command(command, rank_environment(env), 30)
        assert completed.returncode == 2 and message in completed.stderr, completed.describe()


def serve_in_thread(secret: bytes, handle, **options):
    """A RequestServer on a port of 127.0.0.1; returns it, its port and the lines it logged."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    lines = []
    requests = rpc_server.RequestServer(listener, secret, threading.Lock(), handle, lines.append, **options)
    requests.start()
    return requests, listener.getsockname()[1], lines


def closed_by_peer(sock) -> bool:
    """The peer closed the connection (a reset: it closed with bytes of ours unread)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def refusals_told(lines) -> int:
    """The refused connections that these log lines tell of, one each or counted."""
    told = 0
    for line in lines:
        counted = re.search(r"(\d+) more connection\(s\) from", line)
        if counted:
            told += int(counted.group(1))
            continue
        told += 1
        held_back = re.search(r"\((\d+) more held back\)", line)
        if held_back:
            told += int(held_back.group(1))
    return told


def wait_until(condition, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def test_protocol_refuses_strangers_wrong_secrets_and_replays():
    handled = []
    requests, port, lines = serve_in_thread(b"right", lambda request: handled.append(request) or {"ok": True})
    try:
        assert protocol.request("127.0.0.1", port, b"right", {"op": "x"}, 5) == {"ok": True}
        with pytest.raises((protocol.ProtocolError, OSError)):
            protocol.request("127.0.0.1", port, b"wrong", {"op": "y"}, 5)
        # A recorded request sent again (the server's nonce is new): refused.
        with socket.create_connection(("127.0.0.1", port), 5) as sock:
            nonce = protocol._recv_exact(sock, protocol.NONCE_BYTES)
            recorded = protocol.request_frame(b"right", nonce, json.dumps({"op": "z", "nonce": "00" * 32}).encode())
            sock.sendall(recorded)
            assert protocol._recv_exact(sock, protocol.HEADER_BYTES)
        with socket.create_connection(("127.0.0.1", port), 5) as sock:
            protocol._recv_exact(sock, protocol.NONCE_BYTES)
            sock.sendall(recorded)
            assert closed_by_peer(sock)
        # Garbage, a frame too long to read, and a reply passed off as a request.
        with socket.create_connection(("127.0.0.1", port), 5) as sock:
            nonce = protocol._recv_exact(sock, protocol.NONCE_BYTES)
            sock.sendall(protocol.request_frame(b"right", nonce, b"x" * (protocol.MAX_REQUEST + 1)))
            assert closed_by_peer(sock)
        with socket.create_connection(("127.0.0.1", port), 5) as sock:
            nonce = protocol._recv_exact(sock, protocol.NONCE_BYTES)
            sock.sendall(protocol.reply_frame(b"right", b"", nonce, b'{"op": "w"}'))
            assert closed_by_peer(sock)
        for junk in (b"\x00\x00\x00\x05hello" + b"x" * 32, b"\xff\xff\xff\xff" + b"x" * 32):
            with socket.create_connection(("127.0.0.1", port), 5) as sock:
                protocol._recv_exact(sock, protocol.NONCE_BYTES)
                sock.sendall(junk)
                assert closed_by_peer(sock)
        assert [r["op"] for r in handled] == ["x", "z"]
        # One line for the first refusal; the rest are counted, within the interval.
        assert wait_until(lambda: lines) and len(lines) == 1, lines
        assert "refused a connection from 127.0.0.1" in lines[0], lines
    finally:
        requests.close()


def test_refusals_are_logged_once_per_interval_and_address_with_a_count():
    lines = []
    refusals = rpc_server.ThrottledLog(lines.append, 5.0)
    for i in range(100):
        refusals.note("10.0.0.9", f"refused {i}", 100.0 + i * 0.01)
    refusals.note("10.0.0.8", "refused other", 100.5)
    assert lines == ["refused 0", "refused other"]
    assert refusals.flush(101.0) == 105.0  # when the 99 held back are due
    refusals.note("10.0.0.9", "refused late", 105.5)
    assert lines[-1] == "refused late (99 more held back)"
    refusals.note("10.0.0.9", "x", 106.0)
    refusals.note("10.0.0.9", "y", 107.0)
    assert refusals.flush(111.2) is None and len(lines) == 4
    assert lines[-1] == "elastic mode: 2 more connection(s) from 10.0.0.9 refused or failed in the last 6 s"


def test_a_stranger_is_refused_on_its_header_and_a_whole_request_has_a_deadline(monkeypatch):
    """Nothing past the fixed header of a request without the job secret is read: the server
    closes the connection on the header alone, whatever length it claims. Connections that
    trickle their requests (a byte every 0.2 s, each in time for a deadline per read) are closed
    at the request's deadline, their refusals logged as one line and a count. A held join holds
    up no other request, and the server starts no thread for a connection (none can be
    started here)."""
    answer = []

    def handle(request):
        if request["op"] == "join":
            return rpc_server.Wait(lambda now: answer[0] if answer else None)
        return {"op": request["op"]}

    requests, port, lines = serve_in_thread(b"right", handle, request_deadline_s=1.0, log_interval_s=0.5)
    joined = []
    join = threading.Thread(
        target=lambda: joined.append(protocol.request("127.0.0.1", port, b"right", {"op": "join"}, 10)), daemon=True
    )
    join.start()

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    trickling = []
    try:
        with socket.create_connection(("127.0.0.1", port), 5) as sock:
            protocol._recv_exact(sock, protocol.NONCE_BYTES)
            sock.sendall(b"\x00\x01\x00\x00" + b"m" * protocol.MAC_BYTES)  # says 64 KiB follow
            assert closed_by_peer(sock)
        # Refused for its MAC: judged on the header alone, as no more came.
        assert wait_until(lambda: lines) and "without the job secret" in lines[0], lines
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", port), 5)
            protocol._recv_exact(sock, protocol.NONCE_BYTES)
            trickling.append(sock)
        began = time.monotonic()
        closed_after = {}
        while time.monotonic() - began < 3.0 and len(closed_after) < len(trickling):
            for sock in trickling:
                if sock not in closed_after:
                    try:
                        sock.send(b"\x00")
                    except OSError:
                        closed_after[sock] = time.monotonic() - began
            assert protocol.request("127.0.0.1", port, b"right", {"op": "ping"}, 5) == {"op": "ping"}
            time.sleep(0.2)
        assert len(closed_after) == len(trickling) and max(closed_after.values()) < 2.0, closed_after
        assert not joined
        answer.append({"op": "joined"})
        requests.wake()
        join.join(5)
        assert joined == [{"op": "joined"}]
        # Every one of the 20 refusals is logged or counted, in a few lines.
        assert wait_until(lambda: refusals_told(lines[1:]) == 20), lines
        assert len(lines) <= 4 and "no whole request within 1 s" in lines[1], lines
    finally:
        for sock in trickling:
            sock.close()
        requests.close()


# --------------------------------------------------------------------------
# Jobs without a framework


def numpy_job(tmp_path, launcher_options, job_args, env=None):
    out = tmp_path / "out"
    out.mkdir()
    command = ringrun_command(
        2,
        [str(HERE / "elastic_numpy_job.py"), "--out", str(out), *job_args],
        ["--timeout", str(JOB_LIMIT_S), *launcher_options],
    )
    completed = run_command(command, rank_environment(env), JOB_LIMIT_S + 30, cwd=str(tmp_path))
    result_path = out / "result.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    steps = []
    for path in out.glob("*.jsonl"):
        steps += [json.loads(line) for line in path.read_text().splitlines()]
    return completed, result, sorted(steps, key=lambda s: s["t"])


def sizes_seen(steps):
    sizes = []
    for step in steps:
        if not sizes or sizes[-1] != step["size"]:
            sizes.append(step["size"])
    return sizes


def test_a_killed_worker_is_replaced_after_the_cooldown(tmp_path):
    """2 workers, one killed at step 10: the other goes on alone within a second, and after
    the host's cooldown a new worker joins (2 again); the sum is as if nothing happened."""
    completed, result, steps = numpy_job(
        tmp_path,
        ["--min-np", "1", "--max-np", "2", "--blacklist-cooldown-range", "1", "1"],
        ["--fault", "kill", "--steps", "150"],
    )
    assert completed.returncode == 0, completed.describe()
    assert result["total"] == [150.0] * 8 and result["step"] == 150, result
    assert sizes_seen(steps) == [2, 1, 2], (sizes_seen(steps), completed.describe())
    assert "blacklisted for 1.0 s" in completed.stderr and "membership 3: 2 worker(s)" in completed.stderr
    killed = [s for s in steps if s["step"] == 10 and s["rank"] == 1][0]
    first_alone = [s for s in steps if s["size"] == 1][0]
    assert first_alone["t"] - killed["t"] < 5.0, completed.describe()
    pids = {str(s["pid"]) for s in steps}
    left = [name for name in os.listdir("/dev/shm") if any(f"-p{pid}-" in name for pid in pids)]
    assert not left, left


# ringrun with at most LIMIT threads in its process, as under a limit on tasks (ulimit -u, a
# cgroup's pids.max): python -c THREAD_LIMITED_RINGRUN LIMIT ringrun-arguments...
THREAD_LIMITED_RINGRUN = """
import sys
import threading

from ringcc.launch import cli


limit = int(sys.argv[1])
start = threading.Thread.start


def start_within_the_limit(self):
    if threading.active_count() >= limit:
        raise RuntimeError("can't start new thread")
    start(self)


threading.Thread.start = start_within_the_limit
sys.exit(cli.main(sys.argv[2:]))
"""


class Trickle:
    """`count` connections to `address` that each send a byte every `every_s` seconds (a
    connection the server closes is opened again), for at most `limit_s` seconds."""

    def __init__(self, address, count: int, every_s: float, limit_s: float) -> None:
        self.address, self.count, self.every_s, self.limit_s = address, count, every_s, limit_s
        self.stopped = threading.Event()
        self.opened = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        socks = [None] * self.count
        end = time.monotonic() + self.limit_s
        while time.monotonic() < end and not self.stopped.is_set():
            for i in range(self.count):
                if self.stopped.is_set():
                    break
                try:
                    if socks[i] is None:
                        socks[i] = socket.create_connection(self.address, timeout=1)
                        self.opened += 1
                    socks[i].send(b"\x00")
                except OSError:
                    if socks[i] is not None:
                        socks[i].close()
                    socks[i] = None
            self.stopped.wait(self.every_s)
        for sock in socks:
            if sock is not None:
                sock.close()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(10)


def driver_address(pid: int):
    """Where the worker of this pid reaches ringrun's elastic driver."""
    with open(f"/proc/{pid}/environ", "rb") as file:
        for entry in file.read().split(b"\0"):
            if entry.startswith(b"RINGCC_ELASTIC_DRIVER="):
                host, _, port = entry.split(b"=", 1)[1].decode().rpartition(":")
                return host, int(port)
    raise AssertionError(f"no RINGCC_ELASTIC_DRIVER in the environment of {pid}")


def read_steps(out: Path) -> list[dict]:
    steps = []
    for path in out.glob("*.jsonl"):
        steps += [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return sorted(steps, key=lambda s: s["t"])


def test_slow_connections_and_a_limit_on_threads_do_not_stop_the_driver(tmp_path):
    """150 connections to the driver that trickle a byte every 2 s, and 300 that send a
    header without the job secret, while ringrun may have at most 16 threads: a worker is
    killed, and the other still gets its new membership within seconds and finishes the job;
    the refusals take a few lines of the log, not one each."""
    out = tmp_path / "out"
    out.mkdir()
    steps = 500
    command = [
        sys.executable,
        "-c",
        THREAD_LIMITED_RINGRUN,
        "16",
        "-np",
        "2",
        "--min-np",
        "1",
        "--max-np",
        "2",
        "--timeout",
        "60",
        "--",
        sys.executable,
        str(HERE / "elastic_numpy_job.py"),
        "--out",
        str(out),
        "--steps",
        str(steps),
        "--step-time",
        "0.02",
    ]
    stdout_path, stderr_path = tmp_path / "stdout", tmp_path / "stderr"
    started = time.monotonic()
    process = start_command(command, rank_environment(), stdout_path, stderr_path, cwd=str(tmp_path))
    trickle = None
    try:
        assert wait_until(lambda: len({s["pid"] for s in read_steps(out)}) == 2 or process.poll() is not None, 60)
        first = read_steps(out)
        address = driver_address(first[0]["pid"])
        trickle = Trickle(address, 150, 2.0, 60)
        wait_until(lambda: trickle.opened >= 150, 3)  # a driver that takes no more connections: on at once
        for _ in range(300):
            try:
                with socket.create_connection(address, timeout=1) as sock:
                    sock.sendall(b"\x00\x00\x00\x10" + b"m" * protocol.MAC_BYTES)
            except OSError:
                break  # the driver takes no more connections: what follows shows it
        victim = [s for s in read_steps(out) if s["rank"] == 1][-1]["pid"]
        os.kill(victim, signal.SIGKILL)
        killed = time.time()
        alone = wait_until(lambda: any(s["size"] == 1 and s["t"] > killed for s in read_steps(out)), 15)
        assert alone, f"no step of 1 worker within 15 s of the kill: {stderr_path.read_text()[-3000:]}"
        assert trickle.opened >= 150
        completed = finish_command(process, command, stdout_path, stderr_path, 60, started)
    finally:
        if trickle is not None:
            trickle.stop()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    assert completed.returncode == 0, completed.describe()
    result = json.loads((out / "result.json").read_text())
    assert result["total"] == [float(steps)] * 8 and result["size"] == 1, result
    assert "membership 2: 1 worker(s)" in completed.stderr
    refusals = [line for line in completed.stderr.splitlines() if "from 127.0.0.1" in line]
    assert 1 <= len(refusals) <= 6, completed.describe()


def processes_with(marker: str) -> list[int]:
    """The processes whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as file:
                    if marker.encode() in file.read():
                        found.append(int(entry))
            except OSError:
                pass  # gone meanwhile
    return found


@pytest.mark.parametrize("when", ["first", "later"])
def test_a_discovery_script_that_hangs_is_killed_with_its_process_group(tmp_path, when):
    """A discovery script whose child hangs with the output pipes open: the first run (ringrun
    --timeout 3 ends the job within its time), or a later one (past
    RINGCC_ELASTIC_DISCOVERY_TIMEOUT_S, while the job runs and finishes). No process of the
    script is left once ringrun has exited."""
    marker = f"1000.{os.getpid()}{time.time_ns() % 10**6}"  # sleep's argument, this test's own
    script = tmp_path / "discover.sh"
    if when == "first":
        script.write_text(f"#!/bin/sh\nsleep {marker} &\nwait\n")
    else:
        ran = tmp_path / "ran"
        script.write_text(
            f"#!/bin/sh\nif [ -e {ran} ]; then sh -c 'sleep {marker}'; fi\ntouch {ran}\necho localhost:1\n"
        )
    script.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    command = ringrun_command(
        1,
        [str(HERE / "elastic_numpy_job.py"), "--out", str(out), "--steps", "80"],
        ["--min-np", "1", "--host-discovery-script", str(script), "--timeout", "3" if when == "first" else "60"],
    )
    try:
        # The first run has the default timeout (60 s): ringrun's --timeout ends it.
        env = rank_environment({} if when == "first" else {"RINGCC_ELASTIC_DISCOVERY_TIMEOUT_S": "1"})
        completed = run_command(command, env, 30, cwd=str(tmp_path))
        assert wait_until(lambda: not processes_with(marker), 3), processes_with(marker)
    finally:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)
    if when == "first":
        assert completed.returncode == 124 and completed.seconds < 15, completed.describe()
    else:
        assert completed.returncode == 0, completed.describe()
        assert "ran for more than 1 s; its process group was killed (trying again)" in completed.stderr


def test_a_stopped_worker_is_timed_out_killed_and_left_behind(tmp_path):
    """A worker stopped with SIGSTOP: the other's collective times out (RINGCC_TIMEOUT_S), the
    driver kills the stopped one when it does not come to the next membership, and the job
    finishes with one worker."""
    completed, result, steps = numpy_job(
        tmp_path,
        ["--min-np", "1", "--max-np", "2"],
        ["--fault", "stop", "--steps", "40"],
        env={"RINGCC_TIMEOUT_S": "3"},
    )
    assert completed.returncode == 0, completed.describe()
    assert result["total"] == [40.0] * 8 and result["size"] == 1, result
    assert "did not leave membership 1 within 3 s" in completed.stderr, completed.describe()
    assert "killed by signal SIGKILL" in completed.stderr


def test_reset_limit_stops_the_job(tmp_path):
    completed, result, _ = numpy_job(
        tmp_path, ["--min-np", "1", "--max-np", "2", "--reset-limit", "0"], ["--fault", "kill"]
    )
    assert completed.returncode not in (0, None) and result is None, completed.describe()
    assert "the --reset-limit" in completed.stderr


@pytest.mark.parametrize(
    "timeout_options, env",
    [
        (["--elastic-timeout", "2"], {}),
        ([], {"HOROVOD_ELASTIC_TIMEOUT": "2"}),
        ([], {"RINGCC_ELASTIC_TIMEOUT_S": "2", "HOROVOD_ELASTIC_TIMEOUT": "1"}),
        (["--elastic-timeout", "2"], {"RINGCC_ELASTIC_TIMEOUT_S": "1"}),
    ],
    ids=["flag", "horovod-env", "ringcc-env-beats-horovod-env", "flag-beats-env"],
)
def test_too_few_workers_for_min_np_stops_the_job_after_the_elastic_timeout(tmp_path, timeout_options, env):
    """The wait for --min-np workers: --elastic-timeout, else RINGCC_ELASTIC_TIMEOUT_S, else
    HOROVOD_ELASTIC_TIMEOUT (docs/elastic.md); the losing setting is shorter, so a wrong
    precedence shows as the wrong number of seconds."""
    completed, result, _ = numpy_job(
        tmp_path, ["--min-np", "2", "--max-np", "2", *timeout_options], ["--fault", "kill"], env=env
    )
    assert completed.returncode not in (0, None) and result is None, completed.describe()
    assert "timed out after 2 s waiting for --min-np 2 workers" in completed.stderr, completed.describe()


# --------------------------------------------------------------------------
# PyTorch training through membership changes


@pytest.mark.parametrize("removal", [False, True], ids=["killed", "host-removed"])
def test_torch_training_through_2_1_2_workers_equals_a_replay(tmp_path, removal):
    """hvd.elastic.run with TorchState, ElasticSampler and DistributedOptimizer: 2 workers,
    then 1 (kill -9, or the host removed from discovery: the worker leaves at a commit), then
    2 (a host added to discovery). The final parameters equal, bit for bit, those of a replay
    with the same size at every kept step; the changes take at most 5 s (to 1 worker) and
    15 s (a new worker's first step; 10 s on an idle machine, docs/benchmarks.md)."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(HERE))
    import elastic_scenario
    import elastic_train

    env = rank_environment({"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")})
    summary = elastic_scenario.run(
        tmp_path / "out", STEPS, removal, env, [sys.executable, "-m", "ringcc.launcher"], limit_s=JOB_LIMIT_S
    )
    log = (tmp_path / "out" / "ringrun.log").read_text(errors="replace")
    assert summary["returncode"] == 0, log[-4000:]
    sizes = summary["sizes"]
    assert len(sizes) == STEPS and sizes_seen([{"size": s} for s in sizes]) == [2, 1, 2], sizes
    assert summary["to_one_worker_s"] < 5.0, summary
    assert summary["added_worker_first_step_s"] < 15.0, summary
    got = torch.load(tmp_path / "out" / "final.pt")
    want = elastic_train.replay(sizes, summary["resets_at"])
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), f"parameter {i} differs from the replay: {(g - w).abs().max()}"
    assert ("blacklisted" in log) is not removal, log[-3000:]
    left = [name for name in os.listdir("/dev/shm") if any(f"-p{pid}-" in name for pid in summary["pids"])]
    assert not left, left


def test_torch_training_through_3_then_2_workers_in_mid_epoch_equals_a_replay(tmp_path):
    """3 workers; rank 2 kills itself after step 6, in mid-epoch: the other two go back to the
    commit of step 4 and the sampler deals out what is left of the epoch between them, padding
    it once (95 samples). The final parameters equal, bit for bit, the replay's."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(HERE))
    import elastic_scenario
    import elastic_train

    env = rank_environment({"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")})
    steps = 24
    summary = elastic_scenario.run_through_kill(
        tmp_path / "out", 3, steps, 2, 6, env, [sys.executable, "-m", "ringcc.launcher"], limit_s=JOB_LIMIT_S
    )
    log = (tmp_path / "out" / "ringrun.log").read_text(errors="replace")
    assert summary["returncode"] == 0, log[-4000:]
    assert summary["sizes"] == [3] * 4 + [2] * (steps - 4), (summary, log[-3000:])
    assert summary["resets_at"] == [4], summary
    got = torch.load(tmp_path / "out" / "final.pt")
    want = elastic_train.replay(summary["sizes"], summary["resets_at"])
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), f"parameter {i} differs from the replay: {(g - w).abs().max()}"
    left = [name for name in os.listdir("/dev/shm") if any(f"-p{pid}-" in name for pid in summary["pids"])]
    assert not left, left


@pytest.mark.parametrize("code", [0, 3])
def test_workers_that_end_before_joining_end_the_job(tmp_path, code):
    """Workers that never call ringcc.init(): the job ends with their status, at once."""
    command = [
        sys.executable,
        "-m",
        "ringcc.launcher",
        "-np",
        "2",
        "--min-np",
        "1",
        "--timeout",
        "60",
        sys.executable,
        "-c",
        f"raise SystemExit({code})",
    ]
    completed = run_command(command, rank_environment(), 90, cwd=str(tmp_path))
    assert completed.returncode == code and completed.seconds < 30, completed.describe()
    if code:
        assert "every worker failed before the first membership met" in completed.stderr
