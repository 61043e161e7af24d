"""Is there a real GPU here, and what runs on it? For tests/gpu and
tests/gpu/bench_gpu.py. Nothing here initialises CUDA in this process
except through ringcc.cuda_info() (the driver API, no context).

RINGCC_GPU_DRY_RUN=1 runs tests/gpu on ringcc's stand-in CUDA driver with
fake arrays, to check these scripts themselves on a machine without a GPU;
it proves nothing about a GPU, and the benchmark never runs on it."""

from __future__ import annotations

import importlib.util
import os


def dry_run():
    return os.environ.get("RINGCC_GPU_DRY_RUN") == "1"


def arrays_env(env):
    """A group's environment; fake arrays in a dry run."""
    return {**env, "RINGCC_TEST_ARRAYS": "fake"} if dry_run() else dict(env)


def gpu_skip_reason(ringcc):
    """None when ringcc finds a real CUDA device, else why not."""
    try:
        info = ringcc.cuda_info()
    except Exception as error:  # a core without GPU support, a broken driver
        return f"ringcc.cuda_info() failed: {error}"
    if not info.get("found"):
        return "no CUDA driver (libcuda.so.1) was found: this machine has no GPU"
    if info.get("test_double") and not dry_run():
        return f"the CUDA driver at {info.get('path')} is ringcc's test double, not a GPU"
    if not info.get("initialized"):
        return f"the CUDA driver does not initialise: {info.get('error')}"
    if not info.get("devices"):
        return "the CUDA driver sees no device"
    return None


def have(module):
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def torch_cuda_reason():
    if not have("torch"):
        return "torch is not installed"
    import torch

    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def cupy_reason():
    if not have("cupy"):
        return "cupy is not installed"
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception as error:
        return f"cupy cannot use the GPU: {error}"
    return None


# The groups of tests/ranks/rank_gpu_cases.py that run on a real GPU:
# name: (ranks, environment, tags, array library).
GROUPS = {
    "nccl-1": (1, {"RINGCC_TEST_ARRAYS": "torch", "RINGCC_TEST_EXPECT_BACKEND": "nccl"}, ("device",), "torch"),
    "ipc-2": (2, {"RINGCC_TEST_ARRAYS": "torch", "RINGCC_TEST_EXPECT_BACKEND": "ipc"}, ("device",), "torch"),
    # Four ranks, a small staging area and one-shot limit: reduce-scatter +
    # allgather in several steps.
    "ipc-4": (
        4,
        {
            "RINGCC_TEST_ARRAYS": "torch",
            "RINGCC_TEST_EXPECT_BACKEND": "ipc",
            "RINGCC_IPC_BUFFER_BYTES": str(1 << 20),
            "RINGCC_IPC_ONESHOT_BYTES": "4096",
        },
        ("device",),
        "torch",
    ),
    # The flag words in registered host memory (RINGCC_IPC_FLAGS=host).
    "ipc-2-host-flags": (
        2,
        {"RINGCC_TEST_ARRAYS": "torch", "RINGCC_TEST_EXPECT_BACKEND": "ipc", "RINGCC_IPC_FLAGS": "host"},
        ("device",),
        "torch",
    ),
    "host-2": (
        2,
        {"RINGCC_TEST_ARRAYS": "torch", "RINGCC_GPU_BACKEND": "host", "RINGCC_TEST_EXPECT_BACKEND": "host"},
        ("device",),
        "torch",
    ),
    "ipc-2-cupy": (2, {"RINGCC_TEST_ARRAYS": "cupy", "RINGCC_TEST_EXPECT_BACKEND": "ipc"}, ("device",), "cupy"),
}
GROUP_ENV = {"RINGCC_TIMEOUT_S": "30"}

# The framework adapters on the GPU, two ranks sharing it (CUDA IPC):
# name: (ranks, case script (its path relative to tests/), environment, what it needs, case patterns).
JAX_GPU_CASES = (
    "platform/*",
    "allreduce/*/jit",
    "allreduce/float32/sum/eager",
    "allreduce/scalar-and-empty",
    "allreduce/scale-factors",
    "allreduce/large-4MiB",
    "allgather/*/jit",
    "allgather/int8-and-bfloat16",
    "broadcast/*",
    "reduce_scatter/rows5/*/jit",
    "alltoall/*",
    "barrier/*",
    "ordering/*",
    "grad/*",
    "vmap/*",
    "donation/*",
    "errors/*",
)
FRAMEWORK_GROUPS = {
    "torch-2": (2, "gpu/rank_gpu_torch.py", {"RINGCC_TEST_EXPECT_BACKEND": "ipc"}, "torch", ()),
    # JAX on its CUDA platform, without taking most of the GPU's memory at
    # start (two processes share it).
    "jax-2": (
        2,
        "frameworks/jax/jax_cases.py",
        {"JAX_PLATFORMS": "cuda", "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "RINGCC_TEST_EXPECT_JAX_PLATFORM": "gpu"},
        "jax",
        JAX_GPU_CASES,
    ),
}


def jax_cuda_reason(ringcc):
    """None when ringcc.jax can run on JAX's CUDA platform here (checked
    without importing jax: that would start its GPU client in this process)."""
    if not have("jax"):
        return "jax is not installed"
    if not any(
        have(m)
        for m in (
            "jax_cuda13_plugin",
            "jax_cuda12_plugin",
            "jax_plugins.xla_cuda13",
            "jax_plugins.xla_cuda12",
            "jaxlib.cuda",
        )
    ):
        return "jax has no CUDA plugin (pip install jax[cuda13])"
    if not getattr(ringcc._core, "jax_ffi_cuda_targets", dict)():
        return "this ringcc was built without the XLA FFI handlers (no jaxlib headers at build time)"
    return None


def framework_reason(what, ringcc):
    if what == "torch":
        return torch_cuda_reason()
    if what == "jax":
        return jax_cuda_reason(ringcc)
    return f"unknown framework {what}"


# Cases of rank_gpu_cases.py that only make sense without NCCL at hand.
NOT_ON_GPU = ("forced_nccl_without_nccl", "forced_ipc_without_nvrtc")


def library_reason(what):
    if dry_run():
        return None
    return torch_cuda_reason() if what == "torch" else cupy_reason()


def kill_outcomes(out_dir, completed_describe, victim=1, size=3, within_s=10.0):
    """Problems with a killed-rank job's records (tests/ranks/gpu_deadpeer.py), [] when fine."""
    import json
    import re
    from pathlib import Path

    out_dir = Path(out_dir)
    killed = out_dir / "killed.json"
    if not killed.exists():
        return [f"the victim never killed itself\n{completed_describe}"]
    killed_at = json.loads(killed.read_text())["time"]
    problems = []
    for rank in (r for r in range(size) if r != victim):
        path = out_dir / f"outcome{rank}.json"
        if not path.exists():
            problems.append(f"rank {rank} reported nothing\n{completed_describe}")
            continue
        outcome = json.loads(path.read_text())
        if outcome["class"] not in ("PeerFailureError", "TimeoutError"):
            problems.append(f"rank {rank}: {outcome}")
        elif not re.search(rf"\brank {victim}\b", outcome["message"]):
            problems.append(f"rank {rank}: the error does not name rank {victim}: {outcome['message']}")
        elif outcome["time"] - killed_at >= within_s:
            problems.append(f"rank {rank}: raised {outcome['time'] - killed_at:.1f} s after the kill")
    return problems
