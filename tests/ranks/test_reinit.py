"""Re-initialisation in one process: ringcc.init() after ringcc.shutdown()
(and torch's init_process_group after destroy_process_group) with a new
size, new ranks and a new store address, cycle after cycle, each cycle
ending in a failure; nothing may be left behind (tests/ranks/reinit_job.py,
tests/ranks/torch_reinit_job.py)."""

from __future__ import annotations

import errno
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rank_groups import rank_environment, tail

HERE = Path(__file__).resolve().parent

PROCS = 3
CORE_CYCLES = 40
TORCH_CYCLES = 10
HARD_LIMIT_S = 240
RSS_GROWTH_LIMIT_KIB = 24 * 1024


def free_ports(count):
    """`count` distinct ports that are free now, below the kernel's range of
    ephemeral ports: the cycles use them one after another over half a
    minute, and a port of that range may meanwhile become the local port of
    some connection (an earlier cycle's), so that its cycle's rank 0 could
    not listen on it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as file:
            low = int(file.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    candidates = list(range(max(1024, low - 8192), low))
    random.shuffle(candidates)
    ports = []
    for port in candidates:
        if len(ports) == count:
            break
        if _bindable(port):
            ports.append(port)
    assert len(ports) == count, f"only {len(ports)} free ports below {low}"
    return ports


def _bindable(port: int) -> bool:
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.bind((address, port))
        except OSError as error:
            if family == socket.AF_INET6 and error.errno == errno.EAFNOSUPPORT:
                continue  # no IPv6 here
            return False
    return True


def run_processes(script: str, cycles: int, out_dir: Path):
    """Starts PROCS processes of `script`; returns their records and output."""
    ports = free_ports(cycles)
    env = rank_environment({"RINGCC_TIMEOUT_S": "30"})
    outputs, processes = [], []
    for proc in range(PROCS):
        log = open(out_dir / f"proc{proc}.log", "wb")
        outputs.append(log)
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(HERE / script),
                    "--id",
                    str(proc),
                    "--procs",
                    str(PROCS),
                    "--ports",
                    ",".join(map(str, ports)),
                    "--out",
                    str(out_dir),
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    deadline = time.monotonic() + HARD_LIMIT_S
    codes = []
    for process in processes:
        try:
            codes.append(process.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            process.kill()
            codes.append(None)
            process.wait()
    for log in outputs:
        log.close()
    records = {}
    for proc in range(PROCS):
        path = out_dir / f"proc{proc}.json"
        records[proc] = json.loads(path.read_text()) if path.exists() else None
    text = "\n".join(
        f"--- process {p} (exit {codes[p]}) ---\n" + tail((out_dir / f"proc{p}.log").read_text(errors="replace"), 3000)
        for p in range(PROCS)
    )
    return ports, records, codes, text


def expected_cycles(proc: int, cycles: int) -> int:
    sys.path.insert(0, str(HERE))
    from reinit_job import members_of

    return sum(proc in members_of(c, PROCS) for c in range(cycles))


def check_records(records, codes, text, cycles):
    for proc, record in records.items():
        assert record is not None, f"process {proc} wrote no record\n{text}"
        assert record["error"] is None, f"process {proc}: {record['error']}\n" + "\n".join(record["log"][-4:])
        assert codes[proc] == 0, f"process {proc} exited with {codes[proc]}\n{text}"
        assert record["cycles"] == expected_cycles(proc, cycles), f"process {proc}: {record['cycles']} cycles"
        grown = {fd: target for fd, target in record["fds_at_end"].items() if fd not in record["fds_after_first"]}
        assert not grown, f"process {proc} holds descriptors it did not after its first cycle as rank 0: {grown}"
        assert record["threads_at_end"] <= record["threads_after_first"], (
            f"process {proc}: {record['threads_at_end']} threads, "
            f"{record['threads_after_first']} after the first cycle as rank 0"
        )


def test_reinit_loop_with_failures_leaks_nothing(tmp_path):
    """40 cycles of init (new rank, size, port, transport, secret), collectives, a failure
    (abort, a rank leaving mid-collective, a mismatch, an abort under a named collective)
    and shutdown: every cycle works, and the processes end with the descriptors, threads
    and memory they had after their first cycle as rank 0, and nothing of theirs in /dev/shm."""
    ports, records, codes, text = run_processes("reinit_job.py", CORE_CYCLES, tmp_path)
    check_records(records, codes, text, CORE_CYCLES)
    pids = {str(record["pid"]) for record in records.values()}
    for record in records.values():
        grown = record["rss_at_end_kib"] - record["rss_after_first_kib"]
        assert grown < RSS_GROWTH_LIMIT_KIB, f"resident memory grew by {grown} KiB: {record['rss_by_cycle']}"
    left = [
        name
        for name in os.listdir("/dev/shm")
        if name.startswith("ringcc")
        and (any(f"-{pid}-" in name for pid in pids) or any(name.endswith(f"port{p}") for p in ports))
    ]
    assert not left, f"left in /dev/shm: {left}"


def test_torch_reinit_loop_raises_dist_backend_errors_and_leaks_nothing(tmp_path):
    """destroy_process_group() then init_process_group(backend="ring") with a new rank, world
    size and store, after a peer aborted (a DistBackendError that is also PeerFailureError)."""
    pytest.importorskip("torch")
    _, records, codes, text = run_processes("torch_reinit_job.py", TORCH_CYCLES, tmp_path)
    check_records(records, codes, text, TORCH_CYCLES)
