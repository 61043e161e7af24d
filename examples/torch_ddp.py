"""DistributedDataParallel over ringcc: torch.distributed with backend "ring".

    ringrun -np 2 python examples/torch_ddp.py
    torchrun --nproc-per-node 2 examples/torch_ddp.py [--steps 30] [--batch 32]

The usual DDP script with one word changed: init_process_group(backend="ring")
(installing ringcc registers the backend; `import ringcc.torch` does too, for
a ringcc that is not installed). Every rank trains a replica of a small MLP on
its own shard of a synthetic linear regression problem (no download); DDP averages
the gradients over the ranks with the backend's allreduce, overlapped with the
backward pass, so the replicas stay equal. Rank 0 prints the loss; at the end
every rank checks that its parameters equal rank 0's (a broadcast and a
compare), and the script exits with 1 if they do not.
"""

import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ringcc.torch  # noqa: F401  (registers backend "ring" where ringcc is not installed)


def make_data(rank, samples, seed=1234):
    """This rank's shard of y = x . a + noise; a is the same on every rank."""
    a = torch.randn(16, generator=torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed + 1 + rank)
    x = torch.randn(samples, 16, generator=g)
    y = (x @ a).unsqueeze(1) / 4 + 0.05 * torch.randn(samples, 1, generator=g)
    return x, y


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=32, help="examples per rank and step")
    parser.add_argument("--lr", type=float, default=0.02)
    args = parser.parse_args(argv)

    torch.set_num_threads(1)  # several ranks share the machine's cores
    dist.init_process_group(backend="ring")  # the environment comes from ringrun or torchrun
    rank, size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(rank)  # replicas start different; DDP broadcasts rank 0's parameters
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    x, y = make_data(rank, args.steps * args.batch)

    first = last = None
    for step in range(args.steps):
        xb = x[step * args.batch : (step + 1) * args.batch]
        yb = y[step * args.batch : (step + 1) * args.batch]
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(xb), yb)
        loss.backward()  # DDP's hooks allreduce the gradient buckets here
        optimizer.step()
        # The mean loss over the ranks, for the printout.
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        first = mean.item() if first is None else first
        last = mean.item()
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {last:.4f}", flush=True)

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    same = torch.tensor([int(torch.equal(flat, reference))])
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    identical = bool(same.item())
    if rank == 0:
        print(
            f"backend {dist.get_backend()}, {size} ranks: loss {first:.4f} -> {last:.4f}; "
            f"parameters identical on all ranks: {identical}",
            flush=True,
        )
    dist.destroy_process_group()
    return 0 if identical and last < first else 1


if __name__ == "__main__":
    raise SystemExit(main())
