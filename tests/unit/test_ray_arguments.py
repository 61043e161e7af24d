"""ringcc.ray without a Ray cluster (and without Ray): what RayExecutor's
arguments mean and the clear errors for those that cannot be, the ranks the
workers get from their nodes, each worker's variables, and that neither
`import ringcc` nor `import ringcc.ray` imports Ray."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from ringcc.ray import RayExecutor, RaySettings, create_settings
from ringcc.ray.job import checked_extra_variables, new_job_identity, worker_variables
from ringcc.ray.placement import rank_order, visible_gpus_by_host, worker_layout
from ringcc.ray.ray_module import require_ray_running
from ringcc.ray.settings import settings_of


def test_importing_ringcc_ray_does_not_import_ray():
    code = "import sys, ringcc, ringcc.ray; assert 'ray' not in sys.modules, 'ray was imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_start_without_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    executor = RayExecutor(create_settings(), num_workers=2)
    with pytest.raises(ImportError, match=r"ringcc.ray needs Ray.*pip install 'ray\[train\]'"):
        executor.start()


def test_start_before_ray_init_says_so():
    with pytest.raises(RuntimeError, match=r"Ray is not initialised; call ray.init\(\) first"):
        require_ray_running(SimpleNamespace(is_initialized=lambda: False))


def test_num_workers_packs_one_bundle_per_worker():
    layout = worker_layout(num_workers=3, cpus_per_worker=2)
    assert layout.strategy == "PACK" and layout.num_workers == 3
    assert layout.bundles() == [{"CPU": 2}] * 3
    assert [layout.bundle_of_worker(i) for i in range(3)] == [0, 1, 2]


def test_num_hosts_spreads_one_bundle_per_host():
    layout = worker_layout(num_hosts=2, num_workers_per_host=3, use_gpu=True, gpus_per_worker=1)
    assert layout.strategy == "STRICT_SPREAD" and layout.num_workers == 6
    assert layout.bundles() == [{"CPU": 3, "GPU": 3}] * 2
    assert [layout.bundle_of_worker(i) for i in range(6)] == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({}, "give num_workers, or num_hosts"),
        ({"num_workers": 2, "num_hosts": 2}, "not both"),
        ({"num_workers": 0}, "num_workers must be an integer >= 1, got 0"),
        ({"num_workers": 2.5}, "num_workers must be an integer"),
        ({"num_hosts": 2, "num_workers_per_host": 0}, "num_workers_per_host must be an integer >= 1"),
        ({"num_workers": 2, "cpus_per_worker": 0}, "cpus_per_worker must be a positive number"),
        ({"num_workers": 2, "gpus_per_worker": 2}, "gpus_per_worker=2 needs use_gpu=True"),
        ({"num_workers": 2, "use_gpu": True, "gpus_per_worker": -1}, "gpus_per_worker must be a positive number"),
    ],
)
def test_impossible_layouts_are_refused_by_name(arguments, message):
    with pytest.raises(ValueError, match=message):
        RayExecutor(create_settings(), **arguments)


def test_elastic_arguments_are_refused():
    with pytest.raises(ValueError, match="min_workers, max_workers: elastic Ray jobs are not supported.*ringrun"):
        RayExecutor(create_settings(), min_workers=1, max_workers=4)
    with pytest.raises(TypeError, match="unexpected keyword argument.*num_worker"):
        RayExecutor(create_settings(), num_worker=2)


def test_settings_take_horovods_arguments_and_check_them():
    settings = RayExecutor.create_settings(timeout_s=5, placement_group_timeout_s=7, nics={"eth1", "eth0"})
    assert (settings.timeout_s, settings.placement_group_timeout_s, settings.nics) == (5, 7, ["eth0", "eth1"])
    with pytest.raises(ValueError, match="timeout_s must be a positive, finite number of seconds, got 0"):
        create_settings(timeout_s=0)
    with pytest.raises(ValueError, match="placement_group_timeout_s must be a number of seconds"):
        create_settings(placement_group_timeout_s="soon")
    with pytest.raises(ValueError, match="nics must be a non-empty collection"):
        create_settings(nics=[])
    # Horovod's own settings object (its attributes) is taken too; others are refused.
    horovod_like = SimpleNamespace(timeout_s=9, placement_group_timeout_s=11, nics=None, verbose=2)
    assert settings_of(horovod_like) == RaySettings(timeout_s=9, placement_group_timeout_s=11, verbose=2)
    assert settings_of(None) == RaySettings()
    with pytest.raises(TypeError, match="settings must come from RayExecutor.create_settings"):
        RayExecutor(object(), num_workers=2)


def test_ranks_are_consecutive_on_each_host_in_the_order_hosts_came():
    order, placements = rank_order(["10.0.0.2", "10.0.0.1", "10.0.0.2", "10.0.0.1", "10.0.0.2"])
    assert order == [0, 2, 4, 1, 3]  # worker index of ranks 0..4
    assert [(p.rank, p.host, p.local_rank, p.local_size) for p in placements] == [
        (0, "10.0.0.2", 0, 3),
        (1, "10.0.0.2", 1, 3),
        (2, "10.0.0.2", 2, 3),
        (3, "10.0.0.1", 0, 2),
        (4, "10.0.0.1", 1, 2),
    ]
    assert [(p.cross_rank, p.cross_size) for p in placements] == [(0, 2), (0, 2), (0, 1), (1, 2), (1, 2)]


def test_each_host_sees_its_workers_gpus_in_local_rank_order():
    _, placements = rank_order(["a", "b", "a", "b"])
    gpus = visible_gpus_by_host(placements, [["3"], ["1"], ["0"], ["2"]])  # by rank: a0, a1, b0, b1
    assert gpus == {"a": "3,1", "b": "0,2"}


def test_worker_variables():
    _, placements = rank_order(["10.0.0.2", "10.0.0.3"])
    environ = {"RINGCC_LOG_LEVEL": "debug", "RINGCC_RANK": "7", "RINGCC_SECRET": "old", "PATH": "/bin"}
    variables = worker_variables(
        placements, (1234, 1235), ("ray-job", "s3cret"), 12.5, ["eth0", "eth1"], {"X": "1"}, environ, {}
    )
    assert [v["RINGCC_RANK"] for v in variables] == ["0", "1"]
    for v in variables:
        assert v["RINGCC_MASTER_ADDR"] == v["MASTER_ADDR"] == "10.0.0.2"  # two hosts: rank 0's node
        assert (v["RINGCC_MASTER_PORT"], v["MASTER_PORT"]) == ("1234", "1235")
        assert (v["RINGCC_JOB_ID"], v["RINGCC_SECRET"]) == ("ray-job", "s3cret")
        assert v["RINGCC_TIMEOUT_S"] == "12.5" and v["RINGCC_SOCKET_IFNAME"] == "eth0,eth1"
        assert v["RINGCC_LOG_LEVEL"] == "debug" and v["X"] == "1" and "PATH" not in v
    _, one_host = rank_order(["10.0.0.2", "10.0.0.2"])
    assert worker_variables(one_host, (1, 2), ("j", "s"), 30)[1]["RINGCC_MASTER_ADDR"] == "127.0.0.1"


def test_every_job_gets_its_own_id_and_secret():
    first, second = new_job_identity(), new_job_identity()
    assert first[0] != second[0] and first[1] != second[1] and len(first[1]) == 64


def test_extra_variables_cannot_describe_the_job():
    assert checked_extra_variables({"A": 1}) == {"A": "1"}
    with pytest.raises(ValueError, match="may not set RINGCC_SECRET: RayExecutor sets it"):
        checked_extra_variables({"RINGCC_SECRET": "x"})
    with pytest.raises(ValueError, match="'1A' is not a variable name"):
        checked_extra_variables({"1A": "x"})
    with pytest.raises(TypeError, match="extra_env_vars must be a dict"):
        checked_extra_variables(["A=1"])
