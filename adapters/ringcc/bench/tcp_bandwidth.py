"""One-way TCP bandwidth between two hosts: what one connection carries.

    python -m ringcc.bench tcp_bandwidth serve --port P [--timeout S] [--both-ways --seconds 2]
    python -m ringcc.bench tcp_bandwidth send --host ADDR --port P [--seconds 2] [--chunk 4M] [--both-ways]

The sender writes --chunk bytes at a time for --seconds on one connection
and closes it; the server reads everything into one reusable buffer and
prints one JSON line: bytes, seconds from the first byte to the end of the
stream, and GB/s (1e9 bytes per second, the bench's unit). Nothing is
reduced or copied twice: the ceiling for what a collective over the same
link can carry in one direction.

With --both-ways (on both ends) each end also writes for --seconds on the
same connection while it reads, as a ring's steps between two ranks do:
the GB/s is then what one direction carries while the other runs too.

Where the hosts share one machine's CPUs (namespaces), the server also
reports how many of them were busy over the same span (`cpus_busy`,
ringcc.bench.machine_cpu; null where it cannot be read) and what one byte
carried cost in CPU time (`cpu_ns_per_byte`), to set beside what a
collective's bytes between the hosts cost (ringcc.bench.netns_bench).

measure(hosts, a, b) runs the server inside host b and the sender inside
host a (ringcc.bench.netns_hosts) and returns the figure.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import statistics
import subprocess
import sys
import threading
import time

from . import machine_cpu
from .measure import parse_size

ACCEPT_TIMEOUT_S = 30.0


def pour(conn: socket.socket, seconds: float, chunk: int, sent: list) -> None:
    """Writes chunks on conn for `seconds`, then ends this direction."""
    data = bytes(chunk)
    total, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        conn.sendall(data)
        total += len(data)
    conn.shutdown(socket.SHUT_WR)
    sent.append(total)


def drain(conn: socket.socket, got: list) -> None:
    buf = bytearray(4 << 20)
    total = 0
    while n := conn.recv_into(buf):
        total += n
    got.append(total)


def serve(port: int, timeout_s: float, both_ways: bool = False, seconds: float = 2.0, chunk: int = 4 << 20) -> dict:
    sent: list = []
    with socket.create_server(("0.0.0.0", port)) as server:
        server.settimeout(timeout_s)
        print("listening", flush=True)
        conn, _ = server.accept()
        with conn:
            conn.settimeout(timeout_s)
            writer = threading.Thread(target=pour, args=(conn, seconds, chunk, sent)) if both_ways else None
            if writer:
                writer.start()
            buf = bytearray(4 << 20)
            view = memoryview(buf)
            total, first, busy_first = 0, None, None
            while True:
                n = conn.recv_into(view)
                if n == 0:
                    break
                if first is None:
                    first = time.perf_counter()
                    busy_first = machine_cpu.busy_seconds()
                total += n
            seconds = time.perf_counter() - (first or time.perf_counter())
            busy_last = machine_cpu.busy_seconds()
            if writer:
                writer.join(timeout_s)
    result = {"bytes": total, "seconds": seconds, "gbps": total / seconds / 1e9 if seconds > 0 else 0.0}
    if both_ways:
        result["bytes_sent"] = sent[0] if sent else None
    # Bytes both ways where both ran (the other direction's over its own span, close to this one's).
    carried = total + (sent[0] if sent else 0)
    cpus = machine_cpu.cpus_busy(busy_first, busy_last, seconds)
    result["cpus_busy"] = cpus
    result["cpu_ns_per_byte"] = cpus * seconds / carried * 1e9 if cpus is not None and carried > 0 else None
    return result


def connect(host: str, port: int, timeout_s: float) -> socket.socket:
    """A connection to a server that may still be starting."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return socket.create_connection((host, port), timeout=timeout_s)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def send(host: str, port: int, seconds: float, chunk: int, timeout_s: float, both_ways: bool = False) -> None:
    with connect(host, port, timeout_s) as conn:
        got: list = []
        reader = threading.Thread(target=drain, args=(conn, got)) if both_ways else None
        if reader:
            reader.start()
        pour(conn, seconds, chunk, [])
        if reader:
            reader.join(seconds + timeout_s)


def run_pair(hosts, a: int, b: int, module: str, serve_args: list, client_args: list, client_timeout_s: float) -> dict:
    """Runs `python -m module serve SERVE_ARGS` in host b and, once it
    listens, `python -m module CLIENT_ARGS` in host a; returns the JSON line
    the server printed last."""
    server = subprocess.Popen(
        hosts.exec(b, [sys.executable, "-m", module, "serve", *serve_args]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([server.stdout], [], [], ACCEPT_TIMEOUT_S)
        if not ready or not server.stdout.readline():  # "listening"
            raise RuntimeError(f"{module} server in {hosts.names[b]} did not start")
        subprocess.run(
            hosts.exec(a, [sys.executable, "-m", module, *client_args]),
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=client_timeout_s,
        )
        out, err = server.communicate(timeout=ACCEPT_TIMEOUT_S)
        if server.returncode != 0:
            raise RuntimeError(f"{module} server failed: {err.strip()[-300:]}")
        return json.loads(out.strip().splitlines()[-1])
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)


def measure(
    hosts, a: int = 0, b: int = 1, seconds: float = 2.0, repeats: int = 3, port: int = 29517, both_ways: bool = False
) -> dict:
    """Median GB/s of `repeats` one-way transfers from host a to host b
    (both_ways: from b to a too at the same time; the GB/s of one way)."""
    runs = []
    ways = ["--both-ways", "--seconds", str(seconds)] if both_ways else []
    port_args = ["--port", str(port)]
    client = ["send", "--host", hosts.addresses[b], *port_args, "--seconds", str(seconds), *ways[:1]]
    for _ in range(repeats):
        runs.append(
            run_pair(
                hosts, a, b, "ringcc.bench.tcp_bandwidth", [*port_args, *ways], client, 2 * seconds + ACCEPT_TIMEOUT_S
            )
        )
    costs = [r["cpu_ns_per_byte"] for r in runs if r.get("cpu_ns_per_byte") is not None]
    return {
        "gbps": statistics.median(r["gbps"] for r in runs),
        "runs_gbps": [r["gbps"] for r in runs],
        "cpu_ns_per_byte": statistics.median(costs) if costs else None,
        "runs_cpus_busy": [r.get("cpus_busy") for r in runs],
        "from": hosts.names[a],
        "to": hosts.names[b],
        "seconds": seconds,
        "both_ways": both_ways,
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m ringcc.bench tcp_bandwidth", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("serve")
    c = sub.add_parser("send")
    c.add_argument("--host", required=True)
    for q in (s, c):
        q.add_argument("--port", type=int, required=True)
        q.add_argument("--seconds", type=float, default=2.0, help="how long to write (serve: with --both-ways)")
        q.add_argument("--chunk", type=parse_size, default=4 << 20)
        q.add_argument("--timeout", type=float, default=ACCEPT_TIMEOUT_S)
        q.add_argument("--both-ways", action="store_true", help="write while reading, on both ends")
    a = p.parse_args(argv)
    if a.mode == "serve":
        print(json.dumps(serve(a.port, a.timeout, a.both_ways, a.seconds, a.chunk)), flush=True)
    else:
        send(a.host, a.port, a.seconds, a.chunk, a.timeout, a.both_ways)


if __name__ == "__main__":
    main()
