"""ringrun's elastic mode across two "hosts" on one machine: two network
namespaces joined by a veth pair, each named by its own address (so the
host names of the discovery output are addresses the workers can reach,
and `ip netns exec {host}` starts a worker there). The driver runs in the
first namespace. A worker on the second host is killed, or the link between
the hosts goes down; the job goes on with one worker and takes a new one
on the second host after its cooldown (tests/launch/elastic_numpy_job.py). Needs
root and a working `ip netns`; skipped otherwise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rank_groups import rank_environment, tail

HERE = Path(__file__).resolve().parent

IP_TIMEOUT_S = 20
JOB_LIMIT_S = 120


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result


@pytest.fixture(scope="module")
def hosts():
    """Yields (host A, host B, B's interface): namespaces named by their addresses."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if shutil.which("ip") is None:
        pytest.skip("the `ip` command (iproute2) is not installed")
    pid = os.getpid()
    subnet = f"10.232.{pid % 250 + 1}"
    host_a, host_b = f"{subnet}.1", f"{subnet}.2"
    veth_a, veth_b = f"rce{pid % 100000}a", f"rce{pid % 100000}b"
    created = []
    try:
        try:
            ip("netns", "add", host_a)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            pytest.skip(f"cannot create a network namespace here: {error}")
        created.append(host_a)
        ip("netns", "add", host_b)
        created.append(host_b)
        try:
            ip("link", "add", veth_a, "netns", host_a, "type", "veth", "peer", "name", veth_b, "netns", host_b)
        except RuntimeError as error:
            pytest.skip(f"cannot create a veth pair between network namespaces here: {error}")
        for ns, veth in ((host_a, veth_a), (host_b, veth_b)):
            ip("-n", ns, "addr", "add", f"{ns}/24", "dev", veth)
            ip("-n", ns, "link", "set", veth, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        yield host_a, host_b, veth_b
    finally:
        for ns in reversed(created):
            ip("netns", "del", ns, check=False)


def elastic_job(tmp_path: Path, hosts, job_args, env_extra=None):
    """Starts the job in host A's namespace; returns (process, out dir, log path)."""
    host_a, host_b, _ = hosts
    out = tmp_path / "out"
    out.mkdir()
    discover = tmp_path / "discover.sh"
    discover.write_text(f"#!/bin/sh\necho {host_a}:1\necho {host_b}:1\n")
    discover.chmod(0o755)
    env = rank_environment(
        {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""), **(env_extra or {})}
    )
    exported = []
    for name in ["PYTHONPATH", "PATH", *(env_extra or {})]:
        exported += ["-x", name]
    command = [
        "ip",
        "netns",
        "exec",
        host_a,
        sys.executable,
        "-m",
        "ringcc.launcher",
        "-np",
        "2",
        "--min-np",
        "1",
        "--max-np",
        "2",
        "--blacklist-cooldown-range",
        "1",
        "1",
        "--host-discovery-script",
        str(discover),
        "--agent",
        "ip netns exec {host}",
        "--master-addr",
        host_a,
        "--timeout",
        str(JOB_LIMIT_S),
        *exported,
        sys.executable,
        str(HERE / "elastic_numpy_job.py"),
        "--out",
        str(out),
        *job_args,
    ]
    log_path = tmp_path / "ringrun.log"
    log = open(log_path, "wb")
    process = subprocess.Popen(
        command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(tmp_path)
    )
    log.close()
    return process, out, log_path


def steps_of(out: Path):
    steps = []
    for path in out.glob("*.jsonl"):
        steps += [json.loads(line) for line in path.read_text().splitlines() if line]
    return sorted(steps, key=lambda s: s["t"])


def finish(process, log_path):
    try:
        process.wait(timeout=JOB_LIMIT_S + 30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return tail(log_path.read_text(errors="replace"), 5000)


def sizes_seen(steps):
    sizes = []
    for step in steps:
        if not sizes or sizes[-1] != step["size"]:
            sizes.append(step["size"])
    return sizes


def test_elastic_across_hosts_a_killed_worker_is_replaced(tmp_path, hosts):
    process, out, log_path = elastic_job(tmp_path, hosts, ["--fault", "kill", "--steps", "150"])
    log = finish(process, log_path)
    assert process.returncode == 0, log
    result = json.loads((out / "result.json").read_text())
    assert result["total"] == [150.0] * 8 and result["size"] == 2, result
    assert sizes_seen(steps_of(out)) == [2, 1, 2], log
    assert f"worker {hosts[1]}[0] was killed by signal SIGKILL" in log, log


def test_elastic_across_hosts_a_link_that_goes_down(tmp_path, hosts):
    """The link to host B goes down at step 10: the collective times out (RINGCC_TIMEOUT_S=3)
    on host A, and B's worker, which cannot reach the driver, fails (or is killed when it does
    not come to the next membership); once the link is back and B's cooldown over, a new
    worker on B joins and the sum is as if nothing had happened."""
    host_a, host_b, veth_b = hosts
    process, out, log_path = elastic_job(
        tmp_path, hosts, ["--steps", "250", "--step-time", "0.05"], {"RINGCC_TIMEOUT_S": "3"}
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(s["step"] >= 10 and s["size"] == 2 for s in steps_of(out)):
            assert process.poll() is None, finish(process, log_path)
            time.sleep(0.05)
        ip("-n", host_b, "link", "set", veth_b, "down")
        down = time.time()
        while time.monotonic() < deadline + 60 and not any(s["size"] == 1 and s["t"] > down for s in steps_of(out)):
            assert process.poll() is None, finish(process, log_path)
            time.sleep(0.05)
    finally:
        ip("-n", host_b, "link", "set", veth_b, "up", check=False)
    log = finish(process, log_path)
    assert process.returncode == 0, log
    result = json.loads((out / "result.json").read_text())
    assert result["total"] == [250.0] * 8, result
    assert sizes_seen(steps_of(out)) == [2, 1, 2], log
    # B's worker either finds the driver unreachable and fails, or is killed for not coming.
    assert f"worker {host_b}[0] " in log and f"host {host_b} blacklisted" in log, log
