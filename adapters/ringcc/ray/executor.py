"""RayExecutor: Horovod's Ray API (horovod.ray.RayExecutor) for ringcc. The
driver places one Ray actor per rank with a placement group, gives each the
job's variables (rank, size, local and cross ranks, rank 0's store, a fresh
job id and secret) and runs functions on all of them; a function that calls
ringcc.init() (or hvd.init() of ringcc.torch) there joins the job."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from ringcc.ray.errors import RankFailedError
from ringcc.ray.job import checked_extra_variables, new_job_identity, worker_variables
from ringcc.ray.placement import (
    create_placement_group,
    rank_order,
    visible_gpus_by_host,
    worker_layout,
    worker_options,
)
from ringcc.ray.ray_module import import_ray, require_ray_running
from ringcc.ray.settings import create_settings, settings_of
from ringcc.ray.worker import RingccWorker

logger = logging.getLogger("ringcc")

ELASTIC_ARGUMENTS = ("min_workers", "max_workers", "reset_limit", "cooldown_range")


def _what_failed(ray, error: BaseException, where: dict | None) -> tuple[str, bool]:
    """(what happened to a rank, whether its worker died)."""
    if isinstance(error, ray.exceptions.RayTaskError):
        cause = getattr(error, "cause", None)
        if cause is not None and not isinstance(cause, ray.exceptions.RayTaskError):
            return f"raised {type(cause).__name__}: {cause}", False
        return f"raised: {(str(error).strip().splitlines() or [''])[0]}", False
    if isinstance(error, ray.exceptions.RayActorError):
        place = f" (pid {where['pid']} on {where['node_address']})" if where else ""
        first_line = (str(error).strip().splitlines() or [""])[0]
        return f"died: its Ray worker{place} is gone: {first_line}", True
    return f"failed: {type(error).__name__}: {error}", False


class RayExecutor:
    """Runs a ringcc job on Ray workers, with Horovod's RayExecutor API.

    settings: from RayExecutor.create_settings(...) (or None for the
    defaults). num_workers workers packed onto as few hosts as hold them, or
    num_hosts hosts with num_workers_per_host workers each; each worker
    reserves cpus_per_worker CPUs and, with use_gpu, gpus_per_worker GPUs
    (default 1). use_current_placement_group: inside a placement group (a
    Ray Tune trial), place the workers in it rather than in a new one.
    Horovod's elastic arguments (min_workers, ...) are refused: ringcc's
    elastic jobs run under ringrun (docs/elastic.md)."""

    create_settings = staticmethod(create_settings)

    def __init__(
        self,
        settings=None,
        num_workers: int | None = None,
        num_hosts: int | None = None,
        num_workers_per_host: int = 1,
        cpus_per_worker: float = 1,
        use_gpu: bool = False,
        gpus_per_worker: float | None = None,
        use_current_placement_group: bool = True,
        **elastic,
    ) -> None:
        unknown = set(elastic) - set(ELASTIC_ARGUMENTS) - {"elastic_timeout", "override_discovery"}
        if unknown:
            raise TypeError(f"RayExecutor() got unexpected keyword argument(s): {', '.join(sorted(unknown))}")
        given = [name for name in ELASTIC_ARGUMENTS if elastic.get(name) is not None]
        if given:
            raise ValueError(
                f"RayExecutor: {', '.join(given)}: elastic Ray jobs are not supported by ringcc.ray; "
                "run elastic jobs with ringrun --min-np/--max-np (docs/elastic.md)"
            )
        self.settings = settings_of(settings)
        self.layout = worker_layout(
            num_workers, num_hosts, num_workers_per_host, cpus_per_worker, use_gpu, gpus_per_worker
        )
        self.use_current_placement_group = bool(use_current_placement_group)
        self.workers: list = []  # the actors, by rank
        self.places: list[dict] = []  # where each rank's worker runs, by rank
        self.job_id: str | None = None
        self._actors: list = []  # every actor made, in or out of rank order
        self._group = None
        self._own_group = False
        self._died: set[int] = set()
        self._busy: set[int] = set()  # ranks still running a call that run() gave up on

    @property
    def placement_group(self):
        """The placement group the workers run in (None before start())."""
        return self._group

    # -- start -----------------------------------------------------------

    def start(
        self,
        executable_cls: type | None = None,
        executable_args: Sequence | None = None,
        executable_kwargs: dict | None = None,
        extra_env_vars: dict | None = None,
    ) -> None:
        """Places the workers, gives each its rank and the job's variables
        (plus extra_env_vars), and makes executable_cls(*executable_args,
        **executable_kwargs) in each (what execute() passes its function).
        Raises, with nothing left behind, when the cluster cannot grant the
        workers within placement_group_timeout_s."""
        ray = import_ray()
        require_ray_running(ray)
        if self._actors:
            raise RuntimeError("RayExecutor.start: already started; call shutdown() first")
        extra = checked_extra_variables(extra_env_vars)
        try:
            self._place_workers(ray)
            self._join_job(ray, extra)
            self._wait(
                ray,
                "start",
                [w.start_executable.remote(executable_cls, executable_args, executable_kwargs) for w in self.workers],
            )
        except BaseException:
            self.shutdown()
            raise

    def _place_workers(self, ray) -> None:
        current = ray.util.get_current_placement_group() if self.use_current_placement_group else None
        if current is not None:
            logger.info("RayExecutor: placing the workers in the current placement group")
            self._group, self._own_group = current, False
        else:
            self._group = create_placement_group(ray, self.layout, self.settings.placement_group_timeout_s)
            self._own_group = True
        actor_class = ray.remote(RingccWorker)
        self._actors = [
            actor_class.options(**worker_options(self.layout, self._group, self._own_group, index)).remote()
            for index in range(self.layout.num_workers)
        ]
        # The placement group is granted: the workers only have to start.
        places = self._wait(
            ray, "start", [actor.where.remote() for actor in self._actors], self.settings.placement_group_timeout_s
        )
        order, self._placements = rank_order([place["node_address"] for place in places])
        self.workers = [self._actors[index] for index in order]
        self.places = [places[index] for index in order]

    def _join_job(self, ray, extra: dict[str, str]) -> None:
        ports = self._wait(ray, "start", [self.workers[0].free_ports.remote(2)])[0]
        job = new_job_identity()
        self.job_id = job[0]
        gpus = {}
        if self.layout.gpus_per_worker:
            gpus = visible_gpus_by_host(self._placements, [place["gpu_ids"] for place in self.places])
        variables = worker_variables(
            self._placements, tuple(ports), job, self.settings.timeout_s, self.settings.nics, extra, os.environ, gpus
        )
        self._wait(ray, "start", [w.join_job.remote(v) for w, v in zip(self.workers, variables)])

    # -- running functions --------------------------------------------------

    def _require_started(self, call: str) -> None:
        if not self.workers:
            raise RuntimeError(f"RayExecutor.{call}: the workers are not started; call start() first")
        if self._died:
            ranks = ", ".join(str(rank) for rank in sorted(self._died))
            raise RuntimeError(f"RayExecutor.{call}: rank(s) {ranks} died; call shutdown() and start() again")

    @staticmethod
    def _check_function(call: str, fn) -> None:
        if not callable(fn):
            raise TypeError(f"RayExecutor.{call}: fn must be callable, got {type(fn).__name__}")

    def _callbacks(self, call: str, callbacks) -> None:
        if callbacks:
            logger.warning(
                "RayExecutor.%s: callbacks are not supported and are ignored (as Horovod's non-elastic executor)", call
            )

    def run_remote(self, fn: Callable, args: Sequence | None = None, kwargs: dict | None = None) -> list:
        """fn(*args, **kwargs) on every worker; returns their ObjectRefs, by rank."""
        ray = import_ray()
        self._require_started("run_remote")
        self._check_function("run_remote", fn)
        if args is not None and not isinstance(args, (list, tuple)):
            raise TypeError(f"RayExecutor.run: args must be a list or tuple, got {type(args).__name__}")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise TypeError(f"RayExecutor.run: kwargs must be a dict, got {type(kwargs).__name__}")
        fn_ref = ray.put(fn)  # serialised once, whatever the number of workers
        return [w.run.remote(fn_ref, list(args or ()), dict(kwargs or {})) for w in self.workers]

    def run(
        self,
        fn: Callable,
        args: Sequence | None = None,
        kwargs: dict | None = None,
        callbacks: list | None = None,
    ) -> list[Any]:
        """fn(*args, **kwargs) on every worker; returns the results, by rank.
        Raises RankFailedError when it raises on a rank or a worker dies."""
        self._callbacks("run", callbacks)
        refs = self.run_remote(fn, args, kwargs)
        return self._wait(import_ray(), "run", refs)

    def execute(self, fn: Callable, callbacks: list | None = None) -> list[Any]:
        """fn(executable) on every worker (executable: what start() made of
        executable_cls, else None); returns the results, by rank."""
        ray = import_ray()
        self._require_started("execute")
        self._check_function("execute", fn)
        self._callbacks("execute", callbacks)
        fn_ref = ray.put(fn)
        return self._wait(ray, "execute", [w.execute.remote(fn_ref) for w in self.workers])

    def execute_single(self, fn: Callable) -> Any:
        """fn(executable) on rank 0's worker alone; returns its result."""
        ray = import_ray()
        self._require_started("execute_single")
        self._check_function("execute_single", fn)
        return self._wait(ray, "execute_single", [self.workers[0].execute.remote(fn)])[0]

    def _wait(self, ray, call: str, refs: list, timeout_s: float | None = None) -> list[Any]:
        """The results of refs (one per rank, or rank 0's alone). Healthy
        ranks are waited for as long as they run (timeout_s: at most that);
        once one fails, the others get settings.timeout_s to finish before
        RankFailedError names every rank that failed or did not finish."""
        rank_of = {ref: rank for rank, ref in enumerate(refs)}
        results: list[Any] = [None] * len(refs)
        failures: dict[int, str] = {}
        died: list[int] = []
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        pending = list(refs)
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, pending = ray.wait(pending, num_returns=1, timeout=left)
            if not ready:
                break
            rank = rank_of[ready[0]]
            try:
                results[rank] = ray.get(ready[0])
            except Exception as error:
                where = self.places[rank] if rank < len(self.places) else None
                failures[rank], lost = _what_failed(ray, error, where)
                if lost:
                    died.append(rank)
                if len(failures) == 1:
                    first_error = error
                    first_deadline = time.monotonic() + self.settings.timeout_s
                    deadline = first_deadline if deadline is None else min(deadline, first_deadline)
        if failures:
            self._died.update(died)
            unfinished = sorted(rank_of[ref] for ref in pending)
            self._busy = set(unfinished)
            raise RankFailedError(
                call, len(self.workers) or len(refs), failures, unfinished, died, self.settings.timeout_s
            ) from first_error
        if pending:
            self._busy = {rank_of[ref] for ref in pending}
            raise TimeoutError(
                f"RayExecutor.{call}: rank(s) {', '.join(str(rank_of[ref]) for ref in pending)} did not answer "
                f"within {timeout_s:g} s"
            )
        if len(refs) == len(self.workers):
            self._busy = set()
        return results

    # -- shutdown -----------------------------------------------------------

    def shutdown(self) -> None:
        """Leaves the job on every worker (ringcc.shutdown(), and torch's
        group), ends the workers' processes and frees the placement group
        the executor made; waits at most timeout_s for the ranks to leave
        and as long again for Ray to confirm the workers gone. May be
        called again; start() may follow."""
        actors, group, own_group = self._actors, self._group, self._own_group
        # A rank still running a call, or gone, cannot be asked to leave.
        stuck = {id(self.workers[rank]) for rank in self._busy | self._died if rank < len(self.workers)}
        self._actors, self.workers, self.places, self._group = [], [], [], None
        self._died, self._busy = set(), set()
        self.job_id = None
        if not actors and group is None:
            return
        ray = import_ray()
        if not ray.is_initialized():
            return
        timeout_s = self.settings.timeout_s
        if actors:
            leaving = [actor.leave_job.remote() for actor in actors if id(actor) not in stuck]
            if leaving:
                ray.wait(leaving, num_returns=len(leaving), timeout=timeout_s)
            for actor in actors:
                ray.kill(actor, no_restart=True)
            # A call to a killed actor fails once Ray has recorded its end.
            gone = [actor.where.remote() for actor in actors]
            ray.wait(gone, num_returns=len(gone), timeout=timeout_s)
        if group is not None and own_group:
            ray.util.remove_placement_group(group)
