"""ringrun inside a SLURM allocation (salloc, sbatch): without -H or
--hostfile the allocation's nodes and task counts are the host list, and
ranks on other nodes start through srun (a job step of one task on that
node, sharing the allocation's resources) instead of ssh.
"""

from __future__ import annotations

from collections.abc import Mapping

from ringcc import slurm
from ringcc.launch.errors import LaunchError
from ringcc.launch.hosts import Host, is_local_host

# One task on the named node, alongside the allocation's other steps
# (--overlap: ringrun's own step may hold every CPU); a rank that fails ends
# its step, and ringrun sees it fail.
SRUN_AGENT = "srun --nodes=1 --ntasks=1 --overlap --nodelist={host} --kill-on-bad-exit=1 --quiet"


def allocation_hosts(environ: Mapping[str, str]) -> list[Host] | None:
    """The allocation's nodes and task counts as a host list; None outside
    one. LaunchError when SLURM's variables cannot be read."""
    try:
        nodes = slurm.allocation_hosts(environ)
    except slurm.SlurmError as error:
        raise LaunchError(f"inside a SLURM allocation: {error}; give the hosts with -H instead") from None
    if nodes is None:
        return None
    return [Host(name, slots) for name, slots in nodes]


def is_this_node(host: str, environ: Mapping[str, str]) -> bool:
    """Whether `host`, a node of the allocation, is where ringrun runs: the
    node SLURM runs this step on (SLURMD_NODENAME, e.g. in a batch script),
    or one of this machine's names."""
    return host == environ.get("SLURMD_NODENAME") or is_local_host(host)
