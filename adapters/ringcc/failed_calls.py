"""Calls that fail on this rank, for every framework adapter (torch's
backend and Horovod API, TensorFlow's and MXNet's collectives).

An argument that is wrong on one rank only (a tensor of another type or
device, an unknown op, a bad root or splits...) must fail the same call on
every rank, so that no peer waits for it and the next call is in step. A
call that raises before it issued its core collective takes part in the
peers' one as a failed participant: they raise MismatchError naming this
rank and the reason. Errors the core raises while it takes the arguments
are reported by the core itself.

A bottom module: it imports ringcc and its core, and no framework."""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

import ringcc
from ringcc import _core


def error_text(error: BaseException) -> str:
    """What the peers are told of `error`: ringcc's errors by their message,
    others with their class ("TypeError: ...")."""
    if isinstance(error, _core.RingccError):
        return str(error)
    return f"{type(error).__name__}: {error}"


# The layout of a failed call that is one of several collectives of a
# grouped call this rank fails together (RINGCC_LAYOUT_GROUP_FAILED): the
# peers' engines then leave the group's other collectives to this rank's
# failures (Engine::note_group_rest).
LAYOUT_GROUP_FAILED = -1


def fail_on_every_rank(error: BaseException, kind: str, names: Iterable[str] = (), comm=None, calls: int = 1) -> None:
    """Takes part, as a failed participant of `kind` ("allreduce", ...), in
    the calls `error` stopped on this rank: the engine's collectives `names`
    (ringcc.init()'s ranks), or, given a communicator `comm`, the next
    `calls` collectives in issue order on it. Returns at once; nobody left
    to tell (a communicator gone, ringcc shut down) is no error. Several
    names are a grouped call's collectives, which this rank fails together:
    its peers' engines then leave the group's others to these failures;
    one name a single call's, whose peers' grouped call of that name (if
    any) fails its others itself."""
    message = error_text(error)
    try:
        if comm is None:
            names = list(names)
            layout = LAYOUT_GROUP_FAILED if len(names) > 1 else 0
            for name in names:
                _core._fail_call(kind, message, name, layout)
        else:
            for _ in range(calls):
                comm.report_error(message, kind)
    except Exception:  # noqa: BLE001 - nothing to tell
        pass


def group_layout(tensors) -> int:
    """The layout that each collective of a grouped call on the global set
    carries (the engine's TensorMeta::layout): the group's length, so that
    ranks whose groups differ in length (a tensor missing on one rank) fail
    with MismatchError on every collective they share, rather than combine
    whichever tensors share a position. The shape and dtype of each tensor
    are compared already, collective by collective. A group of one carries
    1, so that a rank whose group holds one tensor where its peers' hold
    more fails too."""
    return len(tensors)


_DIGESTS = re.compile(r"grouped with it \(digests ([^)]*)\)")
_RANK_VALUE = re.compile(r"rank \d+: (-?\d+)")
# The most collectives a longer group may hold beyond this rank's group
# (a layout larger than that is not a group's length).
_MOST_MISSING = 1 << 16


def report_missing(core_kind: str, names, count: int, layout: int):
    """What a grouped call runs on the errors of its collectives (None where
    there is nothing to report: no layout, on another process set): when
    the ranks' groups differed in length (the engine's MismatchError lists
    each rank's layout, group_layout's length), this rank takes part as a
    failed participant in the collectives of the longer groups that it
    never started (names(i) the i-th's engine name, i from `count`), so
    that their ranks fail now rather than at the collectives' timeout."""
    if not layout:
        return None
    reported = []

    def on_error(error: BaseException) -> None:
        found = _DIGESTS.search(str(error))
        lengths = [int(v) for v in _RANK_VALUE.findall(found.group(1))] if found else []
        longest = max(lengths, default=0)
        if not reported and count < longest <= count + _MOST_MISSING:
            reported.append(longest)
            fail_on_every_rank(error, core_kind, [names(i) for i in range(count, longest)])

    return on_error


_DISAGREEING = re.compile(r"tensor '([^']+)': ranks disagree")
_RANK_LAYOUT = re.compile(r"rank (\d+): (-?\d+)")
# The core's kind of a collective named by the Horovod API's kind.
_CORE_KINDS = {"reducescatter": "reduce_scatter"}


def fail_rest_of_groups(error: BaseException, rank: int, single: bool, kind: str | None = None) -> None:
    """What a call whose collective failed because the ranks' groups differ
    runs when it holds none of the groups' other collectives: a single call
    (`single`: layout 0) whose peers ran a grouped call under its name, or
    the first collective of a grouped call that starts the next one only
    once this one is done (torch's differentiable grouped calls). The
    grouped calls name their collectives `<name>`, `<name>.1`, ... (the
    first as the single call would be named), and the engine's
    MismatchError lists every rank's layout, a group's length; this rank
    takes part as a failed participant in `<name>.1` to the longest
    group's last, so that the ranks that started them fail now rather than
    at the stall timeout, and every rank that did not start them does the
    same, so that none is left in flight. `kind`: the core's kind of the
    collectives (None: the first part of their name, as torch's names
    begin)."""
    if not isinstance(error, _core.MismatchError):
        return
    text = str(error)
    named, found = _DISAGREEING.search(text), _DIGESTS.search(text)
    if named is None or found is None:
        return
    layouts = {int(r): int(v) for r, v in _RANK_LAYOUT.findall(found.group(1))}
    if single and layouts.get(rank) != 0:
        return
    longest = max(layouts.values(), default=0)
    if 1 < longest <= 1 + _MOST_MISSING:
        name = named.group(1)
        kind = kind or name.split(".", 1)[0]
        fail_on_every_rank(error, _CORE_KINDS.get(kind, kind), [f"{name}.{i}" for i in range(1, longest)])


def check_group_length(comm, count: int, what: str) -> None:
    """On a process set other than the job, whose collectives run in issue
    order on its communicator `comm`, a grouped call's ranks first agree on
    the group's length: where the groups differ, one rank's collectives
    would pair with another's later ones (a rank returning normally with
    another's tensors, the next call out of step). One small allreduce of
    the longest and the shortest; where they differ, MismatchError on every
    rank of the set before any of the group's collectives starts. `what`
    names the call in the message ("grouped_allgather on ProcessSet(...)")."""
    lengths = np.array([count, -count], np.int64)
    comm.allreduce(lengths, None, ringcc.Max, 1.0, 1.0, True, False, None)
    longest, shortest = int(lengths[0]), -int(lengths[1])
    if longest != shortest:
        raise _core.MismatchError(
            f"{what}: the ranks' groups differ in length (this rank: {count} tensors; "
            f"the ranks' groups hold {shortest} to {longest})"
        )
