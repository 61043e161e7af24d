"""The bounds that fit training: a collective waits 10 minutes for a live
peer by default, ringcc.init(timeout=...) sets that per job, joining keeps
its own 60 s, and RINGCC_TIMEOUT_S alone still bounds everything
(tests/ranks/rank_timeouts.py for the job; the settings read in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ringcc
from ringcc import _core

HERE = Path(__file__).resolve().parent
NAMES = ("RINGCC_COLLECTIVE_TIMEOUT_S", "RINGCC_TIMEOUT_S", "HOROVOD_GLOO_TIMEOUT_SECONDS")


@pytest.fixture
def clean_timeouts(monkeypatch):
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    "env, collective, setup",
    [
        ({}, 600.0, 60.0),
        ({"RINGCC_TIMEOUT_S": "5"}, 5.0, 5.0),
        ({"HOROVOD_GLOO_TIMEOUT_SECONDS": "7"}, 7.0, 7.0),
        ({"RINGCC_COLLECTIVE_TIMEOUT_S": "1800"}, 1800.0, 60.0),
        ({"RINGCC_COLLECTIVE_TIMEOUT_S": "2", "RINGCC_TIMEOUT_S": "30"}, 2.0, 30.0),
    ],
)
def test_the_bounds_each_setting_gives(clean_timeouts, env, collective, setup):
    for name, value in env.items():
        clean_timeouts.setenv(name, value)
    assert (_core.collective_timeout_s(), _core.setup_timeout_s()) == (collective, setup)


@pytest.mark.parametrize("value", ["0", "-3", "ten"])
def test_a_bad_collective_timeout_is_named(clean_timeouts, value):
    clean_timeouts.setenv("RINGCC_COLLECTIVE_TIMEOUT_S", value)
    with pytest.raises(ringcc.InvalidArgumentError, match="RINGCC_COLLECTIVE_TIMEOUT_S"):
        _core.collective_timeout_s()


@pytest.mark.parametrize("timeout", [0, -1.0, "60", True])
def test_init_refuses_a_timeout_that_is_not_a_duration(clean_timeouts, timeout):
    with pytest.raises(ringcc.InvalidArgumentError, match="timeout must be a positive number of seconds"):
        ringcc.init(timeout=timeout)
    assert not ringcc.is_initialized()


def test_init_timeout_bounds_collectives_not_joining(ranks):
    out = ranks.scratch_dir("timeouts")
    command = ranks.command(2, [str(HERE / "rank_timeouts.py"), "--out", str(out)], ["--timeout", "60"])
    completed = ranks.run(command, ranks.environment(), 80)
    assert completed.returncode == 0, completed.describe()
    records = []
    for rank in range(2):
        path = out / f"rank{rank}.json"
        assert path.exists(), completed.describe()
        records.append(json.loads(path.read_text()))
    rank0, rank1 = records
    for record in records:
        assert record["before_init"] == {"collective": 600.0, "setup": 60.0}, record
        assert record["init"]["class"] is None, record  # rank 1 came 3 s late: joining has its own bound
        assert record["after_init"] == {"collective": 1.5, "setup": 60.0}, record
    assert rank0["init"]["seconds"] >= 2.0, rank0  # it did wait for the late rank
    wait = rank0["allreduce"]
    assert wait["class"] == "TimeoutError" and "RINGCC_COLLECTIVE_TIMEOUT_S" in wait["message"], wait
    assert 1.3 <= wait["seconds"] <= 4.5, wait
    late = rank1["allreduce"]
    assert late["class"] == "PeerFailureError" and "rank 0" in late["message"], late
    assert late["seconds"] < 2.0, late
