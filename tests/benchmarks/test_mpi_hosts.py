"""Tests of the MPI peer's job across hosts (adapters/ringcc/bench/mpi_hosts.py): the hosts
and slots from the ranks' places, the agent script mpirun runs, and
mpirun's options. The script is run for real, through an agent that only
sets a variable, so no second host is needed."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ringcc.bench.mpi_hosts import MpiHosts, hosts_from_places, launch_prefix, mpirun_options, write_wrapper  # noqa: E402
from ringcc.bench.peers_mpi import mpirun_command  # noqa: E402

PLACES = ["a 10.0.0.1", "a 10.0.0.1", "b 10.0.0.2", "b 10.0.0.2", "c 10.0.0.3"]


def test_hosts_from_places_in_rank_order_with_slots():
    hosts = hosts_from_places(PLACES, "ip netns exec {host}", True, "10.0.0.0/24")
    assert hosts.names == ["a", "b", "c"]
    assert hosts.addresses == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert hosts.slots == [2, 2, 1]
    assert hosts.host_option() == "10.0.0.1:2,10.0.0.2:2,10.0.0.3:1"


def run_wrapper(path, host, command):
    return subprocess.run([path, host, command], capture_output=True, text=True, timeout=30)


def test_wrapper_runs_the_command_through_the_agent_on_the_named_host(tmp_path):
    hosts = hosts_from_places(PLACES, "env SEEN_HOST={host}", False, None)
    path = write_wrapper(hosts, str(tmp_path))
    # mpirun names the host by address; the agent gets its name.
    result = run_wrapper(path, "10.0.0.2", 'echo "on $SEEN_HOST"; echo two words')
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["on b", "two words"]
    assert run_wrapper(path, "c", 'echo "$SEEN_HOST"').stdout.strip() == "c"


def test_wrapper_refuses_an_unknown_host(tmp_path):
    path = write_wrapper(hosts_from_places(PLACES, "env X={host}", False, None), str(tmp_path))
    result = run_wrapper(path, "10.9.9.9", "echo ran")
    assert result.returncode == 127
    assert "ran" not in result.stdout and "unknown host 10.9.9.9" in result.stderr


def test_wrapper_with_own_hostnames_names_the_uts_namespace(tmp_path):
    hosts = MpiHosts(["h0"], ["10.0.0.1"], [1], "env", own_hostnames=True)
    text = Path(write_wrapper(hosts, str(tmp_path))).read_text()
    assert "unshare --uts" in text and 'hostname "$1"' in text


def test_mpirun_options_across_hosts():
    hosts = hosts_from_places(PLACES, "ip netns exec {host}", True, "10.0.0.0/24")
    opts = mpirun_options(hosts, "/tmp/agent.sh")
    pairs = {(opts[i], opts[i + 1]): opts[i + 2] for i in range(len(opts) - 2) if opts[i].startswith("--")}
    assert opts[:2] == ["--host", "10.0.0.1:2,10.0.0.2:2,10.0.0.3:1"]
    assert pairs[("--prtemca", "plm_ssh_agent")] == "/tmp/agent.sh"
    assert pairs[("--prtemca", "oob_tcp_if_include")] == "10.0.0.0/24"
    assert pairs[("--mca", "btl")] == "self,sm,tcp"
    assert pairs[("--mca", "btl_tcp_if_include")] == "10.0.0.0/24"
    assert pairs[("--mca", "mpi_yield_when_idle")] == "1"
    assert pairs[("--mca", "pml")] == "ob1"


def test_mpirun_runs_under_a_uts_namespace_named_as_rank_0s_host():
    hosts = hosts_from_places(PLACES, "ip netns exec {host}", True, None)
    assert launch_prefix(hosts)[:2] == ["unshare", "--uts"] and launch_prefix(hosts)[-1] == "a"
    cmd = mpirun_command(5, ["--json", "x"], (), hosts, "/tmp/agent.sh")
    assert cmd[: len(launch_prefix(hosts))] == launch_prefix(hosts)
    assert "--oversubscribe" in cmd  # namespace hosts share the machine's cores
    assert cmd[-4:] == ["-m", "ringcc.bench.peers_mpi", "--json", "x"]
    assert launch_prefix(hosts_from_places(PLACES, "ssh {host}", False, None)) == []
