"""Horovod's basics as ringcc's Horovod-style APIs share them
(ringcc/horovod_basics.py), in this process as a job of one rank: the API's
own error before init(), init(comm=...) with every rank, with a rank the job
lacks and with something that is no list of ranks, what an API does on
joining, and the build queries every framework answers alike
(tests/conftest.py's lone_ringcc: no job in the environment)."""

from __future__ import annotations

import pytest

from ringcc import horovod_basics
from ringcc.horovod_basics import HorovodBasics


class ApiNotInitializedError(ValueError):
    pass


def test_queries_before_init_raise_the_apis_error(lone_ringcc):
    basics = HorovodBasics("ringcc.test", (ApiNotInitializedError, "ringcc.test: use hvd.init() first"))
    for query in (basics.rank, basics.size, basics.local_rank, basics.cross_size, basics.stop_timeline):
        with pytest.raises(ApiNotInitializedError, match=r"ringcc\.test: use hvd\.init\(\) first"):
            query()
    assert basics.is_initialized() is False
    basics.init()
    assert (basics.rank(), basics.size(), basics.local_size(), basics.cross_rank()) == (0, 1, 1, 0)
    assert basics.is_initialized() is True


def test_an_api_without_its_own_error_leaves_the_queries_to_ringcc(lone_ringcc):
    basics = HorovodBasics("ringcc.test")
    basics.require_init()  # nothing of its own to raise
    with pytest.raises(lone_ringcc.NotInitializedError):
        basics.rank()


def test_init_takes_a_list_of_every_rank_and_calls_on_join_each_time(lone_ringcc):
    joins = []
    basics = HorovodBasics("ringcc.test", on_join=joins.append)
    basics.init(comm=[0])
    basics.init(comm=range(1))  # again: a no-op for ringcc, not a first join
    basics.init(process_sets="dynamic")
    assert joins == [True, False, False]
    assert lone_ringcc.size() == 1


def test_init_with_ranks_the_job_lacks_says_so_in_the_apis_words(lone_ringcc):
    said = r"^ringcc\.test\.init: comm=\[0, 1\] must list every rank of the job \(0\.\.0\); use process sets"
    with pytest.raises(ValueError, match=said):
        HorovodBasics("ringcc.test").init(comm=[1, 0])
    own = "ringcc.other: init(comm=ranks) takes every rank of the job only"
    with pytest.raises(ValueError, match=r"^ringcc\.other: init\(comm=ranks\) takes every rank of the job only$"):
        HorovodBasics("ringcc.other", comm_not_every_rank=own).init(comm=(0, 2))


def test_init_with_no_list_of_ranks(lone_ringcc):
    # An API without MPI communicators refuses it before joining the job.
    said = r"^ringcc\.test\.init: comm must be None or a list of ranks \(ringcc has no MPI communicators\)$"
    with pytest.raises(ValueError, match=said):
        HorovodBasics("ringcc.test").init(comm=object())
    assert not lone_ringcc.is_initialized()
    # One that takes them hands it to ringcc.init, which says what it takes.
    with pytest.raises(lone_ringcc.InvalidArgumentError, match="comm must be an mpi4py communicator"):
        HorovodBasics("ringcc.test", mpi_communicators=True).init(comm=object())


def test_build_queries_every_framework_answers_alike():
    for query in ("mpi_threads_supported", "gloo_built", "gloo_enabled", "ddl_built", "ccl_built", "rocm_built"):
        assert getattr(horovod_basics, query)() is False, query
    assert isinstance(horovod_basics.cuda_found(), bool)
