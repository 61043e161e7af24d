"""The libraries people train with, on backend "ring", against gloo.

Each group in GROUPS starts once (tests/frameworks/torch/torch_client_cases.py under ringrun
or torchrun) and runs every case: FSDP2 with a torch.distributed.checkpoint
round trip, DTensor redistributions and tensor parallelism, pipelining
schedules, ZeroRedundancyOptimizer, DDP's variants and every built-in comm
hook, PyTorch Lightning's DDPStrategy and Accelerate, each over a "ring"
group and a gloo group in the same processes, with the same seeds and data. Lightning's and Accelerate's
cases skip, saying so, when the library is not installed.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("this torch has no torch.distributed", allow_module_level=True)

from rank_groups import (  # noqa: E402
    GroupRun,
    rank_environment,
    ringrun_command,
    run_case_group,
    run_command,
)
from torch_client_cases import CASES  # noqa: E402

HERE = Path(__file__).resolve().parent
GROUP_TIMEOUT_S = 240
# A case that leaves the ranks out of step fails within this bound.
GROUP_ENV = {"RINGCC_TIMEOUT_S": "20", "OMP_NUM_THREADS": "1"}
# What torch's TCPStore client logs when a call finds the store's server gone.
STORE_GONE = "recvValue failed"


@dataclass(frozen=True)
class Group:
    launcher: str  # "ringrun" or "torchrun" (c10d rendezvous, --standalone)
    size: int


GROUPS: dict[str, Group] = {
    "ringrun-2": Group("ringrun", 2),
    "torchrun-3": Group("torchrun", 3),
}


_runs: dict[str, GroupRun] = {}


def group_run(tmp_path_factory, name: str) -> GroupRun:
    if name not in _runs:
        spec = GROUPS[name]
        out = tmp_path_factory.mktemp(f"torch-clients-{name}")
        env = rank_environment(GROUP_ENV)
        # Lightning looks for an MPI job through mpi4py, which starts Open
        # MPI as a singleton; its shared-memory file outlives the process,
        # so it goes to this run's folder instead of /dev/shm.
        env["OMPI_MCA_btl_sm_backing_directory"] = str(out)
        _runs[name] = run_case_group(
            name, spec.launcher, spec.size, HERE / "torch_client_cases.py", [], out, GROUP_TIMEOUT_S, env
        )
    return _runs[name]


CASE_PARAMS = [
    pytest.param(name, case.name, id=f"{name}:{case.name}")
    for name, spec in GROUPS.items()
    for case in CASES.select(spec.size, ())
]


@pytest.mark.parametrize("group_name,case_name", CASE_PARAMS)
def test_case(tmp_path_factory, group_name, case_name):
    group_run(tmp_path_factory, group_name).assert_case(case_name)


@pytest.mark.parametrize("group_name", list(GROUPS))
def test_group_finished_cleanly(tmp_path_factory, group_name):
    """Every rank ran every case under the launcher asked for, and no rank
    called torch's store after its server had gone (Lightning and
    Accelerate destroy and remake the default group)."""
    run = group_run(tmp_path_factory, group_name)
    run.assert_clean_exit()
    spec = GROUPS[group_name]
    for rank in range(spec.size):
        start = run.start_record(rank)
        assert start["size"] == spec.size
        assert start["backend"] == "ring"
        assert start["launcher"] == spec.launcher
        assert start["cases"] == len(CASES.select(spec.size, ()))
    assert STORE_GONE not in run.completed.stderr, run.completed.describe()


def test_destroy_after_rank_0_left_is_quiet(tmp_path):
    """Rank 0 serves torch's store and destroys its "ring" group first; rank 1
    destroys its own a moment later, as a script's last line does. Leaving
    the group must not call the store (whose server went with rank 0's
    group): gloo's ranks leave without a word, and so must ring's."""
    code = textwrap.dedent(
        """
        import time, torch, torch.distributed as dist
        import ringcc.torch  # registers "ring" where no entry point is installed
        dist.init_process_group("ring")
        t = torch.ones(3)
        dist.all_reduce(t)
        if dist.get_rank() == 1:
            time.sleep(1.0)
        dist.destroy_process_group()
        print("left", t.tolist())
        """
    )
    completed = run_command(ringrun_command(2, ["-c", code], ["--timeout", "60"]), rank_environment(GROUP_ENV), 90)
    assert completed.returncode == 0, completed.describe()
    assert completed.stdout.count("left [2.0, 2.0, 2.0]") == 2, completed.describe()
    assert STORE_GONE not in completed.stderr, completed.describe()


def test_exit_while_a_future_callback_runs(tmp_path):
    """A future's callback still runs on a completer thread (a daemon) when
    the script ends: rank 0 destroys its group, rank 1 leaves it to the exit.
    Leaving waits for the callback; a thread left inside torch's
    Future.set_result while the interpreter finalizes ends in pthread_exit
    there, which aborts the process ("terminate called without an active
    exception")."""
    code = textwrap.dedent(
        """
        import threading, time, torch, torch.distributed as dist
        import ringcc.torch  # registers "ring" where no entry point is installed
        dist.init_process_group("ring")
        rank = dist.get_rank()
        if rank == 1:
            time.sleep(0.3)  # rank 0's future completes on a completer thread
        work = dist.all_reduce(torch.ones(3), async_op=True)

        def slow(future):
            print(rank, "callback on", threading.current_thread().name, flush=True)
            time.sleep(0.5)  # ends after the main thread has started to exit
            print(rank, "callback done", future.value()[0].tolist(), flush=True)

        chained = work.get_future().then(slow)
        time.sleep(0.1)
        if rank == 0:
            dist.destroy_process_group()
        print("main exits", flush=True)
        """
    )
    completed = run_command(ringrun_command(2, ["-c", code], ["--timeout", "60"]), rank_environment(GROUP_ENV), 90)
    assert completed.returncode == 0, completed.describe()
    # Rank 1's allreduce may be done before it asks for the future: its
    # callback then runs at once, on its main thread.
    assert "0 callback on ringcc-completer-" in completed.stdout, completed.describe()
    for rank in (0, 1):
        assert f"{rank} callback done [2.0, 2.0, 2.0]" in completed.stdout, completed.describe()
    assert "terminate called" not in completed.stderr, completed.describe()
