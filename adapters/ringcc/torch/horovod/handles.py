"""What the Horovod API's asynchronous calls return, and waiting for it:
Handle, poll(), synchronize()."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ringcc
from ringcc import _core
from ringcc.failed_calls import fail_rest_of_groups
from ringcc.torch.horovod.basics import HorovodInternalError, internal_error

# allreduce_async_'s direct path returns the core's own handle.
_CoreHandle = _core.Handle
_core_synchronize = _core.synchronize


class Handle:
    """What the `*_async` calls return: pass it to `poll()` and
    `synchronize()`. (Horovod's handles are ints; this is an object with
    `done()`, `wait()`, and calling it waits too.)"""

    __slots__ = ("_waits", "_finish", "_on_error", "_finished", "_result", "_error", "__weakref__")

    def __init__(
        self,
        waits: Sequence,
        finish: Callable[[list], object] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._waits = list(waits)
        self._finish = finish
        self._on_error = on_error  # told the first error, before the other waits
        self._finished = False
        self._result = None
        self._error = None

    def done(self) -> bool:
        return self._finished or all(w.done() for w in self._waits)

    def _wait_all(self) -> list:
        """Every wait's result; the first error once all have finished, so
        that none of the call's collectives is left in flight (a name still
        in flight cannot be enqueued again)."""
        if len(self._waits) == 1 and self._on_error is None:
            return [self._waits[0].wait()]
        results, first = [], None
        for w in self._waits:
            try:
                results.append(w.wait())
            except (ringcc.RingccError, HorovodInternalError) as error:
                if first is None:
                    first = error
                    if self._on_error is not None:
                        self._on_error(error)
                results.append(None)
        if first is not None:
            raise first
        return results

    def wait(self):
        if not self._finished:
            single = len(self._waits) == 1 and self._on_error is None
            try:
                results = self._wait_all()
                self._result = self._finish(results) if self._finish is not None else (results[0] if results else None)
            except ringcc.RingccError as error:
                if single:
                    _tell_longer_groups(error)
                self._error = internal_error(error)
            except HorovodInternalError as error:
                self._error = error
            self._finished = True
            self._waits = []
            self._finish = None
            self._on_error = None
        if self._error is not None:
            raise self._error
        return self._result

    __call__ = wait


def _tell_longer_groups(error: BaseException) -> None:
    """A single call that failed where its peers ran a grouped call under
    its name fails the groups' other collectives (failed_calls)."""
    if isinstance(error, _core.MismatchError):
        fail_rest_of_groups(error, ringcc.rank(), single=True)


def poll(handle) -> bool:
    """True once the operation behind `handle` has completed;
    `synchronize(handle)` then returns without blocking."""
    return bool(handle.done())


def synchronize(handle):
    """Waits for an asynchronous operation and returns its result (the output
    tensor, a list for grouped ops, (output, received_splits) for alltoall
    with splits). Raises the operation's error (see HorovodInternalError)."""
    if handle is None:
        return None
    if type(handle) is _CoreHandle:  # allreduce_async_'s direct path
        try:
            return _core_synchronize(handle)
        except ringcc.RingccError as error:
            _tell_longer_groups(error)
            raise internal_error(error) from None
    if isinstance(handle, Handle):
        return handle.wait()
    if callable(handle):  # e.g. a closure made by Horovod-style code
        return handle()
    return handle.wait()
