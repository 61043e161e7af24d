"""What each task of the SLURM test's job steps runs (tests/launch/test_slurm.py):
the job found from SLURM's variables alone, three ways, each checked with an
allreduce of known values:

    ringcc.init()                               (the core)
    hvd.init()                                  (ringcc.torch's Horovod API)
    init_process_group(backend="ring")          (torch.distributed, env://)

Every task prints one line "SLURM_JOB_RESULT {json}": its SLURM task id,
job and step and what each check found; the test reads them all. With
--sockets, also where the task's TCP sockets listen after the first check
("listen": [[address, port], ...]; rank 0's store among them). Also runs
under ringrun (then RINGCC_RANK names the rank): --only-core runs the first
check alone.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

import ringcc


def core_check() -> dict:
    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    x = np.full(1000, rank + 1, dtype=np.float64)
    ringcc.allreduce_(x, ringcc.Sum)
    want = size * (size + 1) / 2
    return {"rank": rank, "size": size, "local_size": ringcc.local_size(), "allreduce_ok": bool((x == want).all())}


def hvd_check() -> dict:
    import torch

    import ringcc.torch as hvd

    hvd.init()
    total = hvd.allreduce(torch.full((64,), float(hvd.rank() + 1)), op=hvd.Sum, name="slurm.hvd")
    want = hvd.size() * (hvd.size() + 1) / 2
    return {"rank": hvd.rank(), "size": hvd.size(), "allreduce_ok": bool((total == want).all())}


def torch_check() -> dict:
    import torch
    import torch.distributed as dist

    dist.init_process_group(backend="ring")
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.full((257,), float(rank + 1))
    dist.all_reduce(t)
    gathered = [torch.zeros(1) for _ in range(size)]
    dist.all_gather(gathered, torch.tensor([float(rank)]))
    ok = bool((t == size * (size + 1) / 2).all()) and [float(g) for g in gathered] == [float(r) for r in range(size)]
    dist.destroy_process_group()
    return {"rank": rank, "size": size, "allreduce_ok": ok}


def main() -> int:
    result = {
        "procid": os.environ.get("SLURM_PROCID"),
        "step": os.environ.get("SLURM_STEP_ID"),
        "job": os.environ.get("SLURM_JOB_ID"),
    }
    checks = [("core", core_check)]
    if "--only-core" not in sys.argv:
        checks += [("hvd", hvd_check), ("torch", torch_check)]
    for name, check in checks:
        try:
            result[name] = check()
        except Exception as error:  # noqa: BLE001 - reported to the test, which names it
            result[name] = {"error": f"{type(error).__name__}: {error}"}
        if name == "core" and "--sockets" in sys.argv:
            from network_job import tcp_sockets  # beside this file

            result["listen"] = tcp_sockets()["listen"]
    print("SLURM_JOB_RESULT " + json.dumps(result), flush=True)
    ringcc.shutdown()
    return 0 if all("error" not in result[name] for name, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
