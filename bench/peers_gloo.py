"""The gloo peer: torch.distributed's gloo backend, in the bench's own processes.

The process group joins through torch's env:// rendezvous (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT, which ringrun sets) and works on CPU tensors that
share the bench's NumPy buffers (torch.from_numpy), so no copies are timed.
"""
import os
from datetime import timedelta

import numpy as np

from .measure import Backend

ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def open_gloo(world, timeout_s):
    """Returns (GlooBackend, None), or (None, reason) when gloo cannot be used."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        return None, f"torch is not importable ({e})"
    if not dist.is_available() or not dist.is_gloo_available():
        return None, "this torch build has no gloo backend"
    missing = [v for v in ENV if not os.environ.get(v)]
    if missing:
        return None, "torch's env:// variables are not set: " + ", ".join(missing)
    if int(os.environ["WORLD_SIZE"]) != world:
        return None, f"WORLD_SIZE={os.environ['WORLD_SIZE']} but ringcc has {world} ranks"
    try:
        dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=timeout_s))
    except Exception as e:  # noqa: BLE001 - any failure means "peer unavailable"
        return None, f"init_process_group('gloo') failed: {e}"
    return GlooBackend(torch, dist), None


class GlooBackend(Backend):
    name = "gloo"

    def __init__(self, torch, dist):
        self.torch, self.dist = torch, dist
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        # all_gather_into_tensor is deprecated in favour of all_gather_single in newer torch.
        self._allgather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        self.version = f"torch {torch.__version__}"

    def close(self):
        if self.dist.is_initialized():
            self.dist.destroy_process_group()

    def tensor(self, a):
        """A tensor sharing a's memory (bfloat16 goes through a uint16 view)."""
        if a.dtype.name == "bfloat16":
            return self.torch.from_numpy(a.view(np.uint16)).view(self.torch.bfloat16)
        return self.torch.from_numpy(a)

    def max_over_ranks(self, value):
        t = self.torch.tensor([value], dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t.item())

    def barrier(self):
        self.dist.barrier()

    def loop(self, op, x, out):
        t = self.tensor(x)
        if op == "allreduce":
            f = self.dist.all_reduce

            def run(n):
                for _ in range(n):
                    f(t)
        elif op == "allgather":
            f, o = self._allgather, self.tensor(out)

            def run(n):
                for _ in range(n):
                    f(o, t)
        else:
            f = self.dist.broadcast

            def run(n):
                for _ in range(n):
                    f(t, 0)
        return run
