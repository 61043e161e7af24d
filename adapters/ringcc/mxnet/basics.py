"""Joining and leaving the job, and what this build has, for ringcc.mxnet
(Horovod's `init(comm=None, process_sets=None)`, `shutdown()`, `*_built()`,
timeline)."""

from __future__ import annotations

import ringcc
from ringcc import _core
from ringcc import process_sets as _process_sets
from ringcc.process_sets import ProcessSet, add_process_set

__all__ = [
    "init",
    "shutdown",
    "is_initialized",
    "start_timeline",
    "stop_timeline",
    "mpi_built",
    "mpi_enabled",
    "mpi_threads_supported",
    "gloo_built",
    "gloo_enabled",
    "nccl_built",
    "ddl_built",
    "ccl_built",
    "cuda_built",
    "rocm_built",
]


def init(comm=None, process_sets=None):
    """Joins the job (`ringcc.init()`: ringrun, torchrun, mpirun or SLURM
    variables; a lone process is rank 0 of 1). Calling it again is a no-op.

    `comm`: None, an mpi4py communicator whose ranks form the job (as
    `ringcc.init(comm)`), or a list of every rank of the job (ringcc cannot
    run Horovod on a subset: use process sets). `process_sets`: a list of
    ProcessSet to register (every rank passes the same list), or "dynamic"
    (accepted; ringcc always allows add_process_set)."""
    ranks = None
    if isinstance(comm, (list, tuple, range)):
        ranks, comm = sorted(int(r) for r in comm), None
    ringcc.init(comm)
    if ranks is not None and ranks != list(range(ringcc.size())):
        raise ValueError(
            f"ringcc.mxnet.init: comm={ranks} must list every rank of the job "
            f"(0..{ringcc.size() - 1}); use process sets for subsets"
        )
    _process_sets._on_init(ringcc.size())
    if process_sets is not None and process_sets != "dynamic":
        for ps in process_sets:
            if isinstance(ps, ProcessSet) and ps.process_set_id is not None:
                continue
            add_process_set(ps)


def shutdown():
    """Leaves the job (process sets first); `init()` may be called again."""
    _process_sets._on_shutdown()
    ringcc.shutdown()


def is_initialized() -> bool:
    return bool(_core.is_initialized())


def start_timeline(file_path, mark_cycles=False):
    """Writes a Chrome-trace timeline of the engine's named collectives to
    `file_path` (rank 0). `mark_cycles` is accepted and ignored."""
    del mark_cycles
    ringcc.start_timeline(str(file_path))


def stop_timeline():
    ringcc.stop_timeline()


# What this build has, for MXNet arrays: ringcc.mxnet runs collectives of
# CPU arrays through ringcc's own shared memory, TCP or MPI transports; it
# has no Gloo, oneCCL or DDL, and runs no CUDA, NCCL or ROCm code for MXNet.


def mpi_built() -> bool:
    """True when ringcc's MPI plugin is installed and loads (ringcc can
    then start under mpirun, and RINGCC_TRANSPORT=mpi moves data over MPI)."""
    return ringcc.mpi_built()


def mpi_enabled() -> bool:
    """True when this job's collectives go over MPI (RINGCC_TRANSPORT=mpi)."""
    return _core.is_initialized() and ringcc.transport_name() == "mpi"


def mpi_threads_supported() -> bool:
    """False: ringcc does not promise MPI's multi-threaded mode to the
    program. (Horovod raises ValueError when MPI is not enabled; ringcc
    answers False so that scripts branching on it go on.)"""
    return False


def gloo_built() -> bool:
    return False


def gloo_enabled() -> bool:
    return False


def nccl_built() -> int:
    """0: NDArrays never go through NCCL (ringcc.mxnet runs CPU arrays).
    An int, as Horovod's (a version, or 0), for scripts that compare it."""
    return 0


def ddl_built() -> bool:
    return False


def ccl_built() -> bool:
    return False


def cuda_built() -> bool:
    """False: ringcc.mxnet runs collectives of CPU arrays only."""
    return False


def rocm_built() -> bool:
    return False
