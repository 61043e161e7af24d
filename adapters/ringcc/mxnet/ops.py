"""Horovod-style collectives on MXNet NDArrays (ringcc.mxnet.allreduce, ...).

allreduce, grouped_allreduce and broadcast (and their in-place forms) are
asynchronous like every MXNet operation: they return at once and run inside
MXNet's engine once their inputs are ready; reading the result
(asnumpy(), wait_to_read(), a later operation) waits for them.
allgather blocks until the result is known (its shape depends on the other
ranks). Every rank must make the same calls: collectives are matched across
ranks by name (`name=`, or a name from a per-process counter of unnamed calls).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import mxnet as mx

import ringcc
from ringcc.mxnet import _engine
from ringcc.mxnet.errors import mxnet_errors

__all__ = ["allreduce", "allreduce_", "grouped_allreduce", "grouped_allreduce_", "allgather", "broadcast", "broadcast_"]

_unnamed = itertools.count()


def _name(name: str | None, kind: str) -> str:
    if name is None:
        return f"mx.{kind}.noname.{next(_unnamed)}"
    if not isinstance(name, str) or not name:
        raise ringcc.InvalidArgumentError(f"name must be a non-empty string, got {name!r}")
    return name


def fail(kind: str, error: BaseException, names) -> None:
    """Fails the named collectives `names` on every rank, for an error this
    rank found in their arguments before queueing them: ringcc's engine
    fails each name on the ranks that enqueue it, with MismatchError naming
    this rank and why (docs/api.md, "Errors"), so that none waits for it."""
    text = str(error) if isinstance(error, ringcc.RingccError) else f"{type(error).__name__}: {error}"
    for name in names:
        try:
            ringcc._core._fail_call(kind, text, name)
        except Exception:  # noqa: BLE001 - ringcc is not initialized: nobody to tell
            pass


def _reduce_op(average, op):
    """Horovod's convention: op=None and average=None mean Average."""
    if op is not None and average is not None:
        raise ringcc.InvalidArgumentError("give either op= or the deprecated average=, not both")
    if op is None:
        op = ringcc.Average if (average is None or average) else ringcc.Sum
    return ringcc._op(op)


def run(label: str, reads: Sequence, writes: Sequence, start, priority: int = 0) -> None:
    """Pushes one engine operation over `reads` + `writes` (host NDArrays,
    checked by _engine.check_array); start(views, handles) gets views in
    that order."""
    _engine.push(label, list(reads), list(writes), list(reads) + list(writes), start, priority)


def reduce_lists(
    label: str,
    entries,
    *,
    op=ringcc.Sum,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    priority: int = 0,
    extra_writes=(),
) -> None:
    """Allreduces several values in one engine operation (fused by ringcc).

    entries: (name, values, outs): the values (NDArrays, one per local
    device) are summed locally, reduced over the ranks, and the result is
    written to every array of outs (None: back into the values).
    extra_writes: more NDArrays the operation holds for writing (engine
    variables that order it after earlier operations on them)."""
    reads, writes, plan, copies = [], [], [], []
    try:
        for name, values, outs in entries:
            if not values:
                raise ringcc.InvalidArgumentError(f"{name}: no value to reduce")
            for v in values:
                _engine.check_array(v, "value")
            targets = list(values) if outs is None else list(outs)
            for t in targets:
                _engine.check_array(t, "out")
                if tuple(t.shape) != tuple(values[0].shape):
                    raise ringcc.InvalidArgumentError(f"{name}: out has shape {t.shape}, the value {values[0].shape}")
    except Exception as error:
        fail("allreduce", error, [name for name, _, _ in entries])
        raise
    for name, values, outs in entries:
        targets = list(values) if outs is None else list(outs)
        if len(values) > 1:
            ctx = values[0].context
            source = mx.nd.add_n(*[v.as_in_context(ctx) for v in values])
            first = source  # reduced in place, then copied to every target
            rest = targets
        else:
            source = values[0]
            first = targets[0] if targets else source
            rest = targets[1:]
        if first is source:
            plan.append((name, len(writes), None))
            writes.append(source)
        else:
            plan.append((name, len(writes), len(reads)))
            writes.append(first)
            reads.append(source)
        copies.extend((first, t) for t in rest if t is not first)
    nreads = len(reads)

    def start(views, handles):
        for name, w, r in plan:
            if r is None:
                handles.append(
                    ringcc.allreduce_async_(
                        views[nreads + w],
                        op,
                        name=name,
                        prescale_factor=prescale_factor,
                        postscale_factor=postscale_factor,
                    )
                )
            else:
                handles.append(
                    ringcc.allreduce_async(
                        views[r],
                        op,
                        name=name,
                        prescale_factor=prescale_factor,
                        postscale_factor=postscale_factor,
                        out=views[nreads + w],
                    )
                )

    run(label, reads, writes + list(extra_writes), start, priority)
    for source, target in copies:
        source.copyto(target)


# ---------------------------------------------------------------------------
# The Horovod-style functions


@mxnet_errors
def allreduce(tensor, average=None, name=None, priority=0, prescale_factor=1.0, postscale_factor=1.0, op=None):
    """Returns a new NDArray: `tensor` reduced over all ranks (op: ringcc.Sum,
    Average (the default, as in Horovod), Min, Max, Product or their names;
    `average=False` is Horovod's older spelling of op=Sum)."""
    n = _name(name, "allreduce")
    try:
        _engine.check_array(tensor)
        rop = _reduce_op(average, op)
        out = mx.nd.empty(tensor.shape, ctx=tensor.context, dtype=tensor.dtype)
    except Exception as error:
        fail("allreduce", error, [n])
        raise

    def start(views, handles):
        handles.append(
            ringcc.allreduce_async(
                views[0], rop, name=n, prescale_factor=prescale_factor, postscale_factor=postscale_factor, out=views[1]
            )
        )

    run(n, [tensor], [out], start, priority)
    return out


@mxnet_errors
def allreduce_(tensor, average=None, name=None, priority=0, prescale_factor=1.0, postscale_factor=1.0, op=None):
    """allreduce in place; returns `tensor`."""
    n = _name(name, "allreduce")
    try:
        _engine.check_array(tensor)
        rop = _reduce_op(average, op)
    except Exception as error:
        fail("allreduce", error, [n])
        raise

    def start(views, handles):
        handles.append(
            ringcc.allreduce_async_(
                views[0], rop, name=n, prescale_factor=prescale_factor, postscale_factor=postscale_factor
            )
        )

    run(n, [], [tensor], start, priority)
    return tensor


def _grouped(tensors, average, name, priority, prescale_factor, postscale_factor, op, inplace):
    base = _name(name, "grouped_allreduce")
    tensors = list(tensors)
    names = [f"{base}.{i}" for i in range(len(tensors))]
    try:
        for t in tensors:
            _engine.check_array(t)
        rop = _reduce_op(average, op)
        outs = tensors if inplace else [mx.nd.empty(t.shape, ctx=t.context, dtype=t.dtype) for t in tensors]
    except Exception as error:
        fail("allreduce", error, names)
        raise
    reduce_lists(
        base,
        [(n, [t], None if inplace else [o]) for n, t, o in zip(names, tensors, outs)],
        op=rop,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
        priority=priority,
    )
    return outs


@mxnet_errors
def grouped_allreduce(
    tensors, average=None, name=None, priority=0, prescale_factor=1.0, postscale_factor=1.0, op=None
) -> list:
    """allreduce of a list in one operation (ringcc fuses the tensors); returns new NDArrays."""
    return _grouped(tensors, average, name, priority, prescale_factor, postscale_factor, op, False)


@mxnet_errors
def grouped_allreduce_(
    tensors, average=None, name=None, priority=0, prescale_factor=1.0, postscale_factor=1.0, op=None
) -> list:
    """grouped_allreduce in place; returns the list."""
    return _grouped(tensors, average, name, priority, prescale_factor, postscale_factor, op, True)


def _check_root(root_rank):
    # Checked here, before the collective is queued (a rank that finds it
    # wrong fails the collective on every rank, see fail()).
    size = ringcc.size()
    if isinstance(root_rank, bool) or not isinstance(root_rank, int) or not 0 <= root_rank < size:
        raise ringcc.InvalidArgumentError(f"broadcast: root rank {root_rank!r} is out of range for {size} ranks")
    return root_rank


@mxnet_errors
def broadcast(tensor, root_rank=0, name=None, priority=0):
    """Returns a new NDArray holding root_rank's `tensor`."""
    n = _name(name, "broadcast")
    try:
        _engine.check_array(tensor)
        _check_root(root_rank)
        out = mx.nd.empty(tensor.shape, ctx=tensor.context, dtype=tensor.dtype)
    except Exception as error:
        fail("broadcast", error, [n])
        raise

    def start(views, handles):
        handles.append(ringcc.broadcast_async(views[0], root_rank, name=n, out=views[1]))

    run(n, [tensor], [out], start, priority)
    return out


@mxnet_errors
def broadcast_(tensor, root_rank=0, name=None, priority=0):
    """Overwrites `tensor` with root_rank's, in place; returns `tensor`."""
    n = _name(name, "broadcast")
    try:
        _engine.check_array(tensor)
        _check_root(root_rank)
    except Exception as error:
        fail("broadcast", error, [n])
        raise

    def start(views, handles):
        handles.append(ringcc.broadcast_async_(views[0], root_rank, name=n))

    run(n, [], [tensor], start, priority)
    return tensor


@mxnet_errors
def allgather(tensor, name=None, priority=0):
    """Returns the ranks' tensors concatenated along axis 0 (in rank order;
    the first dimension may differ between ranks). Blocks until done."""
    del priority  # runs at once
    n = _name(name, "allgather")
    try:
        _engine.check_array(tensor)
    except Exception as error:
        fail("allgather", error, [n])
        raise
    try:
        tensor.wait_to_read()
    except Exception as error:  # an earlier operation failed: so does this call, on every rank
        fail("allgather", error, [n])
        raise
    gathered = ringcc.allgather_async(_engine.host_view(tensor), name=n).wait()
    return mx.nd.array(gathered, ctx=tensor.context, dtype=tensor.dtype)
