"""pytest's side of the tests: the harness (tests/harness) on sys.path, the
markers of the three kinds of test (tests/README.md) and the fixtures the
folders share. The machinery itself is in harness/rank_groups.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HARNESS_DIR = Path(__file__).resolve().parent / "harness"
if str(HARNESS_DIR) not in sys.path:
    sys.path.insert(0, str(HARNESS_DIR))

from rank_groups import RankLauncher, ringcc  # noqa: E402

# The three kinds of test (tests/README.md), as markers, set by the folder a
# test file is in (its first folder under tests/): `pytest -m unit` runs the
# one-process tests alone. A test file in no folder of this table is an
# error, so that every new test says its kind by where it goes.
KIND_OF_FOLDER = {
    "unit": "unit",
    "ranks": "ranks",
    "launch": "ranks",
    "benchmarks": "ranks",
    "fuzz": "ranks",
    "gpu": "ranks",
    "wheel": "ranks",
    "frameworks": "framework",
}
TESTS_DIR = HARNESS_DIR.parent


def kind_of_test(path: Path) -> str:
    folder = path.resolve().relative_to(TESTS_DIR).parts[0]
    if folder not in KIND_OF_FOLDER:
        raise pytest.UsageError(f"{path}: a test goes in a folder of tests/ that says its kind (tests/README.md)")
    return KIND_OF_FOLDER[folder]


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes several seconds and a lot of memory")
    config.addinivalue_line("markers", "unit: one process, no group of ranks (tests/README.md)")
    config.addinivalue_line("markers", "ranks: groups of ranks, on the core alone (tests/README.md)")
    config.addinivalue_line("markers", "framework: through torch, JAX or MXNet (tests/README.md)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(kind_of_test(item.path))


@pytest.fixture(scope="session")
def ranks(tmp_path_factory) -> RankLauncher:
    return RankLauncher(tmp_path_factory.mktemp("ranks"))


@pytest.fixture(scope="session")
def ringcc_module():
    """The ringcc package the ranks run (imported here too)."""
    return ringcc


# The variables through which a launcher or an MPI job gives a process its
# place in a job; lone_ringcc clears them.
JOB_VARIABLES = (
    "RINGCC_RANK",
    "RINGCC_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "RANK",
    "WORLD_SIZE",
)


@pytest.fixture
def lone_ringcc(ringcc_module, monkeypatch):
    """ringcc in this process, not initialized, with no job in the
    environment (init() makes a job of one rank); shut down afterwards."""
    for name in JOB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    ringcc_module.shutdown()
    yield ringcc_module
    ringcc_module.shutdown()
