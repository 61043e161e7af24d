"""An elastic PyTorch training under ringrun's elastic mode, written as a
Horovod user would (tests/launch/test_elastic.py):

    ringrun -np 2 --min-np 1 --max-np 3 --host-discovery-script ./discover.sh \\
        python tests/launch/elastic_train.py --out DIR

hvd.DistributedOptimizer averages the gradients of a small model over the
ranks; an ElasticSampler deals out a fixed dataset; TorchState commits the
model, the optimizer, the sampler and the step count every --commit-every
steps. Every worker appends JSON lines to DIR/<worker>.jsonl: each step
(with the membership's size and the time), each commit and each reset
(with the step count it resumes from), so the test can tell which size
every kept step had and where the sampler dealt out the samples anew,
replay them (`replay`), and how long each membership change took.
--kill-rank R makes the worker of rank R kill itself after step --kill-at,
once per job.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import sys
import time

import torch

FEATURES, OUTPUTS = 16, 4
# 95 samples, a multiple of neither 2 nor 3: with 2 or 3 workers the sampler
# pads the last batch of an epoch, and of what is left after a reset.
SAMPLES, BATCH = 95, 4


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


def deal_out(epoch: int, processed: int, size: int, seed: int = 0) -> list[list[int]]:
    """Each rank's samples as ElasticSampler deals them out at a reset
    (ElasticSampler.reset and __iter__): what is left of the epoch's order,
    padded once, from its own start, to a multiple of the size."""
    order = list(range(SAMPLES))
    random.Random(seed + epoch).shuffle(order)
    remaining = order[processed:]
    total = math.ceil(len(remaining) / size) * size
    padded = remaining + remaining[: total - len(remaining)]
    return [padded[rank:total:size] for rank in range(size)]


def dealt_batches(sizes, resets=None, seed=0):
    """Each kept step's batches, one per rank, as ElasticSampler deals them
    out to a run whose kept steps had these sizes (sizes[i]: the
    membership's size in step i + 1).

    `resets` holds the step counts at which the run reset its state (the
    sampler then deals out what is left of the epoch among the new
    membership, padded anew; each epoch starts with a deal too); by default
    every change of size."""
    if resets is None:
        resets = [i for i in range(1, len(sizes)) if sizes[i] != sizes[i - 1]]
    resets = set(resets)
    epoch, processed, shares, batch = 0, 0, None, 0
    for step, n in enumerate(sizes):
        if shares is None or step in resets:
            shares, batch = deal_out(epoch, processed, n, seed), 0
        yield [share[batch * BATCH : (batch + 1) * BATCH] for share in shares]
        processed += BATCH * n
        batch += 1
        if batch * BATCH >= len(shares[0]):  # the last batch of the epoch
            epoch, processed, shares = epoch + 1, 0, None


def replay(sizes, resets=None, seed=0):
    """The parameters a run reaches whose kept steps had these sizes and
    resets (`dealt_batches`), computed in one process the way
    DistributedOptimizer averages the ranks' gradients: summed in rank order,
    then divided by the size in float32 (as ringcc's Average does, correctly
    rounded; a product with 1 / size is an ulp off for some values at 3
    ranks)."""
    model, optimizer = make_model()
    x, y = dataset()
    for batches in dealt_batches(sizes, resets, seed):
        grads = []
        for indices in batches:
            model.zero_grad()
            batch_loss(model, x, y, indices).backward()
            grads.append([p.grad.clone() for p in model.parameters()])
        for i, p in enumerate(model.parameters()):
            total = grads[0][i].clone()
            for other in grads[1:]:
                total += other[i]
            p.grad = total / len(batches)
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--commit-every", type=int, default=4)
    parser.add_argument("--step-time", type=float, default=0.05, help="seconds each step lasts at least")
    parser.add_argument("--kill-rank", type=int, help="the rank that kills itself (SIGKILL), once per job")
    parser.add_argument("--kill-at", type=int, default=6, help="the step after which --kill-rank kills itself")
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
    state.register_reset_callbacks([lambda: log("reset", steps=state.steps)])

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
                kill_marker = os.path.join(args.out, "killed")
                if hvd.rank() == args.kill_rank and state.steps == args.kill_at and not os.path.exists(kill_marker):
                    open(kill_marker, "w").close()
                    os.kill(os.getpid(), signal.SIGKILL)
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
