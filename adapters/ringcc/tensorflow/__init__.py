"""Horovod's TensorFlow API over ringcc: a Horovod TF2 script changes one import.

    import ringcc.tensorflow as hvd            # was: import horovod.tensorflow as hvd

    hvd.init()
    with tf.GradientTape() as tape:
        loss = ...
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)

Every collective is one of ringcc's TensorFlow ops (_ops.py): it runs
eagerly and inside tf.function, hands the tensors' memory to ringcc's
background engine as named collectives, and takes part in the engine's
negotiation and fusion. `ringcc.tensorflow.keras` (also `ringcc.keras`) is
the Keras 3 API. Launch with `ringrun -np N python train.py`. See
docs/tensorflow.md.

The package gathers its modules' names, lowest first: process_sets.py,
basics.py (init, rank, size, ...), collectives.py, functions.py
(variables, objects), gradients.py (the gradients' reduction),
gradient_tape.py, optimizer.py (tf.compat.v1) and elastic.py. None of them
imports the package.
"""

from __future__ import annotations

import tensorflow as tf

from ringcc import _versions as _ringcc_versions
from ringcc.elastic import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401  (re-exported)
from ringcc.tensorflow._ops import Adasum, Average, Max, Min, Product, Sum  # noqa: F401  (re-exported)
from ringcc.tensorflow.compression import Compression, Compressor, FP16Compressor, NoneCompressor  # noqa: F401

# TensorFlow: [low, high). Lowest: 2.16, the first whose tf.keras is Keras
# 3 (and whose C API has the asynchronous kernels the ops need since 2.13).
TESTED_TENSORFLOW = ("2.16", "2.22")
if not _ringcc_versions.in_range(tf.__version__, *TESTED_TENSORFLOW):
    import logging

    logging.getLogger("ringcc.tensorflow").warning(
        "ringcc.tensorflow is tested with TensorFlow >= %s and < %s; this is %s",
        *TESTED_TENSORFLOW,
        tf.__version__,
    )

from ringcc.horovod_basics import ccl_built, ddl_built, gloo_built, gloo_enabled, mpi_threads_supported, rocm_built  # noqa: E402,F401
from ringcc.horovod_basics import cuda_found as cuda_built  # noqa: E402,F401
from ringcc.tensorflow import elastic  # noqa: E402,F401
from ringcc.tensorflow.basics import (  # noqa: E402,F401
    NotInitializedError,
    cross_rank,
    cross_size,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_rank_op,
    local_size,
    local_size_op,
    mpi_built,
    mpi_enabled,
    nccl_built,
    rank,
    rank_op,
    shutdown,
    size,
    size_op,
    start_timeline,
    stop_timeline,
)
from ringcc.tensorflow.collectives import (  # noqa: E402,F401
    allgather,
    allreduce,
    alltoall,
    barrier,
    broadcast,
    broadcast_,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    join,
    reducescatter,
)
from ringcc.tensorflow.functions import (  # noqa: E402,F401
    allgather_object,
    broadcast_global_variables,
    broadcast_object,
    broadcast_object_fn,
    broadcast_variables,
)
from ringcc.tensorflow.gradient_tape import DistributedGradientTape, PartialDistributedGradientTape  # noqa: E402,F401
from ringcc.tensorflow.optimizer import BroadcastGlobalVariablesHook, DistributedOptimizer  # noqa: E402,F401
from ringcc.tensorflow.process_sets import (  # noqa: E402,F401
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)


def __getattr__(name):
    if name == "keras":
        # Imported when first asked for (it imports Keras). `import a.b as c`
        # finds the submodule in sys.modules, without asking this module for
        # the attribute first (which `from ringcc.tensorflow import keras`
        # does, and would come back here).
        import ringcc.tensorflow.keras as keras_api

        return keras_api
    raise AttributeError(f"module 'ringcc.tensorflow' has no attribute {name!r}")
