"""Two "hosts" on one machine: two network namespaces joined by a veth pair,
2 ranks in each, started through ringrun's agent (`ip netns exec {host}`).
The ranks must find each other over TCP at the namespaces' addresses and see
local_size == 2, cross_size == 2. Needs root and a working `ip netns`;
skipped otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from rank_cases import CASES as COLLECTIVE_CASES
from rank_errors import CASES as ERROR_CASES

# The cases of the smaller layouts: topology plus each collective's main
# cases. The 2+2 layout with the default transports (hierarchical allreduce:
# shared memory within a host, TCP between hosts) runs every case.
ALL_CASES = ()
MAIN_CASES = (
    "topology",
    "allreduce/float32/*",
    "allreduce/int8/*",
    "allreduce/bfloat16/Sum/*",
    "allgather/*",
    "broadcast/float32/*",
    "reduce_scatter/float32/*",
    "alltoall/*",
    "barrier",
    "async/*",
    "grouped_allreduce*",
)
IP_TIMEOUT_S = 20


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result


@pytest.fixture(scope="module")
def two_namespaces():
    """Yields (namespace A, namespace B, A's address); removes both afterwards."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if shutil.which("ip") is None:
        pytest.skip("the `ip` command (iproute2) is not installed")
    pid = os.getpid()
    ns_a, ns_b = f"ringcc-test-{pid}-a", f"ringcc-test-{pid}-b"
    veth_a, veth_b = f"rcc{pid % 100000}a", f"rcc{pid % 100000}b"  # interface names: 15 characters at most
    subnet = f"10.231.{pid % 250 + 1}"
    created = []
    try:
        try:
            ip("netns", "add", ns_a)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            pytest.skip(f"cannot create a network namespace here: {error}")
        created.append(ns_a)
        ip("netns", "add", ns_b)
        created.append(ns_b)
        try:
            ip("link", "add", veth_a, "netns", ns_a, "type", "veth", "peer", "name", veth_b, "netns", ns_b)
        except RuntimeError as error:
            pytest.skip(f"cannot create a veth pair between network namespaces here: {error}")
        for ns, veth, address in ((ns_a, veth_a, f"{subnet}.1/24"), (ns_b, veth_b, f"{subnet}.2/24")):
            ip("-n", ns, "addr", "add", address, "dev", veth)
            ip("-n", ns, "link", "set", veth, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        ping = (
            subprocess.run(
                ["ip", "netns", "exec", ns_a, "ping", "-c", "1", "-W", "5", f"{subnet}.2"],
                capture_output=True,
                text=True,
                timeout=IP_TIMEOUT_S,
            )
            if shutil.which("ping")
            else None
        )
        if ping is not None and ping.returncode != 0:
            pytest.skip(f"the namespaces cannot reach each other: {ping.stdout}{ping.stderr}")
        yield ns_a, ns_b, f"{subnet}.1"
    finally:
        for ns in reversed(created):  # deleting a namespace deletes its end of the veth pair
            ip("netns", "del", ns, check=False)


# name: (ranks on host A, ranks on host B, extra environment, cases)
LAYOUTS = {
    "2+2-hierarchical": (2, 2, {}, ALL_CASES),
    "2+2-tcp-only": (2, 2, {"RINGCC_TRANSPORT": "tcp"}, MAIN_CASES),
    "2+1-uneven": (2, 1, {}, MAIN_CASES),
    # Every allreduce pipelined (none riding the agreement), down to one element.
    "2+2-pipelined": (2, 2, {"RINGCC_HIERARCHICAL_PIPELINE_BYTES": "1", "RINGCC_INLINE_BYTES": "0"}, MAIN_CASES),
    # Hierarchical collectives off through Horovod's name of the switch: one flat ring.
    "2+2-flat": (2, 2, {"HOROVOD_HIERARCHICAL_ALLREDUCE": "0"}, ("topology", "allreduce/float32/*")),
}


def expected_topology(on_a: int, on_b: int, ns_a: str, ns_b: str):
    """Per rank: (host, local_rank, local_size, cross_rank, cross_size), as ringrun places them."""
    hosts = [(ns_a, on_a), (ns_b, on_b)]
    layout = []
    for host, count in hosts:
        for local_rank in range(count):
            same = [h for h, c in hosts if c > local_rank]
            layout.append((host, local_rank, count, same.index(host), len(same)))
    return layout


def netns_run(ranks, namespaces, layout: str, script: str = "ranks/rank_cases.py"):
    """The group for `layout`, run once (the ranks' results are cached by name)."""
    ns_a, ns_b, master_addr = namespaces
    on_a, on_b, extra_env, cases = LAYOUTS[layout]
    env = {"RINGCC_TIMEOUT_S": "30", **extra_env}
    if script != "ranks/rank_cases.py":
        env["RINGCC_TIMEOUT_S"] = "10"  # a hang costs less
        cases = ()
    exported = []
    for name in ["PYTHONPATH", *env]:
        exported += ["-x", name]  # ranks started through an agent get only the job's variables and these
    return ranks.group(
        f"netns-{layout}-{script.rpartition('/')[2]}",
        on_a + on_b,
        script,
        env=env,
        cases=cases,
        timeout=180,
        launcher_options=[
            "-H",
            f"{ns_a}:{on_a},{ns_b}:{on_b}",
            "--agent",
            "ip netns exec {host}",
            "--master-addr",
            master_addr,
            *exported,
        ],
    )


CASE_PARAMS = [
    pytest.param(layout, case.name, id=f"{layout}:{case.name}")
    for layout, (on_a, on_b, _, cases) in LAYOUTS.items()
    for case in COLLECTIVE_CASES.select(on_a + on_b, (), list(cases))
]


@pytest.mark.parametrize("layout,case_name", CASE_PARAMS)
def test_case_across_hosts(ranks, two_namespaces, layout, case_name):
    netns_run(ranks, two_namespaces, layout).assert_case(case_name)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_topology_across_hosts(ranks, two_namespaces, layout):
    ns_a, ns_b, _ = two_namespaces
    on_a, on_b, extra_env, _ = LAYOUTS[layout]
    run = netns_run(ranks, two_namespaces, layout)
    run.assert_clean_exit()
    for rank, (host, local_rank, local_size, cross_rank, cross_size) in enumerate(
        expected_topology(on_a, on_b, ns_a, ns_b)
    ):
        start = run.start_record(rank)
        if "RINGCC_TRANSPORT" in extra_env or local_size == 1:
            assert start["transport"] == "tcp", f"rank {rank}: {start}"
        else:
            assert start["transport"] == "shm+tcp", f"rank {rank}: {start}"
        topology = run.results[rank]["cases"]["topology"]["message"]
        for fragment in (
            f"host={host}",
            f"local_rank={local_rank}",
            f"local_size={local_size}",
            f"cross_rank={cross_rank}",
            f"cross_size={cross_size}",
        ):
            assert fragment in topology.split(), f"rank {rank}: expected {fragment} in {topology!r}"
        algorithms = topology.partition("algorithms=")[2].split()[0].split(",")
        # Hierarchical where every host runs several ranks and nothing turned it off.
        switched_off = "RINGCC_TRANSPORT" in extra_env or "HOROVOD_HIERARCHICAL_ALLREDUCE" in extra_env
        hierarchical = on_a == on_b > 1 and not switched_off
        assert ("hierarchical" in algorithms) == hierarchical, f"rank {rank}: host algorithms {algorithms}"


ERRORS_LAYOUT = "2+2-hierarchical"


@pytest.mark.parametrize("case_name", [case.name for case in ERROR_CASES.select(4, ())])
def test_error_case_across_hosts(ranks, two_namespaces, case_name):
    """The error cases with shared memory within hosts and TCP between them."""
    netns_run(ranks, two_namespaces, ERRORS_LAYOUT, "ranks/rank_errors.py").assert_case(case_name)
