"""Ranks of a `ringcc.torch` (Horovod API) job deadlock: each issues one
unnamed allreduce, rank 0 before `hvd.barrier()` and the others after it, so
their automatic names (`<op>.noname.<n>`) differ and every rank ends up
blocked on names no other rank will enqueue.

    RINGCC_TIMEOUT_S=3 ringrun -np 2 python tests/frameworks/torch/torch_hvd_deadlock.py --out DIR

With the stall shutdown time at its default (600 s), every rank must raise
from the barrier or synchronize() after RINGCC_TIMEOUT_S, naming each rank's
pending names as automatic ones; the job then goes on with named calls. A
SIGALRM a few seconds past RINGCC_TIMEOUT_S ends a wait the engine does not
end. Each rank writes OUT/rank<R>.json with what was raised and when.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


class WaitBound(Exception):
    """Raised by SIGALRM: the wait outlived its bound."""


def _outcome(call):
    start = time.monotonic()
    try:
        result = call()
        record = {"raised": None, "result": repr(result)[:200]}
    except Exception as error:  # noqa: BLE001 - what we are here to see
        record = {
            "raised": type(error).__name__,
            "bases": [c.__name__ for c in type(error).__mro__],
            "message": str(error),
        }
    record["seconds"] = round(time.monotonic() - start, 3)
    return record


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import torch

    import ringcc.torch as hvd

    bound_s = float(os.environ["RINGCC_TIMEOUT_S"]) + 5

    def expire(signum, frame):
        raise WaitBound(f"still waiting after {bound_s:g} s")

    signal.signal(signal.SIGALRM, expire)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    hvd.allreduce(torch.ones(4), name="first")
    t = torch.ones(10)

    def example():
        signal.setitimer(signal.ITIMER_REAL, bound_s)
        try:
            if rank == 0:
                handle = hvd.allreduce_async_(t)
            hvd.barrier()
            if rank != 0:
                handle = hvd.allreduce_async_(t)
            return hvd.synchronize(handle)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    record = {"rank": rank, "size": size, "example": _outcome(example)}
    record["after"] = _outcome(lambda: hvd.allreduce(torch.full((3,), 1.0 + rank), name="after", op=hvd.Sum).tolist())
    record["shutdown"] = _outcome(hvd.shutdown)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w", encoding="utf-8") as file:
        json.dump(record, file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
