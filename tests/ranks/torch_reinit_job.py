"""One process of the torch re-initialisation test (tests/ranks/test_reinit.py).

As reinit_job.py, through torch.distributed: in every cycle some of the
processes call init_process_group(backend="ring") with that cycle's rank,
world size and store address, check an all_reduce, meet a rank that aborts
(every survivor must get a torch.distributed.DistBackendError that is also
ringcc.PeerFailureError) and call destroy_process_group(). At the end the
process records its file descriptors and threads against those after its
first cycle as rank 0, after a garbage collection: torch's own TCPStore lives as long
as Python objects refer to it, such as a caught exception's traceback.

    python torch_reinit_job.py --id P --procs N --ports P0,P1,... --out DIR
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
from reinit_job import fds, members_of, threads

import ringcc
import ringcc.torch  # noqa: F401  (registers backend "ring")


def one_cycle(cycle: int, rank: int, size: int, port: int, log: list) -> None:
    dist.init_process_group(
        backend="ring",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=size,
        timeout=datetime.timedelta(seconds=30),
    )
    assert (dist.get_rank(), dist.get_world_size()) == (rank, size)
    t = torch.arange(1000, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(t)
    want = torch.arange(1000, dtype=torch.float32) * (size * (size + 1) // 2)
    assert torch.equal(t, want), "all_reduce differs"
    victim = cycle % size
    log.append(f"cycle {cycle}: rank {rank} of {size}, victim {victim}")
    # The barrier may fail on the others already: the victim can leave it
    # (and abort) before they have.
    try:
        dist.barrier()
        if rank == victim:
            ringcc._core._abort(f"injected failure in cycle {cycle}", True)
        dist.all_reduce(torch.ones(256))
    except dist.DistBackendError as error:
        if not isinstance(error, ringcc.PeerFailureError):
            raise AssertionError(f"{type(error).__mro__} is not a ringcc.PeerFailureError") from None
        if rank != victim and f"rank {victim}" not in str(error):
            raise AssertionError(f"the error does not name rank {victim}: {error}") from None
    else:
        raise AssertionError("no error after a rank aborted")
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--procs", type=int, required=True)
    parser.add_argument("--ports", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    ports = [int(p) for p in args.ports.split(",")]
    record = {"id": args.id, "cycles": 0, "log": [], "error": None}
    start_fds = start_threads = None
    served_store = False
    try:
        for cycle, port in enumerate(ports):
            members = members_of(cycle, args.procs)
            if args.id not in members:
                continue
            size = len(members)
            rank = (members.index(args.id) + cycle) % size
            try:
                one_cycle(cycle, rank, size, port, record["log"])
            except BaseException:
                record["log"].append(f"cycle {cycle} failed:\n{traceback.format_exc()}")
                raise
            record["cycles"] += 1
            served_store = served_store or rank == 0
            # Once it has served the store: torch makes some things once per process then.
            if start_fds is None and served_store:
                gc.collect()
                time.sleep(0.2)
                start_fds, start_threads = fds(), threads()
    except BaseException as error:  # noqa: BLE001 - recorded for the test to report
        record["error"] = f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
    gc.collect()
    time.sleep(0.2)  # threads that were told to end have ended
    record.update(
        {
            "fds_after_first": start_fds,
            "fds_at_end": fds(),
            "threads_after_first": start_threads,
            "threads_at_end": threads(),
        }
    )
    with open(os.path.join(args.out, f"proc{args.id}.json"), "w", encoding="utf-8") as file:
        json.dump(record, file)
    return 0 if record["error"] is None else 1


if __name__ == "__main__":
    sys.exit(main())
