"""A job of one rank runs on the single-rank backend (core/backends/single):
every collective gives the one rank's data back, in place and out of
place, and the process opens no socket and no shared-memory segment.
Started plainly (no launcher) and under ringrun -np 1."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from rank_groups import rank_environment, ringrun_command, run_command

JOB = str(Path(__file__).resolve().parent / "single_rank_job.py")


@pytest.mark.parametrize("launch", ["plain", "ringrun"])
def test_one_rank_job_copies_without_sockets_or_shared_memory(launch):
    env = rank_environment({"RINGCC_LOG_LEVEL": "debug"})
    command = [sys.executable, JOB] if launch == "plain" else ringrun_command(1, [JOB])
    done = run_command(command, env, timeout=120)
    assert done.returncode == 0, done.describe()
    last = done.stdout.strip().splitlines()[-1]
    result = json.loads(last[last.index("{") :])  # ringrun tags each line "[0]<stdout>: "
    assert result["checked"] == 128, done.describe()
    # This rank's own error names the call: its place in issue order and shape.
    named = r"broadcast \(collective #\d+ in issue order, shape \[4096\]\): root rank 1 is out of range for 1 ranks"
    assert re.fullmatch(named, result["bad_root"]), done.describe()
    assert result["sockets"] == [], done.describe()
    assert result["shm"] == [], done.describe()
    assert "backend single serves host memory" in done.stderr, done.describe()
    assert "backend shm serves" not in done.stderr
