"""A Horovod-style training script (`import ringcc.torch as hvd`: hvd.init,
broadcast_parameters, DistributedOptimizer, a few steps) that runs the same
under ringrun, as a script, and under RayExecutor, whose workers run its
train() (test_ray.py). Each rank starts from a model of its own and trains
on data of its own, so that the result depends on the broadcast and on the
averaged gradients.

    ringrun -np 2 python tests/frameworks/ray/hvd_train.py --out DIR
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

import ringcc.torch as hvd


def train(steps: int = 4, seed: int = 7) -> dict:
    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(seed + 1000 * hvd.rank())  # rank 0's model wins the broadcast
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    data = torch.Generator().manual_seed(seed + hvd.rank())
    losses = []
    for _ in range(steps):
        x = torch.randn(32, 8, generator=data)
        y = x.sum(dim=1, keepdim=True).sin()
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(hvd.allreduce(loss.detach(), name="loss").item())
    return {
        "rank": hvd.rank(),
        "size": hvd.size(),
        "local_rank": hvd.local_rank(),
        "losses": losses,
        "parameters": [value for p in model.parameters() for value in p.detach().flatten().tolist()],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, help="directory for each rank's rank<N>.json")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    result = train(args.steps)
    Path(args.out, f"rank{result['rank']}.json").write_text(json.dumps(result))
    hvd.shutdown()


if __name__ == "__main__":
    main()
