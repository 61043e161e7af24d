"""ringcc for MXNet 1.9: the kvstore "ring" and a Horovod-style API.

    import mxnet as mx
    import ringcc.mxnet as rmx          # registers the kvstore type "ring"

    kv = mx.kv.create("ring")           # joins the job (ringrun, mpirun, SLURM, ...)
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
    ...
    trainer.step(local_batch_size * kv.num_workers)   # pushpull sums the gradients

or, as with horovod.mxnet:

    rmx.init()
    rmx.broadcast_parameters(net.collect_params(), root_rank=0)
    trainer = rmx.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    trainer.step(local_batch_size)                     # gradients are averaged

The collectives run inside MXNet's asynchronous engine on the NDArrays' own
memory (no copy): they start when their inputs are ready and later
operations wait for them. See docs/mxnet.md.
"""

try:
    import mxnet as _mx
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "ringcc.mxnet needs MXNet: install it with `pip install mxnet==1.9.1 numpy==1.23.5` "
        "(in a virtual environment of its own: MXNet 1.9 needs NumPy < 1.24). "
        "ringcc's other APIs work without it."
    ) from _e

import ringcc as _ringcc  # noqa: E402

if (
    not hasattr(_mx, "kvstore")
    or not hasattr(_mx.kvstore, "KVStoreBase")
    or not hasattr(_mx.kvstore.KVStoreBase, "register")
):  # pragma: no cover
    raise ImportError(
        f"ringcc.mxnet needs MXNet >= 1.7 (mx.kvstore.KVStoreBase.register); "
        f"this is MXNet {getattr(_mx, '__version__', '?')}"
    )

from ringcc import (  # noqa: E402,F401  (re-exported, as horovod.mxnet has them)
    Average,
    Max,
    Min,
    Product,
    Sum,
    cross_rank,
    cross_size,
    local_rank,
    local_size,
    rank,
    size,
)
from ringcc.horovod_basics import ccl_built, ddl_built, gloo_built, gloo_enabled, mpi_threads_supported, rocm_built  # noqa: E402,F401
from ringcc.horovod_basics import cuda_found as cuda_built  # noqa: E402,F401
from ringcc.mxnet._engine import check_errors, wait_all  # noqa: E402,F401
from ringcc.mxnet.basics import (  # noqa: E402,F401
    init,
    is_initialized,
    mpi_built,
    mpi_enabled,
    nccl_built,
    shutdown,
    start_timeline,
    stop_timeline,
)
from ringcc.mxnet.compression import Compression, Compressor, FP16Compressor, NoneCompressor  # noqa: E402,F401
from ringcc.mxnet.errors import mxnet_class as _mxnet_class  # noqa: E402
from ringcc.mxnet.functions import allgather_object, broadcast_object  # noqa: E402,F401
from ringcc.mxnet.kvstore import Ring, RingKVStore  # noqa: E402,F401
from ringcc.mxnet.ops import (  # noqa: E402,F401
    Adasum,
    allreduce,
    allreduce_,
    broadcast,
    broadcast_,
    grouped_allreduce,
    grouped_allreduce_,
)
from ringcc.mxnet.scatter_gather import (  # noqa: E402,F401
    allgather,
    alltoall,
    grouped_allgather,
    grouped_reducescatter,
    reducescatter,
)
from ringcc.mxnet.training import (  # noqa: E402,F401
    DistributedOptimizer,
    DistributedTrainer,
    broadcast_parameters,
)
from ringcc.process_sets import (  # noqa: E402,F401
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)

# The ringcc errors as ringcc.mxnet raises them: each class derives from the
# ringcc class of the same name and mxnet.base.MXNetError (errors.py).
RingccError = _mxnet_class(_ringcc.RingccError)
InvalidArgumentError = _mxnet_class(_ringcc.InvalidArgumentError)
UnsupportedTypeError = _mxnet_class(_ringcc.UnsupportedTypeError)
MismatchError = _mxnet_class(_ringcc.MismatchError)
PeerFailureError = _mxnet_class(_ringcc.PeerFailureError)
TimeoutError = _mxnet_class(_ringcc.TimeoutError)  # noqa: A001 - ringcc's name (not in __all__)
InternalError = _mxnet_class(_ringcc.InternalError)
NotInitializedError = _mxnet_class(_ringcc.NotInitializedError)

__all__ = [
    # lifetime and topology
    "init",
    "shutdown",
    "is_initialized",
    "rank",
    "size",
    "local_rank",
    "local_size",
    "cross_rank",
    "cross_size",
    # build queries
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
    # reductions and compression
    "Sum",
    "Average",
    "Min",
    "Max",
    "Product",
    "Adasum",
    "Compression",
    "Compressor",
    "NoneCompressor",
    "FP16Compressor",
    # collectives
    "allreduce",
    "allreduce_",
    "grouped_allreduce",
    "grouped_allreduce_",
    "allgather",
    "grouped_allgather",
    "broadcast",
    "broadcast_",
    "alltoall",
    "reducescatter",
    "grouped_reducescatter",
    "broadcast_object",
    "allgather_object",
    # process sets
    "ProcessSet",
    "global_process_set",
    "add_process_set",
    "remove_process_set",
    # training
    "DistributedOptimizer",
    "DistributedTrainer",
    "broadcast_parameters",
    # the kvstore
    "RingKVStore",
    "Ring",
    # timeline and errors
    "start_timeline",
    "stop_timeline",
    "wait_all",
    "check_errors",
    "RingccError",
    "InvalidArgumentError",
    "UnsupportedTypeError",
    "MismatchError",
    "PeerFailureError",
    "InternalError",
    "NotInitializedError",
]
