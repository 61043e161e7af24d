"""Shutting down the background engine, in a group of ranks:

    ringrun -np 2 python tests/ranks/rank_engine_shutdown.py --out DIR [--pending]

Each rank runs a few named collectives, shuts ringcc down and records in
DIR/rank<R>.json how long shutdown() took and what the engine's calls raise
afterwards; then it initialises ringcc again, runs a named collective on the
new engine and shuts down once more. With --pending, rank 0 also leaves a
named allreduce that no other rank enqueues: shutdown() must fail it with
NotInitializedError rather than wait for it. With --waiting as well, a thread
of rank 0 is blocked on that allreduce with no time limit when shutdown() is
called: it must get the error too, and nothing may hang or crash. tests/ranks/test_engine.py checks the
records.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def error_of(call):
    """(exception class name, message) of call(), or (None, repr of its result)."""
    try:
        result = call()
    except Exception as error:  # recorded for the test to judge
        return type(error).__name__, str(error)
    return None, repr(result)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--pending", action="store_true", help="rank 0 leaves a named allreduce that the others never enqueue"
    )
    parser.add_argument(
        "--waiting", action="store_true", help="with --pending: a thread of rank 0 waits on it during shutdown()"
    )
    args = parser.parse_args(argv)

    import ringcc

    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    record = {"rank": rank, "size": size}
    results = []
    for i in range(5):
        x = np.full(8, rank + i, dtype=np.float32)
        results.append(ringcc.allreduce_async(x, name=f"before-shutdown/{i}").wait(30))
    record["results_ok"] = all(
        np.array_equal(got, np.full(8, size * i + size * (size - 1) / 2, dtype=np.float32))
        for i, got in enumerate(results)
    )
    pending = waiter = None
    waited = {}
    if args.pending and rank == 0:
        pending = ringcc.allreduce_async(np.ones(4, dtype=np.float32), name="never-matched")
        if args.waiting:
            import threading

            def wait_without_limit():
                waited["error"] = error_of(lambda: ringcc.synchronize(pending))

            waiter = threading.Thread(target=wait_without_limit, daemon=True)
            waiter.start()
            time.sleep(0.3)  # blocked in synchronize() by now
    ringcc.barrier()

    start = time.monotonic()
    ringcc.shutdown()
    record["shutdown_s"] = time.monotonic() - start
    if pending is not None:
        record["pending_done"] = pending.done()
        record["pending_error"] = error_of(lambda: pending.wait(5))
    if waiter is not None:
        waiter.join(10)
        record["waiter_finished"] = not waiter.is_alive()
        record["waiter_error"] = waited.get("error")
    x = np.ones(2, dtype=np.float32)
    record["after"] = {
        "allreduce_async(name=)": error_of(lambda: ringcc.allreduce_async(x, name="after-shutdown")),
        "engine_stats": error_of(ringcc.engine_stats),
        "join": error_of(ringcc.join),
        "start_timeline": error_of(lambda: ringcc.start_timeline(os.devnull)),
    }

    # A new engine after init() again.
    ringcc.init()
    got = ringcc.allreduce_async(np.full(3, rank + 1, dtype=np.int32), name="after-reinit").wait(30)
    record["reinit_ok"] = bool(np.array_equal(got, np.full(3, size * (size + 1) // 2, dtype=np.int32)))
    record["reinit_stats"] = ringcc.engine_stats()
    start = time.monotonic()
    ringcc.shutdown()
    record["second_shutdown_s"] = time.monotonic() - start

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w", encoding="utf-8") as file:
        json.dump(record, file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
