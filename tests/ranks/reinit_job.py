"""One process of the re-initialisation test (tests/ranks/test_reinit.py).

Several of these processes run side by side. In every cycle some of them
form a job, each through ringcc.init() with a rank, size and store port of
that cycle (set in the environment, as an elastic launcher does), run
collectives checked against NumPy, meet a failure (a rank aborts, a rank
leaves mid-collective, the ranks disagree, a named collective's peer
aborts) and leave with ringcc.shutdown(). The membership, the rank order,
the store's port, the transport (shared memory or TCP) and the secret's
source change from one cycle to the next. At the end the process records
what it holds compared with after its first cycle as rank 0: file descriptors,
threads, resident memory and ringcc's files in /dev/shm.

    python reinit_job.py --id P --procs N --ports P0,P1,... --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback

import numpy as np

import ringcc

FAILURES = ("abort", "leave", "mismatch", "named-abort")


def fds() -> dict:
    """This process's open file descriptors and what they point at."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass  # the directory's own descriptor, closed by now
    return found


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def shm_files() -> list:
    try:
        return sorted(name for name in os.listdir("/dev/shm") if name.startswith("ringcc"))
    except OSError:
        return []


def members_of(cycle: int, procs: int) -> list:
    """Every process, but one left out in every other cycle (a different one each time)."""
    if cycle % 2 == 0:
        return list(range(procs))
    left_out = (cycle // 2) % procs
    return [p for p in range(procs) if p != left_out]


def set_job(rank: int, size: int, port: int, cycle: int, secret: str) -> None:
    os.environ.update(
        {
            "RINGCC_RANK": str(rank),
            "RINGCC_SIZE": str(size),
            "RINGCC_LOCAL_SIZE": str(size),
            "RINGCC_MASTER_ADDR": "127.0.0.1",
            "RINGCC_MASTER_PORT": str(port),
            "RINGCC_TRANSPORT": "tcp" if cycle % 3 == 1 else "auto",
        }
    )
    # Half the cycles take the launcher's secret, the others make one in /dev/shm.
    if cycle % 2 == 0:
        os.environ["RINGCC_SECRET"] = secret
    else:
        os.environ.pop("RINGCC_SECRET", None)


def expect_failure(call, classes, fragments, what):
    try:
        call()
    except classes as error:
        text = str(error)
        missing = [f for f in fragments if f not in text]
        if missing:
            raise AssertionError(f"{what}: {type(error).__name__} lacks {missing}: {text}") from None
        return error
    raise AssertionError(f"{what}: no error raised")


def one_cycle(cycle: int, rank: int, size: int, log: list) -> None:
    ringcc.init()
    assert (ringcc.rank(), ringcc.size()) == (rank, size), (
        f"init gave rank {ringcc.rank()} of {ringcc.size()}, expected {rank} of {size}"
    )
    expected_transport = "tcp" if os.environ["RINGCC_TRANSPORT"] == "tcp" else "shm"
    assert ringcc.transport_name() == expected_transport, ringcc.transport_name()
    rng = np.random.default_rng([cycle, 7])
    inputs = [rng.standard_normal(3000 + 17 * cycle).astype(np.float32) for _ in range(size)]
    got = ringcc.allreduce(inputs[rank])
    want = np.sum(np.stack(inputs).astype(np.float64), axis=0)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-4), "allreduce differs from NumPy"
    named = ringcc.allreduce_async(np.full(5, rank + 1, dtype=np.int64), name=f"cycle{cycle}").wait(30)
    assert np.array_equal(named, np.full(5, size * (size + 1) // 2)), f"named allreduce: {named}"
    gathered = ringcc.allgather(np.full((rank + 1, 2), rank, dtype=np.int32))
    assert gathered.shape == (size * (size + 1) // 2, 2), gathered.shape

    failure = FAILURES[cycle % len(FAILURES)]
    victim = cycle % size
    log.append(f"cycle {cycle}: rank {rank} of {size}, {failure}, victim {victim}")
    # The barrier before a failure may itself fail on the others: the
    # victim can leave it (and fail) before they have.
    if failure == "abort":
        if rank == victim:
            ringcc.barrier()
            ringcc._core._abort(f"injected failure in cycle {cycle}", True)
        expect_failure(
            lambda: (ringcc.barrier(), ringcc.allreduce(np.ones(64, dtype=np.float32))),
            ringcc.PeerFailureError,
            [f"rank {victim}"] if rank != victim else [],
            "allreduce after an abort",
        )
    elif failure == "leave":
        if rank == victim:
            ringcc.barrier()
            ringcc.shutdown()
            return
        expect_failure(
            lambda: (ringcc.barrier(), ringcc.allreduce(np.ones(1 << 16, dtype=np.float32))),
            ringcc.PeerFailureError,
            [f"rank {victim}"],
            "allreduce after a rank left",
        )
    elif failure == "mismatch":
        expect_failure(
            lambda: ringcc.allreduce(np.ones(10 + (rank == victim), dtype=np.float32)),
            ringcc.MismatchError,
            [],
            "allreduce of different sizes",
        )
        again = ringcc.allreduce(np.ones(4, dtype=np.float32))
        assert np.array_equal(again, np.full(4, size, dtype=np.float32)), "allreduce after a mismatch"
    else:  # named-abort
        if rank == victim:
            ringcc.barrier()
            ringcc._core._abort(f"injected failure in cycle {cycle}", True)
        else:
            try:
                ringcc.barrier()
            except ringcc.PeerFailureError:
                pass
        handle = ringcc.allreduce_async(np.ones(256, dtype=np.float32), name=f"cycle{cycle}/after")
        expect_failure(
            lambda: handle.wait(30),
            (ringcc.PeerFailureError, ringcc.NotInitializedError),
            [],
            "named allreduce after an abort",
        )
    ringcc.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--procs", type=int, required=True)
    parser.add_argument("--ports", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    ports = [int(p) for p in args.ports.split(",")]
    secret = "reinit-test-secret"
    record = {"id": args.id, "cycles": 0, "log": [], "error": None}
    start_fds = start_threads = start_rss = None
    served_store = False
    try:
        for cycle, port in enumerate(ports):
            members = members_of(cycle, args.procs)
            if args.id not in members:
                record["log"].append(f"cycle {cycle}: left out")
                continue
            size = len(members)
            rank = (members.index(args.id) + cycle) % size
            set_job(rank, size, port, cycle, secret)
            try:
                one_cycle(cycle, rank, size, record["log"])
            except BaseException:
                record["log"].append(f"cycle {cycle} failed:\n{traceback.format_exc()}")
                raise
            assert not ringcc.is_initialized()
            record["cycles"] += 1
            record.setdefault("rss_by_cycle", []).append(rss_kib())
            served_store = served_store or rank == 0
            # Once it has served the store: whatever is made once per process is made.
            if start_fds is None and served_store:
                start_fds, start_threads, start_rss = fds(), threads(), rss_kib()
    except BaseException as error:  # noqa: BLE001 - recorded for the test to report
        record["error"] = f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
    if ringcc.is_initialized():
        ringcc.shutdown()
    time.sleep(0.2)  # threads that were told to end have ended
    end_fds = fds()
    record.update(
        {
            "fds_after_first": start_fds,
            "fds_at_end": end_fds,
            "threads_after_first": start_threads,
            "threads_at_end": threads(),
            "thread_names": [t.name for t in threading.enumerate()],
            "rss_after_first_kib": start_rss,
            "rss_at_end_kib": rss_kib(),
            "pid": os.getpid(),
        }
    )
    with open(os.path.join(args.out, f"proc{args.id}.json"), "w", encoding="utf-8") as file:
        json.dump(record, file)
    return 0 if record["error"] is None else 1


if __name__ == "__main__":
    sys.exit(main())
