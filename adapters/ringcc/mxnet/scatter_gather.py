"""Horovod-style allgather, alltoall and reducescatter on MXNet NDArrays.

allgather, grouped_allgather and alltoall block until their results are
known, as Horovod's do: the shape of the result depends on the other ranks.
They wait for their inputs first, and raise their errors at the call.
reducescatter and grouped_reducescatter know their results' shapes (this
rank's block of rows) and run asynchronously inside MXNet's engine, like
allreduce: the first wait on a result raises their error.
"""

from __future__ import annotations

import mxnet as mx
import numpy as np

import ringcc
from ringcc.failed_calls import group_layout, report_missing
from ringcc.mxnet import _engine
from ringcc.mxnet.errors import mxnet_errors
from ringcc.mxnet.ops import (
    agree_on_group_length,
    collective_name,
    fail,
    is_global,
    member_names,
    reduce_op,
    run,
    run_on_set,
    set_communicator,
    single_call_errors,
    start_each,
)
from ringcc.process_sets import global_process_set

__all__ = ["allgather", "grouped_allgather", "alltoall", "reducescatter", "grouped_reducescatter"]


def _names(kind: str, name, process_set, count: int, grouped: bool) -> list[str]:
    """The engine's names of a call's `count` collectives (labels only on a
    process set other than the global one: there they run in issue order)."""
    if not is_global(process_set):
        base = f"mx.{kind}.{name or 'set'}"
        return [f"{base}.{i}" for i in range(count)] if grouped else [base]
    base = collective_name(name, kind)
    return member_names(base, count) if grouped else [base]


def _ready_inputs(kind: str, tensors, names, process_set):
    """Checks the inputs and waits until they can be read; returns the set's
    communicator (None for the global set). A rank that fails here fails the
    call on the other ranks too."""
    try:
        comm = None if is_global(process_set) else set_communicator(process_set)
        for t in tensors:
            _engine.check_array(t)
        _engine.wait_ready(tensors, [])
    except BaseException as error:
        fail(kind, error, names, process_set, calls=len(names))
        raise
    return comm


def _start_all(kind: str, names, process_set, starters, on_error=None) -> list:
    """Starts one collective per entry of `starters` (start_each); when one
    cannot start, raises once the started ones have finished."""
    handles: list = []
    try:
        start_each(kind, names, process_set, starters, handles, on_error)
    except BaseException:
        for handle in handles:
            try:
                handle.wait()
            except BaseException:  # noqa: BLE001 - the first error is raised
                pass
        raise
    return handles


def _wait_each(handles) -> list:
    """The results of the handles; the first error once all have finished."""
    results, first = [], None
    for handle in handles:
        try:
            results.append(handle.wait())
        except BaseException as error:  # noqa: BLE001 - raised below
            first = first or error
            results.append(None)
    if first is not None:
        raise first
    return results


def _as_ndarray(array: np.ndarray, like) -> mx.nd.NDArray:
    return mx.nd.array(array, ctx=like.context, dtype=like.dtype)


def _allgather(tensors, name, process_set, grouped: bool) -> list:
    tensors = list(tensors)
    if grouped:
        agree_on_group_length(process_set, len(tensors), "grouped_allgather")
    names = _names("allgather", name, process_set, len(tensors), grouped)
    comm = _ready_inputs("allgather", tensors, names, process_set)
    if comm is None:
        layout = group_layout(tensors) if grouped else 0
        starters = [
            lambda t=t, n=n: ringcc._core._allgather(_engine.host_view(t), None, True, n, layout)
            for t, n in zip(tensors, names)
        ]
    else:
        starters = [lambda t=t: comm.allgather(_engine.host_view(t), None, True) for t in tensors]
    on_error = single_call_errors("allgather", process_set) if not grouped else None
    if comm is None and grouped and names:
        base = names[0]
        on_error = report_missing("allgather", lambda i: f"{base}.{i}", len(tensors), group_layout(tensors))
    results = _wait_each(_start_all("allgather", names, process_set, starters, on_error))
    return [_as_ndarray(r, t) for r, t in zip(results, tensors)]


@mxnet_errors
def allgather(tensor, name=None, priority=0, process_set=global_process_set):
    """Returns the tensors of the ranks of `process_set` concatenated along
    axis 0 (in rank order; the first dimension may differ between ranks).
    Blocks until done."""
    del priority  # runs at once
    return _allgather([tensor], name, process_set, False)[0]


@mxnet_errors
def grouped_allgather(tensors, name=None, priority=0, process_set=global_process_set):
    """allgather of each tensor of a list; returns a list. Blocks until done."""
    del priority  # runs at once
    return _allgather(tensors, name, process_set, True)


def _splits_list(splits):
    """alltoall's splits as a list of ints (None: equal splits). An NDArray
    must hold int32, as in Horovod."""
    if splits is None:
        return None
    if isinstance(splits, mx.nd.NDArray):
        if np.dtype(splits.dtype) != np.int32:
            raise ringcc.InvalidArgumentError(
                f"alltoall: splits must be an int32 NDArray, got {np.dtype(splits.dtype)}"
            )
        return [int(s) for s in splits.asnumpy().reshape(-1)]
    values = np.asarray(splits)
    if values.dtype.kind not in "iu":
        raise ringcc.InvalidArgumentError(f"alltoall: splits must be integers, got {values.dtype}")
    return [int(s) for s in values.reshape(-1)]


@mxnet_errors
def alltoall(tensor, splits=None, name=None, priority=0, process_set=global_process_set):
    """Sends splits[j] rows (axis 0) of `tensor` to the j-th rank of
    `process_set` (equal splits when None) and returns the rows received,
    in rank order; with `splits` given, also the number of rows received
    from each rank (an int32 NDArray). Blocks until done."""
    del priority  # runs at once
    names = _names("alltoall", name, process_set, 1, False)
    try:
        split_list = _splits_list(splits)
    except BaseException as error:
        fail("alltoall", error, names, process_set)
        raise
    comm = _ready_inputs("alltoall", [tensor], names, process_set)
    view = _engine.host_view(tensor)
    if comm is None:
        start = lambda: ringcc._core._alltoall(view, split_list, None, True, names[0])  # noqa: E731
    else:
        start = lambda: comm.alltoall(view, split_list, None, True)  # noqa: E731
    output, received = _wait_each(_start_all("alltoall", names, process_set, [start]))[0]
    result = _as_ndarray(output, tensor)
    if splits is None:
        return result
    return result, mx.nd.array(np.asarray(received, dtype=np.int32), ctx=mx.cpu(), dtype="int32")


def _block_rows(rows: int, size: int, rank: int) -> int:
    """The rows of `rank`'s block: as even as possible, lower ranks one more."""
    return rows // size + (1 if rank < rows % size else 0)


def _reducescatter(tensors, op, name, priority, process_set, prescale_factor, postscale_factor, grouped: bool):
    tensors = list(tensors)
    glob = is_global(process_set)
    kind = "reducescatter"
    if grouped:
        agree_on_group_length(process_set, len(tensors), "grouped_reducescatter")
    names = _names(kind, name, process_set, len(tensors), grouped)
    try:
        comm = None if glob else set_communicator(process_set)
        for t in tensors:
            _engine.check_array(t)
            if t.ndim == 0:
                # As in Horovod: the first dimension is what is scattered.
                raise ValueError(f"{kind} does not support scalar inputs: give the tensor at least one dimension")
        rop = reduce_op(op)
        size, rank = (ringcc.size(), ringcc.rank()) if glob else (process_set.size(), process_set.rank())
        outs = [
            mx.nd.empty((_block_rows(t.shape[0], size, rank),) + tuple(t.shape[1:]), ctx=t.context, dtype=t.dtype)
            for t in tensors
        ]
        scale = (float(prescale_factor), float(postscale_factor))
    except BaseException as error:
        fail("reduce_scatter", error, names, process_set, calls=len(names))
        raise
    if not tensors:
        return outs
    count = len(tensors)

    layout = group_layout(tensors) if grouped else 0
    on_error = (
        report_missing("reduce_scatter", lambda i: f"{names[0]}.{i}", count, layout)
        if grouped
        else single_call_errors("reduce_scatter", process_set)
    )

    def start(views, handles):
        starters = [
            lambda i=i, n=n: ringcc._core._reduce_scatter(
                views[i], views[count + i], rop, scale[0], scale[1], True, n, layout
            )
            for i, n in enumerate(names)
        ]
        start_each("reduce_scatter", names, process_set, starters, handles, on_error)

    def start_on_set(views, handles):
        starters = [
            lambda i=i: comm.reduce_scatter(views[i], views[count + i], rop, scale[0], scale[1], True)
            for i in range(count)
        ]
        start_each("reduce_scatter", names, process_set, starters, handles)

    if glob:
        run(names[0], tensors, outs, start, priority)
    else:
        run_on_set("reduce_scatter", names[0], process_set, tensors, outs, start_on_set, priority, count)
    return outs


@mxnet_errors
def reducescatter(
    tensor,
    op=ringcc.Average,
    name=None,
    priority=0,
    process_set=global_process_set,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """Reduces `tensor` over the ranks of `process_set` (op: Average, the
    default, or Sum; also Min, Max, Product) and returns this rank's block
    of rows (axis 0; as even as possible, lower ranks take one more row)."""
    return _reducescatter([tensor], op, name, priority, process_set, prescale_factor, postscale_factor, False)[0]


@mxnet_errors
def grouped_reducescatter(
    tensors,
    op=ringcc.Average,
    name=None,
    priority=0,
    process_set=global_process_set,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """reducescatter of each tensor of a list, in one operation; returns a list."""
    return _reducescatter(tensors, op, name, priority, process_set, prescale_factor, postscale_factor, True)
