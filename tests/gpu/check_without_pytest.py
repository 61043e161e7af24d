"""tests/gpu without pytest (for a GPU machine that lacks it): runs the same
groups of tests/ranks/rank_gpu_cases.py, of the framework adapters
(tests/gpu/rank_gpu_torch.py, tests/frameworks/jax/jax_cases.py) and the killed-rank job with ringrun,
prints every case's status and exits 1 when any case failed."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
sys.path[:0] = [str(HERE), str(TESTS / "harness"), str(TESTS / "ranks"), str(TESTS / "frameworks" / "jax")]

from gpu_env import (  # noqa: E402
    FRAMEWORK_GROUPS,
    GROUP_ENV,
    GROUPS,
    NOT_ON_GPU,
    arrays_env,
    framework_reason,
    gpu_skip_reason,
    kill_outcomes,
    library_reason,
)
from jax_cases import CASES as JAX_CASES  # noqa: E402
from rank_gpu_cases import CASES  # noqa: E402
from rank_gpu_torch import CASES as TORCH_CASES  # noqa: E402
from rank_harness import read_results  # noqa: E402

import ringcc  # noqa: E402


def environment(extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(ringcc.__file__).resolve().parent.parent), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def ringrun(n, script_args, env, timeout):
    command = [
        sys.executable,
        "-m",
        "ringcc.launcher",
        "-np",
        str(n),
        "--timeout",
        str(timeout),
        "--",
        sys.executable,
        *script_args,
    ]
    return subprocess.run(command, env=environment(env), capture_output=True, text=True, timeout=timeout + 30)


def main() -> int:
    reason = gpu_skip_reason(ringcc)
    if reason:
        print(f"tests/gpu: skipped: {reason}")
        return 0
    failed = passed = skipped = 0
    root = Path(tempfile.mkdtemp(prefix="ringcc-gpu-"))
    for name, (size, env, tags, what) in GROUPS.items():
        reason = library_reason(what)
        if reason:
            print(f"[{name}] skipped: {reason}")
            continue
        out = root / name
        out.mkdir()
        started = time.monotonic()
        completed = ringrun(
            size,
            [str(TESTS / "ranks" / "rank_gpu_cases.py"), "--out", str(out), "--tags", ",".join(tags)],
            arrays_env({**GROUP_ENV, **env}),
            180,
        )
        results = read_results(str(out), size)
        for case in CASES.select(size, tags):
            if case.name in NOT_ON_GPU:
                continue
            records = [results.get(r, {}).get("cases", {}).get(case.name) for r in range(size)]
            statuses = {rec["status"] if rec else "missing" for rec in records}
            if statuses == {"pass"}:
                passed += 1
            elif statuses == {"skip"}:
                skipped += 1
            else:
                failed += 1
                messages = [f"rank {r}: {rec['message'] if rec else 'no record'}" for r, rec in enumerate(records)]
                print(f"FAIL [{name}] {case.name}\n  " + "\n  ".join(messages))
        print(f"[{name}] done in {time.monotonic() - started:.0f} s (ringrun exit {completed.returncode})")
        if completed.returncode != 0:
            print(completed.stderr[-3000:])
    for name, (size, script, env, what, patterns) in FRAMEWORK_GROUPS.items():
        reason = framework_reason(what, ringcc)
        if reason:
            print(f"[{name}] skipped: {reason}")
            continue
        out = root / name
        out.mkdir()
        started = time.monotonic()
        args = [str(TESTS / script), "--out", str(out)]
        if patterns:
            args += ["--cases", ",".join(patterns)]
        completed = ringrun(size, args, {**GROUP_ENV, **env}, 180)
        results = read_results(str(out), size)
        cases = TORCH_CASES if script == "gpu/rank_gpu_torch.py" else JAX_CASES
        for case in cases.select(size, (), list(patterns) or None):
            records = [results.get(r, {}).get("cases", {}).get(case.name) for r in range(size)]
            statuses = {rec["status"] if rec else "missing" for rec in records}
            if statuses == {"pass"}:
                passed += 1
            elif statuses == {"skip"}:
                skipped += 1
            else:
                failed += 1
                messages = [f"rank {r}: {rec['message'] if rec else 'no record'}" for r, rec in enumerate(records)]
                print(f"FAIL [{name}] {case.name}\n  " + "\n  ".join(messages))
        print(f"[{name}] done in {time.monotonic() - started:.0f} s (ringrun exit {completed.returncode})")
    for backend in ("ipc", "host"):
        out = root / f"kill-{backend}"
        out.mkdir()
        completed = ringrun(
            3,
            [str(TESTS / "ranks" / "gpu_deadpeer.py"), "--out", str(out), "--victim", "1"],
            arrays_env({"RINGCC_TIMEOUT_S": "8", "RINGCC_GPU_BACKEND": backend, "RINGCC_TEST_ARRAYS": "torch"}),
            90,
        )
        problems = kill_outcomes(out, completed.stderr[-3000:])
        if problems:
            failed += 1
            print(f"FAIL killed rank ({backend}):\n  " + "\n  ".join(problems))
        else:
            passed += 1
    print(f"tests/gpu: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
