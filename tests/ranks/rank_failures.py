"""Rank programs for the failure tests (tests/ranks/test_failures.py):

    ringrun -np 3 python tests/ranks/rank_failures.py kill --victim 1 [--named] --out DIR
    ringrun -np 2 python tests/ranks/rank_failures.py timeout --timeout-s 2 --out DIR
    ringrun -np 2 python tests/ranks/rank_failures.py stranger --out DIR

Each rank writes what happened to it as DIR/outcome<R>.json (and prints it
as one "OUTCOME {...}" line).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np

import ringcc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))  # tests/harness
from proc_sockets import listening_ports  # noqa: E402


def write_json(path: str, record: dict) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        json.dump(record, file)
    os.replace(path + ".tmp", path)


def report(out_dir: str, rank: int, record: dict) -> None:
    record = {"rank": rank, "pid": os.getpid(), **record}
    write_json(os.path.join(out_dir, f"outcome{rank}.json"), record)
    print("OUTCOME " + json.dumps(record), flush=True)


def describe(error: BaseException) -> dict:
    return {
        "class": type(error).__name__,
        "message": str(error),
        "time": time.time(),
        "is_builtin_timeout": isinstance(error, TimeoutError),
    }


def kill(args) -> int:
    """Allreduces in a loop; the victim SIGKILLs itself in the middle of one."""
    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    if rank != args.victim:
        # ringrun stops the other ranks once it sees the victim die; the
        # survivors stay to report what ringcc told them.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    data = np.full(1 << 20, rank + 1, dtype=np.float32)  # 4 MiB: each allreduce takes a while
    want = np.float32(size * (size + 1) / 2)
    wrong = 0
    iterations = 0

    def die():
        write_json(os.path.join(args.out, "killed.json"), {"rank": rank, "time": time.time()})
        os.kill(os.getpid(), signal.SIGKILL)

    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if rank == args.victim and iterations == args.kill_after:
                threading.Timer(0.005, die).start()  # fires while the next allreduce runs
            if args.named:
                result = ringcc.synchronize(ringcc.allreduce_async(data, name="loop"))
            else:
                result = ringcc.allreduce(data)
            if not np.all(result == want):
                wrong += 1
            iterations += 1
        record = {"class": None, "message": "no error within 60 s"}
    except ringcc.RingccError as error:
        record = describe(error)
    # Once a failure is known, shutdown() must not wait for the dead rank.
    start = time.monotonic()
    try:
        ringcc.shutdown()
        record["shutdown_error"] = None
    except Exception as error:  # noqa: BLE001 - recorded
        record["shutdown_error"] = f"{type(error).__name__}: {error}"
    record.update(iterations=iterations, wrong_results=wrong, shutdown_s=time.monotonic() - start)
    report(args.out, rank, record)
    return 0


def timeout(args) -> int:
    """Rank 1 skips a barrier; rank 0 must time out after --timeout-s.

    Rank 1 then calls the barrier late and allreduces a few times: rank 0
    has given up, so by the first allreduce at the latest rank 1 must get an
    error, never a wrong result. Rank 0 stays alive (aborted) meanwhile."""
    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    ringcc.barrier()
    for i in range(4):  # earlier collectives of the same shape as the late ones
        ringcc.allreduce(np.full(4, 10 * i + rank, dtype=np.float32))
    # Set after init() so that starting the job is not bound by the short limit.
    os.environ["RINGCC_TIMEOUT_S"] = str(args.timeout_s)
    start = time.monotonic()
    if rank == 1:
        time.sleep(args.sleep_s)
    try:
        ringcc.barrier()
        record = {"class": None, "message": "the barrier returned"}
    except ringcc.RingccError as error:
        record = describe(error)
    record["seconds"] = time.monotonic() - start
    if rank == 0:
        report(args.out, rank, record)
        late_report = os.path.join(args.out, "outcome1.json")
        deadline = time.monotonic() + args.sleep_s + 30
        while not os.path.exists(late_report) and time.monotonic() < deadline:
            time.sleep(0.05)
        return 0
    later = []
    for i in range(4, 7):
        try:
            got = ringcc.allreduce(np.full(4, 10 * i + rank, dtype=np.float32))
            want = sum(10 * i + r for r in range(size))
            later.append({"iteration": i, "result": float(got[0]), "expected": float(want)})
        except ringcc.RingccError as error:
            later.append({"iteration": i, **describe(error)})
    record["later_allreduces"] = later
    report(args.out, rank, record)
    return 0


def stranger(args) -> int:
    """Allreduces (over TCP) until the test has finished poking at our ports."""
    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    store_port = int(os.environ["RINGCC_MASTER_PORT"])
    ports = listening_ports()
    write_json(
        os.path.join(args.out, f"ports{rank}.json"),
        {
            "rank": rank,
            "pid": os.getpid(),
            "transport": ringcc.transport_name(),
            "store_port": store_port if rank == 0 else None,
            "data_ports": [p for p in ports if p != store_port],
        },
    )
    stop_path = os.path.join(args.out, "stop")
    iterations = wrong = 0
    errors = []
    deadline = time.monotonic() + args.max_seconds
    while True:
        data = np.arange(65536, dtype=np.int64) * (rank + 1) + iterations
        want = np.arange(65536, dtype=np.int64) * (size * (size + 1) // 2) + size * iterations
        try:
            if not np.array_equal(ringcc.allreduce(data), want):
                wrong += 1
            stop = np.array([os.path.exists(stop_path) or time.monotonic() > deadline], dtype=np.int32)
            stop = ringcc.allreduce(stop, ringcc.Max)[0]
        except ringcc.RingccError as error:
            errors.append(f"{type(error).__name__}: {error}")
            break
        iterations += 1
        if stop:
            break
    report(
        args.out,
        rank,
        {
            "iterations": iterations,
            "wrong_results": wrong,
            "errors": errors,
            "stopped_by_test": os.path.exists(stop_path),
        },
    )
    ringcc.shutdown()
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    k = commands.add_parser("kill")
    k.add_argument("--victim", type=int, required=True)
    k.add_argument("--kill-after", type=int, default=5, help="allreduces before the victim dies")
    k.add_argument("--named", action="store_true", help="named allreduces (through the engine)")
    t = commands.add_parser("timeout")
    t.add_argument("--timeout-s", type=float, default=2.0)
    t.add_argument("--sleep-s", type=float, default=5.0)
    s = commands.add_parser("stranger")
    s.add_argument("--max-seconds", type=float, default=60.0)
    for sub in (k, t, s):
        sub.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    return {"kill": kill, "timeout": timeout, "stranger": stranger}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
