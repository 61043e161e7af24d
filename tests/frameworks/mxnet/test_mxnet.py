"""ringcc.mxnet (the kvstore "ring", the Horovod-style API) on MXNet 1.9.1.

MXNet 1.9.1 needs NumPy < 1.24, so it lives in a virtual environment of its
own: $RINGCC_MXNET_VENV, by default ringcc/mxnet-venv in the user's cache
directory ($XDG_CACHE_HOME, else ~/.cache: ~/.cache/ringcc/mxnet-venv),
created here when missing (python -m venv; pip install numpy==1.23.5
mxnet==1.9.1, about 300 MB) and reused by every later run. Remove it with
`rm -rf ~/.cache/ringcc/mxnet-venv`; RINGCC_MXNET_VENV=none skips these tests
without making one. ringcc is pip-installed into it from this
checkout (a C++ build: 2-4 minutes on two cores) when the venv has none, or
when the sources of the compiled core changed since the last install there;
when only the package's Python files changed they are copied over the
installed ones (a stamp file in the venv keeps both hashes).
RINGCC_MXNET_INSTALL=0 skips the install and runs the ringcc that this
pytest process imports instead (same interpreter version; faster while
developing); RINGCC_MXNET_INSTALL=copy copies that installed package, its
compiled core included, into the venv instead of building it again (CI,
whose environment has just built and installed this checkout: the core
uses NumPy only through its Python API, so one build serves both).
Skipped, with the reason, when the venv cannot be created or MXNet cannot
be installed (no network).

Each group in GROUPS starts once (ringrun ... tests/frameworks/mxnet/mxnet_cases.py inside the
venv) and runs every case of mxnet_cases.CASES; each test below asserts on one
case in one group. examples/mxnet_gluon.py and adapters/ringcc/bench/mxnet_pushpull.py run
once each with small settings.

Run only these: python -m pytest tests/frameworks/mxnet/test_mxnet.py
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from mxnet_cases import CASES  # noqa: E402
from rank_groups import HARD_TIMEOUT_MARGIN_S, RINGCC_PARENT, TESTS_DIR, GroupRun, read_results, run_command  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


def venv_path(environ=os.environ) -> Path:
    """$RINGCC_MXNET_VENV, else $XDG_CACHE_HOME/ringcc/mxnet-venv, else ~/.cache/ringcc/mxnet-venv."""
    given = environ.get("RINGCC_MXNET_VENV", "").strip()
    if given:
        return Path(given).expanduser()
    cache = environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "ringcc" / "mxnet-venv"


VENV_DISABLED = os.environ.get("RINGCC_MXNET_VENV", "").strip().lower() == "none"
VENV = venv_path()
PINS = ("numpy==1.23.5", "mxnet==1.9.1")
INSTALL_RINGCC = os.environ.get("RINGCC_MXNET_INSTALL", "1").strip().lower() not in ("0", "false", "no", "off")
COPY_RINGCC = os.environ.get("RINGCC_MXNET_INSTALL", "").strip().lower() == "copy"
STAMP = VENV / "ringcc-source.json"
# What the compiled core is built from, and the Python package (the stamp's hashes).
BUILD_SOURCES = ("CMakeLists.txt", "pyproject.toml", "core", "bindings")
PACKAGE = "adapters/ringcc"

VENV_TIMEOUT_S = 120
PIP_MXNET_TIMEOUT_S = 420
PIP_RINGCC_TIMEOUT_S = 480
GROUP_TIMEOUT_S = 150
# A case that leaves the ranks out of step fails within this bound.
GROUP_ENV = {"RINGCC_TIMEOUT_S": "30", "OMP_NUM_THREADS": "1", "MXNET_CPU_WORKER_NTHREADS": "1"}

GROUPS = {
    "mxnet-2": (2, {}),
    "mxnet-1": (1, {}),
    "mxnet-3": (3, {}),
    # MXNet's NaiveEngine runs every operation inline; TCP between the ranks.
    "mxnet-naive-tcp-2": (2, {"MXNET_ENGINE_TYPE": "NaiveEngine", "RINGCC_TRANSPORT": "tcp"}),
}

_PREFIX = re.compile(r"^\[\d+\]<\w+>: ?")

# The first test sets up the venv (pip installs, a C++ build: minutes): more
# than pyproject's per-test timeout (pytest-timeout) allows. Its own steps
# have the time limits above.
try:
    import pytest_timeout  # noqa: F401
except ImportError:
    pytestmark = []
else:
    pytestmark = [pytest.mark.timeout(VENV_TIMEOUT_S + PIP_MXNET_TIMEOUT_S + PIP_RINGCC_TIMEOUT_S + 300)]


def _python() -> Path:
    return VENV / "bin" / "python"


def _run(command: list[str], timeout: float, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in command],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(REPO),
        env=env,
        stdin=subprocess.DEVNULL,
    )


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _clean_env(extra: dict[str, str] = None) -> dict[str, str]:
    """Our environment without ringcc/Horovod settings, another venv or PYTHONPATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RINGCC_", "HOROVOD_", "MXNET_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    if not INSTALL_RINGCC:
        env["PYTHONPATH"] = RINGCC_PARENT
    env.update(extra or {})
    return env


def _files(names, suffixes=None) -> list[Path]:
    paths = []
    for name in names:
        path = REPO / name
        if path.is_file():
            paths.append(path)
        elif path.is_dir():
            paths.extend(
                p
                for p in path.rglob("*")
                if p.is_file()
                and "__pycache__" not in p.parts
                and not p.name.endswith((".so", ".pyc"))
                and (suffixes is None or p.name.endswith(suffixes))
            )
    return sorted(paths)


def _hash(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _stamp() -> dict[str, str]:
    try:
        return json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return {}


def _copy_installed_ringcc() -> None:
    """This process's installed ringcc (compiled core and all) into the venv."""
    import ringcc

    source = Path(ringcc.__file__).resolve().parent
    assert REPO not in source.parents, f"RINGCC_MXNET_INSTALL=copy needs an installed ringcc, not {source}"
    assert list(source.glob("_core*.so")), f"no compiled core next to {source}"
    where = _run([_python(), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 120, _clean_env())
    assert where.returncode == 0, where.stderr
    target = Path(where.stdout.strip()) / "ringcc"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))


def _pip_install_ringcc() -> None:
    """pip install of this checkout (the compiled core included) into the venv."""
    STAMP.unlink(missing_ok=True)
    if COPY_RINGCC:
        _copy_installed_ringcc()
        return
    # --no-deps: ringcc's only dependency, NumPy, is there (and pinned);
    # RINGCC_JAX_FFI=OFF: no XLA handlers in an MXNet venv.
    try:
        done = _run(
            [
                _python(),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "-q",
                "--no-deps",
                "--force-reinstall",
                REPO,
            ],
            PIP_RINGCC_TIMEOUT_S,
            _clean_env({"RINGCC_JAX_FFI": "OFF"}),
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"pip install {REPO} into {VENV} took more than {PIP_RINGCC_TIMEOUT_S} s")
    assert done.returncode == 0, f"pip install {REPO} into {VENV} failed:\n{_tail(done.stdout + done.stderr, 60)}"


def _sync_package() -> None:
    """Copies the package's Python files over the installed ones (what pip
    would install for them), when only those changed since the last build."""
    where = _run([_python(), "-c", "import os, ringcc; print(os.path.dirname(ringcc.__file__))"], 120, _clean_env())
    assert where.returncode == 0, where.stderr
    site = Path(where.stdout.strip())
    for path in _files([PACKAGE], (".py",)):
        target = site / path.relative_to(REPO / PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def _has_mxnet() -> bool:
    if not _python().exists():
        return False
    check = (
        "import mxnet, numpy; "
        "assert (mxnet.__version__, numpy.__version__) == ('1.9.1', '1.23.5'), "
        "(mxnet.__version__, numpy.__version__)"
    )
    try:
        return _run([_python(), "-c", check], 120, _clean_env()).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _loads() -> subprocess.CompletedProcess:
    """Whether the venv's ringcc (with its compiled core) loads and joins a job of one."""
    return _run([_python(), "-c", "import ringcc, ringcc.mxnet; ringcc.init(); ringcc.shutdown()"], 120, _clean_env())


_timings: dict[str, float] = {}


def test_venv_location():
    """The MXNet environment goes to the user's cache directory unless told otherwise."""
    home = os.path.expanduser("~")
    assert venv_path({}) == Path(home) / ".cache" / "ringcc" / "mxnet-venv"
    assert venv_path({"XDG_CACHE_HOME": "/c"}) == Path("/c/ringcc/mxnet-venv")
    assert venv_path({"RINGCC_MXNET_VENV": "/x/v", "XDG_CACHE_HOME": "/c"}) == Path("/x/v")


@pytest.fixture(scope="module")
def mxnet_venv():
    """The venv's python, with MXNet 1.9.1 and this checkout's ringcc."""
    if VENV_DISABLED:
        pytest.skip("RINGCC_MXNET_VENV=none: no MXNet environment")
    start = time.monotonic()
    if not _has_mxnet():
        if not _python().exists():
            VENV.parent.mkdir(parents=True, exist_ok=True)
            try:
                done = _run([sys.executable, "-m", "venv", VENV], VENV_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pytest.skip(f"creating the MXNet venv {VENV} took more than {VENV_TIMEOUT_S} s")
            if done.returncode != 0:
                pytest.skip(f"cannot create the MXNet venv {VENV} with {sys.executable} -m venv:\n{_tail(done.stderr)}")
        try:
            done = _run(
                [_python(), "-m", "pip", "install", "--disable-pip-version-check", "-q", *PINS],
                PIP_MXNET_TIMEOUT_S,
                _clean_env(),
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"pip install {' '.join(PINS)} took more than {PIP_MXNET_TIMEOUT_S} s")
        if done.returncode != 0 or not _has_mxnet():
            pytest.skip(
                f"cannot install {' '.join(PINS)} into {VENV} (no network?):\n{_tail(done.stdout + done.stderr)}"
            )
    _timings["venv with MXNet"] = time.monotonic() - start
    if INSTALL_RINGCC:
        start = time.monotonic()
        wanted = {"build": _hash(_files(BUILD_SOURCES)), "package": _hash(_files([PACKAGE], (".py",)))}
        stamp = _stamp()
        if COPY_RINGCC or stamp.get("build") != wanted["build"] or _loads().returncode != 0:
            _pip_install_ringcc()
        elif stamp.get("package") != wanted["package"]:
            _sync_package()  # the compiled core is current: no rebuild
        if COPY_RINGCC or stamp != wanted:
            check = _loads()
            assert check.returncode == 0, (
                f"ringcc was installed into {VENV} but does not load there:\n{_tail(check.stdout + check.stderr)}"
            )
            if not COPY_RINGCC:  # a copy is of whatever was installed, not of these sources
                STAMP.write_text(json.dumps(wanted))
        _timings["ringcc install"] = time.monotonic() - start
    return _python()


def _launch(python: Path, size: int, script_args: list[str], timeout: float):
    return [
        str(python),
        "-m",
        "ringcc.launcher",
        "-np",
        str(size),
        "--timeout",
        str(timeout),
        "--",
        str(python),
        *script_args,
    ]


_runs: dict[str, GroupRun] = {}


def group_run(python: Path, tmp_path_factory, name: str) -> GroupRun:
    if name not in _runs:
        size, env = GROUPS[name]
        out = tmp_path_factory.mktemp(name)
        command = _launch(python, size, [str(HERE / "mxnet_cases.py"), "--out", str(out)], GROUP_TIMEOUT_S)
        start = time.monotonic()
        completed = run_command(command, _clean_env({**GROUP_ENV, **env}), GROUP_TIMEOUT_S + HARD_TIMEOUT_MARGIN_S)
        _timings[f"group {name}"] = time.monotonic() - start
        _runs[name] = GroupRun(name, size, str(out), completed, read_results(str(out), size))
    return _runs[name]


CASE_PARAMS = [
    pytest.param(name, case.name, id=f"{name}:{case.name}")
    for name, (size, _) in GROUPS.items()
    for case in CASES.select(size, ())
]


@pytest.mark.parametrize("group_name,case_name", CASE_PARAMS)
def test_case(mxnet_venv, tmp_path_factory, group_name, case_name):
    group_run(mxnet_venv, tmp_path_factory, group_name).assert_case(case_name)


@pytest.mark.parametrize("group_name", list(GROUPS))
def test_group_finished_cleanly(mxnet_venv, tmp_path_factory, group_name):
    run = group_run(mxnet_venv, tmp_path_factory, group_name)
    run.assert_clean_exit()
    size, env = GROUPS[group_name]
    for rank in range(size):
        start = run.start_record(rank)
        assert start["size"] == size
        where = Path(start["ringcc_file"]).resolve()
        if INSTALL_RINGCC:
            assert VENV.resolve() in where.parents, f"rank {rank} ran the ringcc at {where}, not the venv's"
        else:
            assert Path(RINGCC_PARENT).resolve() in where.parents, where
        if size > 1:
            assert start["transport"] == env.get("RINGCC_TRANSPORT", "shm")


def test_example_trains_with_identical_parameters(mxnet_venv, tmp_path):
    """examples/mxnet_gluon.py on 2 ranks (kvstore given by name): loss goes down, parameters bit-identical."""
    command = _launch(
        mxnet_venv,
        2,
        [str(REPO / "examples" / "mxnet_gluon.py"), "--steps", "25", "--mode", "string", "--out", str(tmp_path)],
        120,
    )
    done = run_command(command, _clean_env(GROUP_ENV), 140)
    assert done.returncode == 0, done.describe()
    assert "parameters identical on all ranks: True" in done.stdout, done.describe()
    files = [np.load(tmp_path / f"params_rank{r}.npz") for r in range(2)]
    keys = sorted(k for k in files[0].files if k.startswith("param"))
    assert len(keys) == 6
    for key in keys:
        np.testing.assert_array_equal(files[0][key], files[1][key], err_msg=key)
    assert float(files[0]["last_loss"]) < 0.7 * float(files[0]["first_loss"])


def test_bench_runs(mxnet_venv):
    """adapters/ringcc/bench/mxnet_pushpull.py with tiny settings prints one row per variant."""
    command = _launch(
        mxnet_venv,
        2,
        ["-m", "ringcc.bench.mxnet_pushpull", "--size", "1M", "--iters", "2", "--warmup", "1", "--repeats", "1"],
        120,
    )
    done = run_command(command, _clean_env(GROUP_ENV), 140)
    assert done.returncode == 0, done.describe()
    lines = [_PREFIX.sub("", line) for line in done.stdout.splitlines()]
    rows = {
        line.split()[0]: line.split()
        for line in lines
        if line
        and line.split()[0]
        in ("core", "core-named", "pushpull", "pushpull-sync", "pushpull-16keys", "core-16keys", "rmx-allreduce_")
    }
    assert len(rows) == 7, done.describe()
    assert rows["core"][-1] == "1.000"


def test_rank_that_raises_fails_the_others_at_once(mxnet_venv, tmp_path):
    """Rank 1 raises after init(); rank 0's ringcc.mxnet allreduce fails at once with
    PeerFailureError naming rank 1, and ringrun names rank 1 (tests/ranks/rank_raises.py)."""
    sys.path.insert(0, str(TESTS_DIR / "ranks"))
    from test_hangs import check_raise_outcome

    command = [
        str(mxnet_venv),
        "-m",
        "ringcc.launcher",
        "-np",
        "2",
        "--timeout",
        "90",
        "--grace-period",
        "20",
        "--",
        str(mxnet_venv),
        str(TESTS_DIR / "ranks" / "rank_raises.py"),
        "--api",
        "mxnet",
        "--out",
        str(tmp_path),
    ]
    done = run_command(command, _clean_env(GROUP_ENV), 110)
    check_raise_outcome(tmp_path, done, ())


def test_import_without_mxnet_explains():
    """Outside the venv (no MXNet): the import error says what to install."""
    env = {**_clean_env(), "PYTHONPATH": RINGCC_PARENT}
    done = _run([sys.executable, "-c", "import sys; sys.modules['mxnet'] = None\nimport ringcc.mxnet"], 60, env)
    assert done.returncode != 0
    assert "ringcc.mxnet needs MXNet" in done.stderr and "mxnet==1.9.1" in done.stderr, done.stderr


def test_report_timings(mxnet_venv, tmp_path_factory):
    """Not a check: prints how long the venv, the install and each group took (pytest -s shows it)."""
    for name in GROUPS:
        group_run(mxnet_venv, tmp_path_factory, name)
    print("\nMXNet test timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in _timings.items()))
