"""RayExecutor (Horovod's Ray API, ringcc.ray) and Ray Train with the "ring"
backend, on one local Ray cluster for the whole module (docs/ray.md): a
Horovod-style script under RayExecutor gives what it gives under ringrun,
the workers get the job's variables and their secret stays in memory, a
raising function and a dead worker end run() naming the rank within the
settings' timeout, shutdown() leaves no process, and Ray Train's DDP over
"ring" ends where gloo's does."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'ray[train]')")
pytest.importorskip("torch", reason="torch is not installed")

import hvd_train  # noqa: E402  (beside this file, on sys.path through pytest's rootdir import)
import ray_cases  # noqa: E402
from rank_groups import rank_environment, ringrun_command, run_command  # noqa: E402

from ringcc.ray import RankFailedError, RayExecutor  # noqa: E402

HERE = Path(__file__).resolve().parent
# The cluster's logical CPUs: the module's executor (2), the dead-worker
# case's (2) and Ray Train's run (its controller and 2 workers) may hold
# them at once; the machine's cores are shared whatever the count.
CLUSTER_CPUS = 8
RINGRUN_TIMEOUT_S = 120
PROCESS_EXIT_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # The workers cannot import this folder: its modules travel by value.
    ray.cloudpickle.register_pickle_by_value(hvd_train)
    ray.cloudpickle.register_pickle_by_value(ray_cases)
    ray.init(
        num_cpus=CLUSTER_CPUS,
        include_dashboard=False,
        object_store_memory=100 * 1024 * 1024,
        log_to_driver=False,
    )
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def executor(cluster):
    settings = RayExecutor.create_settings(timeout_s=60)
    job = RayExecutor(settings, num_workers=2, cpus_per_worker=1)
    job.start(
        executable_cls=ray_cases.Recorder,
        executable_args=["worker"],
        executable_kwargs={"suffix": "!"},
        extra_env_vars={"RAY_CASES_MARK": "marked"},
    )
    try:
        yield job
    finally:
        job.shutdown()


def process_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie has ended
    except FileNotFoundError:
        return True


def wait_until_gone(pids, timeout_s: float = PROCESS_EXIT_TIMEOUT_S) -> list[int]:
    """The pids still running after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = [pid for pid in pids if not process_gone(pid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def test_horovod_script_gives_what_it_gives_under_ringrun(executor, tmp_path):
    under_ray = executor.run(hvd_train.train, kwargs={"steps": 4})
    completed = run_command(
        ringrun_command(2, [str(HERE / "hvd_train.py"), "--out", str(tmp_path), "--steps", "4"]),
        rank_environment(),
        RINGRUN_TIMEOUT_S,
    )
    assert completed.returncode == 0, completed.describe()
    under_ringrun = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    assert [r["rank"] for r in under_ray] == [0, 1] and [r["size"] for r in under_ray] == [2, 2]
    # The ranks agree (the broadcast and the averaged gradients worked) ...
    assert under_ray[0]["parameters"] == under_ray[1]["parameters"]
    # ... and end where ringrun's ranks end, to the bit.
    assert under_ray == under_ringrun


def test_workers_get_the_jobs_variables_and_keep_the_secret_in_memory(executor):
    views = executor.execute(ray_cases.job_view)
    variables = [view["variables"] for view in views]
    assert [v["RINGCC_RANK"] for v in variables] == ["0", "1"]
    assert [v["HOROVOD_RANK"] for v in variables] == ["0", "1"] and [v["RANK"] for v in variables] == ["0", "1"]
    for v in variables:
        sizes = (v["RINGCC_SIZE"], v["WORLD_SIZE"], v["RINGCC_LOCAL_SIZE"], v["RINGCC_CROSS_SIZE"])
        assert sizes == ("2", "2", "2", "1")
        assert v["RINGCC_MASTER_ADDR"] == "127.0.0.1"  # one host: the store listens on loopback only
        assert v["RINGCC_MASTER_PORT"] == variables[0]["RINGCC_MASTER_PORT"] != v["MASTER_PORT"]
        assert v["RINGCC_JOB_ID"] == executor.job_id and executor.job_id.startswith("ray-")
        assert v["RINGCC_TIMEOUT_S"] == "60" and v["RAY_CASES_MARK"] == "marked"
    assert [v["RINGCC_LOCAL_RANK"] for v in variables] == ["0", "1"]
    assert [view["label"] for view in views] == ["worker!", "worker!"]
    for view in views:
        assert view["secret_length"] == 64
        assert not view["secret_on_command_line"] and not view["secret_in_start_environment"]


def test_run_execute_single_and_run_remote(executor):
    # sum over ranks of (rank + 1) * scale + offset
    assert executor.run(ray_cases.sum_of_ranks, args=[2.0], kwargs={"offset": 0.5}) == [7.0, 7.0]
    assert ray.get(executor.run_remote(ray_cases.sum_of_ranks, args=(1.0,))) == [3.0, 3.0]
    only = executor.execute_single(ray_cases.job_view)
    assert only["variables"]["RINGCC_RANK"] == "0" and only["label"] == "worker!"


def test_bad_calls_say_what_is_wrong(executor):
    with pytest.raises(TypeError, match="fn must be callable"):
        executor.run(42)
    with pytest.raises(TypeError, match="args must be a list or tuple"):
        executor.run(ray_cases.sum_of_ranks, args=5)
    with pytest.raises(RuntimeError, match="already started"):
        executor.start()


def test_a_raising_function_names_its_rank(executor):
    with pytest.raises(RankFailedError) as raised:
        executor.run(ray_cases.raise_on_rank, args=[1])
    error = raised.value
    assert error.rank == 1 and set(error.failures) == {1} and error.died == [] and error.unfinished == []
    assert "RayExecutor.run: rank 1 of 2 raised ValueError: rank 1 refuses" in str(error)
    assert isinstance(error.__cause__, ValueError)
    # The job is still usable.
    assert executor.run(ray_cases.raise_on_rank, args=[5]) == [0, 1]


def test_a_dead_worker_ends_run_within_the_timeout_and_shutdown_ends_the_rest(cluster):
    timeout_s = 4
    job = RayExecutor(RayExecutor.create_settings(timeout_s=timeout_s), num_workers=2)
    job.start()
    try:
        pids = [view["pid"] for view in job.execute(ray_cases.job_view)]
        started = time.monotonic()
        with pytest.raises(RankFailedError) as raised:
            job.run(ray_cases.exit_on_rank, args=[1])
        elapsed = time.monotonic() - started
        error = raised.value
        assert error.rank == 1 and error.died == [1] and error.unfinished == [0], str(error)
        assert "rank 1 of 2 died" in str(error) and "had not finished 4 s" in str(error)
        assert "call shutdown() and start() again" in str(error)
        # Rank 0 never notices (it sleeps): the settings' timeout ends the wait.
        assert timeout_s - 0.5 < elapsed < timeout_s + 15, elapsed
        with pytest.raises(RuntimeError, match=r"rank\(s\) 1 died; call shutdown\(\) and start\(\) again"):
            job.run(ray_cases.raise_on_rank, args=[5])
    finally:
        job.shutdown()
    assert wait_until_gone(pids) == []


def test_a_placement_the_cluster_cannot_grant_times_out_and_leaves_nothing(cluster):
    def live_groups():
        return {key for key, group in ray.util.placement_group_table().items() if group["state"] != "REMOVED"}

    before = live_groups()
    job = RayExecutor(RayExecutor.create_settings(placement_group_timeout_s=1), num_workers=CLUSTER_CPUS + 1)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"did not grant the placement group of 9 workers \(PACK.* within 1 s"):
        job.start()
    assert time.monotonic() - started < 15
    assert live_groups() == before and job.placement_group is None


def test_ray_train_ring_backend_ends_where_gloo_does(cluster, tmp_path):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    def fit(backend: str) -> list[dict]:
        out = tmp_path / backend
        out.mkdir()
        trainer = TorchTrainer(
            ray_cases.ddp_train_loop,
            train_loop_config={"seed": 3, "steps": 3, "out": str(out)},
            torch_config=TorchConfig(backend=backend),
            scaling_config=ScalingConfig(num_workers=2),
            run_config=RunConfig(storage_path=str(tmp_path / "storage"), name=f"ddp-{backend}"),
        )
        trainer.fit()
        return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(2)]

    ring, gloo = fit("ring"), fit("gloo")
    assert [r["backend"] for r in ring + gloo] == ["ring", "ring", "gloo", "gloo"]
    assert all(r["world_size"] == 2 and r["ranks_agree"] for r in ring + gloo)
    assert [r["parameters"] for r in ring] == [r["parameters"] for r in gloo]


def test_shutdown_leaves_no_process(executor):
    # The module's executor, last: what every earlier case left running ends.
    pids = [view["pid"] for view in executor.execute(ray_cases.job_view)]
    group = executor.placement_group
    executor.shutdown()
    assert wait_until_gone(pids) == []
    assert ray.util.placement_group_table(group)["state"] == "REMOVED"
    with pytest.raises(RuntimeError, match="not started; call start"):
        executor.run(ray_cases.raise_on_rank, args=[5])
    executor.shutdown()  # again: nothing to do
