"""Tests of the bench across namespace hosts: the hosts are made, reach each
other and are removed whatever happens (adapters/ringcc/bench/netns_hosts.py), the one-way
TCP bandwidth and the exchange round between them are measured
(adapters/ringcc/bench/tcp_bandwidth.py, tcp_exchange.py), and the
summary reads the bench's JSON (adapters/ringcc/bench/netns_bench.py). The namespace tests
need root and iproute2 and are skipped without them."""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ringcc.bench import machine_cpu, tcp_bandwidth, tcp_exchange  # noqa: E402
from ringcc.bench.netns_bench import (  # noqa: E402
    layout_summary,
    parse_layout,
    tcp_bytes_per_busbw_byte,
)
from ringcc.bench.netns_hosts import INTERFACE, NamespaceHosts, can_make_hosts  # noqa: E402
from ringcc.bench.peers_gloo import gloo_interface, interface_toward  # noqa: E402
from ringcc.bench.peers_mpi import PACKAGE_PARENT  # noqa: E402

needs_namespaces = pytest.mark.skipif(can_make_hosts() is not None, reason=str(can_make_hosts()))


def namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=20).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


@needs_namespaces
@pytest.mark.parametrize("count", [2, 4])
def test_hosts_reach_each_other_and_are_removed(count):
    with NamespaceHosts(count, tag="rcbt-reach") as hosts:
        made = set(hosts.names) | ({hosts.switch} if hosts.switch else set())
        assert made <= namespaces()
        hosts.wait_reachable()
        # The last host reaches the first too (through the bridge with 4).
        probe = (
            "import socket, sys\n"
            "try: socket.create_connection((sys.argv[1], 9), timeout=5)\n"
            "except ConnectionRefusedError: pass"
        )
        subprocess.run(hosts.exec(count - 1, [sys.executable, "-c", probe, hosts.addresses[0]]), check=True, timeout=30)
    assert not made & namespaces()


@needs_namespaces
def test_hosts_are_removed_when_the_block_fails():
    with pytest.raises(RuntimeError, match="on purpose"):
        with NamespaceHosts(4, tag="rcbt-fail") as hosts:
            made = set(hosts.names) | {hosts.switch}
            raise RuntimeError("on purpose")
    assert not made & namespaces()


@needs_namespaces
def test_tcp_bandwidth_between_hosts():
    with NamespaceHosts(2, tag="rcbt-bw") as hosts:
        result = tcp_bandwidth.measure(hosts, 0, 1, seconds=0.2, repeats=1)
    assert result["gbps"] > 0.01
    assert result["from"] == hosts.names[0] and result["to"] == hosts.names[1]
    # The stream's CPU time: both ends work for every byte, so somewhere
    # between a sliver of one CPU and all of the machine's were busy.
    busy = result["runs_cpus_busy"][0]
    assert 0.05 < busy <= len(os.sched_getaffinity(0)) + 0.5
    assert result["cpu_ns_per_byte"] == pytest.approx(busy / result["gbps"], rel=0.05)


@needs_namespaces
def test_tcp_bandwidth_both_ways_between_hosts():
    with NamespaceHosts(2, tag="rcbt-bw2") as hosts:
        result = tcp_bandwidth.measure(hosts, 0, 1, seconds=0.2, repeats=1, both_ways=True)
    assert result["both_ways"] and result["gbps"] > 0.01
    # Both directions' bytes share the CPUs the readings count.
    busy = result["runs_cpus_busy"][0]
    assert 0.05 < busy <= len(os.sched_getaffinity(0)) + 0.5
    assert result["cpu_ns_per_byte"] < busy / result["gbps"]


def test_tcp_bandwidth_both_ways_carries_each_direction():
    import threading

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        server.close()
    out = {}
    t = threading.Thread(target=lambda: out.update(tcp_bandwidth.serve(port, 30, both_ways=True, seconds=0.2)))
    t.start()
    tcp_bandwidth.send("127.0.0.1", port, 0.2, 1 << 16, 30, both_ways=True)
    t.join(timeout=60)
    assert out["bytes"] > 0 and out["bytes_sent"] > 0 and out["gbps"] > 0


@needs_namespaces
def test_tcp_exchange_between_hosts():
    with NamespaceHosts(2, tag="rcbt-xch") as hosts:
        result = tcp_exchange.measure(hosts, 0, 1, rounds=2000, repeats=1)
    assert result["between"] == hosts.names[:2] and result["bytes"] == 256
    # A round trip's half at least, well under a millisecond between namespaces.
    assert 0.5 < result["us_per_round"] < 1000


def test_tcp_exchange_times_rounds_of_both_ends():
    import threading

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        ends = {}

        # Both ends are threads of this process, taking turns at the GIL:
        # enough rounds, and switches often enough, that one switch more or
        # less in an end's timed window stays small beside it.
        rounds = 2000

        def serve_one():
            conn, _ = server.accept()
            with conn:
                ends["server"] = tcp_exchange.exchange(conn, 64, rounds, timeout_s=30)

        interval = sys.getswitchinterval()
        sys.setswitchinterval(0.001)
        try:
            t = threading.Thread(target=serve_one)
            t.start()
            ends["join"] = tcp_exchange.join("127.0.0.1", port, 64, rounds, timeout_s=30)
            t.join(timeout=30)
        finally:
            sys.setswitchinterval(interval)
    assert ends["join"]["rounds"] == rounds and ends["join"]["bytes"] == 64
    # Both ends wait for each other every round: the same pace, give or take the start.
    assert 0 < ends["server"] * 1e6 < 10_000
    assert ends["join"]["us_per_round"] == pytest.approx(ends["server"] * 1e6, rel=0.5)


def test_tcp_exchange_reports_a_peer_that_leaves():
    import threading

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def leave_early():
            conn, _ = server.accept()
            with conn:
                conn.recv(16)  # the first frame, then gone

        t = threading.Thread(target=leave_early)
        t.start()
        with pytest.raises(tcp_exchange.PeerGone, match="closed the connection"):
            tcp_exchange.join("127.0.0.1", port, 16, 100, timeout_s=30)
        t.join(timeout=30)


def test_tcp_exchange_waits_no_longer_than_its_timeout():
    import threading

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        release = threading.Event()

        def stay_silent():
            conn, _ = server.accept()
            with conn:
                release.wait(30)

        t = threading.Thread(target=stay_silent)
        t.start()
        start = time.monotonic()
        try:
            with pytest.raises(TimeoutError, match="no frame from the peer in 0.5 s"):
                tcp_exchange.join("127.0.0.1", port, 16, 100, timeout_s=0.5)
        finally:
            release.set()
            t.join(timeout=30)
    assert time.monotonic() - start < 10


def test_gloo_interface_leaves_loopback_jobs_and_takes_ringccs_setting(monkeypatch):
    for name in ("RINGCC_SOCKET_IFNAME", "HOROVOD_GLOO_IFACE", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        monkeypatch.delenv(name, raising=False)
    assert interface_toward("127.0.0.1") == "lo"
    assert gloo_interface("127.0.0.1") is None  # every rank on this host: gloo's own choice works
    monkeypatch.setenv("RINGCC_SOCKET_IFNAME", "127.0.0.0/8")  # as ringrun --network-interface SUBNET sets it
    assert gloo_interface("192.0.2.1") == "lo"


def job_env():
    """The environment of a job on namespace hosts: no interface variable, and
    the ringcc these tests import (a checkout's or the installed one)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("SOCKET_IFNAME") and k != "HOROVOD_GLOO_IFACE"}
    env["PYTHONPATH"] = PACKAGE_PARENT
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    return env


@needs_namespaces
def test_interface_toward_rank_0_inside_a_namespace_host():
    with NamespaceHosts(2, tag="rcbt-gif") as hosts:
        code = "import sys; from ringcc.bench.peers_gloo import gloo_interface as g; print(g(sys.argv[1]))"
        env = job_env()
        for i in (0, 1):  # rank 0's own host too: its address toward itself
            out = subprocess.run(
                hosts.exec(i, [sys.executable, "-c", code, hosts.addresses[0]]),
                capture_output=True,
                text=True,
                timeout=60,
                env=env,
            )
            assert out.returncode == 0, out.stderr
            assert out.stdout.strip() == INTERFACE


def bench_gloo_across_hosts(tmp_path, gloo_ifname=None, peer_timeout=60):
    """ringcc.bench.allreduce --compare gloo on 2 namespace hosts, 8 B only;
    gloo_ifname: the GLOO_SOCKET_IFNAME the ranks get (None: none).
    Returns (the job's CompletedProcess, its seconds, its JSON or None)."""
    from ringcc.bench.netns_bench import find_ringrun

    out = tmp_path / "gloo.json"
    env = job_env()
    exported = ["-x", "PYTHONPATH", "-x", "PATH"]
    with NamespaceHosts(2, tag="rcbt-gloo") as hosts:
        hosts.wait_reachable()
        if gloo_ifname:  # ringcc's links keep to the hosts' subnet (RINGCC_SOCKET_IFNAME comes first)
            env["GLOO_SOCKET_IFNAME"] = gloo_ifname
            exported += ["-x", "GLOO_SOCKET_IFNAME", "--network-interface", hosts.subnet]
        cmd = [find_ringrun(), "--no-prefix", "-np", "2", "-H", hosts.host_list(1), "--agent", hosts.AGENT]
        cmd += ["--master-addr", hosts.addresses[0], *exported, sys.executable]
        cmd += ["-m", "ringcc.bench.allreduce", "--compare", "gloo", "--ops", "allreduce", "--minbytes", "8"]
        cmd += ["--maxbytes", "8", "--repeats", "1", "--target-s", "0.01", "--peer-timeout", str(peer_timeout)]
        cmd += ["--no-progress", "--json", str(out)]
        start = time.monotonic()
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
        seconds = time.monotonic() - start
    return result, seconds, json.loads(out.read_text()) if out.exists() else None


@needs_namespaces
def test_bench_compares_gloo_across_hosts_with_no_interface_given(tmp_path):
    """gloo alone takes the host name's address, which other namespace hosts
    cannot reach; the bench gives it the interface toward rank 0."""
    pytest.importorskip("torch")
    result, _, doc = bench_gloo_across_hosts(tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert doc["peers"]["gloo"]["status"] == "ok", doc["peers"]["gloo"]
    assert any(r["impl"] == "gloo" and r["op"] == "allreduce" for r in doc["results"])


@needs_namespaces
def test_torch_bench_across_hosts_with_no_interface_given(tmp_path):
    """bench.torch_allreduce's default group is gloo: it gets the same choice."""
    pytest.importorskip("torch")
    from ringcc.bench.netns_bench import find_ringrun

    out = tmp_path / "torch.json"
    env = job_env()
    with NamespaceHosts(2, tag="rcbt-tgl") as hosts:
        hosts.wait_reachable()
        cmd = [find_ringrun(), "--no-prefix", "-np", "2", "-H", hosts.host_list(1), "--agent", hosts.AGENT]
        cmd += ["--master-addr", hosts.addresses[0], "-x", "PYTHONPATH", "-x", "PATH", sys.executable]
        cmd += ["-m", "ringcc.bench.torch_allreduce", "--sizes", "4", "--repeats", "1", "--ddp-steps", "0"]
        cmd += ["--no-progress", "--json", str(out)]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "ring and gloo disagree" not in result.stdout
    assert json.loads(out.read_text())["allreduce"], out.read_text()[:500]


@needs_namespaces
def test_bench_stops_when_gloo_cannot_connect_across_hosts(tmp_path):
    """gloo told to use the loopback interface on hosts that differ: one rank's
    gloo gives up at once, the other's waits for its connection; the job ends
    soon after the peer timeout and says why, instead of hanging."""
    pytest.importorskip("torch")
    result, seconds, _ = bench_gloo_across_hosts(tmp_path, gloo_ifname="lo", peer_timeout=5)
    assert result.returncode != 0
    assert "did not finish its set-up within 15 s" in result.stderr, result.stderr[-3000:]
    assert seconds < 120


def test_machine_cpu_counts_work():
    before, t0 = machine_cpu.busy_seconds(), time.perf_counter()
    while time.perf_counter() < t0 + 0.3:
        pass
    after, t1 = machine_cpu.busy_seconds(), time.perf_counter()
    # This process alone kept one CPU busy all along (the counters tick every 10 ms).
    assert machine_cpu.cpus_busy(before, after, t1 - t0) >= 0.8
    assert machine_cpu.cpus_busy(None, after, 1.0) is None
    assert machine_cpu.cpus_busy(before, after, 0.0) is None
    # One 10 ms tick inside a 30 us loop is not 333 CPUs: held to the machine's.
    assert machine_cpu.cpus_busy(5.0, 5.01, 30e-6) == os.cpu_count()
    assert machine_cpu.cpus_busy(5.0, 5.0, 30e-6) == 0.0
    assert machine_cpu.cpus_busy(5.0, 5.005, 0.01) == pytest.approx(min(0.5, os.cpu_count()))


def test_tcp_bytes_per_busbw_byte():
    # One rank per host: every rank's bytes cross; busbw counts 2 (n - 1) / n S.
    assert tcp_bytes_per_busbw_byte("allreduce", 2, 1) == pytest.approx(2)
    assert tcp_bytes_per_busbw_byte("allreduce", 4, 1) == pytest.approx(4)
    # Two ranks per host: only the hosts' share crosses.
    assert tcp_bytes_per_busbw_byte("allreduce", 2, 2) == pytest.approx(4 / 3)
    assert tcp_bytes_per_busbw_byte("allgather", 4, 1) == pytest.approx(4)
    assert tcp_bytes_per_busbw_byte("reduce_scatter", 2, 2) == pytest.approx(4 / 3)
    assert tcp_bytes_per_busbw_byte("broadcast", 2, 1) == 1
    assert tcp_bytes_per_busbw_byte("broadcast", 4, 1) == 3
    assert tcp_bytes_per_busbw_byte("allreduce", 1, 2) is None
    assert tcp_bytes_per_busbw_byte("alltoall", 2, 2) is None


def test_parse_layout():
    assert parse_layout("2x2") == (2, 2)
    assert parse_layout("4X1") == (4, 1)
    assert parse_layout("1x2") == (1, 2)
    for bad in ("1x1", "0x4", "2x0", "2by2"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_layout(bad)


def test_layout_summary(tmp_path):
    def row(impl, op, nbytes, busbw, ratio=None):
        return {"impl": impl, "op": op, "nbytes": nbytes, "busbw": busbw, "ratio": ratio}

    results = [
        row("ringcc", "allreduce", 8, 0.0),
        row("ringcc", "allreduce", 1 << 20, 0.7),
        row("gloo", "allreduce", 8, 0.0, 3.0),
        row("gloo", "allreduce", 1 << 20, 0.5, 1.4),
        row("mpi", "allreduce", 8, 0.0, 0.8),
        row("mpi", "allreduce", 1 << 20, 0.6, 1.2),
    ]
    path = tmp_path / "2x2.json"
    path.write_text(json.dumps({"meta": {"ops": ["allreduce"]}, "results": results}))
    summary = layout_summary(str(path), tcp_gbps=1.0)["allreduce"]
    assert "cpus_busy" not in summary  # no CPU readings in these rows
    results[1]["cpus_busy"] = 1.4
    path.write_text(json.dumps({"meta": {"ops": ["allreduce"]}, "results": results}))
    costed = layout_summary(str(path), tcp_gbps=1.0, layout=(4, 1))["allreduce"]
    assert costed["cpus_busy"] == 1.4
    # 0.7 GB/s of busbw moves 4 x 0.7 GB/s between 4 hosts of one rank: 1.4 CPUs / 2.8 GB/s.
    assert costed["cpu_ns_per_host_byte"] == pytest.approx(0.5)
    assert summary["largest_bytes"] == 1 << 20
    assert summary["busbw_of_tcp"] == pytest.approx(0.7)
    assert "busbw_of_tcp_both_ways" not in summary
    both = layout_summary(str(path), tcp_gbps=1.0, both_ways_gbps=0.5)["allreduce"]
    assert both["busbw_of_tcp_both_ways"] == pytest.approx(1.4)
    assert summary["peers"]["gloo"]["min_speedup"] == 1.4 and summary["peers"]["gloo"]["min_at_bytes"] == 1 << 20
    assert summary["peers"]["mpi"]["min_speedup"] == 0.8 and summary["peers"]["mpi"]["min_at_bytes"] == 8
