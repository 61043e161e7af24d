"""ringcc.ray without a Ray cluster (and without Ray): what RayExecutor's
arguments mean and the clear errors for those that cannot be, the ranks the
workers get from their nodes, each worker's variables, and that neither
`import ringcc` nor `import ringcc.ray` imports Ray. With a stand-in for Ray
(FakeRay: actors that run in this process), the placement group the workers
go into (use_current_placement_group) and the warning for `callbacks`."""

from __future__ import annotations

import logging
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


# --------------------------------------------------------------------------
# RayExecutor.start/run/shutdown against a stand-in for Ray


class FakeRef:
    """An ObjectRef that already holds its value."""

    def __init__(self, value) -> None:
        self.value = value


class FakeMethod:
    def __init__(self, method) -> None:
        self.method = method

    def remote(self, *args, **kwargs) -> FakeRef:
        # Ray passes the values of ObjectRefs given as arguments.
        args = [arg.value if isinstance(arg, FakeRef) else arg for arg in args]
        return FakeRef(self.method(*args, **kwargs))


class FakeActor:
    """A worker of one node (10.0.0.1), run in this process; takes its
    variables into a dict, not into the environment."""

    def __init__(self, options: dict) -> None:
        self.options, self.variables, self.left = options, None, False
        self.where = FakeMethod(lambda: {"node_address": "10.0.0.1", "hostname": "n1", "pid": 1, "gpu_ids": []})
        self.free_ports = FakeMethod(lambda count: list(range(29500, 29500 + count)))
        self.join_job = FakeMethod(lambda variables: setattr(self, "variables", variables))
        self.start_executable = FakeMethod(lambda cls=None, args=None, kwargs=None: None)
        self.run = FakeMethod(lambda fn, args, kwargs: fn(*args, **kwargs))
        self.execute = FakeMethod(lambda fn: fn(None))
        self.leave_job = FakeMethod(lambda: setattr(self, "left", True))


class FakeRay:
    """What RayExecutor calls of `ray`, recording the placement groups it
    makes and removes and the options of each actor."""

    def __init__(self, current_group=None) -> None:
        self.made_groups: list = []
        self.removed_groups: list = []
        self.actors: list[FakeActor] = []
        self.util = SimpleNamespace(
            get_current_placement_group=lambda: current_group,
            placement_group=self._placement_group,
            remove_placement_group=self.removed_groups.append,
        )

    def _placement_group(self, bundles, strategy):
        group = SimpleNamespace(bundles=bundles, strategy=strategy, ready=lambda: FakeRef(None))
        self.made_groups.append(group)
        return group

    def remote(self, cls):
        ray = self

        class ActorClass:
            @staticmethod
            def options(**options):
                def make():
                    ray.actors.append(FakeActor(options))
                    return ray.actors[-1]

                return SimpleNamespace(remote=make)

        return ActorClass

    @staticmethod
    def is_initialized() -> bool:
        return True

    @staticmethod
    def wait(refs, num_returns=1, timeout=None):
        return list(refs[:num_returns]), list(refs[num_returns:])

    @staticmethod
    def get(ref):
        return ref.value

    @staticmethod
    def put(value) -> FakeRef:
        return FakeRef(value)

    @staticmethod
    def kill(actor, no_restart=True) -> None:
        actor.killed = True


@pytest.fixture
def fake_ray(monkeypatch):
    """Installs a FakeRay as `ray` (and the module worker_options imports); returns a function that
    makes it: fake_ray(current_group=None)."""

    def install(current_group=None) -> FakeRay:
        ray = FakeRay(current_group)
        strategies = SimpleNamespace(PlacementGroupSchedulingStrategy=SimpleNamespace)
        monkeypatch.setitem(sys.modules, "ray", ray)
        monkeypatch.setitem(sys.modules, "ray.util", ray.util)
        monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", strategies)
        return ray

    return install


def strategies_of(ray: FakeRay) -> list[tuple]:
    """(placement group, bundle index) of each actor made."""
    return [
        (
            actor.options["scheduling_strategy"].placement_group,
            actor.options["scheduling_strategy"].placement_group_bundle_index,
        )
        for actor in ray.actors
    ]


@pytest.mark.parametrize("use_current", [True, False])
def test_workers_go_into_the_current_placement_group_unless_told_not_to(fake_ray, use_current):
    """docs/ray.md: inside a placement group (a Ray Tune trial), the workers go
    into that group (any of its bundles) unless use_current_placement_group=False;
    shutdown() removes the group only when the executor made it."""
    trial_group = SimpleNamespace(name="the trial's group")
    ray = fake_ray(current_group=trial_group)
    executor = RayExecutor(create_settings(), num_workers=2, use_current_placement_group=use_current)
    executor.start()
    assert [actor.variables["RINGCC_RANK"] for actor in ray.actors] == ["0", "1"]
    if use_current:
        assert executor.placement_group is trial_group and ray.made_groups == []
        assert strategies_of(ray) == [(trial_group, -1), (trial_group, -1)]
    else:
        (made,) = ray.made_groups
        assert executor.placement_group is made and (made.strategy, made.bundles) == ("PACK", [{"CPU": 1}] * 2)
        assert strategies_of(ray) == [(made, 0), (made, 1)]
    executor.shutdown()
    assert all(actor.left and actor.killed for actor in ray.actors)
    assert ray.removed_groups == ([] if use_current else ray.made_groups)


def test_outside_a_placement_group_the_executor_makes_its_own(fake_ray):
    ray = fake_ray(current_group=None)
    executor = RayExecutor(create_settings(), num_hosts=1, num_workers_per_host=2)
    executor.start()
    (made,) = ray.made_groups
    assert (made.strategy, made.bundles) == ("STRICT_SPREAD", [{"CPU": 2}])
    assert strategies_of(ray) == [(made, 0), (made, 0)]
    executor.shutdown()
    assert ray.removed_groups == [made]


@pytest.fixture
def ringcc_log(caplog):
    """caplog, fed by the `ringcc` logger (which does not propagate to the root logger)."""
    logger = logging.getLogger("ringcc")
    logger.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        logger.removeHandler(caplog.handler)


def test_callbacks_are_ignored_with_a_warning(fake_ray, ringcc_log):
    """docs/ray.md: `callbacks` are accepted and ignored with a warning (as by
    Horovod's non-elastic executor): run() and execute() still return every
    rank's result, no callback is called, and a call without them warns of
    nothing."""
    fake_ray()
    executor = RayExecutor(create_settings(), num_workers=2)
    executor.start()
    called = []
    try:
        ringcc_log.clear()
        assert executor.run(lambda x: x * 2, args=[21]) == [42, 42]
        assert executor.execute(lambda executable: "done") == ["done", "done"]
        assert [r for r in ringcc_log.records if r.levelno >= logging.WARNING] == []
        assert executor.run(lambda x: x * 2, args=[21], callbacks=[called.append]) == [42, 42]
        assert executor.execute(lambda executable: "done", callbacks=[called.append]) == ["done", "done"]
    finally:
        executor.shutdown()
    assert called == []
    warnings = [(r.levelno, r.getMessage()) for r in ringcc_log.records if r.name == "ringcc"]
    assert warnings == [
        (
            logging.WARNING,
            f"RayExecutor.{call}: callbacks are not supported and are ignored (as Horovod's non-elastic executor)",
        )
        for call in ("run", "execute")
    ], warnings
