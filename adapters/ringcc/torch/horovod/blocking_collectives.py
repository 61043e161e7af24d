"""The Horovod API's blocking collectives: each is its asynchronous form
(async_allreduce.py, async_collectives.py) followed by synchronize(), and
differentiable (the Horovod* autograd functions give each its gradient, as
Horovod defines it); and barrier() and join()."""

from __future__ import annotations

import numpy as np
import torch

import ringcc
from ringcc import _core
from ringcc.failed_calls import fail_rest_of_groups, group_layout
from ringcc.torch.compression import Compression
from ringcc.torch.horovod.async_allreduce import (
    allreduce_async,
    allreduce_async_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
)
from ringcc.torch.horovod.async_collectives import (
    allgather_async,
    allgather_in_group,
    alltoall_async,
    alltoall_start,
    broadcast_async,
    broadcast_async_,
    grouped_allgather_async,
    grouped_reducescatter_async,
    reducescatter_async,
    reducescatter_in_group,
)
from ringcc.torch.horovod.basics import (
    Average,
    Max,
    Sum,
    handle_average_backwards_compatibility,
    internal_error,
    rank,
    require_init,
    size,
)
from ringcc.torch.horovod.calls import (
    check_group_length,
    check_process_set,
    enqueue,
    fail_group_unstarted,
    fail_unstarted,
    group_names,
    is_global,
    report_failed,
)
from ringcc.torch.horovod.handles import Handle, synchronize
from ringcc.torch.horovod.names import engine_name, member_name, next_number, reset_names
from ringcc.torch.process_sets import global_process_set


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


# --------------------------------------------------------------------------
# allreduce


class HorovodAllreduce(torch.autograd.Function):
    """allreduce with a gradient: the gradient is allreduced with the same op
    and factors (as in Horovod)."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = op
        ctx.factors = (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        pre, post = ctx.factors
        grad = allreduce(
            grad_output, op=ctx.op, prescale_factor=pre, postscale_factor=post, process_set=ctx.process_set
        )
        return grad, None, None, None, None, None, None


def allreduce(
    tensor,
    average=None,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduces `tensor` over the ranks (Average unless `op` says otherwise)
    and returns a new tensor; `tensor` is not modified. Differentiable."""
    try:
        op = handle_average_backwards_compatibility(op, average)
        compressed, ctx = compression.compress(tensor)
    except Exception as error:
        fail_unstarted(error, "allreduce", name, process_set, "allreduce")
        raise
    if _needs_grad(compressed):
        reduced = HorovodAllreduce.apply(compressed, None, name, op, prescale_factor, postscale_factor, process_set)
    else:
        reduced = synchronize(
            allreduce_async(compressed, None, name, op, prescale_factor, postscale_factor, process_set)
        )
    return compression.decompress(reduced, ctx)


def allreduce_(
    tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """In-place allreduce; returns `tensor`."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor, process_set))


# -- grouped allreduce -------------------------------------------------------


class HorovodGroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op = op
        ctx.factors = (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return tuple(
            synchronize(
                grouped_allreduce_async(
                    list(tensors), average, name, op, prescale_factor, postscale_factor, process_set
                )
            )
        )

    @staticmethod
    def backward(ctx, *grad_outputs):
        pre, post = ctx.factors
        grads = grouped_allreduce(
            list(grad_outputs), op=ctx.op, prescale_factor=pre, postscale_factor=post, process_set=ctx.process_set
        )
        return (None, None, None, None, None, None, *grads)


def grouped_allreduce(
    tensors,
    average=None,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduces a list of tensors together; returns a list of new tensors.
    Differentiable."""
    try:
        op = handle_average_backwards_compatibility(op, average)
        tensors = list(tensors)
        compressed, ctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    except Exception as error:
        fail_group_unstarted(error, "allreduce", name, process_set, tensors)
        raise
    if not tensors:
        return []
    if _needs_grad(*compressed):
        reduced = HorovodGroupedAllreduce.apply(
            None, name, op, prescale_factor, postscale_factor, process_set, *compressed
        )
    else:
        reduced = synchronize(
            grouped_allreduce_async(list(compressed), None, name, op, prescale_factor, postscale_factor, process_set)
        )
    return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]


def grouped_allreduce_(
    tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """In-place grouped allreduce; returns the list."""
    return synchronize(
        grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor, process_set)
    )


def _in_turn(base, tensors, run_one) -> list:
    """The collectives of a differentiable grouped call, each done before the
    next starts: run_one(i, tensor) for each. When the first fails because
    the ranks' groups differ, this rank fails the collectives of the groups
    that it never starts (failed_calls.fail_rest_of_groups), on the global
    set (`base`, the group's call name, not None)."""
    results = []
    for i, t in enumerate(tensors):
        try:
            results.append(run_one(i, t))
        except ringcc.MismatchError as error:
            if i == 0 and base is not None:
                fail_rest_of_groups(error, rank(), single=False)
            raise
    return results


# --------------------------------------------------------------------------
# allgather


class HorovodAllgather(torch.autograd.Function):
    """allgather with a gradient: as in Horovod, the incoming gradient is
    averaged over the ranks and this rank's rows are kept."""

    @staticmethod
    def forward(ctx, tensor, name, process_set, layout=0):
        ctx.dim = int(tensor.shape[0]) if tensor.dim() else 1
        ctx.scalar = tensor.dim() == 0
        ctx.process_set = process_set
        if layout:
            return synchronize(allgather_in_group(tensor, name, process_set, layout))
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        ps = ctx.process_set
        grad_reduced = allreduce(grad_output, op=Average, process_set=ps)
        dims = allgather(torch.tensor([ctx.dim], dtype=torch.int64), process_set=ps)
        r = rank() if is_global(ps) else ps.rank()
        offset = int(dims[:r].sum()) if r else 0
        grad = grad_reduced.narrow(0, offset, ctx.dim)
        if ctx.scalar:
            grad = grad.reshape(())
        return grad, None, None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's `tensor` along dim 0; returns a new tensor.
    Differentiable."""
    if _needs_grad(tensor):
        return HorovodAllgather.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers each tensor of a list; returns a list of new tensors.
    Differentiable (tensor by tensor: each is done before the next starts)."""
    if isinstance(tensors, (list, tuple)) and _needs_grad(*tensors):
        tensors, base, _ = group_names("allgather", name, process_set, tensors)
        if base is None:
            check_group_length(process_set, len(tensors), "grouped_allgather")
        layout = group_layout(tensors) if base else 0
        return _in_turn(
            base, tensors, lambda i, t: HorovodAllgather.apply(t, member_name(base, i), process_set, layout)
        )
    return synchronize(grouped_allgather_async(tensors, name, process_set))


# --------------------------------------------------------------------------
# broadcast


class HorovodBroadcast(torch.autograd.Function):
    """broadcast with a gradient: as in Horovod, the gradient is averaged over
    the ranks and kept on the root only (zeros elsewhere)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if rank() != int(ctx.root_rank):
            grad_reduced = grad_reduced * 0
        return grad_reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's `tensor` on every rank (a new tensor). Differentiable."""
    if _needs_grad(tensor):
        return HorovodBroadcast.apply(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites `tensor` with root_rank's; returns `tensor`."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# --------------------------------------------------------------------------
# alltoall


class HorovodAlltoall(torch.autograd.Function):
    """alltoall with a gradient: the gradient goes back the way the rows came."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_start(tensor, splits, name, process_set, "alltoall"))
        ctx.process_set = process_set
        ctx.received = received
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = synchronize(alltoall_start(grad_output, ctx.received, None, ctx.process_set, "alltoall (backward)"))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Synchronous alltoall (see alltoall_async). Differentiable."""
    if _needs_grad(tensor):
        return HorovodAlltoall.apply(tensor, splits, name, process_set)
    return synchronize(alltoall_async(tensor, splits, name, process_set))


# --------------------------------------------------------------------------
# reducescatter


class HorovodReducescatter(torch.autograd.Function):
    """reducescatter with Horovod's gradient: the incoming gradient, times
    the set's size for Sum (not for Average) and times the scale factors,
    allgathered."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor, layout=0):
        ctx.op = op
        ctx.process_set = process_set
        ctx.scale = float(prescale_factor) * float(postscale_factor)
        if layout:
            return synchronize(
                reducescatter_in_group(tensor, name, op, process_set, prescale_factor, postscale_factor, layout)
            )
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.op not in (Sum, Average):
            raise NotImplementedError("the gradient of reducescatter is defined for Sum and Average")
        scale = ctx.scale
        if ctx.op == Sum:
            scale *= size() if is_global(ctx.process_set) else ctx.process_set.size()
        if scale != 1.0:
            grad_output = grad_output * scale
        return allgather(grad_output, process_set=ctx.process_set), None, None, None, None, None, None


def reducescatter(
    tensor,
    name=None,
    compression=Compression.none,
    op=Average,
    process_set=global_process_set,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """Synchronous reduce-scatter (see reducescatter_async). Differentiable."""
    try:
        compressed, ctx = compression.compress(tensor)
    except Exception as error:
        fail_unstarted(error, "reducescatter", name, process_set, "reduce_scatter")
        raise
    if _needs_grad(compressed):
        result = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor, postscale_factor)
    else:
        result = synchronize(reducescatter_async(compressed, name, op, process_set, prescale_factor, postscale_factor))
    return compression.decompress(result, ctx)


def grouped_reducescatter(
    tensors,
    name=None,
    compression=Compression.none,
    op=Average,
    process_set=global_process_set,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """Reduce-scatters each tensor of a list; returns a list. Differentiable
    (tensor by tensor: each is done before the next starts)."""
    try:
        tensors = list(tensors)
        compressed, ctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    except Exception as error:
        fail_group_unstarted(error, "reducescatter", name, process_set, tensors)
        raise
    if _needs_grad(*compressed):
        compressed, base, _ = group_names("reducescatter", name, process_set, compressed)
        if base is None:
            check_group_length(process_set, len(compressed), "grouped_reducescatter")
        layout = group_layout(compressed) if base else 0
        results = _in_turn(
            base,
            compressed,
            lambda i, t: HorovodReducescatter.apply(
                t, member_name(base, i), op, process_set, prescale_factor, postscale_factor, layout
            ),
        )
    else:
        results = synchronize(
            grouped_reducescatter_async(list(compressed), name, op, process_set, prescale_factor, postscale_factor)
        )
    return [compression.decompress(r, c) for r, c in zip(results, ctxs)]


# --------------------------------------------------------------------------
# barrier and join


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has called barrier(). On the global
    set this is a named engine collective (issued in order like the others)."""
    glob = is_global(process_set)
    full = engine_name("barrier", None) if glob else None
    try:
        check_process_set(process_set)
        comm = None if glob else process_set._communicator()
    except Exception as error:
        report_failed(error, "allreduce" if glob else "barrier", [full], process_set)
        raise
    if glob:
        flag = np.zeros(1, dtype=np.int32)
        h = enqueue(lambda: _core._allreduce(flag, None, Sum, 1.0, 1.0, True, True, full))
    else:
        h = enqueue(lambda: comm.barrier(True))
    Handle([h]).wait()


# The name of the allreduce that realigns the counters of generated names
# after a join (every name the Horovod API gives starts with its op's kind,
# so none can be this one).
_JOIN_NAMES_REALIGNED = "join.generated_names"


def join(device=-1) -> int:
    """Declares that this rank has no more data, and blocks until every rank
    has joined. Meanwhile this rank takes part in the others' allreduces on
    the global set with zeros (Sum is the sum over the ranks that have not
    joined, Average that sum divided by the size of the job), and their
    other collectives on the global set (allgather, broadcast, alltoall,
    reducescatter) raise a HorovodInternalError (a MismatchError) naming the
    joined ranks, as in Horovod. Returns the last rank to join (the same on
    every rank).

    The unnamed calls the others made while this rank was joined took
    generated names this rank did not: on return every rank's counter of
    generated names is the highest of them, so the unnamed calls that
    follow match again.

    `device` is accepted and ignored: a joined rank stands in for host
    tensors only (the others' collectives of CUDA tensors fail with
    MismatchError saying so). Process sets other than the global one are
    not covered."""
    require_init()
    try:
        last = int(ringcc.join())
        counter = np.array([next_number()], dtype=np.int64)
        Handle([_core._allreduce(counter, None, Max, 1.0, 1.0, True, True, _JOIN_NAMES_REALIGNED)]).wait()
    except ringcc.RingccError as error:
        raise internal_error(error) from None
    reset_names(int(counter[0]))
    return last
