"""A rank whose script fails after init(), for each API:

    ringrun -np 2 python tests/ranks/rank_raises.py --api numpy --out DIR

Both ranks initialise and meet once; then rank 1 raises ValueError (or, with
--exit, calls sys.exit(3); with --signal, is interrupted by SIGINT) while
rank 0 goes on to a collective that needs rank 1: NumPy API (allreduce),
Horovod API (ringcc.torch: a named allreduce through the engine), torch
backend "ring" (dist.all_reduce), JAX (ringcc.jax.allreduce), MXNet
(ringcc.mxnet.allreduce). Rank 0 must get PeerFailureError naming rank 1 at
once, not wait: it records what it got in DIR/outcome0.json and lets the
error end it (exit status 1), so ringrun's message tells which rank failed
first. Rank 1 records when it failed in DIR/failed1.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def write_json(path: str, record: dict) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        json.dump(record, file)
    os.replace(path + ".tmp", path)


def setup(api: str):
    """Initialises the API; returns (rank, a barrier, the collective rank 0 blocks in)."""
    if api == "numpy":
        import numpy as np

        import ringcc

        ringcc.init()
        return ringcc.rank(), ringcc.barrier, lambda: ringcc.allreduce(np.ones(4, np.float32))
    if api == "horovod":
        import torch

        import ringcc.torch as hvd

        hvd.init()
        return hvd.rank(), hvd.barrier, lambda: hvd.allreduce(torch.ones(4), name="after-the-failure")
    if api == "torch":
        import datetime

        import torch
        import torch.distributed as dist

        import ringcc.torch  # noqa: F401  (registers backend "ring")

        dist.init_process_group("ring", timeout=datetime.timedelta(seconds=60))
        return dist.get_rank(), dist.barrier, lambda: dist.all_reduce(torch.ones(4))
    if api == "jax":
        import jax
        import jax.numpy as jnp

        import ringcc
        import ringcc.jax as rj

        ringcc.init()
        return (
            ringcc.rank(),
            lambda: rj.barrier(),
            lambda: jax.block_until_ready(rj.allreduce(jnp.ones(4, jnp.float32))),
        )
    if api == "mxnet":
        import mxnet as mx

        import ringcc.mxnet as rmx

        rmx.init()

        def blocking():
            out = rmx.allreduce(mx.nd.ones(4), name="after-the-failure")
            out.wait_to_read()
            rmx.check_errors()

        def barrier():
            rmx.allreduce(mx.nd.ones(1), name="barrier").wait_to_read()

        return rmx.rank(), barrier, blocking
    raise SystemExit(f"unknown api {api!r}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", required=True, choices=("numpy", "horovod", "torch", "jax", "mxnet"))
    parser.add_argument("--out", required=True)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--exit", action="store_true", help="rank 1 calls sys.exit(3) instead of raising")
    how.add_argument("--signal", action="store_true", help="rank 1 gets SIGINT (KeyboardInterrupt)")
    args = parser.parse_args(argv)
    rank, barrier, blocking = setup(args.api)
    if rank == 1:
        barrier()
        write_json(os.path.join(args.out, "failed1.json"), {"time": time.time()})
        if args.exit:
            sys.exit(3)
        if args.signal:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(10)
        raise ValueError("rank 1 fails on purpose")
    # ringrun stops the other ranks once rank 1 exits: stay to report.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    start = time.time()
    try:
        barrier()  # may already fail, where collectives run asynchronously (JAX)
        blocking()
    except BaseException as error:
        write_json(
            os.path.join(args.out, "outcome0.json"),
            {
                "class": type(error).__name__,
                "is_peer_failure": _is_peer_failure(error),
                "message": str(error),
                "time": time.time(),
                "seconds": time.time() - start,
            },
        )
        raise
    write_json(os.path.join(args.out, "outcome0.json"), {"class": None, "message": "no error", "time": time.time()})
    return 0


def _is_peer_failure(error) -> bool:
    import ringcc

    # JAX and MXNet report the core's error inside their own exception type.
    return isinstance(error, ringcc.PeerFailureError) or "ringcc.PeerFailureError" in str(error)


if __name__ == "__main__":
    sys.exit(main())
