"""The collectives of `ringcc.tensorflow` (Horovod's): allreduce,
allgather, broadcast, alltoall, reducescatter (and their grouped forms),
barrier and join. On the job (the global process set) each is one of
ringcc's TensorFlow ops (_ops.py), eagerly and inside tf.function; on any
other process set it runs on the set's communicator, in issue order,
through tf.numpy_function (eagerly and in graphs alike)."""

from __future__ import annotations

import contextlib

import numpy as np
import tensorflow as tf

import ringcc
from ringcc import _core
from ringcc.elastic import HorovodInternalError
from ringcc.failed_calls import check_group_length, fail_on_every_rank
from ringcc.tensorflow import _ops
from ringcc.tensorflow._ops import Average, Sum
from ringcc.tensorflow.basics import require_init, size
from ringcc.tensorflow.compression import Compression
from ringcc.tensorflow.process_sets import global_process_set, is_global, root_in_set


@contextlib.contextmanager
def _arguments_of(kind: str, op_type: str, name, process_set):
    """The argument checks of one collective of `kind` ("allreduce", ...):
    an error raised inside takes part in the collective as a failed
    participant before it reaches the caller, so that the other ranks
    raise MismatchError naming this rank and why instead of waiting for
    it. On the job, under the name its op's kernel would have used: the
    given name, or eagerly the op's type (`op_type`; a graph's unnamed node
    has no name before it is built, and there the error stops the tracing
    on this rank). On another process set, eagerly, the set's next
    collective in issue order."""
    try:
        yield
    except Exception as error:
        if is_global(process_set):
            if name or tf.executing_eagerly():
                fail_on_every_rank(error, kind, [_ops.engine_name(kind, name) or op_type])
        elif tf.executing_eagerly():
            with contextlib.suppress(Exception):  # a set this rank cannot reach: nobody to tell
                fail_on_every_rank(error, kind, comm=process_set._communicator())
        raise


def _refuse_on_set(error: BaseException, tensors, process_set) -> None:
    """A grouped call of `tensors` whose arguments this rank refused on a
    process set other than the job: eagerly, it fails the set's next
    collective in issue order, the length check its peers start the group
    with (_grouped_on_set, an allreduce), so that they raise too and none of
    the group's collectives starts. (In a graph the error stops the tracing
    here.)"""
    if tensors and not is_global(process_set) and tf.executing_eagerly():
        with contextlib.suppress(Exception):  # a set this rank cannot reach: nobody to tell
            fail_on_every_rank(error, "allreduce", comm=process_set._communicator())


def _set_call(fn, tensors, out_dtypes):
    def body(*arrays):
        return fn(*[np.ascontiguousarray(a) for a in arrays])

    return tf.numpy_function(body, list(tensors), out_dtypes, stateful=True)


def _one_by_one(collective, tensors, name, **options) -> list:
    """`collective` of each tensor in turn, the i-th named `name.i`."""
    return [collective(t, name=None if name is None else f"{name}.{i}", **options) for i, t in enumerate(tensors)]


def _grouped_on_set(what: str, collective, tensors, name, process_set, **options) -> list:
    """A grouped call on a process set other than the job, whose
    collectives run in issue order: its ranks first agree on the group's
    length (failed_calls.check_group_length: MismatchError on every rank of
    the set where the groups differ, before any collective of the group),
    then `collective` of each tensor in turn, after that check in a graph
    too."""
    comm = process_set._communicator()
    where = f"{what} on {process_set}"

    def agree() -> np.int32:
        check_group_length(comm, len(tensors), where)
        return np.int32(len(tensors))

    agreed = _set_call(agree, [], tf.int32)
    with tf.control_dependencies([agreed]):
        return _one_by_one(collective, tensors, name, process_set=process_set, **options)


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
    require_init()
    refused = None
    try:
        op = _ops._op_value(_average_compat(op, average))
    except Exception as error:
        if not is_global(process_set) or isinstance(tensor, tf.IndexedSlices):
            with _arguments_of("allreduce", "RingccAllreduce", name, process_set):
                raise
        # The job's op is still built, to fail on every rank (_ops._reduction_of).
        refused, op = error, Sum
    if isinstance(tensor, tf.IndexedSlices):
        if op not in (Average, Sum):
            raise NotImplementedError("an IndexedSlices is reduced with Sum or Average only")
        values = allgather(tensor.values, name=None if name is None else f"{name}.values", process_set=process_set)
        indices = allgather(tensor.indices, name=None if name is None else f"{name}.indices", process_set=process_set)
        scale = prescale_factor * postscale_factor
        if op == Average:
            scale /= size() if is_global(process_set) else process_set.size()
        if scale != 1.0:
            values = values * tf.cast(scale, values.dtype)
        return tf.IndexedSlices(values, indices, dense_shape=tensor.dense_shape)
    if is_global(process_set):
        # A tensor that does not convert still builds the op, to fail on every rank.
        (tensor,), unconverted = _ops.convert_group([tensor])
        with _arguments_of("allreduce", "RingccAllreduce", name, process_set):
            compressed, ctx = compression.compress(tensor)
        (reduced,) = _ops.grouped_allreduce_op(
            [compressed], op, prescale_factor, postscale_factor, name=name, refused=refused or unconverted
        )
    else:
        with _arguments_of("allreduce", "RingccAllreduce", name, process_set):
            tensor = tf.convert_to_tensor(tensor)
            compressed, ctx = compression.compress(tensor)
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
    """One op for the list: packed when there are many of known shapes,
    else each tensor a named collective of the engine, which fuses them
    (docs/tensorflow.md, "Fusion")."""
    require_init()
    tensors = list(tensors)
    refused = None
    try:
        op = _ops._op_value(_average_compat(op, average))
    except Exception as error:
        sparse = any(isinstance(t, tf.IndexedSlices) for t in tensors)
        if not tensors or not is_global(process_set) or sparse:
            _refuse_on_set(error, tensors, process_set)
            raise
        refused, op = error, Sum
    if not tensors:
        return []
    options = {
        "compression": compression,
        "op": op,
        "prescale_factor": prescale_factor,
        "postscale_factor": postscale_factor,
    }
    if not is_global(process_set):
        return _grouped_on_set("grouped_allreduce", allreduce, tensors, name, process_set, **options)
    if any(isinstance(t, tf.IndexedSlices) for t in tensors):
        return _one_by_one(allreduce, tensors, name, process_set=process_set, **options)
    converted, unconverted = _ops.convert_group(tensors)
    compressed = [compression.compress(t) for t in converted]
    reduced = _ops.grouped_allreduce_op(
        [c for c, _ in compressed], op, prescale_factor, postscale_factor, name=name, refused=refused or unconverted
    )
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, compressed)]


def allgather(tensor, name=None, process_set=global_process_set, ignore_name_scope=False):
    """The ranks' tensors concatenated along the first dimension (which may
    differ between ranks)."""
    require_init()
    if is_global(process_set):
        return _ops.grouped_allgather_op([tensor], name=name)[0]  # converts, or fails on every rank
    with _arguments_of("allgather", "RingccAllgather", name, process_set):
        tensor = tf.convert_to_tensor(tensor)
    comm = process_set._communicator()
    flat = tensor if tensor.shape.rank != 0 else tf.reshape(tensor, [1])
    out = _set_call(lambda a: comm.allgather(a), [flat], flat.dtype)
    if flat.shape.rank is not None:
        out.set_shape([None] + flat.shape.as_list()[1:])
    return out


def grouped_allgather(tensors, name=None, process_set=global_process_set, ignore_name_scope=False):
    require_init()
    tensors = list(tensors)
    if is_global(process_set):
        return _ops.grouped_allgather_op(tensors, name=name)
    return _grouped_on_set("grouped_allgather", allgather, tensors, name, process_set)


def broadcast(tensor, root_rank, name=None, process_set=global_process_set, ignore_name_scope=False):
    """`root_rank`'s tensor (a global rank, on process sets too) on every rank."""
    require_init()
    if is_global(process_set):
        # A tensor that does not convert still builds the op, to fail on every rank.
        (tensor,), refused = _ops.convert_group([tensor])
    else:
        with _arguments_of("broadcast", "RingccBroadcast", name, process_set):
            tensor = tf.convert_to_tensor(tensor)
        refused = None
    try:
        root_rank = int(root_rank)
        root = None if is_global(process_set) else root_in_set(process_set, root_rank)
    except Exception as error:
        if not is_global(process_set):
            with _arguments_of("broadcast", "RingccBroadcast", name, process_set):
                raise
        # The job's op is still built, to fail on every rank (_ops.broadcast_op).
        refused, root_rank = refused or error, 0
    if is_global(process_set):
        return _ops.broadcast_op(tensor, root_rank, name=name, refused=refused)
    comm = process_set._communicator()
    out = _set_call(lambda a: comm.broadcast(a, root=root), [tensor], tensor.dtype)
    out.set_shape(tensor.shape)
    return out


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Assigns root_rank's values to `variables` (a variable or a list)."""
    single = isinstance(variables, tf.Variable)
    listed = [variables] if single else list(variables)
    values = _one_by_one(broadcast, listed, name, root_rank=root_rank, process_set=process_set)
    for v, value in zip(listed, values):
        v.assign(value)
    return variables


def alltoall(tensor, splits=None, name=None, process_set=global_process_set, ignore_name_scope=False):
    """Rank r sends splits[j] rows of `tensor` to rank j (equal blocks when
    None); returns (the rows received in rank order, the splits received)."""
    require_init()
    if is_global(process_set):
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
    require_init()
    refused = None
    try:
        op = _ops._op_value(op)
    except Exception as error:
        if not is_global(process_set):
            with _arguments_of("reducescatter", "RingccReducescatter", name, process_set):
                raise
        # The job's op is still built, to fail on every rank (_ops._reduction_of).
        refused, op = error, Average
    # A tensor of rank 0 on some rank is refused by the op's kernel (or the
    # set's communicator) as a failed participant, so that every rank fails;
    # on the job, so is one that does not convert (_ops.convert_group).
    if is_global(process_set):
        (tensor,), unconverted = _ops.convert_group([tensor])
        refused = refused or unconverted
    with _arguments_of("reducescatter", "RingccReducescatter", name, process_set):
        tensor = tf.convert_to_tensor(tensor)
        compressed, ctx = compression.compress(tensor)
        if not is_global(process_set) and compressed.shape.rank == 0:
            # The set's communicator would scatter it as one row; the job's
            # kernel refuses it, as Horovod does.
            raise ValueError(f"reducescatter of '{name or 'a tensor'}': a tensor of rank 0 has no rows to scatter")
    if is_global(process_set):
        (out,) = _ops.grouped_reducescatter_op(
            [compressed], op, prescale_factor, postscale_factor, name=name, refused=refused
        )
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
    require_init()
    tensors, refused = _ops.convert_group(list(tensors))
    if refused is not None and not is_global(process_set):
        _refuse_on_set(refused, tensors, process_set)
        raise refused
    try:
        op = _ops._op_value(op)
    except Exception as error:
        if not tensors or not is_global(process_set):
            _refuse_on_set(error, tensors, process_set)
            raise
        refused, op = refused or error, Average
    if not is_global(process_set):
        options = {
            "compression": compression,
            "op": op,
            "prescale_factor": prescale_factor,
            "postscale_factor": postscale_factor,
        }
        return _grouped_on_set("grouped_reducescatter", reducescatter, tensors, name, process_set, **options)
    compressed = [compression.compress(t) for t in tensors]
    out = _ops.grouped_reducescatter_op(
        [c for c, _ in compressed], op, prescale_factor, postscale_factor, name=name, refused=refused
    )
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(out, compressed)]


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has called it (eagerly; in a graph,
    an op whose output the program must depend on)."""
    require_init()
    if not is_global(process_set):
        comm = process_set._communicator()
        return _set_call(lambda: (comm.barrier(), np.int32(0))[1], [], tf.int32)
    token = tf.zeros([1], tf.int32)
    name = _ops.generated_name("barrier") if tf.executing_eagerly() else None
    return _ops.grouped_allreduce_op([token], Sum, name=name)[0]


def join(device=-1) -> int:
    """Blocks until every rank has joined (this rank stands in with zeros for
    the others' named collectives meanwhile); returns the last rank to join.
    Eager code only."""
    require_init()
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
