"""What every collective call of the Horovod API does around its core
call: which process set it runs on, and when its arguments fail on this
rank, failing it on every rank; then handing it to the core; and the
grouped calls' collectives, one per tensor."""

from __future__ import annotations

from collections.abc import Callable

import ringcc
from ringcc import _core
from ringcc.failed_calls import check_group_length as agree_on_group_length
from ringcc.failed_calls import fail_on_every_rank, group_layout, report_missing
from ringcc.torch.horovod.basics import internal_error, require_init
from ringcc.torch.horovod.handles import Handle
from ringcc.torch.horovod.names import call_name, engine_name, member_name, set_label
from ringcc.torch.process_sets import ProcessSet, global_process_set


def is_global(process_set) -> bool:
    """Whether a call on `process_set` runs on the global set. Anything that
    is not a ProcessSet counts as the global set here (its name is taken as
    the global set's calls take theirs); check_process_set() rejects it."""
    if process_set is global_process_set or process_set is None:
        return True
    return not isinstance(process_set, ProcessSet) or process_set.process_set_id == 0


def call_names(kind: str, name, process_set) -> tuple[bool, str | None, str | None]:
    """(whether a call of `kind` runs on the global set, its engine name
    there, the label its errors give it on another set)."""
    glob = is_global(process_set)
    return glob, engine_name(kind, name) if glob else None, None if glob else set_label(kind, name)


def check_process_set(process_set) -> None:
    if process_set is not None and not isinstance(process_set, ProcessSet):
        raise ValueError(f"process_set must be a ProcessSet, got {type(process_set).__name__}")


# -- calls that fail on this rank ---------------------------------------------
#
# An argument that is wrong on one rank (a tensor of another type, an unknown
# op, a bad root or splits...) must not leave the other ranks waiting for the
# call, nor shift the generated names of the calls that follow. So a call
# takes its name first (the per-process counter of unnamed calls moves alike
# on every rank), checks its arguments, and when a check fails, it takes part
# in the call as a failed participant before raising: under its name on the
# global set (the engine fails that name on every rank with MismatchError,
# a HorovodInternalError, naming this rank and why), in issue order on
# another process set (ringcc/failed_calls.py). Errors the core raises
# while taking the tensors are reported by the core itself.


def report_failed(error: BaseException, kind: str, names=(), process_set=None, calls: int = 1) -> None:
    """Takes part, as a failed participant, in the calls `error` stopped on
    this rank: the engine's collectives `names` (global set), or `calls`
    collectives in issue order on `process_set`."""
    if not _core.is_initialized():
        return
    try:
        glob = process_set is None or is_global(process_set)
        comm = None if glob else process_set._communicator()
    except Exception:  # nothing to tell (a set this rank is not in)
        return
    fail_on_every_rank(error, kind, names, comm, calls)


def enqueue(call: Callable[[], object]):
    """Runs a core enqueue; a failure of the job is a HorovodInternalError."""
    require_init()
    try:
        return call()
    except (ringcc.PeerFailureError, ringcc.InternalError) as error:
        raise internal_error(error) from None


def set_rank(process_set, global_rank: int, what: str) -> int:
    """A global rank as its position in a non-global process set."""
    try:
        return process_set.ranks.index(int(global_rank))
    except ValueError:
        raise ValueError(f"{what}: rank {global_rank} is not in {process_set}") from None


def fail_unstarted(error: BaseException, kind: str, name, process_set, core_kind: str) -> None:
    """For an entry point whose own argument handling failed before its call
    took its name: takes the name as the call would have, and fails the
    call on every rank (see "calls that fail on this rank")."""
    glob = is_global(process_set)
    report_failed(error, core_kind, [engine_name(kind, name)] if glob else [], process_set)


def group_names(kind: str, name, process_set, tensors):
    """(the list of tensors, the call name of the group on the global set or
    None, the engine's names of the group's collectives: kind.base,
    kind.base.1, ..., see names.member_name) of a grouped call. When the
    list cannot be made, the call fails on every rank as one collective
    (this rank cannot tell how many its peers start)."""
    glob = is_global(process_set)
    base = call_name(name) if glob else None
    try:
        tensors = list(tensors)
    except Exception as error:
        report_failed(error, kind, [f"{kind}.{base}"] if glob else [], process_set)
        raise
    names = [f"{kind}.{member_name(base, i)}" for i in range(len(tensors))] if glob else []
    return tensors, base, names


def fail_group_unstarted(error, kind: str, name, process_set, tensors) -> None:
    """fail_unstarted for a grouped call: every collective of the group (one
    when the list itself is unusable; a grouped allreduce on a non-global set
    is one call of the core)."""
    glob = is_global(process_set)
    base = call_name(name) if glob else None
    count = len(tensors) if isinstance(tensors, list) else 1
    report_failed(
        error,
        kind,
        [f"{kind}.{member_name(base, i)}" for i in range(count)] if glob else [],
        process_set,
        calls=1 if kind == "allreduce" else count,
    )


def start_each(tensors, names, process_set, core_kind: str, start_one) -> list:
    """Starts one collective per tensor, start_one(i, tensor) -> handle, all
    before any is waited on (a grouped call's collectives; names[i] is the
    engine's name of the i-th on the global set). When starting one raises,
    the ones not started yet fail on every rank too (start_one fails its own)."""
    handles = []
    for i, t in enumerate(tensors):
        try:
            handles.append(start_one(i, t))
        except Exception as error:
            rest = len(tensors) - i - 1
            report_failed(error, core_kind, names[i + 1 :], process_set, calls=rest)
            raise
    return handles


def check_group_length(process_set, count: int, what: str) -> None:
    """failed_calls.check_group_length on a process set other than the job
    (nothing for what is no process set: the call's own checks refuse it),
    its errors as the Horovod API raises them."""
    if not isinstance(process_set, ProcessSet):
        return
    try:
        agree_on_group_length(process_set._communicator(), count, f"{what} on {process_set}")
    except ringcc.RingccError as error:
        raise internal_error(error) from None


def start_group(kind: str, core_kind: str, name, process_set, tensors, check_one, start_one) -> Handle:
    """A grouped call of one collective per tensor (`kind.base.i` on the
    global set): check_one(tensor) checks every tensor before any starts (one
    that fails fails them all on every rank), start_one(tensor, name,
    layout) starts one (layout: group_layout's, for a named call). The
    Handle's result is the list of their results; on the first error, a
    rank whose group is shorter than its peers' fails their extra
    collectives (report_missing)."""
    tensors, base, names = group_names(kind, name, process_set, tensors)
    if base is None:
        check_group_length(process_set, len(tensors), f"grouped_{kind}")
    try:
        check_process_set(process_set)
        for t in tensors:
            check_one(t)
    except Exception as error:
        # Every collective of the group fails on every rank before any runs.
        report_failed(error, core_kind, names, process_set, calls=len(tensors))
        raise
    layout = group_layout(tensors) if base else 0
    handles = start_each(
        tensors, names, process_set, core_kind, lambda i, t: start_one(t, member_name(base, i), layout)
    )
    on_error = report_missing(core_kind, lambda i: f"{kind}.{member_name(base, i)}", len(tensors), layout)
    return Handle(handles, lambda results: list(results), on_error)
