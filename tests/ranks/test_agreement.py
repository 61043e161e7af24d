"""The agreement over a transport, small allreduces riding along in it:
ranks over TCP run tests/ranks/rank_agreement_cases.py, at 3 ranks (one
above the power of two) with rank 2 never riding along, and at 4 (a cube
of two steps)."""

from __future__ import annotations

import pytest
from rank_agreement_cases import CASES

GROUPS = {
    "agreement-tcp-3": (3, {"RINGCC_TEST_NOT_INLINE_RANK": "2"}),
    "agreement-tcp-4": (4, {}),
}
GROUP_ENV = {"RINGCC_TRANSPORT": "tcp", "RINGCC_TIMEOUT_S": "30"}


def agreement_run(ranks, config: str):
    size, env = GROUPS[config]
    return ranks.group(config, size, "ranks/rank_agreement_cases.py", env={**GROUP_ENV, **env}, timeout=180)


@pytest.mark.parametrize(
    "config,case_name",
    [pytest.param(config, case.name, id=f"{config}:{case.name}") for config in GROUPS for case in CASES],
)
def test_case(ranks, config, case_name):
    agreement_run(ranks, config).assert_case(case_name)
