"""CUDA collectives on a real GPU: `bash tests/gpu/run.sh` runs these on a
GPU machine (they skip, saying why, anywhere else).

The groups run tests/ranks/rank_gpu_cases.py (every dtype and op with pre/post-
scale, multi-step, fused, ragged allgather, broadcast, uneven
reduce-scatter, alltoall, host/CUDA mismatch, named collectives through the
engine, explicit streams, and a kernel queued after the collective on the
same stream seeing its result with no host synchronisation) over: NCCL at
world size 1; 2 and 4 ranks sharing the GPU through CUDA IPC; host staging
forced; CuPy arrays. The framework adapters on 2 ranks sharing the GPU:
backend "ring" (every collective, async work and stream order, DDP against
gloo's result) and the Horovod API (collectives, DistributedOptimizer) in
tests/gpu/rank_gpu_torch.py; ringcc.jax on JAX's CUDA platform (tests/frameworks/jax/jax_cases.py,
a selection). A killed rank makes the others raise within 10 s."""

from __future__ import annotations

import os
import sys

import pytest
from gpu_env import (
    FRAMEWORK_GROUPS,
    GROUP_ENV,
    GROUPS,
    NOT_ON_GPU,
    arrays_env,
    framework_reason,
    gpu_skip_reason,
    kill_outcomes,
    library_reason,
)
from rank_groups import TESTS_DIR, ringcc

# The case scripts these tests share with the ones without a GPU.
sys.path[:0] = [str(TESTS_DIR / "ranks"), str(TESTS_DIR / "frameworks" / "jax")]
from jax_cases import CASES as JAX_CASES  # noqa: E402
from rank_gpu_cases import CASES  # noqa: E402
from rank_gpu_torch import CASES as TORCH_CASES  # noqa: E402

REASON = gpu_skip_reason(ringcc)
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))


def inherited():
    """The caller's RINGCC_ settings (where NVRTC or NCCL are, the cache),
    which the ranks keep here, unlike in the CPU tests."""
    return {k: v for k, v in os.environ.items() if k.startswith("RINGCC_")}


def run_group(ranks, name):
    size, env, tags, what = GROUPS[name]
    reason = library_reason(what)
    if reason:
        pytest.skip(reason)
    return ranks.group(
        f"gpu-real-{name}",
        size,
        "ranks/rank_gpu_cases.py",
        env=arrays_env({**inherited(), **GROUP_ENV, **env}),
        tags=tags,
        timeout=180,
    )


CASE_PARAMS = [
    pytest.param(name, case.name, id=f"{name}:{case.name}")
    for name, (size, env, tags, _) in GROUPS.items()
    for case in CASES.select(size, tags)
    if case.name not in NOT_ON_GPU
]


@pytest.mark.parametrize("group,case_name", CASE_PARAMS)
def test_case(ranks, group, case_name):
    run_group(ranks, group).assert_case(case_name)


@pytest.mark.parametrize("group", list(GROUPS))
def test_group_finished_cleanly(ranks, group):
    run_group(ranks, group).assert_clean_exit()


# --- the framework adapters: backend "ring" and the Horovod API (torch), ringcc.jax

FRAMEWORK_CASES = {"gpu/rank_gpu_torch.py": TORCH_CASES, "frameworks/jax/jax_cases.py": JAX_CASES}


def run_framework_group(ranks, name):
    size, script, env, what, patterns = FRAMEWORK_GROUPS[name]
    reason = framework_reason(what, ringcc)
    if reason:
        pytest.skip(reason)
    return ranks.group(
        f"gpu-real-{name}", size, script, env={**inherited(), **GROUP_ENV, **env}, cases=patterns, timeout=180
    )


FRAMEWORK_PARAMS = [
    pytest.param(name, case.name, id=f"{name}:{case.name}")
    for name, (size, script, env, what, patterns) in FRAMEWORK_GROUPS.items()
    for case in FRAMEWORK_CASES[script].select(size, (), list(patterns) or None)
]


@pytest.mark.parametrize("group,case_name", FRAMEWORK_PARAMS)
def test_framework_case(ranks, group, case_name):
    run_framework_group(ranks, group).assert_case(case_name)


@pytest.mark.parametrize("group", list(FRAMEWORK_GROUPS))
def test_framework_group_finished_cleanly(ranks, group):
    run = run_framework_group(ranks, group)
    if group.startswith("torch"):
        # torch_harness's records: every case ran and the ranks left together.
        for rank in range(run.size):
            entry = run.results.get(rank)
            assert entry and entry["end"] is not None and not entry["end"].get("broken"), run.completed.describe()
    else:
        run.assert_clean_exit()


@pytest.mark.parametrize("backend", ["ipc", "host"])
def test_killed_rank_fails_the_others_within_10_s(ranks, backend):
    reason = library_reason("torch")
    if reason:
        pytest.skip(reason)
    out_dir = ranks.scratch_dir(f"gpu-real-kill-{backend}")
    env = arrays_env({"RINGCC_TIMEOUT_S": "8", "RINGCC_GPU_BACKEND": backend, "RINGCC_TEST_ARRAYS": "torch"})
    command = ranks.command(
        3,
        [str(TESTS_DIR / "ranks" / "gpu_deadpeer.py"), "--out", str(out_dir), "--victim", "1"],
        ["--timeout", "90", "--grace-period", "30"],
    )
    completed = ranks.run(command, ranks.environment({**inherited(), **env}), 120)
    problems = kill_outcomes(out_dir, completed.describe())
    assert not problems, "\n".join(problems)


def test_cuda_info_names_the_gpu():
    info = ringcc.cuda_info()
    device = info["devices"][0]
    assert device["name"] and device["uuid"].startswith("GPU-") and device["compute_capability"][0] >= 5
    assert info["nvrtc"]["found"], info["nvrtc"]


def test_mps_advice_follows_the_driver(ranks):
    # The first rank of ranks sharing the GPU warns once when the driver says
    # the device is not shared through MPS, and stays quiet when it is.
    mps = ringcc.cuda_info()["devices"][0]["mps"]
    if mps is None:
        pytest.skip("this driver does not say whether MPS serves the device")
    stderr = run_group(ranks, "ipc-4").completed.stderr
    advice = "without MPS: the GPU runs their processes in turns"
    assert stderr.count(advice) == (0 if mps else 1), stderr[-3000:]
