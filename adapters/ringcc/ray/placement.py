"""Where a RayExecutor's workers run: the shape of the job (how many workers,
on how many hosts, with what resources), the placement group that reserves
them, and the ranks the workers get from the nodes Ray put them on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ringcc.launch.hosts import Host, RankPlacement, place_ranks


def _count(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"RayExecutor: {name} must be an integer >= {minimum}, got {value!r}")
    return value


def _resource(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"RayExecutor: {name} must be a positive number, got {value!r}")
    return value


@dataclass(frozen=True)
class WorkerLayout:
    """The job's workers and what each reserves. With num_hosts the workers
    come num_workers_per_host to a host, on num_hosts distinct hosts (one
    placement-group bundle per host, STRICT_SPREAD); otherwise num_workers
    workers are packed onto as few hosts as hold them (one bundle per worker,
    PACK)."""

    num_workers: int
    num_hosts: int | None
    num_workers_per_host: int
    cpus_per_worker: float
    gpus_per_worker: float  # 0 without use_gpu

    @property
    def strategy(self) -> str:
        return "PACK" if self.num_hosts is None else "STRICT_SPREAD"

    def _resources(self, workers: int) -> dict[str, float]:
        resources = {"CPU": self.cpus_per_worker * workers}
        if self.gpus_per_worker:
            resources["GPU"] = self.gpus_per_worker * workers
        return resources

    def bundles(self) -> list[dict[str, float]]:
        if self.num_hosts is None:
            return [self._resources(1) for _ in range(self.num_workers)]
        return [self._resources(self.num_workers_per_host) for _ in range(self.num_hosts)]

    def bundle_of_worker(self, index: int) -> int:
        return index if self.num_hosts is None else index // self.num_workers_per_host


def worker_layout(
    num_workers=None, num_hosts=None, num_workers_per_host=1, cpus_per_worker=1, use_gpu=False, gpus_per_worker=None
) -> WorkerLayout:
    """The layout RayExecutor's arguments ask for, or a ValueError naming the
    argument that cannot be."""
    if num_workers is not None and num_hosts is not None:
        raise ValueError(
            "RayExecutor: give num_workers, or num_hosts with num_workers_per_host, not both "
            f"(got num_workers={num_workers}, num_hosts={num_hosts})"
        )
    if num_workers is None and num_hosts is None:
        raise ValueError("RayExecutor: give num_workers, or num_hosts with num_workers_per_host")
    per_host = _count("num_workers_per_host", num_workers_per_host)
    if num_hosts is not None:
        hosts = _count("num_hosts", num_hosts)
        workers = hosts * per_host
    else:
        hosts = None
        workers = _count("num_workers", num_workers)
    cpus = _resource("cpus_per_worker", cpus_per_worker)
    if gpus_per_worker is not None and not use_gpu:
        raise ValueError(f"RayExecutor: gpus_per_worker={gpus_per_worker!r} needs use_gpu=True")
    gpus = _resource("gpus_per_worker", 1 if gpus_per_worker is None else gpus_per_worker) if use_gpu else 0
    return WorkerLayout(workers, hosts, per_host, cpus, gpus)


def rank_order(node_addresses: Sequence[str]) -> tuple[list[int], list[RankPlacement]]:
    """The workers' ranks from the address of the node each runs on (in the
    order the workers were made): the hosts in the order their first worker
    came, a host's workers in consecutive ranks, as ringrun places ranks.
    Returns (order, placements): order[rank] is the index of the worker that
    gets that rank, placements[rank] its coordinates in the job."""
    hosts: dict[str, list[int]] = {}
    for index, address in enumerate(node_addresses):
        hosts.setdefault(address, []).append(index)
    order = [index for indices in hosts.values() for index in indices]
    placements = place_ranks([Host(name, len(indices)) for name, indices in hosts.items()], len(order))
    return order, placements


def visible_gpus_by_host(placements: Sequence[RankPlacement], gpu_ids: Sequence[Sequence]) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES for each host: every GPU Ray gave that host's
    workers, in local-rank order, so that a worker's own GPU is device
    local_rank (Horovod's `torch.cuda.set_device(hvd.local_rank())`) and the
    ranks of a host see each other's GPUs (CUDA IPC). gpu_ids[rank]: the GPU
    ids Ray gave that rank's worker."""
    by_host: dict[str, list[str]] = {}
    for placement in sorted(placements, key=lambda p: (p.host, p.local_rank)):
        by_host.setdefault(placement.host, []).extend(str(gpu) for gpu in gpu_ids[placement.rank])
    return {host: ",".join(ids) for host, ids in by_host.items() if ids}


def create_placement_group(ray, layout: WorkerLayout, timeout_s: float):
    """Reserves the layout's bundles; waits at most timeout_s for the cluster
    to grant them, then removes the request and raises TimeoutError."""
    bundles = layout.bundles()
    group = ray.util.placement_group(bundles, strategy=layout.strategy)
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    if not ready:
        ray.util.remove_placement_group(group)
        raise TimeoutError(
            f"RayExecutor: the cluster did not grant the placement group of {layout.num_workers} workers "
            f"({layout.strategy}, bundles {bundles}) within {timeout_s:g} s (placement_group_timeout_s); "
            f"resources available now: {ray.available_resources()}"
        )
    return group


def worker_options(layout: WorkerLayout, group, own_group: bool, index: int) -> dict:
    """The Ray options of worker `index`: its resources, in its bundle of
    the group (any bundle of a group the caller was already running in)."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    options = {
        "num_cpus": layout.cpus_per_worker,
        "scheduling_strategy": PlacementGroupSchedulingStrategy(
            placement_group=group,
            placement_group_bundle_index=layout.bundle_of_worker(index) if own_group else -1,
            placement_group_capture_child_tasks=False,
        ),
    }
    if layout.gpus_per_worker:
        options["num_gpus"] = layout.gpus_per_worker
    return options
