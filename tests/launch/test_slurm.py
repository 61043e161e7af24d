"""ringcc under a real SLURM that the test starts itself: munged, slurmctld
and slurmd (Debian's `slurm-wlm` and `munge`) with a configuration in a
temporary directory, one node ("ringcc-node", 16 CPUs declared whatever the
machine has), run as root. Skipped, saying why, where they are not
installed, the test does not run as root, or the daemons do not start.

In one allocation of 8 tasks:
  - `srun -n 4 python slurm_job.py` with nothing exported: ringcc.init(),
    hvd.init() and init_process_group(backend="ring") each find the job
    from SLURM and allreduce right;
  - two steps of 2 tasks started at once, each with the first port derived
    from its job and step already held by a stranger: both serve on a port
    further down the list, find each other's stores (and never the other
    step's), and allreduce right;
and `ringrun` inside `salloc -n 4`: its hosts and slots come from the
allocation, and its ranks start through srun (the node's name is not this
machine's, so ringrun does not start them itself).

Every wait is bounded; the daemons, the job steps they started and the
temporary directory go whatever happens.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from rank_groups import rank_environment, run_command

from ringcc import slurm
from ringcc.free_ports import free_ports

HERE = Path(__file__).resolve().parent
JOB = HERE / "slurm_job.py"
NODE = "ringcc-node"
START_TIMEOUT_S = 30
STEP_TIMEOUT_S = 120
DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "salloc", "scancel", "sinfo")


def _munge_key(path: Path) -> None:
    path.write_bytes(os.urandom(1024))
    path.chmod(0o400)


def _slurm_conf(root: Path, ports: list[int]) -> str:
    host = socket.gethostname().split(".")[0]
    return "\n".join(
        [
            "ClusterName=ringcctest",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ports[0]}",
            f"SlurmdPort={ports[1]}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={root}/munge.socket",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool",
            f"SlurmctldPidFile={root}/slurmctld.pid",
            f"SlurmdPidFile={root}/slurmd.pid",
            f"SlurmctldLogFile={root}/slurmctld.log",
            f"SlurmdLogFile={root}/slurmd.log",
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            # 16 CPUs declared below (allocations of 8 and of 4 at once), on a machine that may have 2.
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "KillWait=2",
            "MinJobAge=2",
            "InactiveLimit=0",
            f"NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs=16 RealMemory=1000 State=UNKNOWN",
            f"PartitionName=ringcc Nodes={NODE} Default=YES MaxTime=10 State=UP OverSubscribe=YES",
            "",
        ]
    )


def _stop_group(process: subprocess.Popen) -> None:
    for signum, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue


def _step_daemons(root: Path) -> list[int]:
    """The slurmstepd processes of this cluster (their spool directory is ours)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            if not command.startswith(b"slurmstepd"):
                continue
            if str(root) in os.readlink(entry / "cwd") or str(root).encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


class Cluster:
    """munged, slurmctld and slurmd of one node, configured under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.daemons: list[subprocess.Popen] = []
        self.conf = root / "slurm.conf"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = rank_environment({"SLURM_CONF": str(self.conf), "RINGCC_TIMEOUT_S": "60", **(extra or {})})
        for name in [name for name in env if name.startswith(("SLURM_", "MASTER_", "RANK", "WORLD_SIZE"))]:
            if name != "SLURM_CONF":
                del env[name]
        return env

    def _daemon(self, command: list[str], log: str) -> None:
        with open(self.root / log, "ab") as out:
            self.daemons.append(
                subprocess.Popen(
                    command, env=self.env(), stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
                )
            )

    def log_tails(self) -> str:
        text = []
        for name in ("munged.out", "slurmctld.log", "slurmctld.out", "slurmd.log", "slurmd.out"):
            path = self.root / name
            if path.exists():
                text.append(f"--- {name} ---\n" + path.read_text(errors="replace")[-1500:])
        return "\n".join(text)

    def start(self) -> str:
        """Starts the daemons; "" once the node takes jobs, else why not."""
        (self.root / "state").mkdir()
        (self.root / "spool").mkdir()
        _munge_key(self.root / "munge.key")
        self._daemon(
            [
                "munged",
                "--foreground",
                "--force",
                f"--key-file={self.root}/munge.key",
                f"--socket={self.root}/munge.socket",
                f"--pid-file={self.root}/munged.pid",
                f"--log-file={self.root}/munged.log",
                f"--seed-file={self.root}/munged.seed",
            ],
            "munged.out",
        )
        self.conf.write_text(_slurm_conf(self.root, free_ports(2)))
        self._daemon(["slurmctld", "-D", "-i", "-f", str(self.conf)], "slurmctld.out")
        self._daemon(["slurmd", "-D", "-N", NODE, "-f", str(self.conf)], "slurmd.out")
        deadline = time.monotonic() + START_TIMEOUT_S
        state = ""
        while time.monotonic() < deadline:
            if any(d.poll() is not None for d in self.daemons):
                return "a daemon exited at start:\n" + self.log_tails()
            done = subprocess.run(
                ["sinfo", "-h", "-n", NODE, "-o", "%T"], env=self.env(), capture_output=True, text=True, timeout=10
            )
            state = done.stdout.strip() or done.stderr.strip()
            if done.returncode == 0 and state.rstrip("*") == "idle":
                return ""
            time.sleep(0.3)
        return f"the node did not become idle within {START_TIMEOUT_S} s (last: {state!r}):\n" + self.log_tails()

    def stop(self) -> None:
        try:
            subprocess.run(["scancel", "--full", "-u", "root"], env=self.env(), capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        deadline = time.monotonic() + 10
        while _step_daemons(self.root) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in _step_daemons(self.root):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for daemon in reversed(self.daemons):
            _stop_group(daemon)


@pytest.fixture(scope="module")
def cluster():
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        pytest.skip(
            f"SLURM and munge are not installed ({', '.join(missing)} missing; apt-get install slurm-wlm munge)"
        )
    if os.geteuid() != 0:
        pytest.skip("the test's SLURM runs its daemons as root")
    root = Path(tempfile.mkdtemp(prefix="ringcc-slurm-"))
    root.chmod(0o755)
    made = Cluster(root)
    try:
        why = made.start()
        if why:
            pytest.skip(f"the test's SLURM did not start: {why}")
        yield made
    finally:
        made.stop()
        shutil.rmtree(root, ignore_errors=True)


def results(output: str) -> list[dict]:
    lines = [line for line in output.splitlines() if line.startswith("SLURM_JOB_RESULT ")]
    return [json.loads(line.split(" ", 1)[1]) for line in lines]


def check_step(done, size: int, checks=("core",)) -> list[dict]:
    found = results(done.stdout)
    assert done.returncode == 0 and len(found) == size, done.describe()
    for check in checks:
        ranks = sorted(r[check].get("rank", -1) for r in found)
        assert ranks == list(range(size)), f"{check}: ranks {ranks}\n{done.describe()}"
        for r in found:
            assert r[check].get("size") == size and r[check].get("allreduce_ok"), f"{check}: {r}\n{done.describe()}"
    return found


@pytest.fixture(scope="module")
def allocation(cluster):
    """An allocation of 8 tasks on the node, for the srun steps; its job id."""
    done = run_command(["salloc", "-n", "8", "--no-shell", "--time=5", "-J", "ringcc-steps"], cluster.env(), 60)
    text = done.stdout + done.stderr
    assert done.returncode == 0 and "Granted job allocation" in text, done.describe()
    job = text.split("Granted job allocation", 1)[1].split()[0]
    yield job
    subprocess.run(["scancel", job], env=cluster.env(), capture_output=True, timeout=10)


def srun(job: str, args: list[str], tasks: int = 4) -> list[str]:
    """A step of `tasks` tasks of `job` running slurm_job.py."""
    return [
        "srun",
        f"--jobid={job}",
        "-n",
        str(tasks),
        "--overlap",
        "--kill-on-bad-exit=1",
        "--time=2",
        sys.executable,
        str(JOB),
        *args,
    ]


def test_srun_finds_the_job_three_ways_with_nothing_exported(cluster, allocation):
    done = run_command(srun(allocation, []), cluster.env(), STEP_TIMEOUT_S)
    found = check_step(done, 4, ("core", "hvd", "torch"))
    assert {r["step"] for r in found} == {"0"}, done.describe()
    assert all(r["core"]["local_size"] == 4 for r in found), done.describe()


def test_two_steps_at_once_with_their_first_ports_taken(cluster, allocation):
    # Steps 1 and 2 of the allocation (step 0 ran above): a stranger holds
    # the first port derived from each, so each serves further down its list.
    strangers = []
    for step in ("1", "2"):
        stranger = socket.socket()
        stranger.bind(("0.0.0.0", slurm.store_ports(f"slurm:{allocation}.{step}", "store")[0]))
        stranger.listen()
        strangers.append(stranger)
    env = cluster.env({"RINGCC_LOG_LEVEL": "info"})
    try:
        with tempfile.TemporaryFile() as out_a, tempfile.TemporaryFile() as out_b:
            steps = [
                subprocess.Popen(srun(allocation, ["--only-core"], 2), env=env, stdout=out, stderr=subprocess.STDOUT)
                for out in (out_a, out_b)
            ]
            deadline = time.monotonic() + STEP_TIMEOUT_S
            for step in steps:
                try:
                    step.wait(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _stop_group(step)
            outputs = []
            for step, out in zip(steps, (out_a, out_b)):
                out.seek(0)
                outputs.append((step.returncode, out.read().decode(errors="replace")))
    finally:
        for stranger in strangers:
            stranger.close()
    seen_steps = set()
    for returncode, text in outputs:
        found = results(text)
        assert returncode == 0 and len(found) == 2, text[-4000:]
        assert sorted(r["core"]["rank"] for r in found) == [0, 1], text[-4000:]
        assert all(r["core"]["size"] == 2 and r["core"]["allreduce_ok"] for r in found), text[-4000:]
        assert "the ports before it" in text and "are taken" in text, text[-4000:]
        seen_steps |= {r["step"] for r in found}
    assert seen_steps == {"1", "2"}, outputs


def test_ringrun_inside_salloc_starts_its_ranks_through_srun(cluster):
    command = [
        "salloc",
        "-n",
        "4",
        "--time=2",
        "-J",
        "ringcc-ringrun",
        sys.executable,
        "-m",
        "ringcc.launcher",
        "--timeout",
        "90",
        "--no-prefix",
        sys.executable,
        str(JOB),
        "--only-core",
    ]
    done = run_command(command, cluster.env(), STEP_TIMEOUT_S)
    found = check_step(done, 4)
    # Each rank is a step of its own that srun started.
    assert all(r["step"] is not None for r in found), done.describe()
    assert len({r["step"] for r in found}) == 4, done.describe()


def test_the_steps_left_no_secret_file_behind(cluster, allocation):
    # Runs after the steps above: the single-node secret file of each step
    # (named after the step, core/rendezvous/meeting.cc) went with its job.
    names = {
        "ringcc-secret-job" + hashlib.sha256(f"slurm:{allocation}.{step}".encode()).hexdigest()[:16]
        for step in range(3)
    }
    left = [path for path in Path("/dev/shm").glob("ringcc-u*/*") if path.name in names]
    assert left == []
    assert _step_daemons(cluster.root) == []
