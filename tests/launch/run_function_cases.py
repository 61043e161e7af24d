"""Functions that tests/launch/test_run_function.py runs on ranks with
ringcc.run: importable by name (the ranks get this folder on PYTHONPATH), so
they travel by reference with pickle or cloudpickle alike."""

import os
import signal
import threading

import numpy as np

import ringcc


def describe(label, scale=1):
    """(rank, size, label, scale, the sum over ranks of rank * scale), through a real allreduce."""
    ringcc.init()
    total = ringcc.allreduce(np.array([ringcc.rank() * scale], dtype=np.int64))
    return (ringcc.rank(), ringcc.size(), label, scale, int(total[0]))


def rank_only():
    return int(os.environ["RINGCC_RANK"])


def fail_on(failing_rank):
    ringcc.init()
    if ringcc.rank() == failing_rank:
        raise ValueError(f"rank {failing_rank} refuses")
    ringcc.barrier()  # waits for the failing rank: PeerFailureError, a consequence
    return ringcc.rank()


def die_on(dying_rank):
    ringcc.init()
    if ringcc.rank() == dying_rank:
        os.kill(os.getpid(), signal.SIGKILL)
    ringcc.barrier()
    return ringcc.rank()


def exit_quietly_on(quitting_rank):
    if int(os.environ["RINGCC_RANK"]) == quitting_rank:
        os._exit(0)
    return "returned"


def unpicklable_result():
    return threading.Lock()  # a lock does not pickle
