"""Lifetime and topology of `ringcc.tensorflow` (Horovod's basics): init,
shutdown, rank and size (also as tensors), what the build has, timelines.
ringcc.horovod_basics, which ringcc.torch and ringcc.mxnet share, and the
answers for TensorFlow tensors."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import ringcc
from ringcc import _core
from ringcc.horovod_basics import HorovodBasics
from ringcc.tensorflow import _ops


class NotInitializedError(_core.NotInitializedError, ValueError):
    """A call before hvd.init() (a ValueError, as in Horovod)."""


def _on_join(first: bool) -> None:
    _ops.reset_generated_names()


_basics = HorovodBasics(
    "ringcc.tensorflow",
    (NotInitializedError, "ringcc.tensorflow (Horovod API) has not been initialized; use hvd.init()."),
    mpi_communicators=True,
    on_join=_on_join,
    comm_not_every_rank="ringcc.tensorflow: init(comm=ranks) takes every rank of the job only",
)
require_init = _basics.require_init
init = _basics.init
shutdown = _basics.shutdown
is_initialized = _basics.is_initialized
rank = _basics.rank
size = _basics.size
local_rank = _basics.local_rank
local_size = _basics.local_size
cross_rank = _basics.cross_rank
cross_size = _basics.cross_size
start_timeline = _basics.start_timeline
stop_timeline = _basics.stop_timeline


def is_homogeneous() -> bool:
    require_init()
    sizes = ringcc.allgather(np.array([ringcc.local_size()], dtype=np.int64))
    return bool((sizes == sizes[0]).all())


# What this build has, for TensorFlow tensors (the answers every framework
# shares, CUDA among them, are ringcc.horovod_basics'): they go through
# ringcc's own transports, never MPI; NCCL as ringcc finds it at run time.


def mpi_built() -> bool:
    return False


def mpi_enabled() -> bool:
    return False


def nccl_built() -> int:
    return ringcc.nccl_built()


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
