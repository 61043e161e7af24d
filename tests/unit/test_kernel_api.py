"""The C table through which framework kernels reach the engine
(bindings/kernel_api.h), called as the TensorFlow ops call it, without
TensorFlow: an allreduce whose input lies in segments gives their results
one after another in its output, and a call that cannot be run (a
missing buffer, a segmented call of another kind, counts that do not add
up) fails at once with a message that says why, after which the rank goes
on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rank_groups import rank_environment, run_command

JOB = str(Path(__file__).resolve().parent / "kernel_api_job.py")

INVALID_ARGUMENT = 0


def test_segmented_allreduce_through_the_kernel_table():
    done = run_command([sys.executable, JOB], rank_environment({}), timeout=120)
    assert done.returncode == 0, done.describe()
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["version"] == 4, done.describe()
    assert result["good"] == {"kind": -1, "message": "", "count": 8}, done.describe()
    assert result["good_out"] == [0.0, 1.0, 2.0, 7.0, 7.0, 7.0, 7.0, -1.5], done.describe()
    refusals = {
        "short": "the segments hold 8 elements, not the call's 9",
        "broadcast": "only an allreduce with an output takes its input in segments",
        "no_out": "only an allreduce with an output takes its input in segments",
        "no_input": "a call of 8 elements without an input",
        "no_output": "a call without an output",
        "bad_kind": "collective kind 42 is not one a kernel can call",
        "segment_without_input": "segment 1 has no input",
    }
    for case, message in refusals.items():
        got = result[case]
        assert got["kind"] == INVALID_ARGUMENT and message in got["message"], (case, got)
        assert got["message"].startswith("ringcc.InvalidArgumentError"), (case, got)
    assert result["again"]["kind"] == -1, result["again"]
    assert result["again_out"] == [-1.5, 7.0, 7.0, 7.0, 7.0, 0.0, 1.0, 2.0], done.describe()
    assert result["plain"]["kind"] == -1, result["plain"]
    assert result["plain_out"] == [7.0] * 4, done.describe()
