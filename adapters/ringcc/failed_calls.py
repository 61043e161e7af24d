"""Calls that fail on this rank, for every framework adapter (torch's
backend and Horovod API, TensorFlow's and MXNet's collectives).

An argument that is wrong on one rank only (a tensor of another type or
device, an unknown op, a bad root or splits...) must fail the same call on
every rank, so that no peer waits for it and the next call is in step. A
call that raises before it issued its core collective takes part in the
peers' one as a failed participant: they raise MismatchError naming this
rank and the reason. Errors the core raises while it takes the arguments
are reported by the core itself.

A bottom module: it imports the core and no framework."""

from __future__ import annotations

from collections.abc import Iterable

from ringcc import _core


def error_text(error: BaseException) -> str:
    """What the peers are told of `error`: ringcc's errors by their message,
    others with their class ("TypeError: ...")."""
    if isinstance(error, _core.RingccError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def fail_on_every_rank(error: BaseException, kind: str, names: Iterable[str] = (), comm=None, calls: int = 1) -> None:
    """Takes part, as a failed participant of `kind` ("allreduce", ...), in
    the calls `error` stopped on this rank: the engine's collectives `names`
    (ringcc.init()'s ranks), or, given a communicator `comm`, the next
    `calls` collectives in issue order on it. Returns at once; nobody left
    to tell (a communicator gone, ringcc shut down) is no error."""
    message = error_text(error)
    try:
        if comm is None:
            for name in names:
                _core._fail_call(kind, message, name)
        else:
            for _ in range(calls):
                comm.report_error(message, kind)
    except Exception:  # noqa: BLE001 - nothing to tell
        pass
