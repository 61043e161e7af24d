"""A rank of a `ringcc.torch` (Horovod API) job dies; the others must raise
from synchronize() and from blocking calls, not hang.

    ringrun -np 3 python tests/frameworks/torch/torch_hvd_deadpeer.py --out DIR
    torchrun --nproc-per-node 3 tests/frameworks/torch/torch_hvd_deadpeer.py --out DIR

The last rank leaves abruptly (os._exit, exit status 0 so that the launcher
lets the others go on) 0.3 s after a first allreduce, while the others wait on an
allreduce it never starts. Every other rank then starts another asynchronous
allreduce and synchronizes it, then tries a blocking allreduce and an
optimizer step; each survivor writes OUT/rank<R>.json with
what was raised and how long it took.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _outcome(call):
    start = time.monotonic()
    try:
        call()
        record = {"raised": None}
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

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    hvd.allreduce(torch.ones(4), name="first")
    os.makedirs(args.out, exist_ok=True)
    if rank == size - 1:
        time.sleep(0.3)  # the others are waiting on "inflight" meanwhile
        sys.stdout.flush()
        os._exit(0)
    record = {"rank": rank, "size": size}
    handle = hvd.allreduce_async(torch.ones(1 << 12), name="inflight")
    record["inflight"] = _outcome(lambda: hvd.synchronize(handle))
    time.sleep(0.2)
    handle = hvd.allreduce_async(torch.ones(1 << 12), name="after")
    record["synchronize"] = _outcome(lambda: hvd.synchronize(handle))
    record["blocking"] = _outcome(lambda: hvd.allreduce(torch.ones(8), name="blocking"))
    inplace = hvd.allreduce_async_(torch.ones(1 << 12), name="after_inplace")  # the direct path
    record["synchronize_inplace"] = _outcome(lambda: hvd.synchronize(inplace))
    model = torch.nn.Linear(4, 2)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters()
    )

    def step():
        model(torch.ones(3, 4)).sum().backward()
        opt.step()

    record["optimizer_step"] = _outcome(step)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w", encoding="utf-8") as file:
        json.dump(record, file)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
