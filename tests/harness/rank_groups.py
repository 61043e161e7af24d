"""Shared machinery of the multi-process tests: starting groups of ranks with
ringrun and reading what each rank recorded.

The ranks use the ringcc that this pytest process imports: an installed
package when there is one, else the source tree's adapters/ directory (with
the core built into it). Its location goes first on the ranks' PYTHONPATH and
they run under the same interpreter (sys.executable).

tests/conftest.py puts this folder (tests/harness) on sys.path; a test takes
what it needs from here by name (`from rank_groups import rank_environment`),
and the session-wide `ranks` fixture is a RankLauncher.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HARNESS_DIR = Path(__file__).resolve().parent
TESTS_DIR = HARNESS_DIR.parent
REPO_DIR = TESTS_DIR.parent
if str(HARNESS_DIR) not in sys.path:
    sys.path.insert(0, str(HARNESS_DIR))

from rank_harness import read_results  # noqa: E402


def _import_ringcc():
    try:
        import ringcc
    except ImportError:
        sys.path.insert(0, str(REPO_DIR / "adapters"))
        import ringcc
    return ringcc


ringcc = _import_ringcc()
# The directory that holds the ringcc package this process imported.
RINGCC_PARENT = str(Path(ringcc.__file__).resolve().parent.parent)

# How long ringrun may run a group, and the extra margin of the hard
# subprocess timeout around it.
GROUP_TIMEOUT_S = 240
HARD_TIMEOUT_MARGIN_S = 20
OUTPUT_TAIL_CHARS = 4000


def rank_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for ringrun and its ranks: ours without ringcc/Horovod
    settings (so runs do not depend on the caller's), ringcc's location
    first on PYTHONPATH, then `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RINGCC_", "HOROVOD_"))}
    paths = [RINGCC_PARENT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != RINGCC_PARENT]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def ringrun_command(num_ranks: int, script: Sequence[str], launcher_options: Sequence[str] = ()) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ringcc.launcher",
        "-np",
        str(num_ranks),
        *launcher_options,
        "--",
        sys.executable,
        *script,
    ]


def torchrun_command(num_ranks: int, script: Sequence[str]) -> list[str]:
    """torchrun (torch.distributed.run, one machine, no restarts) of
    `num_ranks` ranks running `script`: its path and its arguments."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(num_ranks),
        "--max-restarts",
        "0",
        *script,
    ]


def tail(text: str, chars: int = OUTPUT_TAIL_CHARS) -> str:
    return text if len(text) <= chars else "...\n" + text[-chars:]


@dataclass
class Completed:
    command: list[str]
    returncode: int | None  # None: killed after the hard timeout
    stdout: str
    stderr: str
    seconds: float

    def describe(self) -> str:
        return (
            f"command: {' '.join(self.command)}\nexit status: {self.returncode} after {self.seconds:.1f} s\n"
            f"--- stdout (tail) ---\n{tail(self.stdout)}\n--- stderr (tail) ---\n{tail(self.stderr)}"
        )


def _stop(process: subprocess.Popen) -> None:
    """Stops ringrun the way a user would (SIGTERM stops its ranks), then for good."""
    for signum, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        if process.poll() is not None:
            return
        process.send_signal(signum)
        try:
            process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue


def run_at_once(
    commands: list[tuple[list[str], dict[str, str]]], timeout: float, cwd: str | None = None
) -> list[tuple[int | None, str]]:
    """Starts every (argv, env) at once, output and errors together; (exit
    status, or None when killed at the shared deadline, output) of each."""
    outputs = [tempfile.TemporaryFile() for _ in commands]
    processes = [
        subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        for (argv, env), out in zip(commands, outputs)
    ]
    deadline = time.monotonic() + timeout
    results = []
    for process, out in zip(processes, outputs):
        try:
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        out.seek(0)
        results.append((process.returncode, out.read().decode(errors="replace")))
        out.close()
    return results


def _launches_torchrun(command: Sequence[str]) -> bool:
    return "torch.distributed.run" in command or any(os.path.basename(c) == "torchrun" for c in command[:1])


def run_command(command: list[str], env: dict[str, str], timeout: float, cwd: str = str(REPO_DIR)) -> Completed:
    """Runs a command with captured output and a hard timeout. torchrun
    leaves a log directory per run in its TMPDIR; it gets one of its own,
    removed afterwards, so the tests leave nothing in /tmp."""
    if _launches_torchrun(command):
        with tempfile.TemporaryDirectory(prefix="ringcc-test-torchrun-", ignore_cleanup_errors=True) as tmpdir:
            return _run_command(command, {**env, "TMPDIR": tmpdir}, timeout, cwd)
    return _run_command(command, env, timeout, cwd)


def _run_command(command: list[str], env: dict[str, str], timeout: float, cwd: str) -> Completed:
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(process)
            returncode = None
        out.seek(0)
        err.seek(0)
        return Completed(
            command,
            returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            time.monotonic() - start,
        )


def launch_ranks(
    launcher: str,
    num_ranks: int,
    script: Sequence[str],
    timeout: float,
    env: dict[str, str],
    ringrun_options: Sequence[str] = (),
) -> Completed:
    """Runs `script` (its path and arguments) on `num_ranks` ranks under
    `launcher`, "ringrun" (which bounds the job by `timeout` itself) or
    "torchrun", killed HARD_TIMEOUT_MARGIN_S after `timeout`."""
    if launcher == "ringrun":
        command = ringrun_command(num_ranks, script, ["--timeout", f"{timeout:g}", *ringrun_options])
    elif launcher == "torchrun":
        command = torchrun_command(num_ranks, script)
    else:
        raise ValueError(f"unknown launcher {launcher!r}: ringrun or torchrun")
    return run_command(command, env, timeout + HARD_TIMEOUT_MARGIN_S)


def run_case_group(
    name: str,
    launcher: str,
    num_ranks: int,
    script: Path,
    args: Sequence[str],
    out_dir: Path,
    timeout: float,
    env: dict[str, str],
) -> GroupRun:
    """One run of a case script (rank_harness or torch_harness run_cases)
    under `launcher` (launch_ranks), its ranks recording into `out_dir`
    (the script's --out), as a GroupRun named `name`."""
    completed = launch_ranks(launcher, num_ranks, [str(script), "--out", str(out_dir), *args], timeout, env)
    return GroupRun(name, num_ranks, str(out_dir), completed, read_results(str(out_dir), num_ranks))


EXIT_JOB_TIMEOUT_S = 30


def run_exit_jobs(out_dir: Path, kinds: Sequence[str], iterations: int) -> list[dict]:
    """Runs `iterations` jobs of each of `kinds` of tests/harness/exit_job.py (ranks
    that exit after a peer left) into out_dir; its records, one per rank and job."""
    command = [
        sys.executable,
        str(HARNESS_DIR / "exit_job.py"),
        "--out",
        str(out_dir),
        "--kinds",
        ",".join(kinds),
        "--iterations",
        str(iterations),
        "--job-timeout",
        str(EXIT_JOB_TIMEOUT_S),
    ]
    limit = EXIT_JOB_TIMEOUT_S * len(kinds) * iterations + HARD_TIMEOUT_MARGIN_S
    completed = run_command(command, rank_environment({"RINGCC_TIMEOUT_S": "20"}), limit)
    results = out_dir / "results.json"
    assert completed.returncode == 0 and results.exists(), completed.describe()
    records = json.loads(results.read_text())
    assert len(records) == 2 * len(kinds) * iterations, completed.describe()
    return records


def start_command(
    command: list[str], env: dict[str, str], stdout_path: Path, stderr_path: Path, cwd: str = str(REPO_DIR)
) -> subprocess.Popen:
    """Starts a command in the background, its output going to files."""
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        return subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)


def finish_command(
    process: subprocess.Popen, command: list[str], stdout_path: Path, stderr_path: Path, timeout: float, started: float
) -> Completed:
    try:
        returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(process)
        returncode = None
    return Completed(
        command,
        returncode,
        stdout_path.read_text(errors="replace"),
        stderr_path.read_text(errors="replace"),
        time.monotonic() - started,
    )


@dataclass
class GroupRun:
    """One ringrun of a rank script (rank_cases.py or rank_errors.py) and its records."""

    name: str
    size: int
    out_dir: str
    completed: Completed
    results: dict[int, dict] = field(default_factory=dict)

    def _problem(self, text: str) -> str:
        return f"[{self.name}] {text}\n{self.completed.describe()}"

    def assert_case(self, case_name: str) -> None:
        """Passes when every rank passed the case, skips when every rank skipped it."""
        failures, skips, missing, passes = [], [], [], 0
        for rank in range(self.size):
            entry = self.results.get(rank)
            record = None if entry is None else entry["cases"].get(case_name)
            if entry is None:
                missing.append(f"rank {rank} wrote no results")
            elif record is None:
                missing.append(f"rank {rank} recorded nothing for this case (it exited or hung before)")
            elif record["status"] == "pass":
                passes += 1
            elif record["status"] == "skip":
                skips.append(f"rank {rank}: {record['message']}")
            else:
                failures.append(f"rank {rank}: {record['message']}\n{record.get('traceback', '')}".rstrip())
        if failures or missing:
            text = f"[{self.name}] {case_name}\n" + "\n".join(failures + missing)
            if missing:
                text += "\n" + self.completed.describe()
            pytest.fail(text, pytrace=False)
        if skips and passes:
            pytest.fail(f"[{self.name}] {case_name}: skipped on some ranks only: {skips}", pytrace=False)
        if skips:
            pytest.skip(skips[0].split(": ", 1)[1])

    def assert_clean_exit(self) -> None:
        problems = []
        if self.completed.returncode is None:
            problems.append("ringrun did not finish within its time limit")
        for rank in range(self.size):
            entry = self.results.get(rank)
            if entry is None:
                problems.append(f"rank {rank} wrote no results")
                continue
            if entry["end"] is None:
                problems.append(f"rank {rank} did not finish its cases")
            elif entry["end"].get("broken"):
                problems.append(f"rank {rank}: {entry['end']['broken']}")
        if problems:
            pytest.fail(self._problem("; ".join(problems)), pytrace=False)

    def start_record(self, rank: int) -> dict:
        entry = self.results.get(rank)
        if entry is None or entry["start"] is None:
            pytest.fail(self._problem(f"rank {rank} wrote no start record"), pytrace=False)
        return entry["start"]


def memory_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class RankLauncher:
    """Starts ranks with ringrun (the session-wide `ranks` fixture).

    group() runs a rank script once per name and caches the result, so the
    tests that read one group's records share a single run."""

    # Re-exported for tests that build their own runs.
    environment = staticmethod(rank_environment)
    command = staticmethod(ringrun_command)
    run = staticmethod(run_command)
    start = staticmethod(start_command)
    finish = staticmethod(finish_command)
    memory_available = staticmethod(memory_available_bytes)

    def __init__(self, out_root: Path) -> None:
        self.out_root = out_root
        self._groups: dict[str, GroupRun] = {}

    def group(
        self,
        name: str,
        size: int,
        script: str,
        *,
        env: dict[str, str] | None = None,
        tags: Sequence[str] = (),
        cases: Sequence[str] = (),
        launcher_options: Sequence[str] = (),
        timeout: float = GROUP_TIMEOUT_S,
    ) -> GroupRun:
        """Runs `script` (a case script, its path relative to tests/: "ranks/rank_cases.py") on `size`
        ranks, once per name, and reads every rank's records."""
        if name not in self._groups:
            out_dir = self.out_root / name
            out_dir.mkdir(parents=True, exist_ok=True)
            script_args = [str(TESTS_DIR / script), "--out", str(out_dir)]
            if tags:
                script_args += ["--tags", ",".join(tags)]
            if cases:
                script_args += ["--cases", ",".join(cases)]
            options = ["--timeout", str(timeout), *launcher_options]
            command = ringrun_command(size, script_args, options)
            completed = run_command(command, rank_environment(env), timeout + HARD_TIMEOUT_MARGIN_S)
            self._groups[name] = GroupRun(name, size, str(out_dir), completed, read_results(str(out_dir), size))
        return self._groups[name]

    def scratch_dir(self, name: str) -> Path:
        path = self.out_root / name
        path.mkdir(parents=True, exist_ok=True)
        return path
