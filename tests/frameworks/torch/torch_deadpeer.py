"""A rank of a "ring" group dies or is late; the others must raise, not hang or crash.

    ringrun -np 3 python tests/frameworks/torch/torch_deadpeer.py --out DIR [--mode MODE]
    torchrun --nproc-per-node 3 tests/frameworks/torch/torch_deadpeer.py --out DIR

--mode exit (default): the last rank leaves abruptly (os._exit, exit status 0
so that the launcher lets the others go on) right after a first all_reduce;
every other rank then issues an asynchronous all_reduce and waits on it.

--mode ddp-kill / ddp-late: the ranks train a DDP model on backend "ring";
in the second step's backward, after its first buckets' allreduces started,
the last rank kills itself (SIGKILL), or sleeps past the group's timeout
(`--group-timeout`, of init_process_group, or with --subgroup of the
new_group DDP runs on). Every other rank's backward must raise
torch.distributed.DistBackendError naming it.

Each survivor writes OUT/rank<R>.json with what was raised and how long it took.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import time


def _record_error(record: dict, error: BaseException, key: str = "raised") -> None:
    import torch.distributed as dist

    record[key] = type(error).__name__
    record["bases"] = [c.__name__ for c in type(error).__mro__]
    record["module"] = type(error).__module__
    record["message"] = str(error)
    record["dist_backend_error"] = isinstance(error, dist.DistBackendError)


def exit_mode(args, record: dict) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    record.update(rank=rank, size=size)
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == size - 1:
        sys.stdout.flush()
        os._exit(0)
    time.sleep(0.5)
    start = time.monotonic()
    work = dist.all_reduce(torch.ones(1 << 12), async_op=True)
    try:
        work.wait()
        record["raised"] = None
    except Exception as error:  # noqa: BLE001 - what we are here to see
        _record_error(record, error)
    record["seconds"] = round(time.monotonic() - start, 3)
    # The future of a work on the broken group fails too, at once.
    try:
        dist.all_reduce(torch.ones(1), async_op=True).get_future().wait()
        record["second"] = None
    except Exception as error:  # noqa: BLE001
        record["second"] = type(error).__name__


def ddp_mode(args, record: dict) -> None:
    import torch
    import torch.distributed as dist

    short = datetime.timedelta(seconds=args.group_timeout)
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=60) if args.subgroup else short)
    rank, size = dist.get_rank(), dist.get_world_size()
    record.update(rank=rank, size=size)
    group = dist.new_group(timeout=short) if args.subgroup else None
    victim = size - 1
    if rank != victim:
        # ringrun stops the other ranks once it sees the victim die; the
        # survivors stay to report what they saw.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(6)])
    # Small buckets: several allreduces start before the first layer's
    # gradient, the last of backward, is computed.
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=0.02)
    step = [0]

    def stall(grad):
        if step[0] == 1 and rank == victim:
            if args.mode == "ddp-kill":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(args.group_timeout + 20)
            os._exit(0)
        return grad

    model[0].weight.register_hook(stall)
    x = torch.randn(16, 64)
    for step[0] in range(2):
        loss = ddp(x).square().mean()
        start = time.monotonic()
        try:
            loss.backward()
        except Exception as error:  # noqa: BLE001 - what we are here to see
            _record_error(record, error)
            record.update(step=step[0], seconds=round(time.monotonic() - start, 3))
            return
    record.update(raised=None, step=step[0])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--mode", choices=("exit", "ddp-kill", "ddp-late"), default="exit")
    parser.add_argument("--group-timeout", type=float, default=3.0, help="seconds (ddp modes)")
    parser.add_argument("--subgroup", action="store_true", help="DDP on a new_group with the short timeout")
    args = parser.parse_args()

    import ringcc.torch  # noqa: F401

    os.makedirs(args.out, exist_ok=True)
    record: dict = {}
    if args.mode == "exit":
        exit_mode(args, record)
    else:
        ddp_mode(args, record)
    with open(os.path.join(args.out, f"rank{record['rank']}.json"), "w", encoding="utf-8") as file:
        json.dump(record, file)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
