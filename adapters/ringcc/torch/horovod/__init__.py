"""Horovod's PyTorch API over ringcc: a Horovod script changes one import.

    import ringcc.torch as hvd            # was: import horovod.torch as hvd

    hvd.init()
    sampler = DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

Launch with `ringrun -np N python train.py` (or torchrun, mpirun, srun:
`ringcc.init()` reads their variables). See docs/torch.md, "Horovod API".

How it runs. Collectives on the global process set go through ringcc's
background engine as named collectives, as Horovod's do: a tensor is matched
across ranks by its name (any enqueue order), ready allreduces are fused, and
`join()` lets finished ranks stand in with zeros in allreduces (the others'
other collectives raise meanwhile, as in Horovod). A call without a name gets
`<op>.noname.<n>` from a per-process counter, so unnamed calls must be issued
in the same order on every rank (as in Horovod). Blocking calls are the
asynchronous ones followed by `synchronize()`. Collectives on other process
sets run on the set's own communicator in issue order (see process_sets.py).

Tensors reach the core through DLPack, zero-copy when they are contiguous
and of a dtype the core handles (float16, bfloat16, float32, float64, int8,
uint8, int32, int64), on the CPU or a CUDA device; in-place calls then
write into the tensor's own memory. Anything else is staged through a
contiguous copy on the tensor's device: non-contiguous tensors, int16
reductions (in int32), complex Sum/Average (as real pairs), and other
dtypes for broadcast/allgather/alltoall (moved as bytes).

CUDA tensors stay on their device (the core's GPU backends). A named
collective (the global set) runs when the engine gets to it, on the
process's side stream for the device, after the work queued on the
tensor's current stream when it was enqueued; `synchronize(handle)` makes
the current stream wait for it (it does not block for the device), so what
follows on that stream sees the result. Collectives on other process sets
run on the tensor's current stream, in issue order.

Errors raised from `synchronize()`/`Handle.wait()` (peer failure, ranks that
disagree on a tensor's shape or dtype, internal errors) are at once
`HorovodInternalError` (a RuntimeError), `torch.distributed.DistBackendError`
and the ringcc error they come from (`ringcc.PeerFailureError`,
`ringcc.MismatchError`, ...). A wait that ran out
(`RINGCC_COLLECTIVE_TIMEOUT_S`, `RINGCC_STALL_SHUTDOWN_S`) stays `ringcc.TimeoutError`
(a TimeoutError: Python cannot make one class both that and a RuntimeError).

The package is one module per concept, lowest first: names.py (the names
calls are matched by), basics.py (operators, errors, lifetime, topology,
build queries), handles.py (Handle, poll, synchronize), calls.py (process
sets, calls that fail on one rank), wires.py (tensors as the core takes
them), async_allreduce.py and async_collectives.py (the asynchronous
calls), blocking_collectives.py (the blocking, differentiable calls,
barrier and join). None of them imports the package.
"""

from __future__ import annotations

from ringcc.horovod_basics import ccl_built, ddl_built, gloo_built, gloo_enabled, mpi_threads_supported, rocm_built  # noqa: F401
from ringcc.horovod_basics import cuda_found as cuda_built  # noqa: F401
from ringcc.torch.compression import (  # noqa: F401
    BF16Compressor,
    Compression,
    Compressor,
    FP16Compressor,
    NoneCompressor,
)
from ringcc.torch.horovod.async_allreduce import (  # noqa: F401
    allreduce_async,
    allreduce_async_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
)
from ringcc.torch.horovod.async_collectives import (  # noqa: F401
    allgather_async,
    alltoall_async,
    broadcast_async,
    broadcast_async_,
    grouped_allgather_async,
    grouped_reducescatter_async,
    reducescatter_async,
    sparse_allreduce_async,
)
from ringcc.torch.horovod.basics import (  # noqa: F401
    Adasum,
    Average,
    HorovodInternalError,
    HostsUpdatedInterrupt,
    Max,
    Min,
    NotInitializedError,
    Product,
    Sum,
    cross_rank,
    cross_size,
    handle_average_backwards_compatibility,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    nccl_built,
    rank,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from ringcc.torch.horovod.blocking_collectives import (  # noqa: F401
    HorovodAllgather,
    HorovodAllreduce,
    HorovodAlltoall,
    HorovodBroadcast,
    HorovodGroupedAllreduce,
    HorovodReducescatter,
    allgather,
    allreduce,
    allreduce_,
    alltoall,
    barrier,
    broadcast,
    broadcast_,
    grouped_allgather,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_reducescatter,
    join,
    reducescatter,
)
from ringcc.torch.horovod.handles import (  # noqa: F401
    Handle,
    poll,
    synchronize,
)
from ringcc.torch.horovod.names import reset_names as _reset_names  # noqa: F401  (tests realign the ranks' names)
from ringcc.torch.output_rows import OUTPUT_ROWS  # noqa: F401
from ringcc.torch.process_sets import (  # noqa: F401
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)

# The classes keep the module users know them by (tracebacks, reprs,
# pickles): the package, not the module that defines them.
for _class in (
    NotInitializedError,
    Handle,
    HorovodAllreduce,
    HorovodGroupedAllreduce,
    HorovodAllgather,
    HorovodBroadcast,
    HorovodAlltoall,
    HorovodReducescatter,
):
    _class.__module__ = __name__
del _class

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
    "is_homogeneous",
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
    # ops and compression
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
    "BF16Compressor",
    "handle_average_backwards_compatibility",
    # collectives
    "Handle",
    "poll",
    "synchronize",
    "allreduce",
    "allreduce_",
    "allreduce_async",
    "allreduce_async_",
    "grouped_allreduce",
    "grouped_allreduce_",
    "grouped_allreduce_async",
    "grouped_allreduce_async_",
    "sparse_allreduce_async",
    "allgather",
    "allgather_async",
    "grouped_allgather",
    "grouped_allgather_async",
    "broadcast",
    "broadcast_",
    "broadcast_async",
    "broadcast_async_",
    "alltoall",
    "alltoall_async",
    "reducescatter",
    "reducescatter_async",
    "grouped_reducescatter",
    "grouped_reducescatter_async",
    "barrier",
    "join",
    "HorovodAllreduce",
    "HorovodGroupedAllreduce",
    "HorovodAllgather",
    "HorovodBroadcast",
    "HorovodAlltoall",
    "HorovodReducescatter",
    # process sets
    "ProcessSet",
    "global_process_set",
    "add_process_set",
    "remove_process_set",
    # timeline and errors
    "start_timeline",
    "stop_timeline",
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
    "NotInitializedError",
]
