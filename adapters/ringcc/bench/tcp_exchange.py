"""The latency floor of an exchange between two hosts over TCP: both ends
send a frame, then wait for the other's, round after round.

    python -m ringcc.bench tcp_exchange serve --port P [--bytes 256] [--rounds 20000] [--timeout S]
    python -m ringcc.bench tcp_exchange join --host ADDR --port P [--bytes 256] [--rounds 20000]

This is what a rank does in each step of ringcc's agreement (a frame to
the step's partner, the partner's frame back), with nothing else around
it: one connection, TCP_NODELAY, non-blocking reads polled without
sleeping, from Python. A collective whose every rank hears from the
others before it returns (ringcc's, so that ranks that disagree raise on
every rank) cannot run back to back faster than one such round per step;
a broadcast whose root returns once its data is sent (Open MPI's eager
one) is bound only by how fast the root sends and the others receive.

Both ends print one JSON line: the frame's bytes, the rounds timed (after
a tenth as many untimed), microseconds per round. measure(hosts, a, b)
runs the server in host b and the other end in host a
(ringcc.bench.netns_hosts) and returns the median over repeats.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import time

from .tcp_bandwidth import ACCEPT_TIMEOUT_S, connect, run_pair


class PeerGone(RuntimeError):
    pass


def exchange(conn: socket.socket, nbytes: int, rounds: int, timeout_s: float) -> float:
    """Seconds per round of sending a frame and receiving the peer's."""
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.setblocking(False)
    frame = bytes(nbytes)
    buf = bytearray(nbytes)
    view = memoryview(buf)
    deadline = time.monotonic() + timeout_s

    def one_round() -> None:
        sent = 0
        while sent < nbytes:
            try:
                sent += conn.send(frame[sent:])
            except BlockingIOError:
                pass
        got, polls = 0, 0
        while got < nbytes:
            try:
                n = conn.recv_into(view[got:], nbytes - got)
            except BlockingIOError:
                polls += 1
                if polls & 0xFFFF == 0 and time.monotonic() > deadline:
                    raise TimeoutError(f"tcp_exchange: no frame from the peer in {timeout_s:g} s") from None
                continue
            if n == 0:
                raise PeerGone("tcp_exchange: the peer closed the connection")
            got += n

    for _ in range(max(1, rounds // 10)):
        one_round()
    start = time.perf_counter()
    for _ in range(rounds):
        one_round()
    return (time.perf_counter() - start) / rounds


def result(nbytes: int, rounds: int, seconds_per_round: float) -> dict:
    return {"bytes": nbytes, "rounds": rounds, "us_per_round": seconds_per_round * 1e6}


def serve(port: int, nbytes: int, rounds: int, timeout_s: float) -> dict:
    with socket.create_server(("0.0.0.0", port)) as server:
        server.settimeout(timeout_s)
        print("listening", flush=True)
        conn, _ = server.accept()
        with conn:
            return result(nbytes, rounds, exchange(conn, nbytes, rounds, timeout_s))


def join(host: str, port: int, nbytes: int, rounds: int, timeout_s: float) -> dict:
    with connect(host, port, timeout_s) as conn:
        return result(nbytes, rounds, exchange(conn, nbytes, rounds, timeout_s))


def measure(
    hosts, a: int = 0, b: int = 1, nbytes: int = 256, rounds: int = 20000, repeats: int = 3, port: int = 29518
) -> dict:
    """Median microseconds per round of `repeats` exchanges between hosts a and b."""
    runs = []
    args = ["--port", str(port), "--bytes", str(nbytes), "--rounds", str(rounds)]
    client = ["join", "--host", hosts.addresses[b], *args]
    for _ in range(repeats):
        runs.append(run_pair(hosts, a, b, "ringcc.bench.tcp_exchange", args, client, 2 * ACCEPT_TIMEOUT_S))
    return {
        "us_per_round": statistics.median(r["us_per_round"] for r in runs),
        "runs_us": [r["us_per_round"] for r in runs],
        "bytes": nbytes,
        "rounds": rounds,
        "between": [hosts.names[a], hosts.names[b]],
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m ringcc.bench tcp_exchange", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    for mode in ("serve", "join"):
        s = sub.add_parser(mode)
        if mode == "join":
            s.add_argument("--host", required=True)
        s.add_argument("--port", type=int, required=True)
        s.add_argument("--bytes", type=int, default=256)
        s.add_argument("--rounds", type=int, default=20000)
        s.add_argument("--timeout", type=float, default=ACCEPT_TIMEOUT_S)
    a = p.parse_args(argv)
    if a.bytes < 1 or a.rounds < 1:
        p.error("--bytes and --rounds must be >= 1")
    if a.mode == "serve":
        out = serve(a.port, a.bytes, a.rounds, a.timeout)
    else:
        out = join(a.host, a.port, a.bytes, a.rounds, a.timeout)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
