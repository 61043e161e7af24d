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
"""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import tensorflow as tf

import ringcc
from ringcc import _core
from ringcc import _versions as _ringcc_versions
from ringcc.elastic import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401  (re-exported)
from ringcc.tensorflow import _ops
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


def _load_process_sets():
    # The torch adapter's process sets are framework-free (a core
    # communicator per set, met in a store rank 0 serves); loaded here as
    # a module of this package so that TensorFlow does not import torch.
    name = "ringcc.tensorflow._process_sets"
    if name in sys.modules:
        return sys.modules[name]
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "torch", "process_sets.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_process_sets = _load_process_sets()
ProcessSet = _process_sets.ProcessSet
global_process_set = _process_sets.global_process_set
add_process_set = _process_sets.add_process_set
remove_process_set = _process_sets.remove_process_set

# --------------------------------------------------------------------------
# Lifetime and topology


class NotInitializedError(_core.NotInitializedError, ValueError):
    """A call before hvd.init() (a ValueError, as in Horovod)."""


def _require_init() -> None:
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
            add_process_set(ps)


def shutdown():
    _process_sets._on_shutdown()
    ringcc.shutdown()


def is_initialized() -> bool:
    return ringcc.is_initialized()


def rank() -> int:
    _require_init()
    return ringcc.rank()


def size() -> int:
    _require_init()
    return ringcc.size()


def local_rank() -> int:
    _require_init()
    return ringcc.local_rank()


def local_size() -> int:
    _require_init()
    return ringcc.local_size()


def cross_rank() -> int:
    _require_init()
    return ringcc.cross_rank()


def cross_size() -> int:
    _require_init()
    return ringcc.cross_size()


def is_homogeneous() -> bool:
    _require_init()
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
    _require_init()
    ringcc.start_timeline(str(file_path))


def stop_timeline():
    _require_init()
    ringcc.stop_timeline()


# --------------------------------------------------------------------------
# Process sets other than the global one: the set's communicator, in issue
# order, through tf.numpy_function (eagerly and in graphs alike).


def _is_global(process_set) -> bool:
    return process_set is None or process_set is global_process_set or process_set.process_set_id == 0


def _set_call(fn, tensors, out_dtypes):
    def body(*arrays):
        return fn(*[np.ascontiguousarray(a) for a in arrays])

    return tf.numpy_function(body, list(tensors), out_dtypes, stateful=True)


def _root_in_set(process_set, root_rank: int) -> int:
    if root_rank not in process_set.ranks:
        raise ValueError(f"root_rank {root_rank} is not in {process_set}")
    return process_set.ranks.index(root_rank)


# --------------------------------------------------------------------------
# Collectives


def _average_compat(op, average):
    if average is not None:
        if op is not None:
            raise ValueError("The op parameter supersedes average; use op alone")
        return Average if average else Sum
    return Average if op is None else op


def allreduce(
    tensor,
    average=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    name=None,
    process_set=global_process_set,
    ignore_name_scope=False,
):
    """The reduction of `tensor` over the ranks (op Average by default). An
    IndexedSlices is allgathered (values and indices), as in Horovod."""
    _require_init()
    op = _ops._op_value(_average_compat(op, average))
    if isinstance(tensor, tf.IndexedSlices):
        if op not in (Average, Sum):
            raise NotImplementedError("an IndexedSlices is reduced with Sum or Average only")
        values = allgather(tensor.values, name=None if name is None else f"{name}.values", process_set=process_set)
        indices = allgather(tensor.indices, name=None if name is None else f"{name}.indices", process_set=process_set)
        scale = prescale_factor * postscale_factor
        if op == Average:
            scale /= size() if _is_global(process_set) else process_set.size()
        if scale != 1.0:
            values = values * tf.cast(scale, values.dtype)
        return tf.IndexedSlices(values, indices, dense_shape=tensor.dense_shape)
    tensor = tf.convert_to_tensor(tensor)
    compressed, ctx = compression.compress(tensor)
    if _is_global(process_set):
        (reduced,) = _ops.grouped_allreduce_op([compressed], op, prescale_factor, postscale_factor, name=name)
    else:
        comm = process_set._communicator()
        reduced = _set_call(
            lambda a: comm.allreduce(a, op=op, prescale=prescale_factor, postscale=postscale_factor),
            [compressed],
            compressed.dtype,
        )
        reduced.set_shape(compressed.shape)
    return compression.decompress(reduced, ctx)


def grouped_allreduce(
    tensors,
    average=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    name=None,
    process_set=global_process_set,
    ignore_name_scope=False,
):
    """One op for the list: each tensor a named collective of the engine,
    which fuses them."""
    _require_init()
    op = _ops._op_value(_average_compat(op, average))
    tensors = list(tensors)
    if not tensors:
        return []
    if not _is_global(process_set) or any(isinstance(t, tf.IndexedSlices) for t in tensors):
        return [
            allreduce(
                t,
                compression=compression,
                op=op,
                prescale_factor=prescale_factor,
                postscale_factor=postscale_factor,
                name=None if name is None else f"{name}.{i}",
                process_set=process_set,
            )
            for i, t in enumerate(tensors)
        ]
    compressed = [compression.compress(tf.convert_to_tensor(t)) for t in tensors]
    reduced = _ops.grouped_allreduce_op([c for c, _ in compressed], op, prescale_factor, postscale_factor, name=name)
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, compressed)]


def allgather(tensor, name=None, process_set=global_process_set, ignore_name_scope=False):
    """The ranks' tensors concatenated along the first dimension (which may
    differ between ranks)."""
    _require_init()
    tensor = tf.convert_to_tensor(tensor)
    if _is_global(process_set):
        return _ops.grouped_allgather_op([tensor], name=name)[0]
    comm = process_set._communicator()
    flat = tensor if tensor.shape.rank != 0 else tf.reshape(tensor, [1])
    out = _set_call(lambda a: comm.allgather(a), [flat], flat.dtype)
    if flat.shape.rank is not None:
        out.set_shape([None] + flat.shape.as_list()[1:])
    return out


def grouped_allgather(tensors, name=None, process_set=global_process_set, ignore_name_scope=False):
    _require_init()
    tensors = list(tensors)
    if _is_global(process_set):
        return _ops.grouped_allgather_op(tensors, name=name)
    return [allgather(t, None if name is None else f"{name}.{i}", process_set) for i, t in enumerate(tensors)]


def broadcast(tensor, root_rank, name=None, process_set=global_process_set, ignore_name_scope=False):
    """`root_rank`'s tensor (a global rank, on process sets too) on every rank."""
    _require_init()
    tensor = tf.convert_to_tensor(tensor)
    if _is_global(process_set):
        return _ops.broadcast_op(tensor, root_rank, name=name)
    comm = process_set._communicator()
    root = _root_in_set(process_set, int(root_rank))
    out = _set_call(lambda a: comm.broadcast(a, root=root), [tensor], tensor.dtype)
    out.set_shape(tensor.shape)
    return out


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Assigns root_rank's values to `variables` (a variable or a list)."""
    single = isinstance(variables, tf.Variable)
    for i, v in enumerate([variables] if single else list(variables)):
        v.assign(broadcast(v, root_rank, name=None if name is None else f"{name}.{i}", process_set=process_set))
    return variables


def alltoall(tensor, splits=None, name=None, process_set=global_process_set, ignore_name_scope=False):
    """Rank r sends splits[j] rows of `tensor` to rank j (equal blocks when
    None); returns (the rows received in rank order, the splits received)."""
    _require_init()
    if _is_global(process_set):
        return _ops.alltoall_op(tensor, splits, name=name)
    tensor = tf.convert_to_tensor(tensor)
    comm = process_set._communicator()
    n = process_set.size()
    if splits is None:
        rows = tf.shape(tensor, out_type=tf.int64)[0]
        splits = tf.fill([n], rows // n)
    splits = tf.cast(splits, tf.int64)

    def body(a, s):
        out, received = comm.alltoall(a, splits=[int(x) for x in s])
        return out, np.asarray(received, dtype=np.int64)

    out, received = tf.numpy_function(body, [tensor, splits], [tensor.dtype, tf.int64], stateful=True)
    if tensor.shape.rank is not None:
        out.set_shape([None] + tensor.shape.as_list()[1:])
    received.set_shape([n])
    return out, received


def reducescatter(
    tensor,
    device_dense="",
    compression=Compression.none,
    op=Average,
    name=None,
    process_set=global_process_set,
    ignore_name_scope=False,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """The reduction over the ranks, then rank r keeps its block of the first
    dimension (as even as possible, lower ranks one row more)."""
    _require_init()
    op = _ops._op_value(op)
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
        raise ValueError("reducescatter: a tensor of rank 0 cannot be scattered")
    compressed, ctx = compression.compress(tensor)
    if _is_global(process_set):
        (out,) = _ops.grouped_reducescatter_op([compressed], op, prescale_factor, postscale_factor, name=name)
    else:
        comm = process_set._communicator()
        out = _set_call(
            lambda a: comm.reduce_scatter(a, op=op, prescale=prescale_factor, postscale=postscale_factor),
            [compressed],
            compressed.dtype,
        )
        if compressed.shape.rank is not None:
            out.set_shape([None] + compressed.shape.as_list()[1:])
    return compression.decompress(out, ctx)


def grouped_reducescatter(
    tensors,
    device_dense="",
    compression=Compression.none,
    op=Average,
    name=None,
    process_set=global_process_set,
    ignore_name_scope=False,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    _require_init()
    op = _ops._op_value(op)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if any(t.shape.rank == 0 for t in tensors):
        raise ValueError("grouped_reducescatter: a tensor of rank 0 cannot be scattered")
    if not _is_global(process_set):
        return [
            reducescatter(
                t,
                compression=compression,
                op=op,
                name=None if name is None else f"{name}.{i}",
                process_set=process_set,
                prescale_factor=prescale_factor,
                postscale_factor=postscale_factor,
            )
            for i, t in enumerate(tensors)
        ]
    compressed = [compression.compress(t) for t in tensors]
    out = _ops.grouped_reducescatter_op([c for c, _ in compressed], op, prescale_factor, postscale_factor, name=name)
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(out, compressed)]


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has called it (eagerly; in a graph,
    an op whose output the program must depend on)."""
    _require_init()
    if not _is_global(process_set):
        comm = process_set._communicator()
        return _set_call(lambda: (comm.barrier(), np.int32(0))[1], [], tf.int32)
    token = tf.zeros([1], tf.int32)
    name = _ops.generated_name("barrier") if tf.executing_eagerly() else None
    return _ops.grouped_allreduce_op([token], Sum, name=name)[0]


def join(device=-1) -> int:
    """Blocks until every rank has joined (this rank stands in with zeros for
    the others' named collectives meanwhile); returns the last rank to join.
    Eager code only."""
    _require_init()
    try:
        return ringcc.join()
    except _core.RingccError as error:
        raise _to_internal(error) from None


def _to_internal(error: BaseException) -> BaseException:
    name = f"ringcc.{type(error).__name__}"
    if name in _ops._JOB_FAILURES:
        cls = type(type(error).__name__, (type(error), HorovodInternalError), {"__module__": "ringcc.tensorflow"})
        converted = cls(*error.args)
        return converted
    return error


def size_op(process_set_id=0, name=None):
    """The number of ranks, as a tensor (Horovod's graph-time size)."""
    _require_init()
    return tf.constant(ringcc.size(), dtype=tf.int32, name=name)


def rank_op(name=None):
    _require_init()
    return tf.constant(ringcc.rank(), dtype=tf.int32, name=name)


def local_rank_op(name=None):
    _require_init()
    return tf.constant(ringcc.local_rank(), dtype=tf.int32, name=name)


def local_size_op(name=None):
    _require_init()
    return tf.constant(ringcc.local_size(), dtype=tf.int32, name=name)


# --------------------------------------------------------------------------
# Variables and objects


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's values to every variable: one broadcast op per
    variable, named by its place in the list (every rank passes its
    variables in the same order). Returns the grouped assign op."""
    _require_init()
    variables = list(variables)
    if not variables:
        return tf.no_op() if not tf.executing_eagerly() else None
    base = _ops.generated_name("broadcast_variables") if tf.executing_eagerly() else None
    assigns = []
    for i, v in enumerate(variables):
        value = broadcast(v, root_rank, name=None if base is None else f"{base}.{i}", process_set=process_set)
        assigns.append(v.assign(value))
    if tf.executing_eagerly():
        return None
    return tf.group(*assigns)


def broadcast_global_variables(root_rank):
    """TF1 graphs' global variables (tf.compat.v1), broadcast from root_rank."""
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's `obj` (pickled, authenticated with the job's key) on every
    rank. Eager code."""
    _require_init()
    from ringcc.tensorflow import _objects

    return _objects.broadcast_object(obj, root_rank, name, process_set)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    return lambda obj: broadcast_object(obj, root_rank, session, name, process_set)


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every rank's `obj` in rank order. Eager code."""
    _require_init()
    from ringcc.tensorflow import _objects

    return _objects.allgather_object(obj, name, process_set)


# The training API and Keras, built on the collectives above.
from ringcc.tensorflow import elastic  # noqa: E402,F401
from ringcc.tensorflow.gradient_tape import (  # noqa: E402,F401
    BroadcastGlobalVariablesHook,
    DistributedGradientTape,
    DistributedOptimizer,
    PartialDistributedGradientTape,
)


def __getattr__(name):
    if name == "keras":
        # import_module, not `from ringcc.tensorflow import keras`: that form
        # looks the name up on this module first and would come back here.
        import importlib

        return importlib.import_module("ringcc.tensorflow.keras")
    raise AttributeError(f"module 'ringcc.tensorflow' has no attribute {name!r}")
