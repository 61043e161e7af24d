"""Tests of the bench across namespace hosts: the hosts are made, reach each
other and are removed whatever happens (adapters/ringcc/bench/netns_hosts.py), the one-way
TCP bandwidth between them is measured (adapters/ringcc/bench/tcp_bandwidth.py), and the
summary reads the bench's JSON (adapters/ringcc/bench/netns_bench.py). The namespace tests
need root and iproute2 and are skipped without them."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ringcc.bench import tcp_bandwidth  # noqa: E402
from ringcc.bench.netns_bench import layout_summary, parse_layout  # noqa: E402
from ringcc.bench.netns_hosts import NamespaceHosts, can_make_hosts  # noqa: E402

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
    assert summary["largest_bytes"] == 1 << 20
    assert summary["busbw_of_tcp"] == pytest.approx(0.7)
    assert summary["peers"]["gloo"]["min_speedup"] == 1.4 and summary["peers"]["gloo"]["min_at_bytes"] == 1 << 20
    assert summary["peers"]["mpi"]["min_speedup"] == 0.8 and summary["peers"]["mpi"]["min_at_bytes"] == 8
