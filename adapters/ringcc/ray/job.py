"""The variables each RayExecutor worker gets before its function runs: the
ones ringrun gives its ranks (ringcc's, torch's, Horovod's; docs/api.md),
the job's timeout and interfaces, the caller's extra variables, and the
driver's own ringcc settings."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence

from ringcc.launch.hosts import RankPlacement
from ringcc.launch.variables import OUTER_JOB_VARIABLES, VARIABLE_NAME, job_variables

# What describes one job: made here for every job, never taken from the
# driver's environment or from extra_env_vars.
JOB_VARIABLES = frozenset(
    OUTER_JOB_VARIABLES
    + ("RINGCC_JOB_ID", "RINGCC_SECRET", "RINGCC_SECRET_FILE", "RINGCC_HOSTNAME", "GROUP_RANK", "RINGCC_INSECURE")
)


def new_job_identity() -> tuple[str, str]:
    """(job id, secret), fresh for every start(): the id keeps two jobs that
    are handed the same port apart, the secret keeps out whoever is not one
    of the job's ranks."""
    return "ray-" + secrets.token_hex(8), secrets.token_hex(32)


def checked_extra_variables(extra: Mapping | None) -> dict[str, str]:
    """start(extra_env_vars=...): names must be variable names, and none may
    be one the job sets itself."""
    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise TypeError(f"RayExecutor.start: extra_env_vars must be a dict, got {type(extra).__name__}")
    checked = {}
    for name, value in extra.items():
        if not isinstance(name, str) or not VARIABLE_NAME.fullmatch(name):
            raise ValueError(f"RayExecutor.start: extra_env_vars: {name!r} is not a variable name")
        if name in JOB_VARIABLES:
            raise ValueError(
                f"RayExecutor.start: extra_env_vars may not set {name}: RayExecutor sets it for each job and rank"
            )
        checked[name] = str(value)
    return checked


def driver_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The driver's RINGCC_* and HOROVOD_* settings (log level, timeouts,
    wait policy, ...), which reach the workers as they reach ringrun's local
    ranks; the variables that describe a job stay behind."""
    return {
        name: value
        for name, value in environ.items()
        if name.startswith(("RINGCC_", "HOROVOD_")) and name not in JOB_VARIABLES
    }


def worker_variables(
    placements: Sequence[RankPlacement],
    master_ports: tuple[int, int],
    job: tuple[str, str],
    timeout_s: float,
    nics: Sequence[str] | None = None,
    extra: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    gpus_by_host: Mapping[str, str] | None = None,
) -> list[dict[str, str]]:
    """The variables of each rank's worker, by rank. master_ports: rank 0's
    ports for ringcc's store and torch's; job: (job id, secret). The store's
    address is 127.0.0.1 when every rank runs on one host (ringcc then
    listens on loopback only), else rank 0's node address."""
    job_id, secret = job
    single_host = placements[0].local_size == len(placements)
    master_addr = "127.0.0.1" if single_host else placements[0].host
    common = driver_settings(environ or {})
    common["RINGCC_TIMEOUT_S"] = f"{timeout_s:g}"
    if nics:
        common["RINGCC_SOCKET_IFNAME"] = ",".join(nics)
    common.update(extra or {})
    result = []
    for placement in placements:
        variables = dict(common)
        if gpus_by_host and placement.host in gpus_by_host and "CUDA_VISIBLE_DEVICES" not in (extra or {}):
            variables["CUDA_VISIBLE_DEVICES"] = gpus_by_host[placement.host]
        variables.update(job_variables(placement, master_addr, master_ports[0], master_ports[1], secret, job_id))
        result.append(variables)
    return result
