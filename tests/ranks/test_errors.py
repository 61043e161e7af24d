"""Errors: calls before init() and after shutdown() (in this process), and
bad arguments and disagreeing ranks inside groups of ranks (rank_errors.py):
every rank gets the documented exception class and a message that says what
went wrong, quickly, and the group keeps working afterwards."""

from __future__ import annotations

import numpy as np
import pytest
from rank_errors import CASES

# --------------------------------------------------------------------------
# In this process: no job, no ranks (tests/conftest.py's lone_ringcc)


def uninitialized_calls(ringcc):
    x = np.ones(4, dtype=np.float32)
    return {
        "allreduce": lambda: ringcc.allreduce(x),
        "allreduce_": lambda: ringcc.allreduce_(x),
        "allreduce_async": lambda: ringcc.allreduce_async(x),
        "allreduce_async_": lambda: ringcc.allreduce_async_(x),
        "allgather": lambda: ringcc.allgather(x),
        "allgather into out": lambda: ringcc.allgather(x, out=np.empty(8, dtype=np.float32)),
        "allgather_async": lambda: ringcc.allgather_async(x),
        "broadcast": lambda: ringcc.broadcast(x, 0),
        "broadcast_": lambda: ringcc.broadcast_(x, 0),
        "broadcast_async": lambda: ringcc.broadcast_async(x, 0),
        "reduce_scatter": lambda: ringcc.reduce_scatter(x),
        "reduce_scatter_async": lambda: ringcc.reduce_scatter_async(x),
        "alltoall": lambda: ringcc.alltoall(x),
        "alltoall with splits": lambda: ringcc.alltoall(x, [4]),
        "alltoall_async": lambda: ringcc.alltoall_async(x),
        "barrier": ringcc.barrier,
        "barrier_async": ringcc.barrier_async,
        "grouped_allreduce": lambda: ringcc.grouped_allreduce([x]),
        "grouped_allreduce_async_": lambda: ringcc.grouped_allreduce_async_([x]),
        "rank": ringcc.rank,
        "size": ringcc.size,
        "local_rank": ringcc.local_rank,
        "local_size": ringcc.local_size,
        "cross_rank": ringcc.cross_rank,
        "cross_size": ringcc.cross_size,
    }


def assert_not_initialized(ringcc):
    assert not ringcc.is_initialized()
    for what, call in uninitialized_calls(ringcc).items():
        with pytest.raises(ringcc.NotInitializedError, match="init") as caught:
            call()
        assert isinstance(caught.value, RuntimeError), what
        assert isinstance(caught.value, ringcc.RingccError), what


def test_calls_before_init_raise_not_initialized(lone_ringcc):
    assert_not_initialized(lone_ringcc)


def test_calls_after_shutdown_raise_not_initialized(lone_ringcc):
    ringcc = lone_ringcc
    ringcc.init()
    assert ringcc.is_initialized()
    assert (ringcc.rank(), ringcc.size()) == (0, 1)
    np.testing.assert_array_equal(ringcc.allreduce(np.arange(4, dtype=np.int32)), np.arange(4, dtype=np.int32))
    ringcc.shutdown()
    assert_not_initialized(ringcc)
    ringcc.shutdown()  # harmless when already shut down


def test_handle_of_a_collective_issued_before_shutdown(lone_ringcc):
    ringcc = lone_ringcc
    ringcc.init()
    handle = ringcc.allreduce_async(np.full(3, 2.0, dtype=np.float64))
    ringcc.shutdown()  # waits for queued work
    assert handle.done()
    np.testing.assert_array_equal(handle.wait(), np.full(3, 2.0))


def test_error_classes(ringcc_module):
    ringcc = ringcc_module
    builtin = {
        "NotInitializedError": RuntimeError,
        "InvalidArgumentError": ValueError,
        "UnsupportedTypeError": TypeError,
        "MismatchError": ValueError,
        "PeerFailureError": RuntimeError,
        "TimeoutError": TimeoutError,
    }
    for name, base in builtin.items():
        cls = getattr(ringcc, name)
        assert issubclass(cls, ringcc.RingccError), name
        assert issubclass(cls, base), f"{name} should also be a {base.__name__}"
    assert issubclass(ringcc.RingccError, Exception)


# --------------------------------------------------------------------------
# Inside groups of ranks

GROUPS = {
    "errors-shm-2": (2, {}, ("torch",)),
    "errors-tcp-2": (2, {"RINGCC_TRANSPORT": "tcp"}, ()),
    "errors-shm-3": (3, {}, ()),
}
GROUP_ENV = {"RINGCC_TIMEOUT_S": "30"}


def error_run(ranks, config):
    size, env, tags = GROUPS[config]
    return ranks.group(config, size, "ranks/rank_errors.py", env={**GROUP_ENV, **env}, tags=tags, timeout=120)


CASE_PARAMS = [
    pytest.param(config, case.name, id=f"{config}:{case.name}")
    for config, (size, _, tags) in GROUPS.items()
    for case in CASES.select(size, tags)
]


@pytest.mark.parametrize("config,case_name", CASE_PARAMS)
def test_error_case(ranks, config, case_name):
    error_run(ranks, config).assert_case(case_name)


@pytest.mark.parametrize("config", list(GROUPS))
def test_error_group_finished_cleanly(ranks, config):
    run = error_run(ranks, config)
    run.assert_clean_exit()
    # No rank hit a timeout or peer failure on the way.
    assert "TimeoutError" not in run.completed.stderr and "PeerFailureError" not in run.completed.stderr, (
        run.completed.describe()
    )
