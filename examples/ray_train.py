"""Ray Train's TorchTrainer on backend "ring", against gloo, on a local Ray cluster.

    pip install "ray[train]"
    RAY_USAGE_STATS_ENABLED=0 python examples/ray_train.py --workers 2

Starts Ray on this machine (127.0.0.1 only, no dashboard), trains the same
small model with DDP for a few steps twice, once with
`TorchConfig(backend="ring")` and once with `TorchConfig(backend="gloo")`,
and compares what rank 0 reports: the parameters after training must be
equal (bit for bit with 2 workers; with more, within float32 rounding) and
every worker must end with the same parameters. Exits 0 when they are.
ringcc's `torch.backends` entry point registers "ring" in Ray's workers at
`import torch`; nothing else changes in the training function.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch


def train_loop(config: dict) -> None:
    import ray.train
    import torch.distributed as dist
    from ray.train.torch import prepare_model

    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model = prepare_model(model)  # DDP over the group Ray made with the backend asked for
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(config["steps"]):
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(size)]
    dist.all_gather(everyone, flat)
    metrics = {"backend": dist.get_backend(), "same_on_every_worker": all(torch.equal(t, flat) for t in everyone)}
    # Ray keeps the metrics that come with a checkpoint: rank 0's carries the parameters.
    with tempfile.TemporaryDirectory() as directory:
        checkpoint = None
        if rank == 0:
            torch.save(flat, os.path.join(directory, "params.pt"))
            checkpoint = ray.train.Checkpoint.from_directory(directory)
        ray.train.report(metrics, checkpoint=checkpoint)


def fit(backend: str, workers: int, steps: int, storage: str) -> dict:
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    trainer = TorchTrainer(
        train_loop,
        train_loop_config={"steps": steps},
        torch_config=TorchConfig(backend=backend, timeout_s=120),
        scaling_config=ScalingConfig(num_workers=workers, use_gpu=False),
        run_config=RunConfig(name=f"ringcc-{backend}", storage_path=storage),
    )
    start = time.monotonic()
    result = trainer.fit()
    seconds = time.monotonic() - start
    with result.checkpoint.as_directory() as directory:
        params = torch.load(os.path.join(directory, "params.pt"))
    return {**result.metrics, "params": params, "seconds": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    import ray

    ray.init(num_cpus=args.workers + 1, include_dashboard=False, _node_ip_address="127.0.0.1")
    try:
        with tempfile.TemporaryDirectory(prefix="ringcc-ray-") as storage:
            results = {b: fit(b, args.workers, args.steps, storage) for b in ("ring", "gloo")}
    finally:
        ray.shutdown()
    problems = []
    for backend, metrics in results.items():
        print(
            f"{backend}: backend {metrics['backend']}, {metrics['seconds']:.1f} s, "
            f"same on every worker: {metrics['same_on_every_worker']}"
        )
        if metrics["backend"] != backend or not metrics["same_on_every_worker"]:
            problems.append(f"{backend}: {metrics['backend']}, same on every worker: {metrics['same_on_every_worker']}")
    ring, gloo = (results[b]["params"] for b in ("ring", "gloo"))
    if args.workers <= 2:
        equal = torch.equal(ring, gloo)
    else:
        equal = torch.allclose(ring, gloo, rtol=1e-5, atol=1e-6)
    print(
        f"parameters ring vs gloo: {'equal' if equal else 'DIFFERENT'} "
        f"(largest difference {(ring - gloo).abs().max().item():.3g}, {ring.numel()} values)"
    )
    if not equal:
        problems.append("the parameters differ")
    for problem in problems:
        print("FAILED:", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
