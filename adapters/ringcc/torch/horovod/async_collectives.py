"""The Horovod API's other asynchronous collectives: allgather_async,
broadcast_async(_), alltoall_async, reducescatter_async, their grouped
forms, and sparse_allreduce_async (allgathers of indices and values). On
the global process set a dense contiguous CPU tensor of a core dtype takes
a direct path to the core's raw entry points."""

from __future__ import annotations

import torch

import ringcc
from ringcc import _core
from ringcc.torch.horovod.basics import Average, Sum, core_op, internal_error, size
from ringcc.torch.horovod.calls import (
    call_names,
    check_process_set,
    enqueue,
    is_global,
    report_failed,
    set_rank,
    start_each,
    start_group,
)
from ringcc.torch.horovod.handles import Handle
from ringcc.torch.horovod.names import engine_name
from ringcc.torch.horovod.wires import (
    as_torch,
    check_tensor,
    direct_code,
    from_move_wire,
    move_wire,
    reduce_wire,
    shares_memory,
    unwired_result,
)
from ringcc.torch.output_rows import OUTPUT_ROWS
from ringcc.torch.process_sets import global_process_set

# The core's raw entry points of the direct paths.
_broadcast_async_raw = _core._broadcast_async_raw
_allgather_async_raw = _core._allgather_async_raw


# --------------------------------------------------------------------------
# allgather


def _allgather_start(tensor, name, process_set, what: str, layout=0) -> Handle:
    glob, full, label = call_names("allgather", name, process_set)
    try:
        check_process_set(process_set)
        t = check_tensor(tensor, what)
        wire = move_wire(t)
        comm = None if glob else process_set._communicator()
    except Exception as error:
        report_failed(error, "allgather", [full], process_set)
        raise
    if glob:
        h = enqueue(lambda: _core._allgather(wire, None, True, full, layout))
    else:
        h = enqueue(lambda: comm.allgather(wire, None, True, label))

    def finish_rows(results):
        out = as_torch(results[0])
        total_rows = out.shape[0]
        if t.dim() == 0:
            return from_move_wire(out, t.reshape(1), total_rows)
        return from_move_wire(out, t, total_rows)

    return Handle([h], finish_rows)


def allgather_async(tensor, name=None, process_set=global_process_set) -> Handle:
    """Starts an allgather: every rank's `tensor` concatenated along dim 0 in
    rank order (first dimensions may differ). A 0-dim tensor counts as one row."""
    if process_set is global_process_set:
        handle = _direct_allgather(tensor, name)
        if handle is not None:
            return handle
    return _allgather_start(tensor, name, process_set, "allgather_async")


def _direct_allgather(tensor, name):
    """allgather_async of a dense contiguous CPU tensor of a core dtype with
    at least one dimension on the global set: to the engine by address, the
    output (torch.empty) made once the row counts are known; None for
    anything else."""
    code = direct_code(tensor)
    if code is None or not tensor.dim():
        return None
    tail, dtype = tuple(tensor.shape[1:]), tensor.dtype
    try:
        return _allgather_async_raw(
            tensor,
            tensor.data_ptr(),
            tensor.shape,
            code,
            f"allgather.{name}" if name else engine_name("allgather", name),
            lambda rows: torch.empty((rows,) + tail, dtype=dtype),
        )
    except ringcc.NotInitializedError:
        return None
    except (ringcc.PeerFailureError, ringcc.InternalError) as error:
        raise internal_error(error) from None


def allgather_in_group(tensor, name, process_set, layout: int) -> Handle:
    """allgather_async of one tensor of a grouped call, carrying the group's
    layout (failed_calls.group_layout)."""
    return _allgather_start(tensor, name, process_set, "grouped_allgather", layout)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set) -> Handle:
    """Starts an allgather of each tensor of a list; the result is a list."""
    what = "grouped_allgather_async"
    return start_group(
        "allgather",
        "allgather",
        name,
        process_set,
        tensors,
        lambda t: check_tensor(t, what),
        lambda t, name_i, layout: _allgather_start(t, name_i, process_set, what, layout),
    )


# --------------------------------------------------------------------------
# broadcast


def _broadcast_start(tensor, root_rank, name, process_set, inplace: bool, what: str) -> Handle:
    glob, full, label = call_names("broadcast", name, process_set)
    try:
        check_process_set(process_set)
        t = check_tensor(tensor, what)
        root = int(root_rank)
        wire = move_wire(t)
        if inplace:
            direct = shares_memory(wire, t)
            out = None
        else:
            direct = False
            out = torch.empty_like(wire)
        if not glob:
            comm = process_set._communicator()
            set_root = set_rank(process_set, root, what)
    except Exception as error:
        report_failed(error, "broadcast", [full], process_set)
        raise
    if glob:
        h = enqueue(lambda: _core._broadcast(wire, out, root, inplace, True, full))
    else:
        h = enqueue(lambda: comm.broadcast(wire, out, set_root, inplace, True, label))
    return Handle([h], unwired_result(tensor, wire, out, inplace, direct, lambda w: from_move_wire(w, t)))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set) -> Handle:
    """Starts a broadcast of root_rank's `tensor` (a global rank, also for
    process sets); the Handle's result is a new tensor."""
    if process_set is global_process_set:
        handle = _direct_broadcast(tensor, root_rank, name, False)
        if handle is not None:
            return handle
    return _broadcast_start(tensor, root_rank, name, process_set, False, "broadcast_async")


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set) -> Handle:
    """Starts an in-place broadcast into `tensor`."""
    if process_set is global_process_set:
        handle = _direct_broadcast(tensor, root_rank, name, True)
        if handle is not None:
            return handle
    return _broadcast_start(tensor, root_rank, name, process_set, True, "broadcast_async_")


def _direct_broadcast(tensor, root_rank, name, inplace: bool):
    """broadcast_async(_) of a dense contiguous CPU tensor of a core dtype
    from an int root on the global set: to the engine by address (out of
    place into a row of OUTPUT_ROWS); None for anything else."""
    if type(root_rank) is not int or root_rank < 0:
        return None
    code = direct_code(tensor)
    if code is None:
        return None
    full = f"broadcast.{name}" if name else engine_name("broadcast", name)
    try:
        if inplace:
            return _broadcast_async_raw(tensor, tensor.data_ptr(), tensor.shape, code, root_rank, full)
        return _broadcast_async_raw(OUTPUT_ROWS, 0, tensor.shape, code, root_rank, full, tensor, tensor.data_ptr())
    except ringcc.NotInitializedError:
        return None
    except (ringcc.PeerFailureError, ringcc.InternalError) as error:
        raise internal_error(error) from None


# --------------------------------------------------------------------------
# alltoall


def _splits_list(splits) -> list[int] | None:
    if splits is None:
        return None
    if isinstance(splits, torch.Tensor):
        return [int(s) for s in splits.reshape(-1).tolist()]
    return [int(s) for s in splits]


def alltoall_start(tensor, splits, name, process_set, what: str) -> Handle:
    """The Handle's result is always (output, received_splits as int32 tensor)."""
    glob, full, label = call_names("alltoall", name, process_set)
    try:
        check_process_set(process_set)
        t = check_tensor(tensor, what)
        wire = move_wire(t if t.dim() else t.reshape(1))
        split_list = _splits_list(splits)
        comm = None if glob else process_set._communicator()
    except Exception as error:
        report_failed(error, "alltoall", [full], process_set)
        raise
    if glob:
        h = enqueue(lambda: _core._alltoall(wire, split_list, None, True, full))
    else:
        h = enqueue(lambda: comm.alltoall(wire, split_list, None, True, label))
    split_dtype = splits.dtype if isinstance(splits, torch.Tensor) else torch.int32

    def finish(results):
        output, received = results[0]
        out = as_torch(output)
        like = t if t.dim() else t.reshape(1)
        return (from_move_wire(out, like, int(out.shape[0])), torch.tensor(list(received), dtype=split_dtype))

    return Handle([h], finish)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set) -> Handle:
    """Starts an alltoall: rank r sends splits[j] rows (dim 0) of `tensor` to
    rank j (equal splits when None). The result is the received rows in rank
    order, and with `splits` given, (output, received_splits)."""
    inner = alltoall_start(tensor, splits, name, process_set, "alltoall_async")
    if splits is not None:
        return inner
    return Handle([inner], lambda results: results[0][0])


# --------------------------------------------------------------------------
# reducescatter


def _block_rows(rows: int, n: int, r: int) -> int:
    return rows // n + (1 if r < rows % n else 0)


def _reducescatter_start(
    tensor, name, op, process_set, prescale_factor, postscale_factor, what: str, layout=0
) -> Handle:
    glob, full, label = call_names("reducescatter", name, process_set)
    try:
        check_process_set(process_set)
        t = check_tensor(tensor, what)
        if t.dim() == 0:
            # As in Horovod, whose coordinator refuses a rank-zero tensor.
            raise ValueError(
                f"{what}: a 0-dim tensor cannot be reduce-scattered (its first "
                "dimension is split over the ranks); give it at least one dimension"
            )
        op = core_op(op)
        wire = reduce_wire(t, op, what)
        if glob:
            n, r = ringcc.size(), ringcc.rank()
        else:
            comm = process_set._communicator()
            n, r = process_set.size(), process_set.rank()
        rows = _block_rows(int(wire.shape[0]), n, r)
        out = torch.empty((rows,) + tuple(wire.shape[1:]), dtype=wire.dtype, device=wire.device)
        pre, post = float(prescale_factor), float(postscale_factor)
    except Exception as error:
        report_failed(error, "reduce_scatter", [full], process_set)
        raise
    if glob:
        h = enqueue(lambda: _core._reduce_scatter(wire, out, op, pre, post, True, full, layout))
    else:
        h = enqueue(lambda: comm.reduce_scatter(wire, out, op, pre, post, True, label))
    like_shape = (rows,) + tuple(t.shape[1:])

    def finish(_):
        res = out
        if t.dtype.is_complex:
            res = torch.view_as_complex(res)
        elif res.dtype != t.dtype:
            res = res.to(t.dtype)
        res = res.reshape(like_shape)
        if t.device.type != "cpu":
            res = res.to(t.device)
        return res

    return Handle([h], finish)


def reducescatter_async(
    tensor, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0
) -> Handle:
    """Starts a reduce-scatter: the reduction over the ranks, of which rank r
    keeps its block of dim 0 (blocks as even as possible, lower ranks take
    one more row). A 0-dim tensor is refused, as in Horovod."""
    return _reducescatter_start(tensor, name, op, process_set, prescale_factor, postscale_factor, "reducescatter_async")


def reducescatter_in_group(tensor, name, op, process_set, prescale_factor, postscale_factor, layout: int) -> Handle:
    """reducescatter_async of one tensor of a grouped call, carrying the
    group's layout (failed_calls.group_layout)."""
    return _reducescatter_start(
        tensor, name, op, process_set, prescale_factor, postscale_factor, "grouped_reducescatter", layout
    )


def grouped_reducescatter_async(
    tensors, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0
) -> Handle:
    """Starts a reduce-scatter of each tensor of a list; the result is a list."""
    what = "grouped_reducescatter_async"

    def check_one(t):
        if check_tensor(t, what).dim() == 0:
            # Refused, as in Horovod: the whole group fails.
            raise ValueError(f"{what}: a 0-dim tensor cannot be reduce-scattered; give it at least one dimension")

    return start_group(
        "reducescatter",
        "reduce_scatter",
        name,
        process_set,
        tensors,
        check_one,
        lambda t, name_i, layout: _reducescatter_start(
            t, name_i, op, process_set, prescale_factor, postscale_factor, what, layout
        ),
    )


# --------------------------------------------------------------------------
# sparse allreduce (allgathers)


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set) -> Handle:
    """Starts a Sum or Average of a sparse COO tensor: every rank's indices
    and values are allgathered (their counts may differ). The Handle's result
    (synchronize(handle), or handle()) is an uncoalesced sparse tensor."""
    # Generated names only on the global set (the counter must move alike on
    # every rank; other sets' collectives are not matched by name).
    glob = is_global(process_set)
    base = engine_name("sparse_allreduce", name) if glob else None
    try:
        check_process_set(process_set)
        if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
            raise ValueError("sparse_allreduce_async takes a sparse COO tensor")
        op = core_op(op if op is not None else Average)
        if op not in (Sum, Average):
            raise ValueError("sparse_allreduce_async supports Sum and Average only")
        t = tensor.detach()
        indices = t._indices().transpose(0, 1).contiguous()  # one row per non-zero
        values = t._values().contiguous()
    except Exception as error:
        report_failed(
            error,
            "allgather",
            [f"allgather.{base}.indices", f"allgather.{base}.values"] if glob else [],
            process_set,
            calls=2,
        )
        raise
    names = [f"allgather.{base}.indices", f"allgather.{base}.values"] if glob else []
    hi, hv = start_each(
        [(indices, "indices"), (values, "values")],
        names,
        process_set,
        "allgather",
        lambda i, item: allgather_async(item[0], name=base and f"{base}.{item[1]}", process_set=process_set),
    )
    n = size() if glob else process_set.size()

    def finish(results):
        all_indices, all_values = results
        if op == Average:
            all_values = all_values / n
        return torch.sparse_coo_tensor(
            all_indices.transpose(0, 1), all_values, t.size(), device=t.device, check_invariants=False
        )

    return Handle([hi, hv], finish)
