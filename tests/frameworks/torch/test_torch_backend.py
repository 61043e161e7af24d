"""torch.distributed backend "ring" under ringrun and torchrun.

Each group in GROUPS starts once (tests/frameworks/torch/torch_cases.py under ringrun or
torchrun) and runs every case of torch_cases.CASES that suits its size and
tags; each test below asserts on what the ranks recorded for one case in one
group. Separate short runs check a dead peer (tests/frameworks/torch/torch_deadpeer.py), a
script that never imports ringcc (tests/frameworks/torch/torch_entry.py, through the
`torch.backends` entry point), and ranks that exit after their peer left
(tests/harness/exit_job.py).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("this torch has no torch.distributed", allow_module_level=True)

import exit_job  # noqa: E402
from rank_groups import (  # noqa: E402
    HARD_TIMEOUT_MARGIN_S,
    REPO_DIR,
    GroupRun,
    launch_ranks,
    rank_environment,
    run_case_group,
    run_command,
    run_exit_jobs,
    torchrun_command,
)
from torch_cases import CASES  # noqa: E402

HERE = Path(__file__).resolve().parent
GROUP_TIMEOUT_S = 150
# A case that leaves the ranks out of step fails within this bound.
GROUP_ENV = {"RINGCC_TIMEOUT_S": "20", "OMP_NUM_THREADS": "1"}
EXIT_ITERATIONS = 2  # jobs of each kind of tests/harness/exit_job.py


@dataclass(frozen=True)
class Group:
    launcher: str  # "ringrun" or "torchrun"
    size: int
    tags: tuple[str, ...] = ()


GROUPS: dict[str, Group] = {
    "ringrun-2": Group("ringrun", 2, ("ddp", "compile", "gloo-mix")),
    "torchrun-3": Group("torchrun", 3, ("ddp", "compile")),
    "ringrun-4": Group("ringrun", 4),
}


_runs: dict[str, GroupRun] = {}


def group_run(tmp_path_factory, name: str) -> GroupRun:
    if name not in _runs:
        spec = GROUPS[name]
        args = ["--tags", ",".join(spec.tags)] if spec.tags else []
        out = tmp_path_factory.mktemp(f"torch-{name}")
        env = rank_environment(GROUP_ENV)
        _runs[name] = run_case_group(
            name, spec.launcher, spec.size, HERE / "torch_cases.py", args, out, GROUP_TIMEOUT_S, env
        )
    return _runs[name]


CASE_PARAMS = [
    pytest.param(name, case.name, id=f"{name}:{case.name}")
    for name, spec in GROUPS.items()
    for case in CASES.select(spec.size, spec.tags)
]


@pytest.mark.parametrize("group_name,case_name", CASE_PARAMS)
def test_case(tmp_path_factory, group_name, case_name):
    group_run(tmp_path_factory, group_name).assert_case(case_name)


@pytest.mark.parametrize("group_name", list(GROUPS))
def test_group_finished_cleanly(tmp_path_factory, group_name):
    """Every rank ran every case, on backend "ring", under the launcher asked for."""
    run = group_run(tmp_path_factory, group_name)
    run.assert_clean_exit()
    spec = GROUPS[group_name]
    for rank in range(spec.size):
        start = run.start_record(rank)
        assert start["size"] == spec.size
        assert start["backend"] == "ring"
        assert start["launcher"] == spec.launcher
        assert start["transport"] == "shm", start
        assert start["cases"] == len(CASES.select(spec.size, spec.tags))


@pytest.mark.parametrize("launcher", ["ringrun", "torchrun"])
def test_dead_peer_raises_from_wait(tmp_path, launcher):
    """The last rank exits after a first all_reduce: the others' next
    all_reduce raises PeerFailureError (also a torch.distributed.DistBackendError)
    from wait(), quickly, on both launchers."""
    size = 3
    script = [str(HERE / "torch_deadpeer.py"), "--out", str(tmp_path)]
    completed = launch_ranks(launcher, size, script, 60, rank_environment(GROUP_ENV))
    for rank in range(size - 1):
        path = tmp_path / f"rank{rank}.json"
        assert path.exists(), f"rank {rank} wrote nothing\n{completed.describe()}"
        record = json.loads(path.read_text())
        assert record["raised"] == "PeerFailureError", record
        assert "RingccError" in record["bases"] and "RuntimeError" in record["bases"], record
        # torch's own class as well, so `except dist.DistBackendError` catches it too.
        assert "DistBackendError" in record["bases"] and "DistError" in record["bases"], record
        assert f"rank {size - 1}" in record["message"], record
        assert record["seconds"] < 15, record
        assert record["second"] is not None, record


# A DDP job whose last rank dies or is late in backward: launcher, the
# group's timeout (seconds), whether DDP runs on a new_group with it.
DDP_FAILURES = {
    "ddp-kill": (2, "ringrun", 60.0, False),
    "ddp-late": (2, "ringrun", 3.0, False),
    "ddp-kill-3": (3, "torchrun", 60.0, False),
    "ddp-late-3": (3, "ringrun", 3.0, True),
}


@pytest.mark.parametrize("case", list(DDP_FAILURES))
def test_ddp_backward_raises_for_a_dead_or_late_peer(tmp_path, case):
    """The last rank kills itself (SIGKILL), or sleeps past the group's
    timeout (of init_process_group, or of the new_group DDP runs on), in
    DDP's backward: every other rank's backward raises
    torch.distributed.DistBackendError naming it, instead of crashing, hanging
    or raising a pickling error (tests/frameworks/torch/torch_deadpeer.py)."""
    size, launcher, group_timeout, subgroup = DDP_FAILURES[case]
    mode = case.split("-3")[0]
    args = ["--out", str(tmp_path), "--mode", mode, "--group-timeout", str(group_timeout)]
    if subgroup:
        args.append("--subgroup")
    # The core's own bound stays the default's: only the group's timeout runs out.
    env = {k: v for k, v in rank_environment(GROUP_ENV).items() if k != "RINGCC_TIMEOUT_S"}
    script = [str(HERE / "torch_deadpeer.py"), *args]
    completed = launch_ranks(launcher, size, script, 60, env, ringrun_options=["--grace-period", "30"])
    for rank in range(size - 1):
        path = tmp_path / f"rank{rank}.json"
        assert path.exists(), f"rank {rank} wrote nothing\n{completed.describe()}"
        record = json.loads(path.read_text())
        assert record["step"] == 1, record
        assert record["dist_backend_error"], record
        assert f"rank {size - 1}" in record["message"], record
        if mode == "ddp-kill":
            assert record["raised"] == "PeerFailureError" and "RingccError" in record["bases"], record
            assert record["seconds"] < 15, record
        else:
            assert record["raised"] == "CollectiveTimeoutError", record
            assert "Timed out after 3 s" in record["message"], record
            assert group_timeout - 0.5 <= record["seconds"] < group_timeout + 10, record


def test_rank_exits_cleanly_after_its_peer_left(tmp_path):
    """PyTorch's test_barrier_timeout_full_group, its all_reduce twin, and the
    same with the completer thread waiting (tests/harness/exit_job.py): rank 0 times
    out, both ranks destroy their groups, and rank 1 leaves while rank 0
    finalizes. Both exit with status 0; no C++ runtime aborts rank 0."""
    records = run_exit_jobs(tmp_path, exit_job.TORCH_KINDS, EXIT_ITERATIONS)
    problems = exit_job.problems(records)
    assert not problems, "\n\n".join(problems)


def _entry_point_installed() -> bool:
    return any(
        ep.value.startswith("ringcc.torch_entry_point")
        for ep in importlib.metadata.entry_points(group="torch.backends")
    )


@pytest.fixture
def entry_point_env(tmp_path) -> dict[str, str]:
    """The ranks' environment with ringcc's torch.backends entry point: the
    installed one, or (source tree) a stand-in distribution's metadata on
    PYTHONPATH that declares the same entry point as pyproject.toml."""
    env = rank_environment(GROUP_ENV)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    if not _entry_point_installed():
        meta = tmp_path / "meta"
        info = meta / "ringcc_dev_entry_point-0.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ringcc-dev-entry-point\nVersion: 0.0\n")
        (info / "entry_points.txt").write_text("[torch.backends]\nringcc = ringcc.torch_entry_point:register\n")
        env["PYTHONPATH"] = os.pathsep.join([str(meta), env["PYTHONPATH"]])
    return env


def test_declared_entry_point_matches_the_module():
    """pyproject.toml declares the entry point this test relies on."""
    text = (REPO_DIR / "pyproject.toml").read_text()
    assert '[project.entry-points."torch.backends"]' in text
    assert 'ringcc = "ringcc.torch_entry_point:register"' in text


def test_script_that_never_imports_ringcc(tmp_path, entry_point_env):
    """`dist.init_process_group(backend="ring")` under torchrun with no
    `import ringcc`: the entry point registered the backend at `import
    torch` without loading the backend module."""
    out = tmp_path / "out"
    completed = run_command(
        torchrun_command(2, [str(HERE / "torch_entry.py"), "--out", str(out)]),
        entry_point_env,
        90 + HARD_TIMEOUT_MARGIN_S,
    )
    assert completed.returncode == 0, completed.describe()
    for rank in range(2):
        record = json.loads((out / f"rank{rank}.json").read_text())
        assert record["entry_point_loaded"] and record["registered_at_import"], record
        assert not record["backend_loaded_at_import"], record
        assert record["backend"] == "ring" and record["group_type"] == "ProcessGroupRing", record
        assert record["result"] == [3.0, 3.0, 3.0], record


def _python(code: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_entry_point_never_breaks_import_torch(entry_point_env):
    """A failing registration is logged and skipped; `import torch` goes on."""
    result = _python(
        """
        import torch.distributed as dist
        def boom(*args, **kwargs):
            raise RuntimeError("simulated registration failure")
        dist.Backend._plugins.pop("RING", None)
        dist.Backend.register_backend = boom
        import ringcc.torch_entry_point as ep
        ep.register()
        print("still here", "RING" in dist.Backend._plugins)
    """,
        entry_point_env,
    )
    assert result.returncode == 0, result.stderr
    assert "still here False" in result.stdout
    assert "simulated registration failure" in result.stderr


def test_entry_point_can_be_turned_off(entry_point_env):
    env = {**entry_point_env, "RINGCC_TORCH_AUTOLOAD": "0"}
    result = _python(
        """
        import torch, torch.distributed as dist
        print("registered", "RING" in dist.Backend._plugins)
    """,
        env,
    )
    assert result.returncode == 0, result.stderr
    assert "registered False" in result.stdout


def test_import_ringcc_torch_registers(entry_point_env):
    env = {**entry_point_env, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    result = _python(
        """
        import torch, torch.distributed as dist
        before = "RING" in dist.Backend._plugins
        import ringcc.torch
        print("before", before, "after", "RING" in dist.Backend._plugins, dist.Backend.RING)
    """,
        env,
    )
    assert result.returncode == 0, result.stderr
    assert "before False after True ring" in result.stdout
