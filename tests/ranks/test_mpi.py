"""ringcc under mpirun: bootstrap through MPI (no MASTER_ADDR), the MPI
transport (RINGCC_TRANSPORT=mpi) over the whole collective matrix with 2 and
4 ranks, ringcc beside mpi4py in the same process (either initialising MPI
first), a communicator handed to init(), mismatches and bounded waits, and
mpi_built() telling the truth.

Each group starts mpirun once and runs every case of rank_mpi_cases.CASES
inside it. Everything skips, with the reason, where mpirun or ringcc's MPI
plugin is missing; the cases that use mpi4py skip without it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rank_groups import REPO_DIR, GroupRun, rank_environment, ringcc, run_command
from rank_harness import read_results
from rank_mpi_cases import CASES

HERE = Path(__file__).resolve().parent

MPI_GROUP_TIMEOUT_S = 180


def find_mpirun():
    here = Path(sys.executable).parent / "mpirun"
    if os.access(here, os.X_OK):
        return str(here)
    return shutil.which("mpirun")


MPIRUN = find_mpirun()
HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None


def skip_reason():
    if MPIRUN is None:
        return "mpirun not found (next to the interpreter or on PATH)"
    if not ringcc.mpi_built():
        return f"ringcc was built without MPI: {ringcc.mpi_info()['error']}"
    return None


needs_mpi = pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))


def mpirun_command(np_: int, argv):
    cmd = [MPIRUN, "-np", str(np_), "--bind-to", "none"]
    if np_ > (os.cpu_count() or 1):
        cmd.append("--oversubscribe")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd + [sys.executable, *argv]


def mpi_environment(extra: dict[str, str]) -> dict[str, str]:
    env = rank_environment(extra)
    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        env.pop(name, None)  # the job must find itself through MPI
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


@dataclass(frozen=True)
class Group:
    size: int
    env: dict[str, str] = field(default_factory=dict)
    mpi4py_first: bool = False
    cases: tuple[str, ...] = ()


MPI_DATA = {"RINGCC_TRANSPORT": "mpi"}
MATRIX = {
    # MPI's own collectives where auto picks them, ring above the crossover.
    "mpi-2": Group(2, env=MPI_DATA, mpi4py_first=True),
    # ringcc's algorithms over MPI point-to-point for every size.
    "mpi-4-ring": Group(4, env={**MPI_DATA, "RINGCC_MPI_ALGORITHM": "ring"}),
    # MPI's own collectives wherever MPI can (uneven reduce-scatter blocks, alltoallv).
    "mpi-4-native": Group(4, env={**MPI_DATA, "RINGCC_MPI_ALGORITHM": "native"}, mpi4py_first=True),
    # The default data path under mpirun (shared memory here), bootstrapped through MPI.
    "mpi-2-auto": Group(2, cases=("allreduce/float32/*", "allgather/*", "barrier", "mpi/*")),
}
GROUP_ENV = {"RINGCC_TIMEOUT_S": "30"}
_runs: dict[str, GroupRun] = {}


def mpi_group(name: str, tmp_root: Path) -> GroupRun:
    if name not in _runs:
        spec = MATRIX[name]
        out_dir = tmp_root / name
        out_dir.mkdir(parents=True, exist_ok=True)
        argv = [str(HERE / "rank_mpi_cases.py"), "--out", str(out_dir)]
        if spec.cases:
            argv += ["--cases", ",".join(spec.cases)]
        env = {**GROUP_ENV, **spec.env}
        if spec.mpi4py_first and HAVE_MPI4PY:
            env["RINGCC_TEST_MPI4PY_FIRST"] = "1"
        completed = run_command(mpirun_command(spec.size, argv), mpi_environment(env), MPI_GROUP_TIMEOUT_S)
        _runs[name] = GroupRun(name, spec.size, str(out_dir), completed, read_results(str(out_dir), spec.size))
    return _runs[name]


@pytest.fixture(scope="module")
def mpi_root(tmp_path_factory):
    return tmp_path_factory.mktemp("mpi")


def selected(spec: Group):
    return CASES.select(spec.size, (), list(spec.cases) or None)


CASE_PARAMS = [
    pytest.param(name, case.name, id=f"{name}:{case.name}") for name, spec in MATRIX.items() for case in selected(spec)
]


@needs_mpi
@pytest.mark.parametrize("group,case_name", CASE_PARAMS)
def test_case(mpi_root, group, case_name):
    mpi_group(group, mpi_root).assert_case(case_name)


@needs_mpi
@pytest.mark.parametrize("group", list(MATRIX))
def test_group_finished_cleanly(mpi_root, group):
    """Every rank ran every case over the transport asked for, and mpirun exited 0 (MPI finalised)."""
    run = mpi_group(group, mpi_root)
    run.assert_clean_exit()
    assert run.completed.returncode == 0, run.completed.describe()
    spec = MATRIX[group]
    for rank in range(spec.size):
        start = run.start_record(rank)
        assert start["size"] == spec.size
        assert start["transport"] == spec.env.get("RINGCC_TRANSPORT", "shm"), f"rank {rank}: {start}"
        assert start["cases"] == len(selected(spec))


@needs_mpi
def test_timeout_and_abort_over_mpi(tmp_path):
    """A rank left alone times out after RINGCC_TIMEOUT_S; its abort makes the peer fail at once."""
    completed = run_command(
        mpirun_command(2, [str(HERE / "mpi_deadpeer.py")]), mpi_environment({"RINGCC_TRANSPORT": "mpi"}), 90
    )
    lines = [l for l in completed.stdout.splitlines() if l.startswith("RESULT")]
    rank0 = [l for l in lines if l.startswith("RESULT rank 0")]
    rank1 = [l for l in lines if l.startswith("RESULT rank 1")]
    assert rank0 and "TimeoutError after 2." in rank0[0] and "waiting for rank(s) 1" in rank0[0], completed.describe()
    assert rank1 and "PeerFailureError after 0." in rank1[0] and "rank 0 aborted" in rank1[0], completed.describe()


def _python(code: str, env_extra: dict[str, str]):
    env = rank_environment(env_extra)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=str(REPO_DIR), capture_output=True, text=True, timeout=60
    )


def test_mpi_built_is_truthful():
    """mpi_built() is True exactly when a libmpi was found and the plugin for its ABI loads."""
    info = ringcc.mpi_info()
    plugins = sorted(p.name for p in Path(ringcc._core.__file__).parent.glob("libringcc_mpi_*.so"))
    assert ringcc.mpi_built() == info["built"]
    assert ringcc.build_info()["transports"]["mpi"] == info["built"]
    if not plugins:
        assert not info["built"] and "without MPI" in info["error"], info
    elif info["built"]:
        assert info["library"] and info["abi"] in ("openmpi", "mpich", "mpiabi"), info
        assert (
            Path(info["plugin"]).name
            == {
                "openmpi": "libringcc_mpi_openmpi.so",
                "mpich": "libringcc_mpi_mpich.so",
                "mpiabi": "libringcc_mpi_abi.so",
            }[info["abi"]]
        ), info
        assert Path(info["libmpi"]).exists() and info["found_by"], info
    else:
        assert "no MPI library found" in info["error"], info


def test_mpi_built_false_when_the_plugin_is_missing(tmp_path):
    code = (
        "import ringcc; i = ringcc.mpi_info(); print(ringcc.mpi_built(), "
        "ringcc.build_info()['transports']['mpi'], i['error'])"
    )
    done = _python(code, {"RINGCC_MPI_PLUGIN": str(tmp_path / "libringcc_mpi.so")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("False False cannot load the MPI plugin"), done.stdout


def _init_under_ringrun(transport: str):
    """Two ranks under ringrun that call init() with RINGCC_TRANSPORT=transport
    and print InvalidArgumentError's message."""
    launcher = [
        sys.executable,
        "-m",
        "ringcc.launcher",
        "-np",
        "2",
        "--timeout",
        "60",
        "--",
        sys.executable,
        "-c",
        "import ringcc\ntry:\n    ringcc.init()\nexcept ringcc.InvalidArgumentError as e:\n    print('ERR', e)\n",
    ]
    return run_command(launcher, rank_environment({"RINGCC_TRANSPORT": transport, "RINGCC_TIMEOUT_S": "20"}), 90)


def test_transport_mpi_without_mpi_launcher_is_a_clear_error():
    """RINGCC_TRANSPORT=mpi outside an MPI job: InvalidArgumentError saying what is needed."""
    if not ringcc.mpi_built():
        pytest.skip("ringcc was built without MPI")
    done = _init_under_ringrun("mpi")
    # Rank 0 raises it; a rank still meeting rank 0's store may see the store close instead.
    assert done.returncode is not None and "needs a job started through MPI" in done.stdout, done.describe()


def test_unknown_transport_lists_mpi():
    done = _init_under_ringrun("carrier-pigeon")
    assert done.returncode is not None and "must be auto, tcp, shm or mpi, got 'carrier-pigeon'" in done.stdout, (
        done.describe()
    )


# --------------------------------------------------------------------------
# ringrun --mpi and --check-build

from ringcc.launch import build_report, cli, errors, mpirun  # noqa: E402


def _args(argv):
    parser = cli.build_parser()
    options, command = parser.split_command(argv)
    return parser.parse_args(options), command


def test_plan_mpi_command_open_mpi():
    args, command = _args(["--mpi", "-np", "4", "-H", "a:2,b:2", "-x", "FOO", "-x", "BAR=1", "python", "t.py", "-x"])
    env = {"RINGCC_TIMEOUT_S": "9", "PATH": "/bin", "FOO": "x", "OTHER": "y"}
    cmd = mpirun.plan_mpi_command(args, command, env, "/m/mpirun", "openmpi", cpu_count=2, is_root=True)
    assert cmd[:5] == ["/m/mpirun", "-np", "4", "--bind-to", "none"]
    assert cmd[cmd.index("-H") + 1] == "a:2,b:2"
    assert "--oversubscribe" not in cmd  # hosts given: their slots decide
    assert "--allow-run-as-root" in cmd
    exported = [cmd[i + 1] for i, word in enumerate(cmd[:-3]) if word == "-x"]
    assert {"RINGCC_TIMEOUT_S", "PATH", "FOO", "BAR=1"} <= set(exported) and "OTHER" not in exported
    assert cmd[-3:] == ["python", "t.py", "-x"]


def test_plan_mpi_command_local_and_mpich():
    args, command = _args(["--mpi", "-np", "3", "--mpi-args", "--mca btl self,sm", "python", "t.py"])
    cmd = mpirun.plan_mpi_command(args, command, {}, "mpirun", "openmpi", cpu_count=2)
    assert "--oversubscribe" in cmd and "--allow-run-as-root" not in cmd
    assert cmd[-5:] == ["--mca", "btl", "self,sm", "python", "t.py"]
    args, command = _args(["--mpi", "-np", "2", "-H", "a:1,b:1", "python", "t.py"])
    cmd = mpirun.plan_mpi_command(args, command, {"RINGCC_X": "1"}, "mpiexec", "mpich")
    assert cmd[:5] == ["mpiexec", "-n", "2", "-hosts", "a:1,b:1"]
    assert cmd[cmd.index("-genvlist") + 1] == "RINGCC_X"
    with pytest.raises(errors.LaunchError):
        mpirun.plan_mpi_command(_args(["--mpi", "--agent", "x", "python"])[0], ["python"], {}, "m", "openmpi")


@needs_mpi
def test_ringrun_mpi_starts_a_job_through_mpirun():
    script = (
        "import ringcc, numpy as np\nringcc.init()\n"
        "s = ringcc.allreduce(np.array([ringcc.rank() + 1.0]))\n"
        "print('JOB', ringcc.rank(), ringcc.size(), ringcc.transport_name(), float(s[0]), flush=True)\n"
    )
    cmd = [
        sys.executable,
        "-m",
        "ringcc.launcher",
        "--mpi",
        "-np",
        "2",
        "--timeout",
        "90",
        sys.executable,
        "-c",
        script,
    ]
    done = run_command(cmd, mpi_environment({"RINGCC_TRANSPORT": "mpi", "RINGCC_TIMEOUT_S": "30"}), 120)
    lines = sorted(l for l in done.stdout.splitlines() if l.startswith("JOB"))
    assert done.returncode == 0 and lines == ["JOB 0 2 mpi 3.0", "JOB 1 2 mpi 3.0"], done.describe()


def test_check_build_reports_mpi():
    done = run_command([sys.executable, "-m", "ringcc.launcher", "--check-build"], rank_environment(), 60)
    assert done.returncode == 0, done.describe()
    want = "MPI: yes (" if ringcc.mpi_built() else "MPI: no ("
    assert want in done.stdout, done.stdout
    text = build_report.format_build_report(
        {"version": "0", "transports": {"mpi": False}, "mpi": {"built": False, "error": "no plugin"}}, {}
    )
    assert "[ ] MPI" in text and "MPI: no (no plugin)" in text
