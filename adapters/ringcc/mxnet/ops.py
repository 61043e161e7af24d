"""Horovod-style reductions and broadcasts on MXNet NDArrays
(ringcc.mxnet.allreduce, grouped_allreduce, broadcast and their in-place
forms), and the pieces every collective of ringcc.mxnet shares.

They are asynchronous like every MXNet operation: they return at once and
run inside MXNet's engine once their inputs are ready; reading the result
(asnumpy(), wait_to_read(), a later operation) waits for them and raises
their error. Every rank must make the same calls: on the global process set
collectives are matched across ranks by name (`name=`, or a name from a
per-process counter of unnamed calls); on another process set they start
in the order each rank makes them (see _engine.start_now).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

import mxnet as mx

import ringcc
from ringcc.failed_calls import (
    check_group_length,
    fail_on_every_rank,
    fail_rest_of_groups,
    group_layout,
    report_missing,
)
from ringcc.horovod_basics import Adasum
from ringcc.mxnet import _engine
from ringcc.mxnet.errors import mxnet_errors
from ringcc.process_sets import ProcessSet, global_process_set

__all__ = ["Adasum", "allreduce", "allreduce_", "grouped_allreduce", "grouped_allreduce_", "broadcast", "broadcast_"]

_unnamed = itertools.count()


def collective_name(name: str | None, kind: str) -> str:
    """The engine's name of a call on the global set: `mx.<kind>.<name>`,
    or a generated one for an unnamed call."""
    if name is None:
        return f"mx.{kind}.noname.{next(_unnamed)}"
    if not isinstance(name, str) or not name:
        raise ringcc.InvalidArgumentError(f"name must be a non-empty string, got {name!r}")
    return f"mx.{kind}.{name}"


def member_names(base: str, count: int) -> list[str]:
    """The engine's names of a grouped call's `count` collectives on the
    global set: the first as a single call of the same kind and name is
    named, then `<base>.1`, `<base>.2`, ... A rank that makes the single
    call where its peers make the grouped one thus meets them on the first,
    whose layouts differ (0 against the group's length): MismatchError on
    every rank at once, where names that never met waited for the stall
    timeout."""
    return [base if i == 0 else f"{base}.{i}" for i in range(count)]


def single_call_errors(core_kind: str, process_set):
    """What the collective of a single call on the global set tells its
    error to (None elsewhere): where its peers made a grouped call under its
    name, this rank takes part as a failed participant in the group's other
    collectives, which it never starts (failed_calls.fail_rest_of_groups),
    so that no rank waits for them."""
    if not is_global(process_set):
        return None
    rank = ringcc.rank()
    return lambda error: fail_rest_of_groups(error, rank, single=True, kind=core_kind)


def is_global(process_set) -> bool:
    return (
        process_set is None
        or process_set is global_process_set
        or (isinstance(process_set, ProcessSet) and process_set.process_set_id == 0)
    )


def set_communicator(process_set):
    """The core communicator of a process set other than the global one
    (raises ValueError when it is not one, not registered, or this rank is
    not in it)."""
    if not isinstance(process_set, ProcessSet):
        raise ringcc.InvalidArgumentError(f"process_set must be a ProcessSet, got {type(process_set).__name__}")
    return process_set._communicator()


def agree_on_group_length(process_set, count: int, what: str) -> None:
    """Before a grouped call on a process set other than the global one,
    whose collectives start in issue order: its ranks agree on the group's
    length (failed_calls.check_group_length; MismatchError on every rank of
    the set where the groups differ, before any collective of the group
    starts). Nothing on the global set, whose collectives carry the group's
    length, nor for what is no process set (the call's checks refuse it)."""
    if is_global(process_set) or not isinstance(process_set, ProcessSet):
        return
    check_group_length(process_set._communicator(), count, f"{what} on {process_set}")


def set_rank(process_set, global_rank, what: str) -> int:
    """The position in `process_set` of a global rank (a root)."""
    if is_global(process_set):
        size = ringcc.size()
        if isinstance(global_rank, bool) or not isinstance(global_rank, int) or not 0 <= global_rank < size:
            raise ringcc.InvalidArgumentError(f"{what}: root rank {global_rank!r} is out of range for {size} ranks")
        return global_rank
    if isinstance(global_rank, bool) or not isinstance(global_rank, int) or global_rank not in process_set.ranks:
        raise ringcc.InvalidArgumentError(f"{what}: root rank {global_rank!r} is not in {process_set}")
    return process_set.ranks.index(global_rank)


def fail(kind: str, error: BaseException, names, process_set=None, calls: int = 1) -> None:
    """Takes part, as a failed participant, in the collectives `error`
    stopped on this rank before they started, so that no other rank waits
    for them: on the global set the engine fails each of `names` on every
    rank with MismatchError naming this rank and why (docs/api.md,
    "Errors"); on another set, the next `calls` collectives in issue order
    fail the same way."""
    if is_global(process_set):
        fail_on_every_rank(error, kind, names)
    else:
        comm = getattr(process_set, "_comm", None)
        if comm is not None:
            fail_on_every_rank(error, kind, comm=comm, calls=calls)


def reduce_op(op) -> int:
    """The core's code of a reduction (Sum, Average, Min, Max, Product or their names)."""
    if isinstance(op, int) and not isinstance(op, bool) and op == Adasum:
        raise NotImplementedError("ringcc does not implement Adasum; use Average or Sum")
    return ringcc._op(op)


class _Telling:
    """A collective's handle that tells `on_error` of its error before
    raising it (failed_calls.report_missing, fail_rest_of_groups), once:
    the handle may be waited on more than once (the completion thread
    waits with a timeout, then collects), and each telling takes part in
    collectives again, which would fail the peers' next calls of those
    names. A timed wait's TimeoutError (the completion thread's poll) tells
    nothing: the collective's own error, when it comes, must still reach
    on_error."""

    __slots__ = ("_handle", "_on_error")

    def __init__(self, handle, on_error) -> None:
        self._handle = handle
        self._on_error = on_error

    def done(self) -> bool:
        return self._handle.done()

    def wait(self, *timeout):
        try:
            return self._handle.wait(*timeout)
        except ringcc.RingccError as error:
            if timeout and isinstance(error, ringcc.TimeoutError):
                raise
            on_error, self._on_error = self._on_error, None
            if on_error is not None:
                on_error(error)
            raise


def start_each(kind: str, names, process_set, starters, handles: list, on_error=None) -> None:
    """Calls each of `starters` in turn, appending the handle it returns to
    `handles` (one that tells on_error of its error, when given); when one
    raises, the collectives not started yet fail on every rank too (fail())
    and the error is raised (the started ones stay in `handles`, to be
    waited for)."""
    for i, start in enumerate(starters):
        try:
            handle = start()
            handles.append(handle if on_error is None else _Telling(handle, on_error))
        except BaseException as error:
            rest = len(starters) - i - 1
            fail(kind, error, list(names)[i + 1 :], process_set, calls=rest)
            raise


def _reduce_op(average, op):
    """Horovod's convention: op=None and average=None mean Average."""
    if op is not None and average is not None:
        raise ringcc.InvalidArgumentError("give either op= or the deprecated average=, not both")
    if op is None:
        op = ringcc.Average if (average is None or average) else ringcc.Sum
    return reduce_op(op)


def run(label: str, reads: Sequence, writes: Sequence, start, priority: int = 0) -> None:
    """Pushes one engine operation over `reads` + `writes` (host NDArrays,
    checked by _engine.check_array); start(views, handles) gets views in
    that order."""
    _engine.push(label, list(reads), list(writes), list(reads) + list(writes), start, priority)


def run_on_set(
    kind: str, label: str, process_set, reads: Sequence, writes: Sequence, start, priority: int = 0, calls: int = 1
):
    """run() for a process set other than the global one: waits for the
    arrays (an error an earlier operation left on them fails this call's
    `calls` collectives on the set's other ranks too), then starts the
    set's collectives at once, in program order (_engine.start_now)."""
    try:
        _engine.wait_ready(list(reads), list(writes))
    except BaseException as error:
        fail(kind, error, [], process_set, calls=calls)
        raise
    _engine.start_now(label, list(reads), list(writes), list(reads) + list(writes), start, priority)


def reduce_lists(
    label: str,
    entries,
    *,
    op=ringcc.Sum,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    priority: int = 0,
    extra_writes=(),
    process_set=global_process_set,
    layout: int = 0,
    on_error=None,
) -> None:
    """Allreduces several values in one engine operation (fused by ringcc).

    entries: (name, values, outs): the values (NDArrays, one per local
    device) are summed locally, reduced over the ranks of `process_set`, and
    the result is written to every array of outs (None: back into the
    values). extra_writes: more NDArrays the operation holds for writing
    (engine variables that order it after earlier operations on them).
    layout: on the global set, the length of the group the entries make
    (the engine's TensorMeta::layout, failed_calls.group_layout; 0: none),
    and on_error what the collectives' errors are told to (report_missing)."""
    glob = is_global(process_set)
    reads, writes, plan, copies = [], [], [], []
    try:
        comm = None if glob else set_communicator(process_set)
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
        fail("allreduce", error, [name for name, _, _ in entries], process_set, calls=len(entries))
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
    scale = {"prescale_factor": prescale_factor, "postscale_factor": postscale_factor}
    names = [name for name, _, _ in plan]

    def start_one(views, name, w, r):
        """The collective of one entry: in place (r is None) or from views[r]."""
        out = views[nreads + w]
        if comm is not None:
            source = out if r is None else views[r]
            return comm.allreduce(
                source, None if r is None else out, op, prescale_factor, postscale_factor, r is None, True
            )
        if layout:
            source = out if r is None else views[r]
            return ringcc._core._allreduce(
                source, None if r is None else out, op, prescale_factor, postscale_factor, r is None, True, name, layout
            )
        if r is None:
            return ringcc.allreduce_async_(out, op, name=name, **scale)
        return ringcc.allreduce_async(views[r], op, name=name, out=out, **scale)

    def start(views, handles):
        starters = [functools.partial(start_one, views, *entry) for entry in plan]
        start_each("allreduce", names, process_set, starters, handles, on_error)

    if glob:
        run(label, reads, writes + list(extra_writes), start, priority)
    else:
        run_on_set("allreduce", label, process_set, reads, writes + list(extra_writes), start, priority, len(plan))
    for source, target in copies:
        source.copyto(target)


# ---------------------------------------------------------------------------
# The Horovod-style functions


def _allreduce(tensor, average, name, priority, prescale_factor, postscale_factor, process_set, op, inplace):
    n = collective_name(name, "allreduce") if is_global(process_set) else f"mx.allreduce.{name or 'set'}"
    (out,) = _reduce_each(
        n, [n], [tensor], average, priority, prescale_factor, postscale_factor, process_set, op, inplace
    )
    return out


def _reduce_each(
    label, names, tensors, average, priority, prescale_factor, postscale_factor, process_set, op, inplace, layout=0
):
    """Allreduces each of `tensors` under its name of `names`, in one engine
    operation `label`; returns the results (`tensors` themselves in place)."""
    try:
        for t in tensors:
            _engine.check_array(t)
        rop = _reduce_op(average, op)
        outs = tensors if inplace else [mx.nd.empty(t.shape, ctx=t.context, dtype=t.dtype) for t in tensors]
    except Exception as error:
        fail("allreduce", error, names, process_set, calls=len(tensors))
        raise
    if not tensors:
        return outs
    reduce_lists(
        label,
        [(n, [t], None if inplace else [o]) for n, t, o in zip(names, tensors, outs)],
        op=rop,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
        priority=priority,
        process_set=process_set,
        layout=layout,
        on_error=(
            report_missing("allreduce", lambda i: f"{label}.{i}", len(tensors), layout)
            if layout
            else single_call_errors("allreduce", process_set)
        ),
    )
    return outs


@mxnet_errors
def allreduce(
    tensor,
    average=None,
    name=None,
    priority=0,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
    op=None,
):
    """Returns a new NDArray: `tensor` reduced over the ranks of
    `process_set` (op: Sum, Average (the default, as in Horovod), Min, Max,
    Product or their names; `average=False` is Horovod's older spelling of
    op=Sum)."""
    return _allreduce(tensor, average, name, priority, prescale_factor, postscale_factor, process_set, op, False)


@mxnet_errors
def allreduce_(
    tensor,
    average=None,
    name=None,
    priority=0,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
    op=None,
):
    """allreduce in place; returns `tensor`."""
    return _allreduce(tensor, average, name, priority, prescale_factor, postscale_factor, process_set, op, True)


def _grouped(tensors, average, name, priority, prescale_factor, postscale_factor, process_set, op, inplace):
    tensors = list(tensors)
    agree_on_group_length(process_set, len(tensors), "grouped_allreduce_" if inplace else "grouped_allreduce")
    if is_global(process_set):
        base = collective_name(name, "allreduce")
        names = member_names(base, len(tensors))
    else:
        base = f"mx.grouped_allreduce.{name or 'set'}"
        names = [f"{base}.{i}" for i in range(len(tensors))]
    return _reduce_each(
        base,
        names,
        tensors,
        average,
        priority,
        prescale_factor,
        postscale_factor,
        process_set,
        op,
        inplace,
        group_layout(tensors) if is_global(process_set) else 0,
    )


@mxnet_errors
def grouped_allreduce(
    tensors,
    average=None,
    name=None,
    priority=0,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
    op=None,
) -> list:
    """allreduce of a list in one operation (ringcc fuses the tensors); returns new NDArrays."""
    return _grouped(tensors, average, name, priority, prescale_factor, postscale_factor, process_set, op, False)


@mxnet_errors
def grouped_allreduce_(
    tensors,
    average=None,
    name=None,
    priority=0,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
    op=None,
) -> list:
    """grouped_allreduce in place; returns the list."""
    return _grouped(tensors, average, name, priority, prescale_factor, postscale_factor, process_set, op, True)


def _broadcast(tensor, root_rank, name, priority, process_set, inplace):
    glob = is_global(process_set)
    n = collective_name(name, "broadcast") if glob else f"mx.broadcast.{name or 'set'}"
    try:
        _engine.check_array(tensor)
        comm = None if glob else set_communicator(process_set)
        root = set_rank(process_set, root_rank, "broadcast")
        out = tensor if inplace else mx.nd.empty(tensor.shape, ctx=tensor.context, dtype=tensor.dtype)
    except Exception as error:
        fail("broadcast", error, [n], process_set)
        raise
    reads, writes = ([], [tensor]) if inplace else ([tensor], [out])

    def start(views, handles):
        if inplace:
            handles.append(ringcc.broadcast_async_(views[0], root, name=n))
        else:
            handles.append(ringcc.broadcast_async(views[0], root, name=n, out=views[1]))

    def start_on_set(views, handles):
        handles.append(comm.broadcast(views[0], None if inplace else views[1], root, inplace, True))

    if glob:
        run(n, reads, writes, start, priority)
    else:
        run_on_set("broadcast", n, process_set, reads, writes, start_on_set, priority)
    return out


@mxnet_errors
def broadcast(tensor, root_rank=0, name=None, priority=0, process_set=global_process_set):
    """Returns a new NDArray holding `tensor` of root_rank (a global rank,
    also for a process set)."""
    return _broadcast(tensor, root_rank, name, priority, process_set, False)


@mxnet_errors
def broadcast_(tensor, root_rank=0, name=None, priority=0, process_set=global_process_set):
    """Overwrites `tensor` with root_rank's, in place; returns `tensor`."""
    return _broadcast(tensor, root_rank, name, priority, process_set, True)
