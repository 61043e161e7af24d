"""Lifetime and topology of `ringcc.tensorflow` (Horovod's basics): init,
shutdown, rank and size (also as tensors), what the build has, timelines."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import ringcc
from ringcc import _core
from ringcc.tensorflow import _ops
from ringcc.tensorflow import process_sets as _process_sets


class NotInitializedError(_core.NotInitializedError, ValueError):
    """A call before hvd.init() (a ValueError, as in Horovod)."""


def require_init() -> None:
    if not ringcc.is_initialized():
        raise NotInitializedError("ringcc.tensorflow (Horovod API) has not been initialized; use hvd.init().")


def init(comm=None, process_sets=None):
    """Joins the job (ringcc.init(): ringrun, mpirun, SLURM or torchrun
    variables). `comm` may only be None or cover every rank; `process_sets`:
    a list of ProcessSet to add, or "dynamic" (accepted, changes nothing)."""
    if comm is not None and not isinstance(comm, (list, tuple)):
        ringcc.init(comm)
    else:
        ringcc.init()
    if comm is not None and isinstance(comm, (list, tuple)) and sorted(comm) != list(range(ringcc.size())):
        raise ValueError("ringcc.tensorflow: init(comm=ranks) takes every rank of the job only")
    _ops.reset_generated_names()
    _process_sets._on_init(ringcc.size())
    if process_sets not in (None, "dynamic"):
        for ps in process_sets:
            _process_sets.add_process_set(ps)


def shutdown():
    _process_sets._on_shutdown()
    ringcc.shutdown()


def is_initialized() -> bool:
    return ringcc.is_initialized()


def rank() -> int:
    require_init()
    return ringcc.rank()


def size() -> int:
    require_init()
    return ringcc.size()


def local_rank() -> int:
    require_init()
    return ringcc.local_rank()


def local_size() -> int:
    require_init()
    return ringcc.local_size()


def cross_rank() -> int:
    require_init()
    return ringcc.cross_rank()


def cross_size() -> int:
    require_init()
    return ringcc.cross_size()


def is_homogeneous() -> bool:
    require_init()
    sizes = ringcc.allgather(np.array([ringcc.local_size()], dtype=np.int64))
    return bool((sizes == sizes[0]).all())


def mpi_built() -> bool:
    return False


def mpi_enabled() -> bool:
    return False


def mpi_threads_supported() -> bool:
    return False


def gloo_built() -> bool:
    return False


def gloo_enabled() -> bool:
    return False


def nccl_built() -> int:
    return ringcc.nccl_built()


def ddl_built() -> bool:
    return False


def ccl_built() -> bool:
    return False


def cuda_built() -> bool:
    return bool(ringcc.cuda_info().get("found"))


def rocm_built() -> bool:
    return False


def start_timeline(file_path, mark_cycles=False):
    require_init()
    ringcc.start_timeline(str(file_path))


def stop_timeline():
    require_init()
    ringcc.stop_timeline()


def size_op(process_set_id=0, name=None):
    """The number of ranks, as a tensor (Horovod's graph-time size)."""
    require_init()
    return tf.constant(ringcc.size(), dtype=tf.int32, name=name)


def rank_op(name=None):
    require_init()
    return tf.constant(ringcc.rank(), dtype=tf.int32, name=name)


def local_rank_op(name=None):
    require_init()
    return tf.constant(ringcc.local_rank(), dtype=tf.int32, name=name)


def local_size_op(name=None):
    require_init()
    return tf.constant(ringcc.local_size(), dtype=tf.int32, name=name)
