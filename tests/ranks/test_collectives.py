"""The collectives checked against NumPy, in groups of 1 to 4 ranks.

Each group in MATRIX starts once (ringrun ... tests/ranks/rank_cases.py) and runs
every case of rank_cases.CASES that suits its size; each test below asserts
on what the ranks recorded for one case in one group, so a failure names the
case and the group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rank_cases import CASES


@dataclass(frozen=True)
class Group:
    size: int
    env: dict[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()


FUSION_1MIB = {"RINGCC_FUSION_THRESHOLD": str(1 << 20)}
MATRIX = {
    "shm-1": Group(1),
    "shm-2": Group(2, tags=("torch",)),
    # Allgathers longer than a shared-memory piece: read from the peers
    # directly (cross-memory attach) in shm-2 and shm-4, staged here.
    # Allreduces write their areas as RINGCC_SHM_STORES says: chosen by
    # timing in shm-2, bypassing the cache here, plain stores in shm-4.
    "shm-3": Group(3, env={"RINGCC_SHM_CMA": "0", "RINGCC_SHM_STORES": "bypass", **FUSION_1MIB}),
    "shm-4": Group(4, env={"RINGCC_SHM_STORES": "plain"}),
    # Collectives from 64 KiB and every agreement on the links' shared
    # streams, the data of smaller ones on the one-way streams: the two
    # alternate on a link.
    "tcp-2": Group(2, env={"RINGCC_TRANSPORT": "tcp", "RINGCC_TCP_ONE_WAY_BYTES": "65536", **FUSION_1MIB}),
    # Several sockets per stream with small stripes: messages cross sockets.
    "tcp-3": Group(3, env={"RINGCC_TRANSPORT": "tcp", "RINGCC_TCP_SOCKETS": "3", "RINGCC_TCP_STRIPE_BYTES": "65536"}),
}
# A stuck collective fails within this bound instead of the default 60 s.
GROUP_ENV = {"RINGCC_TIMEOUT_S": "30"}


def matrix_run(ranks, config: str):
    spec = MATRIX[config]
    return ranks.group(config, spec.size, "ranks/rank_cases.py", env={**GROUP_ENV, **spec.env}, tags=spec.tags)


CASE_PARAMS = [
    pytest.param(config, case.name, id=f"{config}:{case.name}")
    for config, spec in MATRIX.items()
    for case in CASES.select(spec.size, spec.tags)
]


@pytest.mark.parametrize("config,case_name", CASE_PARAMS)
def test_case(ranks, config, case_name):
    matrix_run(ranks, config).assert_case(case_name)


@pytest.mark.parametrize("config", list(MATRIX))
def test_group_finished_cleanly(ranks, ringcc_module, config):
    """Every rank ran every case to the end, over the transport asked for, with this process's ringcc."""
    run = matrix_run(ranks, config)
    run.assert_clean_exit()
    spec = MATRIX[config]
    expected_transport = "self" if spec.size == 1 else spec.env.get("RINGCC_TRANSPORT", "shm")
    for rank in range(spec.size):
        start = run.start_record(rank)
        assert start["size"] == spec.size
        assert start["transport"] == expected_transport, f"rank {rank}: {start}"
        assert Path(start["ringcc_file"]).resolve() == Path(ringcc_module.__file__).resolve(), (
            f"rank {rank} imported {start['ringcc_file']}, the tests import {ringcc_module.__file__}"
        )
        assert start["cases"] == len(CASES.select(spec.size, spec.tags))


HUGE_CASE = "allreduce/uint8+int8/3GiB+1"
HUGE_MEMORY_BYTES = 9 << 30  # two ranks with 3 GiB each, plus headroom


@pytest.mark.slow
def test_allreduce_3gib_64bit_counts(ranks):
    """allreduce_ of 3 GiB + 1 one-byte elements on 2 ranks (counts past 2^31 and 2^32 - 1 bytes)."""
    available = ranks.memory_available()
    if available is not None and available < HUGE_MEMORY_BYTES:
        pytest.skip(
            f"needs about {HUGE_MEMORY_BYTES >> 30} GiB of free memory, {available / (1 << 30):.1f} GiB available"
        )
    run = ranks.group(
        "huge-2", 2, "ranks/rank_cases.py", env=GROUP_ENV, tags=("huge",), cases=(HUGE_CASE,), timeout=180
    )
    run.assert_case(HUGE_CASE)
    run.assert_clean_exit()
