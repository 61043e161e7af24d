"""ringcc's diagnostics: the Python `ringcc` logger (level from RINGCC_LOG_LEVEL,
the core's line format) and the core's own lines (time, host, rank, pid)."""

from __future__ import annotations

import logging
import re
import subprocess
import sys

from rank_groups import rank_environment, ringrun_command, run_command

# [ringcc 2025-11-26T09:14:03.127Z node1 rank 3 pid 4242] LEVEL: message
LINE = re.compile(
    r"^\[ringcc (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (\S+)(?: rank (\d+))? pid (\d+)\] "
    r"(TRACE|DEBUG|INFO|WARNING|ERROR|CRITICAL): (.*)$"
)


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], env=rank_environment(env), capture_output=True, text=True, timeout=60
    )


def test_level_comes_from_the_environment():
    from ringcc._log import TRACE, level_from_environment

    assert level_from_environment({}) == (logging.WARNING, None)
    assert level_from_environment({"RINGCC_LOG_LEVEL": "DEBUG"}) == (logging.DEBUG, None)
    assert level_from_environment({"RINGCC_LOG_LEVEL": "trace"}) == (TRACE, None)
    assert level_from_environment({"HOROVOD_LOG_LEVEL": "error"}) == (logging.ERROR, None)
    assert level_from_environment({"RINGCC_LOG_LEVEL": "info", "HOROVOD_LOG_LEVEL": "error"})[0] == logging.INFO
    level, problem = level_from_environment({"RINGCC_LOG_LEVEL": "loud"})
    assert level == logging.WARNING and "unknown log level RINGCC_LOG_LEVEL='loud'" in problem


def test_python_lines_use_the_core_format_and_level():
    code = (
        "import logging, ringcc; log = logging.getLogger('ringcc.torch'); "
        "log.debug('hidden at info'); log.info('before init'); ringcc.init(); "
        "log.warning('joined %s', 'a job'); ringcc.shutdown(); import os; print(os.getpid())"
    )
    done = _python(code, RINGCC_LOG_LEVEL="info", RINGCC_HOSTNAME="node-7")
    assert done.returncode == 0, done.stderr
    lines = [LINE.match(line) for line in done.stderr.splitlines()]
    assert all(lines), done.stderr
    # The core's own lines at info (what the job set up, leaving it) aside:
    lines = [m for m in lines if not m.group(6).startswith(("job -: 1 rank(s)", "rank 0 leaves job"))]
    assert [(m.group(5), m.group(6)) for m in lines] == [("INFO", "before init"), ("WARNING", "joined a job")]
    first, second = lines
    assert first.group(2) == second.group(2) == "node-7"
    assert first.group(3) is None and second.group(3) == "0"  # the rank, once the process joined
    assert first.group(4) == second.group(4) == done.stdout.strip()
    # The default level is warning; nothing goes to the root logger as well.
    done = _python(
        "import logging, ringcc; logging.basicConfig(level=logging.DEBUG); "
        "logging.getLogger('ringcc').info('quiet'); logging.getLogger('ringcc').warning('once')"
    )
    assert done.returncode == 0, done.stderr
    assert "quiet" not in done.stderr and done.stderr.count("once") == 1, done.stderr


def test_unknown_level_is_reported_once():
    done = _python("import ringcc", RINGCC_LOG_LEVEL="loud")
    assert done.returncode == 0
    assert done.stderr.count("unknown log level RINGCC_LOG_LEVEL='loud'") == 1, done.stderr


def test_core_lines_carry_time_host_rank_and_pid(tmp_path):
    script = tmp_path / "join.py"
    # ringrun names each rank's host in RINGCC_HOSTNAME; the lines carry that name.
    script.write_text(
        "import ringcc, os\nringcc.init()\n"
        "print('pid', ringcc.rank(), os.getpid(), os.environ['RINGCC_HOSTNAME'])\n"
        "ringcc.shutdown()\n"
    )
    done = run_command(
        ringrun_command(2, [str(script)], ["--no-prefix"]), rank_environment({"RINGCC_LOG_LEVEL": "debug"}), 60
    )
    assert done.returncode == 0, done.describe()
    pids, hosts = {}, set()
    for line in done.stdout.splitlines():
        if line.startswith("pid "):
            _, rank, pid, host = line.split()
            pids[rank] = pid
            hosts.add(host)
    joined = [LINE.match(line) for line in done.stderr.splitlines() if "DEBUG: job " in line and "2 rank(s)" in line]
    assert len(joined) >= 2 and all(joined), done.stderr
    seen = set()
    for m in joined:
        assert hosts == {m.group(2)}
        assert pids[m.group(3)] == m.group(4), (pids, m.group(0))
        seen.add(m.group(3))
    assert seen == {"0", "1"}


def test_info_says_what_the_job_set_up_and_when_each_rank_leaves(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import ringcc\nringcc.init()\nringcc.barrier()\nringcc.shutdown()\n")
    quiet = run_command(ringrun_command(2, [str(script)], ["--no-prefix"]), rank_environment(), 60)
    assert quiet.returncode == 0 and " INFO: " not in quiet.stderr, quiet.describe()
    done = run_command(
        ringrun_command(2, [str(script)], ["--no-prefix", "--log-level", "info"]), rank_environment(), 60
    )
    assert done.returncode == 0, done.describe()
    lines = [LINE.match(line) for line in done.stderr.splitlines()]
    info = [m for m in lines if m and m.group(5) == "INFO"]
    jobs = [m for m in info if m.group(6).startswith("job ")]
    assert len(jobs) == 1 and jobs[0].group(3) == "0", done.stderr  # rank 0, once per job
    for part in (
        "2 rank(s) on 1 host(s)",
        "data over shm (every rank on one host)",
        "host algorithms: shm",
        "fusion threshold 67108864 bytes",
        "waits 600 s for a live peer",
        "joining 60 s",
    ):
        assert part in jobs[0].group(6), (part, jobs[0].group(6))
    job_id = jobs[0].group(6).split()[1].rstrip(":")
    leaving = sorted(m.group(3) for m in info if m.group(6).startswith(f"rank {m.group(3)} leaves job {job_id} after "))
    assert leaving == ["0", "1"], done.stderr
