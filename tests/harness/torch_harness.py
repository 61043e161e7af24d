"""Runs a list of cases inside one group of torch.distributed ranks.

The torch counterpart of rank_harness.run_cases: the rank script (torch_cases.py)
builds a rank_harness.CaseList and calls run_cases(), which initialises
torch.distributed with the backend asked for (default "ring"), then runs every
selected case on every rank in the same order. Before each case the ranks meet
in a barrier on torch's own store (independent of the backend, so a case that
broke a group cannot stop the others from lining up). Results go to
OUT/rank<R>.jsonl in rank_harness's format, so rank_groups' GroupRun reads them.

Works under ringrun and torchrun alike: both set RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT, and torch's env:// rendezvous reads them.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import traceback
from collections.abc import Callable

from rank_harness import CaseList, Context, Skip, _write, case_seed  # noqa: F401  (re-exported)

SYNC_TIMEOUT_S = 90.0


class TorchContext(Context):
    """What a case knows: rank, size, and the default group's backend."""

    backend: str = "ring"

    def generator(self, rank: int | None = None, salt: int = 0):
        """A torch.Generator every rank can recreate for any rank's data."""
        import torch

        g = torch.Generator()
        g.manual_seed((self.seed * 1000003 + (self.rank if rank is None else rank) * 7919 + salt) % (2**63))
        return g


def _store_barrier(store, key: str, size: int) -> None:
    store.add(key, 1)
    deadline = time.monotonic() + SYNC_TIMEOUT_S
    delay = 0.0005
    while store.add(key, 0) < size:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the ranks did not meet at {key} within {SYNC_TIMEOUT_S:g} s")
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run test cases inside a group of torch.distributed ranks.")
    parser.add_argument("--out", required=True, help="directory for the per-rank result files")
    parser.add_argument("--tags", default="", help="comma-separated tags this group enables")
    parser.add_argument("--cases", default="", help="comma-separated name patterns (fnmatch) to run")
    parser.add_argument("--backend", default="ring", help="the default group's backend")
    parser.add_argument("--list", action="store_true", help="print the selected case names and exit")
    return parser.parse_args(argv)


def run_cases(cases: CaseList, argv: list[str] | None = None, before_init: Callable[[], None] | None = None) -> int:
    args = parse_args(argv)
    tags = [t for t in args.tags.split(",") if t]
    patterns = [p for p in args.cases.split(",") if p]
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if args.list:
        for case in cases.select(size, tags, patterns):
            print(case.name)
        return 0
    if before_init is not None:
        before_init()
    import torch.distributed as dist

    import ringcc.torch  # noqa: F401  (registers backend "ring" when no entry point did)

    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    store = dist.distributed_c10d._get_default_store()
    selected = cases.select(size, tags, patterns)
    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, f"rank{rank}.jsonl")
    if os.path.exists(out_path):
        os.remove(out_path)
    group = dist.group.WORLD
    import ringcc

    _write(
        out_path,
        {
            "kind": "start",
            "rank": rank,
            "size": size,
            "pid": os.getpid(),
            "transport": getattr(group, "transport_name", args.backend),
            "cases": len(selected),
            "ringcc_file": ringcc.__file__,
            "backend": dist.get_backend(),
            "launcher": "ringrun" if "RINGCC_RANK" in os.environ else "torchrun",
        },
    )
    failures, broken = 0, None
    for index, case in enumerate(selected):
        record = {"kind": "case", "name": case.name}
        if broken is None:
            try:
                _store_barrier(store, f"ringcc-tests/case{index}", size)
            except Exception as error:  # noqa: BLE001
                broken = f"synchronisation before case {index}: {error}"
        if broken is not None:
            record.update(status="fail", message=f"not run: {broken}", seconds=0.0)
            _write(out_path, record)
            failures += 1
            continue
        context = TorchContext(rank=rank, size=size, case=case.name, seed=case_seed(case.name))
        context.backend = args.backend
        start = time.monotonic()
        try:
            case.fn(context)
            record.update(status="pass", message="\n".join(context.notes))
        except Skip as reason:
            record.update(status="skip", message=str(reason))
        except BaseException as error:  # noqa: BLE001 - recorded; the ranks stay in step
            failures += 1
            lines = traceback.format_exception(type(error), error, error.__traceback__)
            record.update(status="fail", message=f"{type(error).__name__}: {error}", traceback="".join(lines[-8:]))
            if isinstance(error, KeyboardInterrupt):
                raise
        record["seconds"] = round(time.monotonic() - start, 4)
        _write(out_path, record)
    if broken is None:
        try:
            _store_barrier(store, "ringcc-tests/end", size)
            # Rank 0 serves torch's store: it leaves last, once every rank
            # is past the barrier (else their last store call fails).
            if rank == 0:
                _store_barrier(store, "ringcc-tests/left", size)
            else:
                store.add("ringcc-tests/left", 1)
        except Exception as error:  # noqa: BLE001
            broken = str(error)
    _write(out_path, {"kind": "end", "failures": failures, "broken": broken})
    try:
        dist.destroy_process_group()
    except Exception as error:  # noqa: BLE001
        print(f"destroy_process_group: {error}", file=sys.stderr)
    sys.stdout.flush()
    return 0 if failures == 0 else 1
