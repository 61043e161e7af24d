"""SLURM, as the core reads it (core/rendezvous/slurm.h): the compressed host
list, the ports a step's stores derive from its job and step ids, and the
allocation that ringrun runs inside. Plain standard-library Python, so that
ringrun (ringcc.launch) and torch's env:// rendezvous (ringcc.slurm_torch)
use it without the compiled core.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

# core/rendezvous/slurm.h: kSlurmStorePorts, kSlurmFirstPort, kSlurmPortRange.
STORE_PORTS = 8
FIRST_PORT = 20000
PORT_RANGE = 12000
_MOST_HOSTS = 1_000_000

NODE_LIST_VARIABLES = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")


class SlurmError(ValueError):
    """SLURM's variables say something that cannot be read."""


def _bad_list(text: str, why: str) -> SlurmError:
    shown = text[:200] + ("..." if len(text) > 200 else "")
    return SlurmError(f"cannot read SLURM host list {shown!r}: {why}")


def _expand_ranges(ranges: str, text: str) -> list[str]:
    values: list[str] = []
    for part in ranges.split(","):
        low, dash, high = part.partition("-")
        high = high if dash else low
        if not (low.isdigit() and high.isdigit() and low.isascii() and high.isascii()) or max(len(low), len(high)) > 9:
            raise _bad_list(text, f"{part!r} in brackets is not a number or a range of numbers (such as 01-04)")
        first, last = int(low), int(high)
        if last < first:
            raise _bad_list(text, f"the range {part!r} ends below its start")
        if last - first + len(values) >= _MOST_HOSTS:
            raise _bad_list(text, "more than a million hosts")
        values.extend(str(n).zfill(len(low)) for n in range(first, last + 1))
    return values


def _expand_name(name: str, text: str) -> list[str]:
    open_at = name.find("[")
    if open_at < 0:
        if "]" in name:
            raise _bad_list(text, "']' without '['")
        return [name]
    close_at = name.find("]", open_at)
    if close_at < 0:
        raise _bad_list(text, "'[' without ']'")
    prefix, inner = name[:open_at], name[open_at + 1 : close_at]
    if "]" in prefix:
        raise _bad_list(text, "']' without '['")
    if "[" in inner:
        raise _bad_list(text, "'[' inside brackets")
    rests = _expand_name(name[close_at + 1 :], text)
    values = _expand_ranges(inner, text)
    if len(values) * len(rests) > _MOST_HOSTS:
        raise _bad_list(text, "more than a million hosts")
    return [prefix + value + rest for value in values for rest in rests]


def expand_host_list(text: str) -> list[str]:
    """SLURM's compressed host list expanded: "node[01-02,07],gpu-a1" ->
    ["node01", "node02", "node07", "gpu-a1"]; several brackets in a name give
    every combination, the first bracket slowest; a range keeps the zero
    padding of its first bound. SlurmError names what cannot be read."""
    hosts: list[str] = []
    depth, start = 0, 0
    for index, char in enumerate(text + ","):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if depth < 0:
            raise _bad_list(text, "']' without '['")
        if depth > 1:
            raise _bad_list(text, "'[' inside brackets")
        if char != "," or depth:
            continue
        name = text[start:index]
        if not name:
            raise _bad_list(text, "an empty host name")
        hosts.extend(_expand_name(name, text))
        start = index + 1
    if depth:
        raise _bad_list(text, "'[' without ']'")
    if any(not host for host in hosts):
        raise _bad_list(text, "an empty host name")
    return hosts


def store_ports(identity: str, salt: str) -> list[int]:
    """The ports a store of the step `identity` ("slurm:<job>.<step>") tries,
    in order (core/rendezvous/slurm.h, slurm_store_ports: the same ports)."""
    ports: list[int] = []
    for index in range(4 * STORE_PORTS):
        if len(ports) == STORE_PORTS:
            break
        digest = hashlib.sha256(f"{identity}/{salt}/{index}".encode()).digest()
        port = FIRST_PORT + int.from_bytes(digest[:4], "big") % PORT_RANGE
        if port not in ports:
            ports.append(port)
    return ports


def step_identity(environ: Mapping[str, str]) -> str:
    """The core's name for the job step ("slurm:<job>.<step>", launcher_job_identity), "" outside SLURM."""
    job = environ.get("SLURM_JOB_ID", "")
    if not job:
        return ""
    step = environ.get("SLURM_STEP_ID", "")
    return f"slurm:{job}" + (f".{step}" if step else "")


def step_nodes(environ: Mapping[str, str]) -> list[str]:
    """The step's nodes, in SLURM's order (task 0 runs on the first)."""
    for name in NODE_LIST_VARIABLES:
        if environ.get(name):
            return expand_host_list(environ[name])
    raise SlurmError("SLURM gives no node list (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST)")


def expand_counts(text: str, variable: str) -> list[int]:
    """SLURM's per-node counts: "2(x3),1" -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not match or int(match.group(1)) < 1:
            raise SlurmError(f"cannot read {variable}={text!r}: expected counts such as '2(x3),1'")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


def allocation_hosts(environ: Mapping[str, str]) -> list[tuple[str, int]] | None:
    """Inside an allocation (salloc, sbatch: SLURM_JOB_ID with a node list),
    its nodes and the tasks each may run: SLURM_JOB_NODELIST with
    SLURM_TASKS_PER_NODE (else SLURM_JOB_CPUS_PER_NODE, one task a CPU).
    None outside one. SlurmError when they disagree or cannot be read."""
    if not environ.get("SLURM_JOB_ID"):
        return None
    node_list = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not node_list:
        return None
    nodes = expand_host_list(node_list)
    variable = "SLURM_TASKS_PER_NODE" if environ.get("SLURM_TASKS_PER_NODE") else "SLURM_JOB_CPUS_PER_NODE"
    if not environ.get(variable):
        return [(node, 1) for node in nodes]
    counts = expand_counts(environ[variable], variable)
    if len(counts) != len(nodes):
        raise SlurmError(
            f"{variable}={environ[variable]!r} gives {len(counts)} counts for the {len(nodes)} nodes of {node_list!r}"
        )
    return list(zip(nodes, counts))
