"""What ringrun prints when a job of ringcc ranks is interrupted or fails
(docs/launchers.md, "When a job fails"): one line for Ctrl-C; for a rank that
raises, its traceback once and whole, the other ranks' PeerFailureError one
line each, and a closing summary naming the rank that failed first.

Real 2-rank jobs on 127.0.0.1; they need the compiled core (and torch for the
torch variant).
"""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("numpy")
try:
    from ringcc import _core  # noqa: F401
except ImportError:
    pytest.skip("the compiled core (ringcc._core) is not built", allow_module_level=True)

ADAPTERS_DIR = Path(__file__).resolve().parents[2] / "adapters"
JOB_TIMEOUT_S = 60  # every job here ends in seconds; a hang fails the test
PREFIXED = re.compile(r"^\[(\d+)\]<(stdout|stderr)>: (.*)$")


def environment():
    env = dict(os.environ)
    source = [str(ADAPTERS_DIR)] if any((ADAPTERS_DIR / "ringcc").glob("_core*.so")) else []
    env["PYTHONPATH"] = os.pathsep.join(source + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["RINGCC_TIMEOUT_S"] = "30"
    env["MASTER_ADDR"] = env["RINGCC_MASTER_ADDR"] = "127.0.0.1"
    for name in ("RINGCC_LOG_LEVEL", "HOROVOD_LOG_LEVEL", "RINGCC_RINGRUN_REPORTS"):
        env.pop(name, None)
    return env


def ringrun_command(*args):
    return [sys.executable, "-m", "ringcc.launcher", "-np", "2", *map(str, args)]


def run_job(script, *args):
    return subprocess.run(
        ringrun_command(sys.executable, "-c", script, *args),
        env=environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
    )


def rank_lines(lines, rank):
    """The text of rank `rank`'s stderr lines among `lines`."""
    return [m.group(3) for m in map(PREFIXED.match, lines) if m and m.group(1) == str(rank) and m.group(2) == "stderr"]


def wait_for(condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


# --------------------------------------------------------------------------
# Ctrl-C

# Both ranks wait in a collective that never completes (rank 0's named
# allreduce waits for rank 1's of the same name, which rank 1 never makes,
# and the other way round), after saying they are ready.
WAITING_JOB = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    import ringcc
    ringcc.init()
    rank = ringcc.rank()
    handle = ringcc.allreduce_async(np.ones(4), name="waits.%d" % rank)
    open(os.path.join(sys.argv[1], "%d.ready" % rank), "w").close()
    handle.wait()
    """
)


@pytest.mark.parametrize("to_group", [False, True], ids=["ringrun", "process-group"])
def test_interrupt_prints_one_line_and_exits_130(tmp_path, to_group):
    out_path, err_path = tmp_path / "out", tmp_path / "err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        process = subprocess.Popen(
            ringrun_command(sys.executable, "-c", WAITING_JOB, tmp_path),
            env=environment(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
        try:
            ready = wait_for(lambda: len(list(tmp_path.glob("*.ready"))) == 2, JOB_TIMEOUT_S / 2)
            assert ready, err_path.read_text()
            time.sleep(0.5)  # both ranks inside handle.wait()
            if to_group:
                os.killpg(process.pid, signal.SIGINT)
            else:
                process.send_signal(signal.SIGINT)
            returncode = process.wait(timeout=JOB_TIMEOUT_S / 2)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
    stdout, stderr = out_path.read_text(), err_path.read_text()
    context = f"stdout:\n{stdout}\nstderr:\n{stderr}"
    assert stdout.splitlines() == [], context
    assert stderr.splitlines() == ["ringrun: interrupted; stopping 2 ranks"], context
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, context
    assert returncode == 130, context


# --------------------------------------------------------------------------
# A rank that raises

# Rank 1 raises ValueError("boom") while rank 0 waits in a barrier. Rank 1
# writes its traceback slowly and rank 0 writes "tick" lines meanwhile (from
# an exit handler, after its PeerFailureError), so that without ringrun's
# holding them, rank 0's lines would land inside rank 1's traceback.
RAISING_JOB = textwrap.dedent(
    """
    import atexit, signal, sys, time

    def ticks():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # ringrun stopping this rank: the ticks end soon anyway
        for number in range(60):
            print("tick %d" % number, file=sys.stderr, flush=True)
            time.sleep(0.01)

    atexit.register(ticks)  # before ringcc's: runs after it
    import ringcc
    {init}
    if {rank} == 1:
        class SlowStderr:
            def __init__(self, stream):
                self.stream = stream
            def write(self, text):
                time.sleep(0.02)
                return self.stream.write(text)
            def flush(self):
                self.stream.flush()
            def __getattr__(self, name):
                return getattr(self.stream, name)

        atexit.unregister(ticks)
        time.sleep(1)  # rank 0 is in its barrier
        sys.stderr = SlowStderr(sys.stderr)
        def fail():
            raise ValueError("boom")
        fail()
    {wait}
    """
)
NUMPY_PARTS = {"init": "ringcc.init()", "rank": "ringcc.rank()", "wait": "ringcc.barrier()"}
TORCH_PARTS = {
    "init": "import torch, torch.distributed as dist; dist.init_process_group(backend='ring')",
    "rank": "dist.get_rank()",
    "wait": "dist.barrier()",
}


def check_failure_report(result):
    context = f"exit status {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    lines = result.stderr.splitlines()
    # No line carries a rank prefix twice (torch's "[rank1]: " inside ringrun's "[1]<stderr>: ").
    assert not any(re.match(r"^\[\d+\]<std(?:out|err)>: \[rank\d+\]:", line) for line in lines), context
    # Rank 1's traceback once, whole and contiguous.
    starts = [i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line]
    assert len(starts) == 1 and lines[starts[0]] == "[1]<stderr>: Traceback (most recent call last):", context
    end = next((i for i in range(starts[0], len(lines)) if lines[i] == "[1]<stderr>: ValueError: boom"), None)
    assert end is not None, context
    block = lines[starts[0] : end + 1]
    assert all(line.startswith("[1]<stderr>: ") for line in block), context
    assert any(line.endswith(", in fail") for line in block), context  # the frame that raised
    # Rank 0: its PeerFailureError in one line (naming rank 1), and no traceback.
    rank0 = [line for line in rank_lines(lines, 0) if not re.fullmatch(r"tick \d+", line)]
    assert len(rank0) == 1 and "PeerFailureError" in rank0[0] and "rank 1" in rank0[0], context
    assert " ERROR: " not in rank0[0], context
    # The closing summary, ringrun's only line and the last.
    ringrun_lines = [line for line in lines if line.startswith("ringrun: ")]
    assert len(ringrun_lines) == 1 and lines[-1] == ringrun_lines[0], context
    summary = re.fullmatch(
        r"ringrun: rank 1 failed first: ValueError: boom \(exit code 1, host \S+, "
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)(?:; stopped 1 other rank)?",
        lines[-1],
    )
    assert summary, context
    assert result.returncode == 1, context


def test_rank_that_raises_numpy():
    check_failure_report(run_job(RAISING_JOB.format(**NUMPY_PARTS)))


def test_rank_that_raises_torch():
    pytest.importorskip("torch")
    check_failure_report(run_job(RAISING_JOB.format(**TORCH_PARTS)))
