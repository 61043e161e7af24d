"""What test_ray.py runs on RayExecutor's workers and in Ray Train's: the
test registers this module to be pickled by value, since the workers cannot
import this folder."""

from __future__ import annotations

import os
import time

# The variables RayExecutor gives each worker that the cases look at.
SHOWN_VARIABLES = (
    "RINGCC_RANK",
    "RINGCC_SIZE",
    "RINGCC_LOCAL_RANK",
    "RINGCC_LOCAL_SIZE",
    "RINGCC_CROSS_RANK",
    "RINGCC_CROSS_SIZE",
    "RINGCC_MASTER_ADDR",
    "RINGCC_MASTER_PORT",
    "RINGCC_JOB_ID",
    "RINGCC_TIMEOUT_S",
    "HOROVOD_RANK",
    "RANK",
    "WORLD_SIZE",
    "MASTER_PORT",
    "RAY_CASES_MARK",
)


class Recorder:
    """The executable object of start(executable_cls=Recorder, ...)."""

    def __init__(self, label, suffix=""):
        self.label = label + suffix


def job_view(executable) -> dict:
    """What a worker was told, and whether its secret shows where other users look."""
    secret = os.environ.get("RINGCC_SECRET", "")
    with open("/proc/self/cmdline", "rb") as f:
        on_command_line = secret.encode() in f.read()
    with open("/proc/self/environ", "rb") as f:  # the environment the process started with
        in_start_environment = secret.encode() in f.read()
    return {
        "variables": {name: os.environ.get(name) for name in SHOWN_VARIABLES},
        "secret_length": len(secret),
        "secret_on_command_line": on_command_line,
        "secret_in_start_environment": in_start_environment,
        "label": getattr(executable, "label", None),
        "pid": os.getpid(),
    }


def sum_of_ranks(scale, offset=0.0) -> float:
    """An allreduce over the job: sum over ranks of (rank + 1) * scale + offset."""
    import torch

    import ringcc.torch as hvd

    hvd.init()
    value = torch.tensor([(hvd.rank() + 1) * scale + offset], dtype=torch.float64)
    return hvd.allreduce(value, op=hvd.Sum, name="sum_of_ranks").item()


def raise_on_rank(failing_rank: int) -> int:
    rank = int(os.environ["RINGCC_RANK"])
    if rank == failing_rank:
        raise ValueError(f"rank {rank} refuses")
    return rank


def exit_on_rank(failing_rank: int) -> None:
    """The failing rank's process ends at once; the others do not notice
    (they sleep rather than wait in a collective), so that only the
    executor's timeout ends run()."""
    rank = int(os.environ["RINGCC_RANK"])
    if rank == failing_rank:
        os._exit(3)
    time.sleep(3600)


def ddp_train_loop(config: dict) -> None:
    """Ray Train's loop: a few DDP steps over the group Ray Train made with
    the backend under test; each rank writes its parameters, the backend,
    and whether every rank ended with the same parameters to
    config["out"]/rank<N>.json (Ray Train keeps reported metrics only with
    a checkpoint)."""
    import json
    from pathlib import Path

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.manual_seed(config["seed"])
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    data = torch.Generator().manual_seed(config["seed"] + dist.get_rank())
    for _ in range(config["steps"]):
        x = torch.randn(32, 8, generator=data)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), x.sum(dim=1, keepdim=True).sin()).backward()
        optimizer.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    record = {
        "backend": dist.get_backend(),
        "world_size": dist.get_world_size(),
        "ranks_agree": all(torch.equal(flat, other) for other in gathered),
        "parameters": flat.tolist(),
    }
    Path(config["out"], f"rank{dist.get_rank()}.json").write_text(json.dumps(record))
