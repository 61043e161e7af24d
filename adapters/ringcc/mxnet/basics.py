"""Joining and leaving the job, and what this build has, for ringcc.mxnet
(Horovod's `init(comm=None, process_sets=None)`, `shutdown()`, `*_built()`,
timeline): ringcc.horovod_basics, which ringcc.torch and ringcc.tensorflow
share, and the answers for MXNet arrays. Rank and size are ringcc's own
(ringcc/mxnet/__init__.py)."""

from __future__ import annotations

import ringcc
from ringcc import _core
from ringcc.horovod_basics import HorovodBasics

__all__ = [
    "init",
    "shutdown",
    "is_initialized",
    "start_timeline",
    "stop_timeline",
    "mpi_built",
    "mpi_enabled",
    "nccl_built",
    "cuda_built",
]

# Before init(), ringcc's own calls raise ringcc's NotInitializedError.
_basics = HorovodBasics("ringcc.mxnet", mpi_communicators=True)
init = _basics.init
shutdown = _basics.shutdown
is_initialized = _basics.is_initialized
start_timeline = _basics.start_timeline
stop_timeline = _basics.stop_timeline

# What this build has, for MXNet arrays (the answers every framework shares
# are ringcc.horovod_basics'): ringcc.mxnet runs collectives of CPU arrays
# through ringcc's own shared memory, TCP or MPI transports, and runs no
# CUDA or NCCL code for MXNet.


def mpi_built() -> bool:
    """True when ringcc's MPI plugin is installed and loads (ringcc can
    then start under mpirun, and RINGCC_TRANSPORT=mpi moves data over MPI)."""
    return ringcc.mpi_built()


def mpi_enabled() -> bool:
    """True when this job's collectives go over MPI (RINGCC_TRANSPORT=mpi)."""
    return _core.is_initialized() and ringcc.transport_name() == "mpi"


def nccl_built() -> int:
    """0: NDArrays never go through NCCL (ringcc.mxnet runs CPU arrays).
    An int, as Horovod's (a version, or 0), for scripts that compare it."""
    return 0


def cuda_built() -> bool:
    """False: ringcc.mxnet runs collectives of CPU arrays only."""
    return False
