"""The MPI peer's job across hosts: which hosts, how mpirun reaches them.

The bench's ranks tell rank 0 where they run (host name as the launcher
gave it, and the address with which they reach rank 0's store); rank 0 then
starts mpirun beside itself with the same hosts and slots, reaching the other
hosts through the same agent as ringrun (--agent), e.g. `ip netns exec
{host}` for network-namespace hosts:

    mpirun --host ADDR0:SLOTS,ADDR1:SLOTS --prtemca plm_ssh_agent WRAPPER
           --prtemca oob_tcp_if_include IF --mca btl self,sm,tcp
           --mca btl_tcp_if_include IF --mca pml ob1 --mca mpi_yield_when_idle 1

Hosts are given to mpirun by address (the names of namespace hosts resolve
nowhere); WRAPPER, a script in a temporary directory, maps the address back to
the host's name and runs the daemon's command through the agent, as ssh
would run it (one shell command line).

With own_hostnames (hosts that share one kernel, as network namespaces do),
mpirun and each daemon run in a UTS namespace of their own named as their
host (`unshare --uts`): Open MPI tells nodes apart by host name, and would
otherwise take every namespace for one node and pass its messages through
shared memory. mpi_yield_when_idle=1: MPI ranks that wait yield the CPU
rather than spin, which hosts sharing cores need (spinning ranks starve the
ones they wait for: with Open MPI's default, an 8 B allreduce across two
namespace hosts took milliseconds).
"""

from __future__ import annotations

import os
import shlex
import socket
from dataclasses import dataclass, field

from .host_addresses import address_toward

WRAPPER_NAME = "mpi-agent.sh"


@dataclass
class MpiHosts:
    names: list[str]  # host names as the launcher gave them, rank 0's first
    addresses: list[str]  # the address mpirun reaches each host at
    slots: list[int]  # ranks on each host
    agent: str  # the remote agent's template, {host} replaced by the name
    own_hostnames: bool = False
    interface: str | None = None  # Open MPI's *_if_include (a name or a CIDR subnet)
    extra: list[str] = field(default_factory=list)

    def host_option(self) -> str:
        return ",".join(f"{a}:{s}" for a, s in zip(self.addresses, self.slots))


def rank_place() -> str:
    """ "host address" of this rank: the launcher's host name, and the local
    address that routes to the master (rank 0's store)."""
    host = os.environ.get("RINGCC_HOSTNAME") or socket.gethostname()
    master = os.environ.get("RINGCC_MASTER_ADDR") or os.environ.get("MASTER_ADDR") or "127.0.0.1"
    return f"{host} {address_toward(master) or master}"


def hosts_from_places(places: list[str], agent: str, own_hostnames: bool, interface: str | None) -> MpiHosts:
    """MpiHosts from every rank's rank_place(), in rank order."""
    names, addresses, slots = [], [], []
    for place in places:
        host, _, address = place.partition(" ")
        if host in names:
            slots[names.index(host)] += 1
        else:
            names.append(host)
            addresses.append(address)
            slots.append(1)
    return MpiHosts(names, addresses, slots, agent, own_hostnames, interface)


def interface_from_env() -> str | None:
    """ringrun's --network-interface (RINGCC_SOCKET_IFNAME) when Open MPI takes
    it as it is: one interface name or one subnet, not a list or an exclusion."""
    value = os.environ.get("RINGCC_SOCKET_IFNAME", "").strip()
    if not value or any(c in value for c in ",^="):
        return None
    return value


def write_wrapper(hosts: MpiHosts, directory: str) -> str:
    """The plm_ssh_agent script: `WRAPPER HOST COMMAND...` runs COMMAND (one
    shell line, as ssh would) on HOST through the agent."""
    cases = "\n".join(
        f"  {shlex.quote(address)}|{shlex.quote(name)}) name={shlex.quote(name)} ;;"
        for name, address in zip(hosts.names, hosts.addresses)
    )
    words = shlex.split(hosts.agent)
    if any("{host}" in w for w in words):
        # Each word quoted around the host's name, which the shell fills in.
        agent = " ".join('"$name"'.join(shlex.quote(part) if part else "" for part in w.split("{host}")) for w in words)
    else:
        agent = " ".join(shlex.quote(w) for w in words) + ' "$name"'
    if hosts.own_hostnames:
        run = f'exec {agent} unshare --uts sh -c \'hostname "$1" && exec sh -c "$2"\' mpi-agent "$name" "$*"'
    else:
        run = f'exec {agent} sh -c "$*"'
    script = (
        "#!/bin/sh\n"
        "# mpirun's remote agent for the bench's MPI peer: HOST COMMAND...\n"
        'host="$1"; shift\n'
        'case "$host" in\n'
        f"{cases}\n"
        '  *) echo "mpi agent: unknown host $host" >&2; exit 127 ;;\n'
        "esac\n"
        f"{run}\n"
    )
    path = os.path.join(directory, WRAPPER_NAME)
    with open(path, "w") as f:
        f.write(script)
    os.chmod(path, 0o755)
    return path


def mpirun_options(hosts: MpiHosts, wrapper: str) -> list[str]:
    """mpirun's options for a job across `hosts`."""
    opts = ["--host", hosts.host_option(), "--prtemca", "plm_ssh_agent", wrapper]
    if hosts.interface:
        opts += ["--prtemca", "oob_tcp_if_include", hosts.interface]
    opts += ["--mca", "btl", "self,sm,tcp", "--mca", "pml", "ob1", "--mca", "mpi_yield_when_idle", "1"]
    if hosts.interface:
        opts += ["--mca", "btl_tcp_if_include", hosts.interface]
    return opts + list(hosts.extra)


def launch_prefix(hosts: MpiHosts) -> list[str]:
    """What mpirun runs under: a UTS namespace named as rank 0's host when
    the hosts share a kernel, else nothing."""
    if not hosts.own_hostnames:
        return []
    return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hosts.names[0]]
