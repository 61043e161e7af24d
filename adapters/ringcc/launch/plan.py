"""The job's plan: where each rank runs, its environment and the command that
starts it (directly, or through an agent).
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
from collections.abc import Mapping, Sequence

from ringcc.launch.agents import DEFAULT_AGENT, agent_command, with_ssh_options
from ringcc.launch.allocation import SRUN_AGENT, allocation_hosts, is_this_node
from ringcc.launch.errors import LaunchError
from ringcc.launch.hosts import (
    BIND_CHOICES,
    Host,
    bind_cpus,
    free_ports,
    is_local_host,
    parse_hostfile,
    parse_hosts,
    place_ranks,
    unbracket,
)
from ringcc.launch.processes import RankLaunch
from ringcc.launch.variables import (
    NETWORK_INTERFACE_VARIABLE,
    RINGRUN_REPORTS_VARIABLE,
    SECRET_VARIABLE,
    agent_forwarded_variables,
    exported_variables,
    job_variables,
    one_thread_per_rank,
)


def plan_job(args: argparse.Namespace, command: Sequence[str], environ: Mapping[str, str]) -> list[RankLaunch]:
    """Decides where each rank runs, its environment and the command that starts it."""
    if args.hosts is not None and args.hostfile is not None:
        raise LaunchError("give either -H or --hostfile, not both")
    if args.hosts is not None:
        hosts: list[Host] | None = parse_hosts(args.hosts)
    elif args.hostfile is not None:
        hosts = parse_hostfile(args.hostfile)
    else:
        hosts = allocation_hosts(environ)
    in_allocation = hosts is not None and args.hosts is None and args.hostfile is None
    if hosts is None and args.agent is not None:
        raise LaunchError("--agent needs the hosts to start ranks on (-H or --hostfile)")

    if hosts is None:
        num_ranks = 1 if args.num_proc is None else args.num_proc
        placements = place_ranks([Host(socket.gethostname(), max(num_ranks, 1))], num_ranks)
    else:
        num_ranks = sum(host.slots for host in hosts) if args.num_proc is None else args.num_proc
        placements = place_ranks(hosts, num_ranks)
    default_agent = SRUN_AGENT if in_allocation else DEFAULT_AGENT
    agent = with_ssh_options(
        args.agent if args.agent is not None else default_agent,
        args.ssh_connect_timeout,
        getattr(args, "ssh_port", None),
        getattr(args, "ssh_identity_file", None),
    )

    def through_agent(host: str) -> bool:
        if hosts is None:
            return False
        if args.agent is not None:
            return True
        return not (is_this_node(host, environ) if in_allocation else is_local_host(host))

    first_host = placements[0].host
    if args.master_addr:
        master_addr = unbracket(args.master_addr)
    elif not any(through_agent(p.host) for p in placements):
        master_addr = "127.0.0.1"
    elif through_agent(first_host):
        master_addr = first_host
    else:  # rank 0 runs here, some ranks elsewhere: they need a name for this machine
        master_addr = socket.gethostname()

    if args.master_port is not None:
        master_port = args.master_port
        (torch_port,) = free_ports(1, avoid=[master_port])
    else:
        master_port, torch_port = free_ports(2)
    secret = secrets.token_hex(32)
    job_id = secrets.token_hex(8)

    exported = exported_variables(args.export, environ)
    forwarded_to_agent_ranks = agent_forwarded_variables(environ, exported, args.env_all)
    local_base = {**environ, **exported}
    cwd = os.getcwd()

    bind = getattr(args, "bind_to", "none") or "none"
    if bind not in BIND_CHOICES:
        raise LaunchError(f"--bind-to must be one of {', '.join(BIND_CHOICES)}, not {bind!r}")
    available = sorted(os.sched_getaffinity(0)) if bind == "core" else []

    launches = []
    for placement in placements:
        rank_variables = job_variables(placement, master_addr, master_port, torch_port, secret, job_id)
        if args.network_interface:
            rank_variables[NETWORK_INTERFACE_VARIABLE] = args.network_interface
        rank_variables[RINGRUN_REPORTS_VARIABLE] = "1"
        if through_agent(placement.host):
            rank_env = {**forwarded_to_agent_ranks}
            rank_env.setdefault("PYTHONUNBUFFERED", environ.get("PYTHONUNBUFFERED", "1"))
            one_thread_per_rank(rank_env, environ, placement)
            rank_env.update(rank_variables)
            secret_line = (rank_env.pop(SECRET_VARIABLE) + "\n").encode()
            argv = agent_command(agent, placement.host, rank_env, command, cwd)
            launches.append(RankLaunch(placement, argv, dict(environ), through_agent=True, stdin=secret_line))
        else:
            rank_env = {**local_base}
            rank_env.setdefault("PYTHONUNBUFFERED", "1")
            one_thread_per_rank(rank_env, environ, placement)
            rank_env.update(rank_variables)
            cpus = bind_cpus(placement.local_rank, available) if bind == "core" else None
            launches.append(RankLaunch(placement, list(command), rank_env, through_agent=False, cpus=cpus))
    return launches
