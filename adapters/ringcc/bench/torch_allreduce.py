"""torch.distributed with backend "ring" against gloo, in the same processes.

    ringrun --no-prefix -np 2 python -m ringcc.bench torch_allreduce [--sizes 4,4K,1M,64M] [--repeats 3]
        [--ddp-params 25M] [--ddp-batch 32] [--ddp-steps 8] [--ddp-hooks default,powersgd]
        [--threads 1] [--json PATH]
        [--csv PATH] [--plot PATH.png|.svg|.pdf] [--no-progress]
    torchrun --nproc-per-node 2 -m ringcc.bench.torch_allreduce ...

Rank 0 prints two tables:

* `dist.all_reduce` (float32, SUM, in place, async_op=False) per size: time
  per call and busbw for "ring" and for gloo, and ring/gloo (speed-up: gloo's
  time over ring's). Each point is a loop of `dist.all_reduce(t, group=g)`;
  time per call is (t_end - t_start) / iters, the maximum over ranks; busbw
  is bytes / time * 2 (n - 1) / n, as nccl-tests define it.
* one DDP training step (forward, backward with DDP's bucketed allreduce
  overlapping it, SGD step) of an MLP of about --ddp-params parameters, per
  backend and per comm hook of --ddp-hooks: median seconds per step (the
  slowest rank's), and gloo's time over ring's. The steps alternate between
  the backends two at a time. "default" is DDP's built-in allreduce;
  "powersgd" is PowerSGD's hook (rank 1, compressing from the third step,
  timed after it), with the model in one bucket: the hook's callbacks issue
  collectives, and with several buckets another bucket's hook could get
  its collective in before them on one rank and not on another.

While it runs, rank 0 shows progress on stderr (size, backend, time so far).
--csv writes one row per (backend, size) of the all_reduce table (units in
the column names), --plot the figure of ringcc.bench.figure: busbw, latency
and the speed-up over gloo against size (needs matplotlib).

Both backends get their own process group in the same processes (the default
group is gloo, "ring" comes from dist.new_group(backend="ring"); gloo gets
the interface ringcc's links use unless GLOO_SOCKET_IFNAME is set, see
ringcc.bench.peers_gloo), and the
measurements alternate between them over --repeats, so that slow drifts of a
shared machine hit both alike; tables show medians over the repeats.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import sys
import time

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    text = text.strip().upper().rstrip("B").rstrip("I")
    for suffix in ("G", "M", "K"):
        if text.endswith(suffix):
            return int(float(text[:-1]) * UNITS[suffix])
    return int(text)


def format_size(n: int) -> str:
    for suffix in ("G", "M", "K"):
        if n >= UNITS[suffix] and n % UNITS[suffix] == 0:
            return f"{n // UNITS[suffix]}{suffix}"
    return str(n)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="4,4K,1M,64M", help="message sizes in bytes (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--min-time", type=float, default=0.3, help="seconds each point runs at least (sets the iteration count)"
    )
    parser.add_argument("--ddp-params", default="25M", help="parameters of the DDP model (0: no DDP table)")
    parser.add_argument("--ddp-batch", type=int, default=32)
    parser.add_argument("--ddp-steps", type=int, default=8, help="timed DDP steps per backend and repeat")
    parser.add_argument(
        "--ddp-hooks",
        default="default",
        help="DDP comm hooks to time, comma-separated: default, powersgd (default: %(default)s)",
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="torch intra-op threads per rank (default: cores / local ranks)"
    )
    parser.add_argument("--json", help="write every measurement here (rank 0)")
    parser.add_argument("--csv", metavar="PATH", help="write the all_reduce table as CSV (rank 0)")
    parser.add_argument(
        "--plot",
        metavar="PATH",
        help="picture of all_reduce busbw, latency and speed-up against size: .png, .svg or .pdf (needs matplotlib)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    args = parser.parse_args(argv)
    unknown = set(_hooks(args)) - set(DDP_HOOKS)
    if unknown:
        parser.error(f"--ddp-hooks: unknown {', '.join(sorted(unknown))}; use {', '.join(DDP_HOOKS)}")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        from .output import MATPLOTLIB_MISSING

        parser.error(MATPLOTLIB_MISSING)
    if args.plot:
        from .figure import picture_error

        if picture_error(args.plot):
            parser.error(picture_error(args.plot))
    return args


DDP_HOOKS = ("default", "powersgd")


def _hooks(args) -> list[str]:
    return [h for h in args.ddp_hooks.split(",") if h]


class Bench:
    def __init__(self, args):
        import torch
        import torch.distributed as dist

        import ringcc.torch  # noqa: F401  (registers "ring" when no entry point did)

        self.torch, self.dist, self.args = torch, dist, args
        local = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("RINGCC_LOCAL_SIZE", "1")))
        threads = args.threads or max(1, (os.cpu_count() or 1) // max(local, 1))
        torch.set_num_threads(threads)
        self.threads = threads
        from .launch_hint import alone_hint, started_alone

        if started_alone():
            raise SystemExit(alone_hint("torch_allreduce", sys.argv[1:], stops=True))
        from .peers_gloo import give_gloo_an_interface

        give_gloo_an_interface()  # across hosts: the interface ringcc's links use
        dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.groups = {"ring": dist.new_group(backend="ring"), "gloo": dist.new_group(backend="gloo")}
        from .output import Progress

        self.progress = Progress(enabled=self.rank == 0 and not args.no_progress)

    def max_over_ranks(self, value: float) -> float:
        t = self.torch.tensor([value], dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t[0])

    def check(self):
        """Both backends give the same all_reduce (the figures compare like with like)."""
        torch, dist = self.torch, self.dist
        base = torch.arange(1000, dtype=torch.float32) * (self.rank + 1)
        a, b = base.clone(), base.clone()
        dist.all_reduce(a, group=self.groups["ring"])
        dist.all_reduce(b, group=self.groups["gloo"])
        if not torch.equal(a, b):
            raise SystemExit("ring and gloo disagree on all_reduce; not benchmarking")

    def time_allreduce(self, name: str, nbytes: int, iters: int) -> float:
        torch, dist = self.torch, self.dist
        group = self.groups[name]
        t = torch.ones(max(nbytes // 4, 1), dtype=torch.float32)
        for _ in range(min(iters, 5)):
            dist.all_reduce(t, group=group)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t, group=group)
        elapsed = (time.perf_counter() - start) / iters
        return self.max_over_ranks(elapsed)

    def iterations(self, nbytes: int) -> int:
        """Iterations so that the slower backend runs about --min-time."""
        probe = max(self.time_allreduce(name, nbytes, 3) for name in self.groups)
        return max(3, min(20000, int(self.args.min_time / max(probe, 1e-7))))

    def allreduce_table(self):
        results = []
        sizes = [parse_size(s) for s in self.args.sizes.split(",") if s]
        for index, nbytes in enumerate(sizes, 1):
            self.progress.update(f"dist.all_reduce {format_size(nbytes)}B (size {index}/{len(sizes)})", force=True)
            iters = self.iterations(nbytes)
            times = {name: [] for name in self.groups}
            for repeat in range(self.args.repeats):
                for name in self.groups:
                    self.progress.update(
                        f"dist.all_reduce {format_size(nbytes)}B (size {index}/{len(sizes)}), "
                        f"repeat {repeat + 1}/{self.args.repeats}, {name}"
                    )
                    times[name].append(self.time_allreduce(name, nbytes, iters))
            results.append({"nbytes": nbytes, "iters": iters, "times_s": times})
        return results

    def ddp_model(self, params: int):
        nn = self.torch.nn
        # Three layers width w: 2*1024*w + w*w (+ biases) parameters.
        width = 1024
        while 2 * 1024 * width + width * width < params:
            width += 64
        self.torch.manual_seed(0)
        model = nn.Sequential(
            nn.Linear(1024, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1024)
        )
        return model, sum(p.numel() for p in model.parameters())

    def ddp_tables(self):
        if parse_size(self.args.ddp_params) <= 0:
            return []
        return [self.ddp_table(hook) for hook in _hooks(self.args)]

    def ddp_table(self, hook: str):
        torch = self.torch
        params = parse_size(self.args.ddp_params)
        runs = {}
        for name, group in self.groups.items():
            model, count = self.ddp_model(params)
            if hook == "powersgd":
                from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

                ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=1 << 16)
                state = powersgd.PowerSGDState(process_group=group, matrix_approximation_rank=1, start_powerSGD_iter=2)
                ddp.register_comm_hook(state, powersgd.powerSGD_hook)
            else:
                ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
            opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
            g = torch.Generator().manual_seed(1 + self.rank)
            x = torch.randn(self.args.ddp_batch, 1024, generator=g)
            y = torch.randn(self.args.ddp_batch, 1024, generator=g)
            runs[name] = (ddp, opt, x, y)

        def step(name):
            ddp, opt, x, y = runs[name]
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()

        self.progress.update(f"DDP steps ({hook}), MLP of {count / 1e6:.1f}M parameters", force=True)
        for name in runs:  # warm-up (DDP's bucket rebuild after the first step, PowerSGD's start)
            for _ in range(3):
                step(name)
        # Alternate a few steps of each backend, --repeats x --ddp-steps
        # steps each in all, so that the load of a shared host hits both.
        times = {name: [] for name in runs}
        rounds = max(1, self.args.ddp_steps // 2)
        for _ in range(self.args.repeats):
            for _ in range(rounds):
                for name in runs:
                    self.dist.barrier()
                    for _ in range(2):
                        start = time.perf_counter()
                        step(name)
                        times[name].append(self.max_over_ranks(time.perf_counter() - start))
        # Same seed, same data: the two models must have trained alike.
        ring_p = torch.cat([p.detach().reshape(-1) for p in runs["ring"][0].parameters()])
        gloo_p = torch.cat([p.detach().reshape(-1) for p in runs["gloo"][0].parameters()])
        max_diff = float((ring_p - gloo_p).abs().max())
        return {
            "hook": hook,
            "params": count,
            "batch": self.args.ddp_batch,
            "steps": self.args.ddp_steps,
            "times_s": times,
            "max_param_diff": max_diff,
        }


def busbw(nbytes: int, seconds: float, size: int) -> float:
    return nbytes / seconds / 1e9 * (2 * (size - 1) / size)


def report(bench, allreduce, ddps) -> str:
    size = bench.size
    lines = [
        f"# torch {bench.torch.__version__}, {size} ranks, {bench.threads} torch threads per rank, "
        f"{platform.machine()}, {os.cpu_count()} cores, ring transport "
        f"{bench.groups['ring'].transport_name}",
        "# dist.all_reduce, float32, SUM, in place (medians over repeats)",
        f"# {'size':>8} {'count':>10} {'ring us':>10} {'ring GB/s':>10} {'gloo us':>10} "
        f"{'gloo GB/s':>10} {'speedup':>10}",
        "# speedup = gloo time / ring time (higher is better for ring)",
    ]
    for entry in allreduce:
        n = entry["nbytes"]
        ring = statistics.median(entry["times_s"]["ring"])
        gloo = statistics.median(entry["times_s"]["gloo"])
        lines.append(
            f"  {format_size(n):>8} {max(n // 4, 1):>10} {ring * 1e6:10.1f} {busbw(n, ring, size):10.3f} "
            f"{gloo * 1e6:10.1f} {busbw(n, gloo, size):10.3f} {gloo / ring:10.2f}"
        )
    if ddps:
        first = ddps[0]
        lines += [
            "",
            f"# DDP training step, MLP of {first['params'] / 1e6:.1f}M parameters, batch {first['batch']} "
            f"(median of {len(first['times_s']['ring'])} steps each, alternating in pairs)",
            f"# {'comm hook':>10} {'ring s':>10} {'gloo s':>10} {'gloo/ring':>10}   max |param diff| ring vs gloo",
        ]
        for ddp in ddps:
            ring = statistics.median(ddp["times_s"]["ring"])
            gloo = statistics.median(ddp["times_s"]["gloo"])
            lines.append(
                f"  {ddp['hook']:>10} {ring:10.4f} {gloo:10.4f} {gloo / ring:10.2f}   {ddp['max_param_diff']:.3g}"
            )
    return "\n".join(lines)


def table_rows(allreduce, size):
    """One row per (backend, size): median time, busbw, and for "ring" the
    speed-up over gloo (gloo time / ring time, higher is better)."""
    rows = []
    for entry in allreduce:
        n = entry["nbytes"]
        medians = {name: statistics.median(t) for name, t in entry["times_s"].items()}
        for name, t in medians.items():
            rows.append(
                {
                    "backend": name,
                    "size_bytes": n,
                    "count_elements": max(n // 4, 1),
                    "iters": entry["iters"],
                    "time_us": t * 1e6,
                    "busbw_GBps": busbw(n, t, size),
                    "speedup_vs_gloo_x": medians["gloo"] / t if name == "ring" else None,
                    "repeats": len(entry["times_s"][name]),
                }
            )
    return rows


def figure_entries(allreduce, size):
    """The all_reduce table as ringcc.bench.figure draws it: backend -> size
    -> median time and busbw, the repeats' times as the samples."""
    points = {}
    for entry in allreduce:
        n = entry["nbytes"]
        for name, times in entry["times_s"].items():
            t = statistics.median(times)
            us = [x * 1e6 for x in times]
            points.setdefault(name, {})[n] = {"time_us": t * 1e6, "busbw": busbw(n, t, size), "times_us": us}
    return {"dist.all_reduce": points}


def write_outputs(bench, args, allreduce):
    from .output import machine_description, write_csv

    rows = table_rows(allreduce, bench.size)
    if args.csv:
        columns = ("backend", "size_bytes", "count_elements", "iters", "time_us", "busbw_GBps", "speedup_vs_gloo_x")
        write_csv(args.csv, rows, columns + ("repeats",))
        print(f"# {len(rows)} rows written to {args.csv}")
    if args.plot:
        import ringcc

        from .figure import plot_results, plot_title

        title = plot_title(
            f"torch.distributed all_reduce, {bench.size} ranks, float32, bars: quartiles of the repeats",
            {"ringcc": ringcc.__version__, "torch": bench.torch.__version__},
            machine_description(),
        )
        try:
            layout = plot_results(args.plot, figure_entries(allreduce, bench.size), title, ours="ring")
            print(f"# plot written to {args.plot} ({', '.join(layout.rows)})")
        except ValueError as error:
            print(f"# plot not written: {error}")


def main(argv=None) -> int:
    args = parse_args(argv)
    bench = Bench(args)
    bench.check()
    allreduce = bench.allreduce_table()
    ddps = bench.ddp_tables()
    bench.progress.done()
    if bench.rank == 0:
        print(report(bench, allreduce, ddps), flush=True)
        write_outputs(bench, args, allreduce)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as file:
                json.dump(
                    {
                        "size": bench.size,
                        "threads": bench.threads,
                        "torch": bench.torch.__version__,
                        "allreduce": allreduce,
                        "ddp": ddps,
                    },
                    file,
                    indent=1,
                )
    bench.dist.barrier()
    bench.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
