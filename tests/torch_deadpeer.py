"""A rank of a "ring" group dies; the others must raise from wait(), not hang.

    ringrun -np 3 python tests/torch_deadpeer.py --out DIR
    torchrun --nproc-per-node 3 tests/torch_deadpeer.py --out DIR

The last rank leaves abruptly (os._exit, exit status 0 so that the launcher
lets the others go on) right after a first all_reduce; every other rank then
issues an asynchronous all_reduce and waits on it. Each survivor writes
OUT/rank<R>.json with what wait() raised and how long it took.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import torch
    import torch.distributed as dist

    import ringcc.torch  # noqa: F401

    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.ones(4)
    dist.all_reduce(t)
    os.makedirs(args.out, exist_ok=True)
    if rank == size - 1:
        sys.stdout.flush()
        os._exit(0)
    time.sleep(0.5)
    record = {"rank": rank, "size": size}
    start = time.monotonic()
    work = dist.all_reduce(torch.ones(1 << 12), async_op=True)
    try:
        work.wait()
        record["raised"] = None
    except Exception as error:  # noqa: BLE001 - what we are here to see
        record["raised"] = type(error).__name__
        record["bases"] = [c.__name__ for c in type(error).__mro__]
        record["message"] = str(error)
    record["seconds"] = round(time.monotonic() - start, 3)
    # The future of a work on the broken group fails too, at once.
    try:
        dist.all_reduce(torch.ones(1), async_op=True).get_future().wait()
        record["second"] = None
    except Exception as error:  # noqa: BLE001
        record["second"] = type(error).__name__
    with open(os.path.join(args.out, f"rank{rank}.json"), "w", encoding="utf-8") as file:
        json.dump(record, file)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
