"""A short GPU allreduce benchmark (part of `bash tests/gpu/run.sh`).

    python tests/gpu/bench_gpu.py [--out FILE] [--quick]

Each configuration is one ringrun job on this machine's first GPU, torch
tensors of float32, blocking calls (the collective, then
torch.cuda.synchronize()), at 8 B, 1 MiB and 64 MiB:
  ringcc, 1 rank (NCCL)          with torch's nccl backend at world size 1
  ringcc, 2 ranks sharing the GPU (CUDA IPC)   with torch's gloo on CUDA tensors
  ringcc, 2 ranks, RINGCC_GPU_BACKEND=host
  ringcc, 4 ranks sharing the GPU (CUDA IPC)
Time per call is the median over the timed calls; busbw = bytes / time *
2 (n - 1) / n, as nccl-tests define it. Refuses to run on ringcc's test
double of the CUDA driver: it never produces a GPU figure."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = [8, 1 << 20, 64 << 20]
ITERATIONS = {8: 300, 1 << 20: 100, 64 << 20: 20}
CONFIGS = [
    # (label, ranks, environment, comparison)
    ("ringcc nccl", 1, {"RINGCC_GPU_BACKEND": "nccl"}, "nccl"),
    ("ringcc ipc", 2, {"RINGCC_GPU_BACKEND": "ipc"}, "gloo"),
    ("ringcc ipc, host flags", 2, {"RINGCC_GPU_BACKEND": "ipc", "RINGCC_IPC_FLAGS": "host"}, None),
    ("ringcc host", 2, {"RINGCC_GPU_BACKEND": "host"}, None),
    ("ringcc ipc", 4, {"RINGCC_GPU_BACKEND": "ipc"}, None),
]


def timed(call, sync, iterations):
    for _ in range(5):
        call()
    sync()
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def worker(args) -> int:
    import torch
    import ringcc
    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    torch.cuda.set_device(0)
    results = []
    for nbytes in SIZES:
        iterations = max(3, ITERATIONS[nbytes] // (4 if args.quick else 1))
        x = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
        seconds = timed(lambda: ringcc.allreduce_(x), torch.cuda.synchronize, iterations)
        results.append({"what": "ringcc", "backend": ringcc.gpu_backend(), "bytes": nbytes, "seconds": seconds})
        ok = bool((x[:4] == x[0]).all().item())
        if not ok:
            print(f"rank {rank}: wrong result", file=sys.stderr)
    ringcc.shutdown()
    if args.compare:
        import torch.distributed as dist
        dist.init_process_group(args.compare, init_method=f"file://{args.store}", rank=rank, world_size=size)
        for nbytes in SIZES:
            iterations = max(3, ITERATIONS[nbytes] // (4 if args.quick else 1))
            x = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
            seconds = timed(lambda: dist.all_reduce(x), torch.cuda.synchronize, iterations)
            results.append({"what": f"torch {args.compare}", "backend": args.compare, "bytes": nbytes,
                            "seconds": seconds})
        dist.destroy_process_group()
    if rank == 0:
        Path(args.result).write_text(json.dumps(results))
    return 0


def busbw(nbytes, seconds, n):
    return nbytes / seconds * 2 * (n - 1) / n / 1e9 if n > 1 else 0.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None, help="JSON file for the results")
    parser.add_argument("--quick", action="store_true", help="a quarter of the iterations")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--compare", default="")
    parser.add_argument("--store", default="")
    parser.add_argument("--result", default="")
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    import ringcc
    from gpu_env import gpu_skip_reason, torch_cuda_reason
    reason = gpu_skip_reason(ringcc) or torch_cuda_reason()
    if reason:
        print(f"bench_gpu: not run: {reason}")
        return 0
    device = ringcc.cuda_info()["devices"][0]
    print(f"bench_gpu: {device['name']} ({device['uuid']}), float32, blocking calls, median time per call")
    rows = []
    for label, n, env, compare in CONFIGS:
        with tempfile.TemporaryDirectory() as scratch:
            result = os.path.join(scratch, "result.json")
            command = [sys.executable, "-m", "ringcc.launcher", "-np", str(n), "--timeout", "150", "--",
                       sys.executable, str(Path(__file__).resolve()), "--worker", "--result", result,
                       "--store", os.path.join(scratch, "store")]
            if compare:
                command += ["--compare", compare]
            if args.quick:
                command.append("--quick")
            environment = {k: v for k, v in os.environ.items() if not k.startswith("RINGCC_")}
            environment.update(env)
            environment["RINGCC_TIMEOUT_S"] = "60"
            started = time.monotonic()
            completed = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=200)
            if completed.returncode != 0 or not os.path.exists(result):
                print(f"  {label} x{n}: failed (exit {completed.returncode})\n{completed.stdout[-2000:]}"
                      f"\n{completed.stderr[-3000:]}")
                rows.append({"config": label, "ranks": n, "error": completed.stderr[-3000:]})
                continue
            for entry in json.loads(Path(result).read_text()):
                entry.update(config=label, ranks=n, busbw_GBps=busbw(entry["bytes"], entry["seconds"], n))
                rows.append(entry)
                print(f"  {entry['what']:>12} ({entry['backend']:>4}) x{n}  {entry['bytes']:>9} B  "
                      f"{entry['seconds'] * 1e6:10.1f} us  busbw {entry['busbw_GBps']:8.2f} GB/s")
            print(f"  ({label} x{n}: {time.monotonic() - started:.0f} s)")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": device, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
