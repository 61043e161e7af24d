"""A training script for torchrun's restarts over backend "ring"
(tests/frameworks/torch/test_elastic_torchrun.py):

    torchrun --nnodes=1 --nproc-per-node=2 --max-restarts=3 --rdzv-backend=c10d \\
        --rdzv-endpoint=127.0.0.1:0 tests/frameworks/torch/torchrun_train.py --checkpoint DIR --out DIR \\
        [--kill-rank R --kill-at STEP]

Every rank trains the same small model on batches that depend only on the
step and the rank, averaging gradients with all_reduce; rank 0 writes a
checkpoint (model, optimizer, step) every --every steps, and every rank
starts from the last checkpoint when there is one. In the first attempt
(TORCHELASTIC_RESTART_COUNT 0) rank --kill-rank kills itself with SIGKILL
during step --kill-at; torchrun then restarts the group, and training goes
on from the checkpoint. Rank 0 writes the final parameters and what each
attempt did to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

FEATURES, OUTPUTS, BATCH = 16, 4, 8


def make_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.Tanh(), torch.nn.Linear(32, OUTPUTS))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, optimizer


def batch(step: int, rank: int):
    generator = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(BATCH, FEATURES, generator=generator), torch.randn(BATCH, OUTPUTS, generator=generator)


def local_gradients(model, step: int, rank: int):
    model.zero_grad()
    x, y = batch(step, rank)
    torch.nn.functional.mse_loss(model(x), y).backward()


def reference_parameters(steps: int, size: int):
    """What `size` ranks reach after `steps` steps, computed in one process."""
    model, optimizer = make_model()
    for step in range(steps):
        grads = []
        for rank in range(size):
            local_gradients(model, step, rank)
            grads.append([p.grad.clone() for p in model.parameters()])
        for i, p in enumerate(model.parameters()):
            total = grads[0][i].clone()
            for other in grads[1:]:
                total += other[i]
            p.grad = total / size
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--kill-rank", type=int, default=-1)
    parser.add_argument("--kill-at", type=int, default=-1)
    parser.add_argument("--late-rank0", type=float, default=1.0)
    args = parser.parse_args()

    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if attempt > 0 and os.environ.get("RANK") == "0":
        # Rank 0 of a restarted attempt arrives late, as a slow host would: the
        # others meet the store while only the earlier attempt's keys are there.
        time.sleep(args.late_rank0)
    dist.init_process_group(backend="ring")
    rank, size = dist.get_rank(), dist.get_world_size()
    with open(os.path.join(args.out, f"pid-attempt{attempt}-rank{rank}"), "w", encoding="utf-8") as file:
        file.write(str(os.getpid()))
    model, optimizer = make_model()
    path = os.path.join(args.checkpoint, "checkpoint.pt")
    start = 0
    if os.path.exists(path):
        saved = torch.load(path)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        start = saved["step"]
    began = time.time()
    for step in range(start, args.steps):
        local_gradients(model, step, rank)
        if attempt == 0 and rank == args.kill_rank and step == args.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= size
        optimizer.step()
        if rank == 0 and (step + 1) % args.every == 0:
            temporary = path + ".tmp"
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step + 1}, temporary)
            os.replace(temporary, path)
    with open(os.path.join(args.out, f"attempt{attempt}-rank{rank}.json"), "w", encoding="utf-8") as file:
        json.dump(
            {"attempt": attempt, "rank": rank, "size": size, "start": start, "began": began, "ended": time.time()}, file
        )
    if rank == 0:
        torch.save([p.detach() for p in model.parameters()], os.path.join(args.out, "final.pt"))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
