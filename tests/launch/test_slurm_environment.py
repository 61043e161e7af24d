"""ringcc.init() from the variables srun gives its tasks, set here by hand
(no SLURM needed; tests/launch/test_slurm.py runs a real one): two steps of
one job at once on this host, the first port derived from one of them held
by a stranger, both meet their own ranks; a master port, or a master
address, set alone replacing only its half (the store's port, or its node);
and the errors a task gets, on every rank, where it cannot go on: several
nodes without a job secret, a node list that cannot be read, rank 0 not on
the step's first node.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest
from rank_groups import rank_environment, run_at_once

from ringcc import slurm

HERE = Path(__file__).resolve().parent
JOB_TIMEOUT_S = 90


def task_env(job: str, step: str, procid: int, ntasks: int, nodes: int = 1, **extra: str) -> dict[str, str]:
    env = rank_environment({"RINGCC_TIMEOUT_S": "30"})
    for name in [name for name in env if name.startswith(("SLURM_", "MASTER_")) or name in ("RANK", "WORLD_SIZE")]:
        del env[name]
    env.update(
        {
            "SLURM_JOB_ID": job,
            "SLURM_STEP_ID": step,
            "SLURM_PROCID": str(procid),
            "SLURM_NTASKS": str(ntasks),
            "SLURM_STEP_NUM_NODES": str(nodes),
            "SLURM_STEP_NODELIST": "cn1" if nodes == 1 else f"cn[1-{nodes}]",
            **extra,
        }
    )
    return env


def test_two_steps_at_once_one_with_its_first_port_taken():
    job = str(900000 + int(time.time()) % 99999)
    stranger = socket.socket()
    stranger.bind(("0.0.0.0", slurm.store_ports(f"slurm:{job}.1", "store")[0]))
    stranger.listen()
    try:
        commands = [
            (
                [sys.executable, str(HERE / "slurm_job.py"), "--only-core"],
                task_env(job, step, procid, 2, RINGCC_LOG_LEVEL="info"),
            )
            for step in ("0", "1")
            for procid in range(2)
        ]
        results = run_at_once(commands, JOB_TIMEOUT_S)
    finally:
        stranger.close()
    for (returncode, output), (_, env) in zip(results, commands):
        assert returncode == 0, output[-4000:]
        (line,) = [line for line in output.splitlines() if line.startswith("SLURM_JOB_RESULT ")]
        found = json.loads(line.split(" ", 1)[1])
        assert found["core"] == {"rank": int(env["SLURM_PROCID"]), "size": 2, "local_size": 2, "allreduce_ok": True}
    # Rank 0 of step 1 says which port it took instead.
    assert "the ports before it" in results[2][1], results[2][1][-4000:]
    assert "the ports before it" not in results[0][1], results[0][1][-4000:]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def store_ports_of_a_step(commands) -> list[int]:
    """Runs a step's tasks (slurm_job.py --only-core --sockets); the ports rank 0 listens on at 127.0.0.1."""
    results = run_at_once(commands, JOB_TIMEOUT_S)
    everything = "\n".join(output[-3000:] for _, output in results)
    found = []
    for returncode, output in results:
        assert returncode == 0, everything
        (line,) = [line for line in output.splitlines() if line.startswith("SLURM_JOB_RESULT ")]
        found.append(json.loads(line.split(" ", 1)[1]))
    assert all(f["core"].get("allreduce_ok") for f in found), everything
    (rank0,) = [f for f in found if f["core"]["rank"] == 0]
    return [port for address, port in rank0["listen"] if address == "127.0.0.1"]


SOCKETS_JOB = [sys.executable, str(HERE / "slurm_job.py"), "--only-core", "--sockets"]


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads rank 0's sockets from /proc (Linux)")
@pytest.mark.parametrize(("variable", "offset"), [("RINGCC_MASTER_PORT", 0), ("MASTER_PORT", 1)])
def test_a_master_port_alone_keeps_the_first_node_of_the_step(variable, offset):
    """docs/launchers.md: set alone, the port replaces only its half. The
    step spans two nodes, the first "localhost" (so the ranks run here): the
    store serves on the port given (MASTER_PORT + 1: torch keeps MASTER_PORT),
    on none derived from the step, at the first node: a loopback name, so no
    secret is needed (at cn2 the ranks would need one, and fail)."""
    job, port = str(910000 + int(time.time()) % 89999), free_port() - offset
    nodes = {"SLURM_STEP_NODELIST": "localhost,cn2"}
    commands = [
        (SOCKETS_JOB, task_env(job, "0", procid, 2, nodes=2, **nodes, **{variable: str(port)})) for procid in range(2)
    ]
    store_ports = store_ports_of_a_step(commands)
    assert port + offset in store_ports, store_ports
    assert not set(slurm.store_ports(f"slurm:{job}.0", "store")) & set(store_ports), store_ports


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads rank 0's sockets from /proc (Linux)")
@pytest.mark.parametrize("variable", ["RINGCC_MASTER_ADDR", "MASTER_ADDR"])
def test_a_master_address_alone_keeps_the_ports_derived_from_the_step(variable):
    """docs/launchers.md: set alone, the address replaces only its half. The
    step spans nodes cn1 and cn2 (no such hosts): the ranks meet only at the
    address given, 127.0.0.1 (a loopback address: no secret needed), on a
    port derived from the job and step."""
    job = str(920000 + int(time.time()) % 79999)
    commands = [(SOCKETS_JOB, task_env(job, "3", procid, 2, nodes=2, **{variable: "127.0.0.1"})) for procid in range(2)]
    store_ports = store_ports_of_a_step(commands)
    assert set(slurm.store_ports(f"slurm:{job}.3", "store")) & set(store_ports), store_ports


INIT = [sys.executable, "-c", "import ringcc; ringcc.init()"]


def test_several_nodes_without_a_secret_fail_on_every_rank_saying_what_to_set():
    results = run_at_once([(INIT, task_env("77", "0", procid, 2, nodes=2)) for procid in range(2)], JOB_TIMEOUT_S)
    for returncode, output in results:
        assert returncode != 0 and "has no job secret" in output, output[-3000:]
        assert "export RINGCC_SECRET=" in output and "docs/launchers.md" in output, output[-3000:]


def test_a_node_list_that_cannot_be_read_is_named():
    env = task_env("78", "0", 1, 2, nodes=2, SLURM_STEP_NODELIST="node[1-", RINGCC_SECRET="s")
    ((returncode, output),) = run_at_once([(INIT, env)], JOB_TIMEOUT_S)
    assert returncode != 0 and "cannot read SLURM host list 'node[1-'" in output, output[-3000:]


def test_rank_0_off_the_first_node_says_what_to_set():
    env = task_env("79", "0", 0, 2, nodes=2, SLURMD_NODENAME="node5", RINGCC_SECRET="s")
    ((returncode, output),) = run_at_once([(INIT, env)], JOB_TIMEOUT_S)
    assert returncode != 0 and "rank 0 runs on SLURM node node5, not on cn1" in output, output[-3000:]
    assert "RINGCC_MASTER_ADDR" in output, output[-3000:]
