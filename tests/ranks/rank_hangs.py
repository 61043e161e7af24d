"""Waits that used to hang past every timeout, each ending now with an error
on every rank within its bound. One job of 2 ranks, every case its own
init() ... shutdown():

    RINGCC_TIMEOUT_S=5 RINGCC_STALL_SHUTDOWN_S=2 ringrun -np 2 python tests/ranks/rank_hangs.py --out DIR

- skip-then-shutdown: rank 0 waits on a named collective rank 1 never
  enqueues; rank 1 shuts down. Rank 0: PeerFailureError naming rank 1, at once.
- skip-then-other: rank 0 waits on one name, rank 1 on another. Both:
  TimeoutError naming the tensor and the missing rank after
  RINGCC_STALL_SHUTDOWN_S.
- join-vs-shutdown: rank 0 in join(), rank 1 shuts down. Rank 0:
  PeerFailureError naming rank 1, at once.
- join-stalls: rank 0 in join(), rank 1 idle. Rank 0: TimeoutError naming
  rank 1 after RINGCC_STALL_SHUTDOWN_S.
- horovod-generated-names: the Horovod API example whose ranks' generated
  names differ (an unnamed allreduce_async_ before hvd.barrier() on rank 0,
  after it on rank 1, which comes 0.5 s late). Both: TimeoutError after
  RINGCC_STALL_SHUTDOWN_S, not one a TimeoutError and the other the news
  that its peer shut down.

Each rank writes DIR/rank<R>.json: per case, what each call raised and when.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import ringcc


def attempt(call) -> dict:
    start = time.monotonic()
    try:
        result = call()
        outcome = {"class": None, "message": repr(result)[:200]}
    except Exception as error:  # noqa: BLE001 - recorded for the test to judge
        outcome = {
            "class": type(error).__name__,
            "message": str(error),
            "peer_failure": isinstance(error, ringcc.PeerFailureError),
            "timeout": isinstance(error, ringcc.TimeoutError),
        }
    outcome["seconds"] = time.monotonic() - start
    return outcome


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args(argv)
    stall_s = float(os.environ["RINGCC_STALL_SHUTDOWN_S"])
    x = np.ones(4, np.float32)
    records = {}

    def case(name, body):
        ringcc.init()
        ringcc.barrier()
        record = body(ringcc.rank())
        record["shutdown"] = attempt(ringcc.shutdown)
        records[name] = record
        print("HANG-CASE", name, json.dumps(record), flush=True)

    def skip_then_shutdown(rank):
        if rank == 0:
            return {"wait": attempt(lambda: ringcc.synchronize(ringcc.allreduce_async(x, name="skipped")))}
        time.sleep(0.2)  # rank 0 waits by now
        return {}

    def skip_then_other(rank):
        name = "wanted-by-0" if rank == 0 else "wanted-by-1"
        return {"wait": attempt(lambda: ringcc.synchronize(ringcc.allreduce_async(x, name=name)))}

    def join_vs_shutdown(rank):
        if rank == 0:
            return {"join": attempt(ringcc.join)}
        time.sleep(0.2)
        return {}

    def join_stalls(rank):
        if rank == 0:
            return {"join": attempt(ringcc.join)}
        time.sleep(stall_s + 1.5)  # alive, cycling, but neither joining nor enqueuing
        return {}

    case("skip-then-shutdown", skip_then_shutdown)
    case("skip-then-other", skip_then_other)
    case("join-vs-shutdown", join_vs_shutdown)
    case("join-stalls", join_stalls)

    if not args.no_torch:
        try:
            import torch

            import ringcc.torch as hvd
        except ImportError:
            hvd = None
        if hvd is not None:
            hvd.init()
            r = hvd.rank()
            t = torch.ones(10)

            def example():
                if r == 0:
                    h = hvd.allreduce_async_(t)
                else:  # the ranks' stall clocks start apart: both still fail by the stall
                    time.sleep(0.5)
                hvd.barrier()
                if r == 1:
                    h = hvd.allreduce_async_(t)
                hvd.synchronize(h)

            record = {"example": attempt(example)}
            start = time.monotonic()
            hvd.shutdown()
            record["shutdown"] = {"seconds": time.monotonic() - start}
            records["horovod-generated-names"] = record
            print("HANG-CASE horovod-generated-names", json.dumps(record), flush=True)

    with open(os.path.join(args.out, f"rank{int(os.environ['RINGCC_RANK'])}.json"), "w", encoding="utf-8") as file:
        json.dump(records, file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
