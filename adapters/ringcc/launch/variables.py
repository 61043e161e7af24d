"""The job's variables: what ringrun tells each rank about the job, the
variables -x and --env-all pass on, and the job secret's name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ringcc.launch.errors import LaunchError
from ringcc.launch.hosts import RankPlacement

# Variables that describe the launcher's own shell or host; --env-all does not
# copy them to ranks started through an agent.
HOST_SPECIFIC_VARIABLES = frozenset({"HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_"})

VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The job secret reaches ranks started through an agent on their standard
# input (ringcc.launch.agents), never on a command line.
SECRET_VARIABLE = "RINGCC_SECRET"

# --network-interface: what the ranks' core reads (core/os/net_interface.h).
NETWORK_INTERFACE_VARIABLE = "RINGCC_SOCKET_IFNAME"

# Tells ringcc in a rank that ringrun reports an interrupt and the job's
# first failure, so the rank prints no traceback that would only repeat it
# (ringcc/__init__.py; docs/launchers.md, "When a job fails").
RINGRUN_REPORTS_VARIABLE = "RINGCC_RINGRUN_REPORTS"


def job_variables(
    placement: RankPlacement, master_addr: str, master_port: int, torch_port: int, secret: str, job_id: str = ""
) -> dict[str, str]:
    """The variables that tell one rank about the job: ringcc's, torch's and Horovod's.
    RINGCC_JOB_ID names the job, so that its ranks never pair with another
    job's given the same port."""
    p = placement
    variables = {
        "RINGCC_JOB_ID": job_id,
        "RINGCC_RANK": p.rank,
        "RINGCC_SIZE": p.size,
        "RINGCC_LOCAL_RANK": p.local_rank,
        "RINGCC_LOCAL_SIZE": p.local_size,
        "RINGCC_CROSS_RANK": p.cross_rank,
        "RINGCC_CROSS_SIZE": p.cross_size,
        "RINGCC_HOSTNAME": p.host,
        "RINGCC_MASTER_ADDR": master_addr,
        "RINGCC_MASTER_PORT": master_port,
        "RINGCC_SECRET": secret,
        "RANK": p.rank,
        "WORLD_SIZE": p.size,
        "LOCAL_RANK": p.local_rank,
        "LOCAL_WORLD_SIZE": p.local_size,
        "GROUP_RANK": p.host_index,
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": torch_port,
        "HOROVOD_RANK": p.rank,
        "HOROVOD_SIZE": p.size,
        "HOROVOD_LOCAL_RANK": p.local_rank,
        "HOROVOD_LOCAL_SIZE": p.local_size,
        "HOROVOD_CROSS_RANK": p.cross_rank,
        "HOROVOD_CROSS_SIZE": p.cross_size,
    }
    return {name: str(value) for name, value in variables.items()}


def exported_variables(specs: Sequence[str], environ: Mapping[str, str]) -> dict[str, str]:
    """-x NAME=VALUE and -x NAME (the launcher's value)."""
    exported = {}
    for spec in specs:
        name, equals, value = spec.partition("=")
        if not VARIABLE_NAME.fullmatch(name):
            raise LaunchError(f"-x {spec}: {name!r} is not a variable name")
        if not equals:
            if name not in environ:
                raise LaunchError(f"-x {name}: {name} is not set in ringrun's environment")
            value = environ[name]
        exported[name] = value
    return exported


def agent_forwarded_variables(
    environ: Mapping[str, str], exported: Mapping[str, str], env_all: bool, left_out: Sequence[str] = ()
) -> dict[str, str]:
    """What a rank started through an agent gets of ringrun's environment: the
    -x variables, and with --env-all every variable but the host's own ones
    (and `left_out`)."""
    forwarded: dict[str, str] = {}
    if env_all:
        forwarded = {
            name: value
            for name, value in environ.items()
            if VARIABLE_NAME.fullmatch(name) and name not in HOST_SPECIFIC_VARIABLES and name not in left_out
        }
    forwarded.update(exported)
    return forwarded


def one_thread_per_rank(rank_env, environ, placement) -> None:
    """OMP_NUM_THREADS=1 for ranks that share a host, unless the user set it
    (as torchrun does): thread pools of OpenMP/OpenBLAS in every rank would
    otherwise compete for the same cores, and their idle spinning slows
    communication."""
    if placement.local_size > 1 and "OMP_NUM_THREADS" not in environ:
        rank_env["OMP_NUM_THREADS"] = "1"


# Variables of an outer job that must not reach elastic workers: they get
# theirs at init() (ringcc.launch.elastic_driver).
OUTER_JOB_VARIABLES = (
    "RINGCC_RANK",
    "RINGCC_SIZE",
    "RINGCC_LOCAL_RANK",
    "RINGCC_LOCAL_SIZE",
    "RINGCC_CROSS_RANK",
    "RINGCC_CROSS_SIZE",
    "RINGCC_MASTER_ADDR",
    "RINGCC_MASTER_PORT",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "HOROVOD_RANK",
    "HOROVOD_SIZE",
    "HOROVOD_LOCAL_RANK",
    "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK",
    "HOROVOD_CROSS_SIZE",
)
