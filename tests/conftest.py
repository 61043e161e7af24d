"""pytest's side of the tests: the harness (tests/harness) on sys.path, the
markers of the three kinds of test (tests/README.md) and the session-wide
fixtures. The machinery itself is in harness/rank_groups.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HARNESS_DIR = Path(__file__).resolve().parent / "harness"
if str(HARNESS_DIR) not in sys.path:
    sys.path.insert(0, str(HARNESS_DIR))

from rank_groups import RankLauncher, ringcc  # noqa: E402

# The three kinds of test (tests/README.md), as markers: `pytest -m unit`
# runs the one-process tests alone. A file not listed here is a multi-rank
# test (marker "ranks").
UNIT_TESTS = {
    "test_crypto.py",
    "test_device_api.py",
    "test_device_kernels.py",
    "test_dlpack_abi.py",
    "test_gpu_libraries.py",
    "test_layers.py",
    "test_logging.py",
    "test_mpi_api.py",
    "test_mpi_search.py",
    "test_packaging.py",
    "test_reduction_kernels.py",
    "test_single_rank.py",
    "test_tensorflow_api.py",
}
FRAMEWORK_TESTS = {
    "test_elastic_torchrun.py",
    "test_examples.py",
    "test_jax.py",
    "test_mxnet.py",
    "test_tensorflow.py",
    "test_torch_backend.py",
    "test_torch_clients.py",
    "test_torch_conformance.py",
    "test_torch_horovod.py",
}


def kind_of_test(file_name: str) -> str:
    if file_name in UNIT_TESTS:
        return "unit"
    return "framework" if file_name in FRAMEWORK_TESTS else "ranks"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes several seconds and a lot of memory")
    config.addinivalue_line("markers", "unit: one process, no group of ranks (tests/README.md)")
    config.addinivalue_line("markers", "ranks: groups of ranks, on the core alone (tests/README.md)")
    config.addinivalue_line("markers", "framework: through torch, JAX or MXNet (tests/README.md)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(kind_of_test(item.path.name))


@pytest.fixture(scope="session")
def ranks(tmp_path_factory) -> RankLauncher:
    return RankLauncher(tmp_path_factory.mktemp("ranks"))


@pytest.fixture(scope="session")
def ringcc_module():
    """The ringcc package the ranks run (imported here too)."""
    return ringcc
