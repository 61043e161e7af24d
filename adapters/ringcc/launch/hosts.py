"""Hosts and placement: the host list (-H, --hostfile), which hosts are this
machine, where each rank runs and its coordinates in the job, the cores a
rank is bound to (--bind-to core), and free ports for the job's stores.

The free-port helper itself is ringcc.free_ports, shared with the workers'
side (ringcc.elastic, ringcc.torchrun), which never imports ringcc.launch.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass

from ringcc.free_ports import dual_stack_socket, free_ports
from ringcc.launch.errors import LaunchError

__all__ = ["dual_stack_socket", "free_ports"]


@dataclass(frozen=True)
class Host:
    name: str
    slots: int


@dataclass(frozen=True)
class RankPlacement:
    """Where one rank runs and its coordinates in the job."""

    rank: int
    size: int
    host: str
    host_index: int  # index among the hosts that got ranks
    local_rank: int
    local_size: int
    cross_rank: int  # index among the ranks with the same local_rank
    cross_size: int


def _parse_slots(text: str, where: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise LaunchError(f"{where}: the slot count must be a positive integer, got {text!r}")
    return int(text)


def parse_host_entry(entry: str, where: str = "-H") -> Host:
    """Parses "host", "host:slots" or "[ipv6]:slots"."""
    entry = entry.strip()
    name, slots = entry, 1
    if entry.startswith("["):
        close = entry.find("]")
        rest = entry[close + 1 :] if close >= 0 else ""
        if close < 0 or (rest and not rest.startswith(":")):
            raise LaunchError(f"{where}: cannot read host {entry!r}")
        name = entry[1:close]
        if rest:
            slots = _parse_slots(rest[1:], where)
    elif entry.count(":") == 1:
        name, _, count = entry.partition(":")
        slots = _parse_slots(count, where)
    if not name:
        raise LaunchError(f"{where}: empty host name in {entry!r}")
    return Host(name, slots)


def parse_hosts(spec: str) -> list[Host]:
    """Parses -H: "host1:4,host2:4"; a host without a count has one slot."""
    hosts = [parse_host_entry(entry) for entry in spec.split(",") if entry.strip()]
    if not hosts:
        raise LaunchError("-H: no hosts given")
    _check_unique(hosts, "-H")
    return hosts


def parse_hostfile(path: str) -> list[Host]:
    """Reads lines "host slots=N", "host:N" or "host"; "#" starts a comment."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.readlines()
    except OSError as error:
        raise LaunchError(f"--hostfile: {error}") from None
    hosts = []
    for number, line in enumerate(lines, start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{path}:{number}"
        host = parse_host_entry(words[0], where)
        for word in words[1:]:
            key, equals, value = word.partition("=")
            if key != "slots" or not equals:
                raise LaunchError(f"{where}: expected 'slots=N', got {word!r}")
            host = Host(host.name, _parse_slots(value, where))
        hosts.append(host)
    if not hosts:
        raise LaunchError(f"--hostfile: no hosts in {path}")
    _check_unique(hosts, path)
    return hosts


def _check_unique(hosts: Sequence[Host], where: str) -> None:
    seen = set()
    for host in hosts:
        if host.name in seen:
            raise LaunchError(f"{where}: host {host.name!r} is listed twice")
        seen.add(host.name)


def place_ranks(hosts: Sequence[Host], num_ranks: int) -> list[RankPlacement]:
    """Fills the hosts' slots in order with ranks 0..num_ranks-1."""
    total_slots = sum(host.slots for host in hosts)
    if num_ranks < 1:
        raise LaunchError(f"-np must be at least 1, got {num_ranks}")
    if num_ranks > total_slots:
        raise LaunchError(f"-np {num_ranks} is more than the {total_slots} slots of the host list")
    ranks_per_host = []  # (host name, number of ranks), hosts without ranks left out
    remaining = num_ranks
    for host in hosts:
        if remaining == 0:
            break
        count = min(host.slots, remaining)
        ranks_per_host.append((host.name, count))
        remaining -= count
    hosts_with_local_rank: dict[int, int] = {}
    for _, count in ranks_per_host:
        for local_rank in range(count):
            hosts_with_local_rank[local_rank] = hosts_with_local_rank.get(local_rank, 0) + 1
    placements = []
    seen_with_local_rank: dict[int, int] = {}
    for host_index, (name, count) in enumerate(ranks_per_host):
        for local_rank in range(count):
            cross_rank = seen_with_local_rank.get(local_rank, 0)
            seen_with_local_rank[local_rank] = cross_rank + 1
            placements.append(
                RankPlacement(
                    rank=len(placements),
                    size=num_ranks,
                    host=name,
                    host_index=host_index,
                    local_rank=local_rank,
                    local_size=count,
                    cross_rank=cross_rank,
                    cross_size=hosts_with_local_rank[local_rank],
                )
            )
    return placements


def local_host_names() -> frozenset:
    hostname = socket.gethostname()
    return frozenset(
        name.lower()
        for name in ("localhost", "localhost.localdomain", "127.0.0.1", "::1", hostname, hostname.split(".")[0])
    )


def is_local_host(name: str) -> bool:
    return name.lower() in local_host_names()


def unbracket(host: str) -> str:
    """ "[fd00::1]" -> "fd00::1" (an IPv6 address as URLs and host lists write it)."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


BIND_CHOICES = ("none", "core")


def cpu_cores(cpus: Sequence[int]) -> list[frozenset]:
    """The CPUs of `cpus` grouped by physical core (hardware threads of one
    core together, from /sys/devices/system/cpu), in order of their first CPU;
    each CPU a core of its own where the topology cannot be read."""
    cores: dict[tuple[str, str], list[int]] = {}
    for cpu in sorted(cpus):
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(base + "physical_package_id") as f:
                package = f.read().strip()
            with open(base + "core_id") as f:
                core = f.read().strip()
        except OSError:
            package, core = "cpu", str(cpu)
        cores.setdefault((package, core), []).append(cpu)
    return sorted((frozenset(c) for c in cores.values()), key=min)


def bind_cpus(local_rank: int, available: Sequence[int]) -> frozenset:
    """--bind-to core: local rank i runs on core i (its hardware threads),
    round robin when the ranks outnumber the cores."""
    cores = cpu_cores(available)
    return cores[local_rank % len(cores)]
