"""An elastic PyTorch training under ringrun's elastic mode, written as a
Horovod user would (tests/test_elastic.py):

    ringrun -np 2 --min-np 1 --max-np 3 --host-discovery-script ./discover.sh \\
        python tests/elastic_train.py --out DIR

hvd.DistributedOptimizer averages the gradients of a small model over the
ranks; an ElasticSampler deals out a fixed dataset; TorchState commits the
model, the optimizer, the sampler and the step count every --commit-every
steps. Every worker appends JSON lines to DIR/<worker>.jsonl: each step
(with the membership's size and the time), each commit and each reset, so
the test can tell which size every kept step had and replay them
(`replay`), and how long each membership change took.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time

import torch

FEATURES, OUTPUTS = 16, 4
SAMPLES, BATCH = 96, 4


def make_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.Tanh(), torch.nn.Linear(32, OUTPUTS))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, optimizer


def dataset():
    generator = torch.Generator().manual_seed(7)
    return torch.randn(SAMPLES, FEATURES, generator=generator), torch.randn(SAMPLES, OUTPUTS, generator=generator)


def batch_loss(model, x, y, indices):
    index = torch.tensor(indices)
    return torch.nn.functional.mse_loss(model(x[index]), y[index])


def replay(sizes, seed=0):
    """The parameters a run reaches whose kept steps had these sizes
    (sizes[i]: the membership's size in step i + 1), computed in one process
    the way ElasticSampler and DistributedOptimizer share out the work."""
    model, optimizer = make_model()
    x, y = dataset()
    epoch, processed = 0, 0
    for n in sizes:
        order = list(range(SAMPLES))
        random.Random(seed + epoch).shuffle(order)
        remaining = order[processed:]
        per_rank = math.ceil(len(remaining) / n)
        grads = []
        for rank in range(n):
            positions = [rank + j * n for j in range(min(BATCH, per_rank))]
            indices = [remaining[p] if p < len(remaining) else remaining[p - len(remaining)] for p in positions]
            model.zero_grad()
            batch_loss(model, x, y, indices).backward()
            grads.append([p.grad.clone() for p in model.parameters()])
        for i, p in enumerate(model.parameters()):
            total = grads[0][i].clone()
            for other in grads[1:]:
                total += other[i]
            p.grad = total / n
        optimizer.step()
        processed += BATCH * n
        if per_rank <= BATCH:  # the epoch's last batch
            epoch, processed = epoch + 1, 0
    return [p.detach().clone() for p in model.parameters()]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--commit-every", type=int, default=4)
    parser.add_argument("--step-time", type=float, default=0.05, help="seconds each step lasts at least")
    args = parser.parse_args()

    import ringcc.torch as hvd
    from ringcc.torch.elastic import ElasticSampler

    hvd.init()
    worker = os.environ.get("RINGCC_ELASTIC_WORKER", "worker")
    log_file = open(os.path.join(args.out, f"{worker}.jsonl"), "a", encoding="utf-8")

    def log(event, **fields):
        log_file.write(
            json.dumps(
                {"event": event, "t": time.time(), "pid": os.getpid(), "rank": hvd.rank(), "size": hvd.size(), **fields}
            )
            + "\n"
        )
        log_file.flush()

    log("start")
    model, optimizer = make_model()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    x, y = dataset()
    sampler = ElasticSampler(range(SAMPLES), shuffle=True, seed=0)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, steps=0)
    state.register_reset_callbacks([lambda: log("reset")])

    @hvd.elastic.run
    def train(state):
        log("sync", steps=state.steps)
        while state.steps < args.steps:
            indices = list(iter(state.sampler))
            batches = [indices[i : i + BATCH] for i in range(0, len(indices), BATCH)]
            for batch_index, batch in enumerate(batches):
                began = time.monotonic()
                optimizer.zero_grad()
                batch_loss(model, x, y, batch).backward()
                optimizer.step()
                state.sampler.record_batch(batch_index, BATCH)
                state.steps += 1
                log("step", steps=state.steps)
                time.sleep(max(0.0, args.step_time - (time.monotonic() - began)))
                if state.steps >= args.steps:
                    break
                if state.steps % args.commit_every == 0:
                    log("commit", steps=state.steps)
                    state.commit()
            else:
                state.epoch += 1
                state.sampler.set_epoch(state.epoch)
                continue
            break

    train(state)
    log("done", steps=state.steps)
    if hvd.rank() == 0:
        torch.save([p.detach() for p in model.parameters()], os.path.join(args.out, "final.pt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
