"""What ringcc reads from SLURM, on the Python side (ringcc.slurm): the
compressed host list, the per-node counts, the allocation ringrun takes its
hosts from, the ports derived from a step (the same as the core's:
tests/cpp/test_slurm_hosts.cc holds the same values), ringrun's plan inside
an allocation, and when torch's env:// fills in from SLURM."""

from __future__ import annotations

import argparse

import pytest

from ringcc import slurm, slurm_torch
from ringcc.launch import allocation
from ringcc.launch.errors import LaunchError
from ringcc.launch.plan import plan_job


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node1", ["node1"]),
        ("a,b,c", ["a", "b", "c"]),
        ("node[01-04,07],gpu-a[1-2]", ["node01", "node02", "node03", "node04", "node07", "gpu-a1", "gpu-a2"]),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("r[1-2]n[08-10]", ["r1n08", "r1n09", "r1n10", "r2n08", "r2n09", "r2n10"]),
        ("x[3]-ib", ["x3-ib"]),
    ],
)
def test_host_lists_expand_in_full(text, hosts):
    assert slurm.expand_host_list(text) == hosts


def test_a_thousand_hosts_expand():
    assert len(slurm.expand_host_list("big[1-1000]")) == 1000


@pytest.mark.parametrize(
    "text", ["", "a,,b", "n[1-2", "n1-2]", "n[2-1]", "n[a-b]", "n[]", "n[1-2]]", "n[[1]]", "n[1,]", "n[0-99999999]"]
)
def test_bad_host_lists_are_refused_naming_them(text):
    with pytest.raises(slurm.SlurmError, match="cannot read SLURM host list"):
        slurm.expand_host_list(text)


def test_a_range_that_ends_below_its_start_says_so():
    with pytest.raises(slurm.SlurmError, match="'5-3' ends below its start"):
        slurm.expand_host_list("n[5-3]")


def test_ports_match_the_cores():
    assert slurm.store_ports("slurm:42.0", "store") == [27221, 23144, 28751, 25711, 22622, 22143, 30346, 22269]
    assert slurm.store_ports("slurm:42.1", "store") == [28483, 25665, 28384, 30280, 29791, 24469, 22395, 20064]
    torch_ports = slurm.store_ports("slurm:42.0", "torch")
    assert len(set(torch_ports)) == slurm.STORE_PORTS
    assert all(slurm.FIRST_PORT <= p < slurm.FIRST_PORT + slurm.PORT_RANGE for p in torch_ports)


def test_step_identity_is_the_cores():
    assert slurm.step_identity({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "3"}) == "slurm:7.3"
    assert slurm.step_identity({"SLURM_JOB_ID": "7"}) == "slurm:7"
    assert slurm.step_identity({}) == ""


def test_counts_expand():
    assert slurm.expand_counts("2(x3),1", "SLURM_TASKS_PER_NODE") == [2, 2, 2, 1]
    with pytest.raises(slurm.SlurmError, match=r"cannot read SLURM_TASKS_PER_NODE='2\(x'"):
        slurm.expand_counts("2(x", "SLURM_TASKS_PER_NODE")


ALLOCATION = {"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "cn[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)"}


def test_allocation_hosts():
    assert slurm.allocation_hosts(ALLOCATION) == [("cn1", 2), ("cn2", 2)]
    cpus = {"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "cn[1-2]", "SLURM_JOB_CPUS_PER_NODE": "8,4"}
    assert slurm.allocation_hosts(cpus) == [("cn1", 8), ("cn2", 4)]
    assert slurm.allocation_hosts({"SLURM_JOB_ID": "12"}) is None
    assert slurm.allocation_hosts({}) is None


def test_an_allocation_whose_counts_disagree_is_a_launch_error():
    with pytest.raises(LaunchError, match="gives 1 counts for the 2 nodes"):
        allocation.allocation_hosts({**ALLOCATION, "SLURM_TASKS_PER_NODE": "4"})


def _args(**given) -> argparse.Namespace:
    values = dict(
        hosts=None,
        hostfile=None,
        agent=None,
        num_proc=None,
        master_addr=None,
        master_port=None,
        export=[],
        env_all=False,
        network_interface=None,
        ssh_connect_timeout=None,
        bind_to="none",
    )
    values.update(given)
    return argparse.Namespace(**values)


def test_ringrun_inside_an_allocation_starts_other_nodes_through_srun():
    environ = {**ALLOCATION, "SLURMD_NODENAME": "cn1", "PATH": "/usr/bin"}
    launches = plan_job(_args(), ["python", "train.py"], environ)
    assert [(launch.placement.host, launch.placement.local_rank) for launch in launches] == [
        ("cn1", 0),
        ("cn1", 1),
        ("cn2", 0),
        ("cn2", 1),
    ]
    here, there = launches[0], launches[2]
    assert not here.through_agent and here.argv == ["python", "train.py"]
    assert there.through_agent and there.argv[:1] == ["srun"] and "--nodelist=cn2" in there.argv
    assert "--overlap" in there.argv
    # The secret goes to srun on standard input, never on its command line.
    secret = here.env["RINGCC_SECRET"]
    assert there.stdin == (secret + "\n").encode() and not any(secret in word for word in there.argv)


def test_hosts_given_win_over_the_allocation():
    environ = {**ALLOCATION, "SLURMD_NODENAME": "cn1"}
    launches = plan_job(_args(hosts="localhost:2"), ["python", "train.py"], environ)
    assert [launch.placement.host for launch in launches] == ["localhost", "localhost"]
    assert not any(launch.through_agent for launch in launches)


def test_torch_env_fills_in_from_slurm_only_when_nothing_is_set():
    task = {"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "9"}
    assert slurm_torch.applies(task)
    assert not slurm_torch.applies({**task, "MASTER_ADDR": "h"})
    assert not slurm_torch.applies({**task, "MASTER_PORT": "29500"})
    assert not slurm_torch.applies({"SLURM_JOB_ID": "9"})
