"""Runs tests/launch/elastic_train.py under ringrun's elastic mode through a
change of membership: 2 workers, then 1 (a worker killed with SIGKILL, or
its host removed from discovery), then 2 again (a host added to
discovery); reports what happened and how long each change took.

    python tests/launch/elastic_scenario.py --out DIR [--removal]   (prints a JSON summary)

tests/launch/test_elastic.py and docs/benchmarks.md use it.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def read_events(out: Path) -> list[dict]:
    events = []
    for path in glob.glob(str(out / "*.jsonl")):
        worker = Path(path).stem
        with open(path, encoding="utf-8") as file:
            for line in file:
                if line.endswith("\n"):
                    events.append({**json.loads(line), "worker": worker})
    return sorted(events, key=lambda e: e["t"])


def wait_for(condition, timeout: float, what: str, process: subprocess.Popen):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if process.poll() is not None:
            raise RuntimeError(f"ringrun exited ({process.returncode}) while waiting for {what}")
        time.sleep(0.02)
    raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")


def kept_sizes(events: list[dict]) -> list[int]:
    """The membership size of every step the run kept: a step redone after
    a failure (back to the last commit) counts as its last run."""
    sizes: dict[int, int] = {}
    for event in events:
        if event["event"] == "step":
            sizes[event["steps"]] = event["size"]
    return [sizes[s] for s in sorted(sizes)]


def kept_resets(events: list[dict]) -> list[int]:
    """The step counts at which the kept steps' sampler dealt out the samples
    anew: for the kept run of each step, the last reset before it that
    resumed from an earlier step (a reset undone by a later one is not kept)."""
    kept: dict[int, float] = {}
    for event in events:
        if event["event"] == "step":
            kept[event["steps"]] = event["t"]
    resets = [e for e in events if e["event"] == "reset"]
    found = set()
    for steps, t in kept.items():
        before = [r for r in resets if r["t"] < t and r["steps"] < steps]
        if before:
            found.add(max(before, key=lambda r: r["t"])["steps"])
    return sorted(found)


def run(out: Path, steps: int, removal: bool, env: dict[str, str], ringrun: list[str], limit_s: float = 240.0) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    hosts = out / "hosts"
    hosts.write_text("localhost:2\n")
    discover = out / "discover.sh"
    discover.write_text(f"#!/bin/sh\ncat {hosts}\n")
    discover.chmod(0o755)
    command = [
        *ringrun,
        "-np",
        "2",
        "--min-np",
        "1",
        "--max-np",
        "2",
        "--host-discovery-script",
        str(discover),
        "--timeout",
        str(limit_s),
        sys.executable,
        str(HERE / "elastic_train.py"),
        "--out",
        str(out),
        "--steps",
        str(steps),
    ]
    log = open(out / "ringrun.log", "wb")
    process = subprocess.Popen(
        command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(out)
    )
    summary: dict = {"command": command}
    try:

        def step_of_size(size, after=0.0, worker=None):
            for e in read_events(out):
                if (
                    e["event"] == "step"
                    and e["size"] == size
                    and e["t"] > after
                    and (worker is None or e["worker"] == worker)
                ):
                    return e
            return None

        first = wait_for(
            lambda: (
                step_of_size(2, 0.0)
                if any(e["event"] == "step" and e["size"] == 2 and e["steps"] >= 8 for e in read_events(out))
                else None
            ),
            120,
            "8 steps of 2 workers",
            process,
        )
        victim = [e for e in read_events(out) if e["event"] == "step" and e["rank"] == 1][-1]
        if removal:
            hosts.write_text("localhost:1\n")
        else:
            os.kill(victim["pid"], signal.SIGKILL)
        changed = time.time()
        summary["removed_worker"] = victim["worker"]
        one = wait_for(lambda: step_of_size(1, changed), 60, "a step of 1 worker", process)
        summary["to_one_worker_s"] = one["t"] - changed
        summary["first_step_of_2"] = first["steps"]
        time.sleep(1.0)
        hosts.write_text("localhost:2\n127.0.0.1:1\n" if not removal else "localhost:1\n127.0.0.1:1\n")
        added = time.time()
        new = wait_for(
            lambda: next(
                (
                    e
                    for e in read_events(out)
                    if e["event"] == "step" and e["t"] > added and e["worker"].startswith("127.0.0.1")
                ),
                None,
            ),
            60,
            "a step of the added worker",
            process,
        )
        summary["added_worker_first_step_s"] = new["t"] - added
        process.wait(timeout=limit_s)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()
    events = read_events(out)
    summary["returncode"] = process.returncode
    summary["sizes"] = kept_sizes(events)
    summary["resets_at"] = kept_resets(events)
    summary["resets"] = [(e["worker"], e["size"]) for e in events if e["event"] == "reset"]
    summary["pids"] = sorted({e["pid"] for e in events})
    return summary


def run_through_kill(
    out: Path,
    workers: int,
    steps: int,
    kill_rank: int,
    kill_at: int,
    env: dict[str, str],
    ringrun: list[str],
    limit_s: float = 120.0,
) -> dict:
    """`workers` workers on this machine (--min-np one fewer), the worker of
    rank `kill_rank` killing itself after step `kill_at`; the others go on
    without it to the end. Returns what happened (sizes, resets, pids)."""
    out.mkdir(parents=True, exist_ok=True)
    command = [
        *ringrun,
        "-np",
        str(workers),
        "--min-np",
        str(workers - 1),
        "--max-np",
        str(workers),
        "--timeout",
        str(limit_s),
        sys.executable,
        str(HERE / "elastic_train.py"),
        "--out",
        str(out),
        "--steps",
        str(steps),
        "--step-time",
        "0.02",
        "--kill-rank",
        str(kill_rank),
        "--kill-at",
        str(kill_at),
    ]
    with open(out / "ringrun.log", "wb") as log:
        completed = subprocess.run(
            command,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=str(out),
            timeout=limit_s + 30,
        )
    events = read_events(out)
    return {
        "command": command,
        "returncode": completed.returncode,
        "sizes": kept_sizes(events),
        "resets_at": kept_resets(events),
        "pids": sorted({e["pid"] for e in events}),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--removal", action="store_true", help="remove the host from discovery instead of killing")
    args = parser.parse_args()
    ringrun = [sys.executable, "-m", "ringcc.launcher"]
    summary = run(Path(args.out), args.steps, args.removal, dict(os.environ), ringrun)
    print(json.dumps(summary))
    return 0 if summary["returncode"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
