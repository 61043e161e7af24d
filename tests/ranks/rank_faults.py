"""A rank of the fault-injection jobs (tests/ranks/test_fault_injection.py).

Every rank runs a mix of collectives for up to --seconds: large allreduces
and reduce-scatters (a kill lands mid-transfer), batches of small named
allreduces that the engine negotiates and fuses, allgathers, broadcasts
and grouped allreduces, writing its progress to OUT/progress<R>; the test kills one rank from
outside at a random moment. With --die-in-init the victim kills itself
from a timer a few milliseconds into ringcc.init() (during the
rendezvous). Each rank records how it ended in OUT/outcome<R>.json: the
error's class and message and when it was raised.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time

# ringrun stops the other ranks (SIGTERM) once one dies: survivors stay to
# report. Ignored before the slow imports, which a rank still runs when a
# faster one has already died.
signal.signal(signal.SIGTERM, signal.SIG_IGN)

import numpy as np  # noqa: E402

import ringcc  # noqa: E402


def write(path, record):
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        json.dump(record, file)
    os.replace(path + ".tmp", path)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--die-in-init", type=int, default=-1, help="this rank kills itself during init")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rank_env = int(os.environ["RINGCC_RANK"])
    outcome = os.path.join(args.out, f"outcome{rank_env}.json")
    write(outcome, {"pid": os.getpid(), "state": "starting"})
    if rank_env == args.die_in_init:
        # Dies during the others' rendezvous, not before they have started.
        size = int(os.environ["RINGCC_SIZE"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
            os.path.exists(os.path.join(args.out, f"outcome{r}.json")) for r in range(size)
        ):
            time.sleep(0.005)
        delay = random.Random(args.seed).uniform(0.0, 0.02)

        def die():
            # When, for the test's bound: the others' imports may have taken
            # long before this (a loaded machine), but the bound is about
            # the time from the death to their errors.
            write(os.path.join(args.out, f"killed{rank_env}.json"), {"t": time.time()})
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Timer(delay, die).start()
    began = time.time()
    try:
        ringcc.init()
        rank, size = ringcc.rank(), ringcc.size()
        write(outcome, {"pid": os.getpid(), "state": "running", "hosts": ringcc.cross_size()})
        rng = np.random.default_rng([args.seed, rank])
        big = rng.standard_normal(4 << 20).astype(np.float32)
        sizes = np.random.default_rng(args.seed).integers(1, 5000, 16)  # the same on every rank
        small = [rng.standard_normal(int(n)).astype(np.float32) for n in sizes]
        iteration = 0
        # Rank 0 decides when to stop, so that every rank stops after the same iteration.
        while ringcc.broadcast(np.array([time.time() - began < args.seconds], dtype=np.uint8), 0)[0]:
            got = ringcc.allreduce(big)
            if not np.isfinite(got[:16]).all():
                raise AssertionError("allreduce returned garbage")
            handles = [ringcc.allreduce_async(s, name=f"fused.{i}") for i, s in enumerate(small)]
            for handle in handles:
                handle.wait(60)
            block = ringcc.reduce_scatter(big)
            if not np.isfinite(block[:16]).all():
                raise AssertionError("reduce_scatter returned garbage")
            ringcc.allgather(np.full((rank + 1, 3), rank, dtype=np.int32))
            # Blocks of 4-16 MiB: read from the peers directly (process_vm_readv) on a host.
            ringcc.allgather(big[: (1 << 20) * (rank + 1)])
            ringcc.broadcast(np.arange(100000, dtype=np.float64), iteration % size)
            # Longer than an area, in place: the root writes into the others
            # (process_vm_writev) while they read it.
            ringcc.broadcast_(big, iteration % size)
            ringcc.grouped_allreduce(small[:4])
            iteration += 1
            with open(os.path.join(args.out, f"progress{rank}"), "w", encoding="utf-8") as file:
                file.write(str(iteration))
        write(outcome, {"pid": os.getpid(), "state": "finished", "iterations": iteration})
        ringcc.shutdown()
        return 0
    except Exception as error:  # noqa: BLE001 - what the test checks
        write(
            outcome,
            {
                "pid": os.getpid(),
                "state": "raised",
                "class": type(error).__name__,
                "message": str(error),
                "t": time.time(),
            },
        )
        try:
            ringcc.shutdown()
        except Exception:  # noqa: BLE001 - leaving a broken job
            pass
        return 1


if __name__ == "__main__":
    sys.exit(main())
