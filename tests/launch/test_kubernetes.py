"""The Kubernetes examples (examples/kubernetes/) in the environment their
operators give each pod, reproduced on this machine: each pod a network
namespace with a host name of its own (`unshare --uts`), the pods joined on
one bridge (in a namespace of its own), and the names of the job's headless
service in each pod's /etc/hosts (/etc/netns/<namespace>/hosts, which `ip
netns exec` puts in place).

  - PyTorchJob (Kubeflow's training operator): a master and a worker pod,
    each `python examples/torch_ddp.py` with the operator's MASTER_ADDR,
    MASTER_PORT, WORLD_SIZE, RANK, PET_* and PYTHONUNBUFFERED, and the job
    secret from a file as a mounted Secret gives it (RINGCC_SECRET_FILE).
  - MPIJob (Kubeflow's MPI operator, Open MPI): the launcher pod runs
    mpirun with the operator's hostfile ("<job>-worker-<i>.<job>.<ns>.svc
    slots=N") and variables; `ssh` is a stand-in that enters the worker's
    namespace (the operator's pods run sshd).

They need root, `ip netns` and `unshare`, and are skipped otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rank_groups import rank_environment, run_at_once

REPO = Path(__file__).resolve().parents[2]
IP_TIMEOUT_S = 20
JOB_TIMEOUT_S = 150
NAMESPACE = "default"


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")


class Pods:
    """Network namespaces as pods on one bridge: pod i is 10.<n>.<m>.(i+1)."""

    def __init__(self, tag: str, names: list[str], subnet: str) -> None:
        self.tag = tag
        self.names = names
        self.subnet = subnet
        self.switch = f"{tag}-sw"
        self.namespaces = {name: f"{tag}-{i}" for i, name in enumerate(names)}
        self.addresses = {name: f"{subnet}.{i + 1}" for i, name in enumerate(names)}
        self.made: list[str] = []

    def create(self, aliases: dict[str, list[str]]) -> None:
        ip("netns", "add", self.switch)
        self.made.append(self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        hosts = "127.0.0.1 localhost\n" + "".join(
            f"{self.addresses[name]} {' '.join([name, *aliases.get(name, [])])}\n" for name in self.names
        )
        for i, name in enumerate(self.names):
            ns = self.namespaces[name]
            ip("netns", "add", ns)
            self.made.append(ns)
            ip("link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", f"p{i}", "netns", self.switch)
            ip("-n", self.switch, "link", "set", f"p{i}", "master", "br0", "up")
            ip("-n", ns, "addr", "add", f"{self.addresses[name]}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts)

    def remove(self) -> None:
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=IP_TIMEOUT_S)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)

    def command(self, name: str, argv: list[str]) -> list[str]:
        """argv run in pod `name`: its namespace, its host name."""
        return [
            "ip",
            "netns",
            "exec",
            self.namespaces[name],
            "unshare",
            "--uts",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            name,
            *argv,
        ]


def make_pods(tag: str, names: list[str], aliases: dict[str, list[str]] | None = None) -> Pods:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("network namespaces as pods need root")
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            pytest.skip(f"`{tool}` is not installed")
    pods = Pods(f"rck-{os.getpid() % 100000}-{tag}", names, f"10.{os.getpid() % 200 + 20}.{len(tag) + 60}")
    try:
        pods.create(aliases or {})
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        pods.remove()
        pytest.skip(f"cannot make network namespaces joined by a bridge here: {error}")
    return pods


def test_pytorchjob_pods_train_with_the_operators_variables(tmp_path):
    job = "ringcc-ddp"
    names = [f"{job}-master-0", f"{job}-worker-0"]
    pods = make_pods("pt", names)
    try:
        secret = tmp_path / "secret"
        secret.write_text(os.urandom(32).hex() + "\n")
        secret.chmod(0o400)
        commands = []
        for rank, name in enumerate(names):
            env = rank_environment(
                {
                    "MASTER_ADDR": f"{job}-master-0",
                    "MASTER_PORT": "23456",
                    "WORLD_SIZE": "2",
                    "RANK": str(rank),
                    "PET_NNODES": "2",
                    "PET_NPROC_PER_NODE": "1",
                    "PET_NODE_RANK": str(rank),
                    "PYTHONUNBUFFERED": "0",
                    "RINGCC_SECRET_FILE": str(secret),
                    "RINGCC_TIMEOUT_S": "60",
                }
            )
            argv = [sys.executable, str(REPO / "examples" / "torch_ddp.py"), "--steps", "5"]
            commands.append((pods.command(name, argv), env))
        results = run_at_once(commands, JOB_TIMEOUT_S, cwd=REPO)
    finally:
        pods.remove()
    for name, (returncode, output) in zip(names, results):
        assert returncode == 0, f"pod {name} exited with {returncode}:\n{output[-4000:]}"
    assert "backend ring, 2 ranks" in results[0][1] and "identical on all ranks: True" in results[0][1], results[0][1]


SSH_STAND_IN = """#!{python}
# ssh as mpirun uses it, into the pod's network namespace: the operator's
# pods run sshd; here the host name picks the namespace.
import os, sys
pods = dict(line.split() for line in open({pods_file!r}) if line.strip())
args = sys.argv[1:]
with_value = {{"-o", "-p", "-l", "-i", "-F", "-E", "-b", "-c", "-m", "-J"}}
while args and args[0].startswith("-"):
    args = args[2:] if args[0] in with_value else args[1:]
host, command = args[0], " ".join(args[1:])
name = host.split(".")[0]
os.execvp("ip", ["ip", "netns", "exec", pods[name], "unshare", "--uts", "sh", "-c",
                 'hostname "$0" && cd "$1" && eval "$2"', name, os.getcwd(), command])
"""


def _mpirun() -> str | None:
    found = Path(sys.executable).with_name("mpirun")
    return str(found) if found.exists() else shutil.which("mpirun")


def test_mpijob_launcher_runs_mpirun_over_the_operators_hostfile(tmp_path):
    mpirun = _mpirun()
    if mpirun is None:
        pytest.skip("mpirun (Open MPI) is not installed")
    job = "ringcc-hvd"
    workers = [f"{job}-worker-0", f"{job}-worker-1"]
    names = [f"{job}-launcher", *workers]
    fqdn = {name: [f"{name}.{job}.{NAMESPACE}.svc", f"{name}.{job}"] for name in names}
    pods = make_pods("mpi", names, fqdn)
    try:
        hostfile = tmp_path / "hostfile"  # the operator's /etc/mpi/hostfile
        hostfile.write_text("".join(f"{name}.{job}.{NAMESPACE}.svc slots=1\n" for name in workers))
        pods_file = tmp_path / "pods"
        pods_file.write_text("".join(f"{name} {ns}\n" for name, ns in pods.namespaces.items()))
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        ssh = bin_dir / "ssh"
        ssh.write_text(SSH_STAND_IN.format(python=sys.executable, pods_file=str(pods_file)))
        ssh.chmod(0o755)
        env = rank_environment(
            {
                "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
                "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                "OMPI_MCA_orte_default_hostfile": str(hostfile),
                "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
                "OMPI_MCA_orte_set_default_slots": "1",
                "K_MPI_JOB_ROLE": "launcher",
                "OMPI_ALLOW_RUN_AS_ROOT": "1",
                "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "RINGCC_TIMEOUT_S": "60",
            }
        )
        argv = [
            mpirun,
            "--hostfile",
            str(hostfile),
            "-np",
            "2",
            "--bind-to",
            "none",
            "-x",
            "PATH",
            "-x",
            "PYTHONPATH",
            "-x",
            "RINGCC_TIMEOUT_S",
            "-x",
            "LD_LIBRARY_PATH",
            sys.executable,
            str(REPO / "examples" / "pytorch_mnist_style.py"),
            "--epochs",
            "1",
            "--samples",
            "128",
        ]
        ((returncode, output),) = run_at_once([(pods.command(f"{job}-launcher", argv), env)], JOB_TIMEOUT_S, cwd=REPO)
    finally:
        pods.remove()
    assert returncode == 0, f"the launcher's mpirun exited with {returncode}:\n{output[-4000:]}"
    # 128 samples over 2 ranks: each trains on 64.
    assert "[0/64]" in output and "Test set:" in output, output[-4000:]
