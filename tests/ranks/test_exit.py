"""Ranks exit cleanly after a peer left while they waited for it: rank 0
waits on a daemon thread in a barrier, an allreduce, a named allreduce
(synchronize) or join() while its main thread exits and rank 1 leaves
(tests/harness/exit_job.py, whose jobs fork from one process). Every exit status is
0 and no C++ runtime aborts a rank ("terminate called ..."). The torch
kinds of the same jobs are in test_torch_backend.py."""

from __future__ import annotations

import exit_job
from rank_groups import run_exit_jobs

ITERATIONS = 4  # jobs of each kind


def test_ranks_exit_cleanly_after_peer_left_during_a_wait(tmp_path):
    records = run_exit_jobs(tmp_path, exit_job.CORE_KINDS, ITERATIONS)
    problems = exit_job.problems(records)
    assert not problems, "\n\n".join(problems)
