"""The Horovod API's asynchronous allreduces: allreduce_async(_) and
grouped_allreduce_async(_). The common case of a training loop (a dense
contiguous CPU tensor of a core dtype, an int op) takes a direct path to
the core's raw entry points; anything else the general one (wires.py)."""

from __future__ import annotations

import torch

import ringcc
from ringcc import _core
from ringcc.failed_calls import group_layout, report_missing
from ringcc.torch.horovod.basics import Average, core_op, handle_average_backwards_compatibility, internal_error
from ringcc.torch.horovod.calls import (
    call_names,
    check_process_set,
    enqueue,
    group_names,
    report_failed,
    start_each,
)
from ringcc.torch.horovod.handles import Handle
from ringcc.torch.horovod.names import engine_name, member_name, set_label
from ringcc.torch.horovod.wires import (
    check_reducible,
    check_tensor,
    direct_code,
    from_reduce_wire,
    reduce_wire,
    shares_memory,
    unwired_result,
)
from ringcc.torch.output_rows import OUTPUT_ROWS
from ringcc.torch.process_sets import ProcessSet, global_process_set

# The core's raw entry points of the direct paths.
_allreduce_async_raw = _core._allreduce_async_raw
_comm_allreduce_async_raw = _core._comm_allreduce_async_raw


def _allreduce_start(
    tensor, name, op, prescale_factor, postscale_factor, process_set, inplace: bool, what: str, average=None, layout=0
) -> Handle:
    glob, full, label = call_names("allreduce", name, process_set)
    try:
        check_process_set(process_set)
        op = handle_average_backwards_compatibility(op, average)
        t = check_tensor(tensor, what)
        op = core_op(op)
        wire = reduce_wire(t, op, what)
        pre, post = float(prescale_factor), float(postscale_factor)
        if inplace:
            direct = (
                shares_memory(wire, t)
                and t.dtype == wire.dtype
                or (t.dtype.is_complex and t.device.type in ("cpu", "cuda") and t.is_contiguous())
            )
            out = None
        else:
            direct = False
            out = torch.empty(wire.shape, dtype=wire.dtype, device=wire.device)
        comm = None if glob else process_set._communicator()
    except Exception as error:
        report_failed(error, "allreduce", [full], process_set)
        raise
    if glob:
        h = enqueue(lambda: _core._allreduce(wire, out, op, pre, post, inplace, True, full, layout))
    else:
        h = enqueue(lambda: comm.allreduce(wire, out, op, pre, post, inplace, True, label))

    return Handle([h], unwired_result(tensor, wire, out, inplace, direct, lambda w: from_reduce_wire(w, t)))


def allreduce_async(
    tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
) -> Handle:
    """Starts an allreduce of `tensor` (not modified); returns a Handle whose
    result is a new tensor. op defaults to Average. The operation is keyed
    by `name` (generated when None); shape and dtype must match across ranks."""
    return _allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor, process_set, False)


def allreduce_async_(
    tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Starts an in-place allreduce: the result is written into `tensor`'s
    own memory, and the handle's result is `tensor`. Wait with
    `synchronize(handle)`, test with `poll(handle)`."""
    return _allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor, process_set, True)


def _allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor, process_set, in_place):
    """allreduce_async(_): the direct path where it takes the call, else the general one."""
    if average is None:
        reduce_op = Average if op is None else op
        if process_set is global_process_set:
            handle = _direct_allreduce(
                tensor, "allreduce", name, reduce_op, prescale_factor, postscale_factor, in_place
            )
        else:
            handle = _direct_set_allreduce(
                tensor, process_set, name, reduce_op, prescale_factor, postscale_factor, in_place
            )
        if handle is not None:
            return handle
    what = "allreduce_async_" if in_place else "allreduce_async"
    return _allreduce_start(tensor, name, op, prescale_factor, postscale_factor, process_set, in_place, what, average)


def _direct_set_allreduce(tensor, process_set, name, op, prescale_factor, postscale_factor, inplace: bool):
    """_direct_allreduce on a process set this rank is in: in issue order
    on the set's communicator, by address. None when not such a case."""
    comm = getattr(process_set, "_comm", None) if isinstance(process_set, ProcessSet) else None
    if comm is None or process_set.process_set_id is None:
        return None
    code = direct_code(tensor, op)
    if code is None:
        return None
    try:
        label = None if name is None else set_label("allreduce", name)
        if inplace:
            return _comm_allreduce_async_raw(
                comm, tensor, tensor.data_ptr(), tensor.shape, code, op, prescale_factor, postscale_factor, label
            )
        return _comm_allreduce_async_raw(
            comm,
            OUTPUT_ROWS,
            0,
            tensor.shape,
            code,
            op,
            prescale_factor,
            postscale_factor,
            label,
            tensor,
            tensor.data_ptr(),
        )
    except (ringcc.PeerFailureError, ringcc.InternalError) as error:
        raise internal_error(error) from None


def _direct_allreduce(tensor, kind, name, op, prescale_factor, postscale_factor, inplace: bool, layout=0):
    """The common case of a training loop (a dense contiguous CPU tensor of a
    core dtype, an int op, the global process set): the allreduce goes to
    the engine with the tensor's address (no DLPack export, no wrapper
    handle), named as `kind` names it; in place, or out of place into a new
    tensor (a row of OUTPUT_ROWS) that the handle returns, `tensor` only
    read. None when `tensor` is not such a case (the caller takes the
    general path). A bad scale factor fails the call under its name (the
    core does that). `layout`: that of the group the call belongs to
    (failed_calls.group_layout), 0 for none."""
    code = direct_code(tensor, op)
    if code is None:
        return None
    full = f"{kind}.{name}" if name else engine_name(kind, name)
    try:
        if inplace:
            return _allreduce_async_raw(
                tensor, tensor.data_ptr(), tensor.shape, code, op, full, prescale_factor, postscale_factor, layout
            )
        return _allreduce_async_raw(
            OUTPUT_ROWS,
            0,
            tensor.shape,
            code,
            op,
            full,
            prescale_factor,
            postscale_factor,
            tensor,
            tensor.data_ptr(),
            layout,
        )
    except ringcc.NotInitializedError:
        return None  # the general path says so in Horovod's words
    except (ringcc.PeerFailureError, ringcc.InternalError) as error:
        raise internal_error(error) from None


# -- grouped allreduce -------------------------------------------------------


def _grouped_allreduce_start(
    tensors, name, op, prescale_factor, postscale_factor, process_set, inplace: bool, what: str, average=None
) -> Handle:
    tensors, base, names = group_names("allreduce", name, process_set, tensors)
    glob = base is not None
    try:
        check_process_set(process_set)
        op = handle_average_backwards_compatibility(op, average)
        code = core_op(op)
        plain = [check_tensor(t, what) for t in tensors]
        for t in plain:
            check_reducible(t, code, what)
        pre, post = float(prescale_factor), float(postscale_factor)
    except Exception as error:
        # Every tensor of the group fails on every rank before any runs.
        report_failed(error, "allreduce", names, process_set, calls=1 if tensors else 0)
        raise
    if not tensors:
        return Handle([], lambda _: [])
    if glob:
        # Named tensors of one group: the engine fuses what is ready.
        layout = group_layout(tensors)

        def start_one(i, t):
            name_i = member_name(base, i)
            h = _direct_allreduce(t, "allreduce", name_i, code, pre, post, True, layout) if inplace else None
            if h is None:
                h = _allreduce_start(t, name_i, code, pre, post, process_set, inplace, what, layout=layout)
            return h

        handles = start_each(tensors, names, process_set, "allreduce", start_one)
        on_error = report_missing("allreduce", lambda i: f"allreduce.{member_name(base, i)}", len(tensors), layout)
        return Handle(handles, lambda results: list(results), on_error)
    try:
        comm = process_set._communicator()
        wires = [reduce_wire(t, code, what) for t in plain]
        if not inplace:
            # The communicator reduces in place: never into the caller's inputs.
            wires = [w.clone() if w.data_ptr() == p.data_ptr() else w for w, p in zip(wires, plain)]
    except Exception as error:
        report_failed(error, "allreduce", [], process_set)
        raise
    h = enqueue(lambda: comm.grouped_allreduce(wires, code, pre, post, True, True))

    def finish(_):
        results = []
        for t, p, w in zip(tensors, plain, wires):
            if not inplace:
                results.append(from_reduce_wire(w, p))
                continue
            if not (p.device.type in ("cpu", "cuda") and p.is_contiguous() and w.data_ptr() == p.data_ptr()):
                with torch.no_grad():
                    t.copy_(from_reduce_wire(w, p))
            results.append(t)
        return results

    return Handle([h], finish)


def grouped_allreduce_async(
    tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
) -> Handle:
    """Starts an allreduce of a list of tensors (not modified), reduced
    together; the Handle's result is a list of new tensors."""
    return _grouped_allreduce_start(
        tensors, name, op, prescale_factor, postscale_factor, process_set, False, "grouped_allreduce_async", average
    )


def grouped_allreduce_async_(
    tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
) -> Handle:
    """In-place form of grouped_allreduce_async."""
    return _grouped_allreduce_start(
        tensors, name, op, prescale_factor, postscale_factor, process_set, True, "grouped_allreduce_async_", average
    )
