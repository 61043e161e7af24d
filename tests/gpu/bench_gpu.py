"""The GPU benchmark of `bash tests/gpu/run.sh`, and what tells where the
time goes.

    python tests/gpu/bench_gpu.py [--out FILE] [--quick] [--no-mps | --mps-only]

1. `python -m ringcc.bench.allreduce --device cuda` (torch float32 tensors on the
   machine's first GPU, allreduce, blocking calls: the collective then
   torch.cuda.synchronize()) at 8 B, 1 MiB and 64 MiB, one ringrun job per
   configuration:
     ringcc, 1 rank (NCCL)                  with torch's nccl backend
     ringcc, 2 ranks sharing the GPU (CUDA IPC)   with torch's gloo on CUDA tensors
     ringcc, 2 ranks, IPC flags in host memory (RINGCC_IPC_FLAGS=host)
     ringcc, 2 ranks, RINGCC_GPU_BACKEND=host
     ringcc, 4 ranks sharing the GPU (CUDA IPC)
   ringcc.bench.allreduce reports the time per call (median over its batches) and
   busbw = bytes / time * 2 (n - 1) / n, as nccl-tests define it.
2. Diagnostics:
     host cost per call at world size 1: a loop of calls without waiting
       for the device, then one synchronisation (ringcc and torch's nccl);
     the floor of 2 processes sharing the GPU: each iteration a host
       barrier (ringcc.barrier()) then, or not, a one-element torch kernel
       and torch.cuda.synchronize(); and 1 process doing the same: what any
       collective that makes both processes' contexts run on the GPU in
       turn pays, whatever it does;
     RINGCC_GPU_TRACE on 2 ranks (CUDA IPC, 8 B and 1 MiB), summed up by
       ringcc.bench.gpu_trace: host and device phases per rank, and where each
       rank's device work ran;
     the CUDA IPC (2 and 4 ranks, beside torch's gloo) and host staging
       configurations and the floor again under NVIDIA's Multi-Process
       Service (MPS: the processes' kernels run side by side),
       with a private MPS daemon started for it and stopped after (skipped
       when nvidia-cuda-mps-control is missing, or with --no-mps).
Results go to --out as JSON. Refuses to run on ringcc's test double of the
CUDA driver: it never produces a GPU figure."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SIZES = "-b 8 -e 64M -f 8388608"  # 8 B, 1 MiB (a key size), 64 MiB
CONFIGS = [
    # (label, ranks, environment, peer)
    ("ringcc nccl", 1, {"RINGCC_GPU_BACKEND": "nccl"}, "nccl"),
    ("ringcc ipc", 2, {"RINGCC_GPU_BACKEND": "ipc"}, "gloo"),
    ("ringcc ipc, host flags", 2, {"RINGCC_GPU_BACKEND": "ipc", "RINGCC_IPC_FLAGS": "host"}, None),
    ("ringcc host", 2, {"RINGCC_GPU_BACKEND": "host"}, None),
    ("ringcc ipc", 4, {"RINGCC_GPU_BACKEND": "ipc"}, None),
]
# Under MPS the processes' kernels run side by side instead of in turns:
# the same configurations again, each beside its peer under MPS as well.
MPS_CONFIGS = [
    ("ringcc ipc under MPS", 2, {"RINGCC_GPU_BACKEND": "ipc"}, "gloo"),
    ("ringcc host under MPS", 2, {"RINGCC_GPU_BACKEND": "host"}, None),
    ("ringcc ipc under MPS", 4, {"RINGCC_GPU_BACKEND": "ipc"}, "gloo"),
]


def environment(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RINGCC_") or k == "RINGCC_CACHE_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["RINGCC_TIMEOUT_S"] = "60"
    env.update(extra)
    return env


def ringrun(n, argv, env, timeout):
    command = [
        sys.executable,
        "-m",
        "ringcc.launcher",
        "--no-prefix",
        "-np",
        str(n),
        "--timeout",
        str(timeout),
        "--",
        sys.executable,
        *argv,
    ]
    started = time.monotonic()
    try:
        completed = subprocess.run(
            command, env=environment(env), capture_output=True, text=True, timeout=timeout + 30, cwd=str(REPO)
        )
    except subprocess.TimeoutExpired as error:
        return None, f"timed out after {timeout + 30} s\n{error.stdout or ''}\n{error.stderr or ''}", 0.0
    return completed, "", time.monotonic() - started


# --- 1. ringcc.bench.allreduce -------------------------------------------------------


def run_config(label, n, env, peer, scratch, quick):
    path = Path(scratch) / f"{label.replace(' ', '_').replace(',', '')}-{n}.json"
    argv = [
        "-m",
        "ringcc.bench.allreduce",
        "--device",
        "cuda",
        "--ops",
        "allreduce",
        *SIZES.split(),
        "--repeats",
        "1",
        "--target-s",
        "0.05" if quick else "0.1",
        "--check",
        "--no-progress",
        "--json",
        str(path),
    ]
    if peer:
        argv += ["--compare", peer]
    completed, problem, seconds = ringrun(n, argv, env, 150)
    if completed is None or completed.returncode != 0 or not path.exists():
        detail = problem or f"exit {completed.returncode}\n{completed.stdout[-2000:]}\n{completed.stderr[-3000:]}"
        print(f"  {label} x{n}: failed: {detail}")
        return [{"config": label, "ranks": n, "error": detail[-3000:]}]
    doc = json.loads(path.read_text())
    rows = []
    for e in doc["results"]:
        row = {
            "config": label,
            "ranks": n,
            "what": "ringcc" if e["impl"] == "ringcc" else f"torch {e['impl']}",
            "backend": doc["meta"].get("gpu_backend") if e["impl"] == "ringcc" else e["impl"],
            "bytes": e["nbytes"],
            "seconds": e["time_us"] / 1e6,
            "busbw_GBps": e["busbw"],
            "wrong": e.get("wrong"),
        }
        rows.append(row)
        print(
            f"  {row['what']:>12} ({row['backend'] or '?':>4}) x{n}  {row['bytes']:>9} B  "
            f"{e['time_us']:10.1f} us  busbw {e['busbw']:8.2f} GB/s" + ("  WRONG" if e.get("wrong") else "")
        )
    for name, info in doc.get("peers", {}).items():
        if info.get("status") != "ok":
            print(f"  (peer {name} skipped: {info.get('reason')})")
    print(f"  ({label} x{n}: {seconds:.0f} s)")
    return rows


# --- 2. diagnostics: workers --------------------------------------------------


def median_time(run, iterations, per):
    """Median over `iterations` batches of `per` calls of run(per), per call (seconds)."""
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        run(per)
        times.append((time.perf_counter() - start) / per)
    return statistics.median(times)


def worker_enqueue(args):
    """World size 1: host time per call of ringcc.allreduce_ and of torch's
    nccl all_reduce (a loop of calls, then one synchronisation)."""
    import torch

    import ringcc

    ringcc.init()
    torch.cuda.set_device(0)
    x = torch.zeros(2, device="cuda")
    out = {}

    def ringcc_calls(k):
        for _ in range(k):
            ringcc.allreduce_(x)
        torch.cuda.synchronize()

    ringcc_calls(200)
    out["ringcc (host time per call, no wait)"] = median_time(ringcc_calls, 15, 200)

    def ringcc_blocking(k):
        for _ in range(k):
            ringcc.allreduce_(x)
            torch.cuda.synchronize()

    out["ringcc (blocking call)"] = median_time(ringcc_blocking, 15, 100)
    ringcc.shutdown()
    import torch.distributed as dist

    dist.init_process_group(
        "nccl", init_method=f"file://{args.store}", rank=0, world_size=1, device_id=torch.device("cuda", 0)
    )

    def torch_calls(k):
        for _ in range(k):
            dist.all_reduce(x)
        torch.cuda.synchronize()

    torch_calls(200)
    out["torch nccl (host time per call, no wait)"] = median_time(torch_calls, 15, 200)

    def torch_blocking(k):
        for _ in range(k):
            dist.all_reduce(x)
            torch.cuda.synchronize()

    out["torch nccl (blocking call)"] = median_time(torch_blocking, 15, 100)

    def sync_only(k):
        for _ in range(k):
            torch.cuda.synchronize()

    out["torch.cuda.synchronize() alone"] = median_time(sync_only, 15, 100)
    dist.destroy_process_group()
    Path(args.result).write_text(json.dumps(out))
    return 0


def worker_floor(args):
    """Per iteration: ringcc.barrier() (host), then, or not, a one-element
    torch kernel and torch.cuda.synchronize()."""
    import torch

    import ringcc

    ringcc.init()
    torch.cuda.set_device(0)
    x = torch.zeros(1, device="cuda")
    out = {}

    def barrier_only(k):
        for _ in range(k):
            ringcc.barrier()

    def barrier_kernel_sync(k):
        for _ in range(k):
            ringcc.barrier()
            x.add_(1)
            torch.cuda.synchronize()

    def kernel_sync(k):
        for _ in range(k):
            x.add_(1)
            torch.cuda.synchronize()

    for name, run in (
        ("barrier", barrier_only),
        ("barrier + kernel + synchronize", barrier_kernel_sync),
        ("kernel + synchronize, no barrier", kernel_sync),
    ):
        run(50)
        out[name] = median_time(run, 9, 100)
    ringcc.shutdown()
    if ringcc_rank() == 0:
        Path(args.result).write_text(json.dumps(out))
    return 0


def ringcc_rank():
    return int(os.environ.get("RINGCC_RANK", "0"))


def worker_trace(args):
    """CUDA IPC allreduce of 8 B and 1 MiB, RINGCC_GPU_TRACE set by the caller."""
    import torch

    import ringcc

    ringcc.init()
    torch.cuda.set_device(0)
    for count, calls in ((2, 150), (1 << 18, 60)):
        x = torch.zeros(count, device="cuda")
        for _ in range(calls):
            ringcc.allreduce_(x)
            torch.cuda.synchronize()
    ringcc.shutdown()
    return 0


# --- 2. diagnostics: drivers ----------------------------------------------------


def diagnose_enqueue(scratch):
    result = Path(scratch) / "enqueue.json"
    completed, problem, _ = ringrun(
        1,
        [
            str(Path(__file__).resolve()),
            "--worker",
            "enqueue",
            "--result",
            str(result),
            "--store",
            str(Path(scratch) / "store-enqueue"),
        ],
        {"RINGCC_GPU_BACKEND": "nccl"},
        90,
    )
    if completed is None or completed.returncode != 0 or not result.exists():
        print(f"  world size 1, host cost: failed: {problem or completed.stderr[-2000:]}")
        return {"error": problem or completed.stderr[-2000:]}
    out = json.loads(result.read_text())
    for name, seconds in out.items():
        print(f"  world size 1 (NCCL): {name:<42} {seconds * 1e6:8.1f} us")
    return out


def diagnose_floor(scratch, label, env):
    out = {}
    for n in (1, 2):
        result = Path(scratch) / f"floor-{label}-{n}.json"
        completed, problem, _ = ringrun(
            n, [str(Path(__file__).resolve()), "--worker", "floor", "--result", str(result)], env, 90
        )
        if completed is None or completed.returncode != 0 or not result.exists():
            print(f"  floor ({label}) x{n}: failed: {problem or completed.stderr[-2000:]}")
            out[n] = {"error": problem or completed.stderr[-2000:]}
            continue
        out[n] = json.loads(result.read_text())
        for name, seconds in out[n].items():
            print(f"  floor ({label}) x{n}: {name:<34} {seconds * 1e6:8.1f} us")
    return out


def diagnose_trace(scratch, env):
    prefix = str(Path(scratch) / "trace")
    completed, problem, _ = ringrun(
        2,
        [str(Path(__file__).resolve()), "--worker", "trace"],
        {"RINGCC_GPU_BACKEND": "ipc", "RINGCC_GPU_TRACE": prefix, **env},
        90,
    )
    if completed is None or completed.returncode != 0:
        print(f"  trace: failed: {problem or completed.stderr[-2000:]}")
        return {"error": problem or completed.stderr[-2000:]}
    sys.path.insert(0, str(REPO))
    from ringcc.bench.gpu_trace import load, summarize

    records = load(prefix)
    lines = summarize(records, skip=20)
    print("\n".join("  " + line for line in lines))
    return {"summary": lines, "records": {str(r): v for r, v in records.items()}}


class Mps:
    """A private MPS control daemon (its own pipe and log directories, which
    only the processes given its environment use), stopped on exit."""

    def __init__(self, scratch):
        self.control = shutil.which("nvidia-cuda-mps-control")
        self.dirs = {
            "CUDA_MPS_PIPE_DIRECTORY": str(Path(scratch) / "mps-pipe"),
            "CUDA_MPS_LOG_DIRECTORY": str(Path(scratch) / "mps-log"),
        }
        self.started = False

    def __enter__(self):
        if not self.control:
            return None
        for d in self.dirs.values():
            os.makedirs(d, exist_ok=True)
        env = {**os.environ, **self.dirs}
        try:
            subprocess.run([self.control, "-d"], env=env, check=True, timeout=30, capture_output=True)
        except (subprocess.SubprocessError, OSError) as error:
            print(f"  MPS: the daemon did not start: {error}")
            return None
        self.started = True
        time.sleep(1.0)
        return dict(self.dirs)

    def __exit__(self, *exc):
        if self.started:
            try:
                subprocess.run(
                    [self.control],
                    input="quit\n",
                    env={**os.environ, **self.dirs},
                    text=True,
                    timeout=30,
                    capture_output=True,
                )
            except (subprocess.SubprocessError, OSError) as error:
                print(f"  MPS: stopping the daemon failed: {error}")


# --- main -----------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None, help="JSON file for the results")
    parser.add_argument("--quick", action="store_true", help="shorter points")
    parser.add_argument("--no-mps", action="store_true", help="skip the runs under MPS")
    parser.add_argument("--mps-only", action="store_true", help="only the runs under MPS")
    parser.add_argument("--worker", default="")
    parser.add_argument("--store", default="")
    parser.add_argument("--result", default="")
    args = parser.parse_args()
    if args.worker:
        return {"enqueue": worker_enqueue, "floor": worker_floor, "trace": worker_trace}[args.worker](args)

    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    from gpu_env import gpu_skip_reason, torch_cuda_reason

    import ringcc

    reason = gpu_skip_reason(ringcc) or torch_cuda_reason()
    if reason:
        print(f"bench_gpu: not run: {reason}")
        return 0
    device = ringcc.cuda_info()["devices"][0]
    print(
        f"bench_gpu: {device['name']} ({device['uuid']}), float32 allreduce, blocking calls "
        "(python -m ringcc.bench.allreduce --device cuda)"
    )
    started = time.monotonic()
    doc = {"device": device, "rows": [], "diagnostics": {}}
    with tempfile.TemporaryDirectory() as scratch:
        if not args.mps_only:
            for label, n, env, peer in CONFIGS:
                doc["rows"] += run_config(label, n, env, peer, scratch, args.quick)
            print("diagnostics:")
            doc["diagnostics"]["world size 1 host cost"] = diagnose_enqueue(scratch)
            doc["diagnostics"]["floor"] = diagnose_floor(scratch, "time-sliced", {})
            doc["diagnostics"]["trace"] = diagnose_trace(scratch, {})
        if args.no_mps or os.environ.get("RINGCC_BENCH_MPS") == "0":
            print("  MPS: skipped (--no-mps or RINGCC_BENCH_MPS=0)")
        else:
            with Mps(scratch) as mps_env:
                if mps_env is None:
                    print("  MPS: skipped (nvidia-cuda-mps-control is not on PATH, or its daemon did not start)")
                else:
                    print("  under MPS (a private daemon), the peer under MPS too:")
                    for label, n, env, peer in MPS_CONFIGS:
                        doc["rows"] += run_config(label, n, {**env, **mps_env}, peer, scratch, args.quick)
                    doc["diagnostics"]["floor under MPS"] = diagnose_floor(scratch, "MPS", mps_env)
    print(f"bench_gpu: done in {time.monotonic() - started:.0f} s")
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
