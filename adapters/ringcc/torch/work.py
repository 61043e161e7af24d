"""Work objects that backend "ring" hands to torch.distributed.

A `RingWork` is a `torch.distributed.Work` subclass. C++ callers (DDP's
reducer, functional collectives) see only `wait(timeout)` and `get_future()`;
Python callers also get `is_completed()`, `is_success()`, `exception()`,
`result()`, `source_rank()` and `synchronize()`, which behave as gloo's do.

A work waits on zero or more *waitables* (the core's `Handle`s, or futures of
the point-to-point channels), then runs its `finish` step once (copies from
staging buffers into the caller's tensors, under `no_grad`), then its result
is the list of output tensors. The first error is kept and raised from every
`wait()`; a future gets it through `set_exception`. A failure of the job is
raised as a torch.distributed.DistBackendError that is also the ringcc error
(ringcc/torch/errors.py).

A CUDA work knows the stream its collective is enqueued on (`stream`: the
caller's current stream for a request run inline, else the process group's
side stream). Its `wait()` blocks until the collective is enqueued, then
makes the waiting thread's current stream wait for that stream (an event),
as torch's nccl backend does; `synchronize()` also blocks the host until
the device is done. The finish step runs on that stream, and the future
(`get_future()`) is a CUDA future of its device, completed on it.
"""

from __future__ import annotations

import contextlib
import datetime
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import List, Optional

import torch
import torch.distributed as dist

import ringcc
from ringcc import _core
from ringcc.torch.errors import as_dist_error


def timeout_seconds(timeout) -> float | None:
    """A wait timeout as seconds; None for "no timeout given".

    C++ passes std::chrono::milliseconds as a timedelta, with 0 meaning
    "unset" (c10d's kNoTimeout) and negative meaning "unset" in options."""
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        seconds = timeout.total_seconds()
    else:
        seconds = float(timeout)
    return seconds if seconds > 0 else None


class _ProfileRange:
    """A profiler range opened when a collective is issued and closed when it
    completes (on whatever thread notices), like the c10d dispatcher's."""

    __slots__ = ("_rf",)

    def __init__(self, name: str) -> None:
        self._rf = torch.autograd.profiler.record_function(name)
        self._rf.__enter__()

    def close(self) -> None:
        rf, self._rf = self._rf, None
        if rf is not None:
            try:
                rf.__exit__(None, None, None)
            except Exception:  # the profiler went away meanwhile
                pass


def profile_range(name: str) -> _ProfileRange | None:
    """A range named `name` when the profiler is on, else None (costs nothing)."""
    if torch.autograd._profiler_enabled():
        return _ProfileRange(name)
    return None


class FutureWaitable:
    """Adapts a concurrent.futures.Future (a point-to-point channel's) to the
    wait(timeout)/done() interface of the core's Handle."""

    __slots__ = ("future",)

    def __init__(self, future) -> None:
        self.future = future

    def wait(self, timeout=None):
        import concurrent.futures

        try:
            return self.future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise _core.TimeoutError(
                "the point-to-point operation did not complete within the wait's timeout"
            ) from None

    def done(self) -> bool:
        return self.future.done()


class RingWork(dist.Work):
    """One operation (or a coalesced set) of backend "ring"."""

    def __init__(
        self,
        outputs: Sequence[torch.Tensor] = (),
        waits: Sequence = (),
        finish: Callable[[], None] | None = None,
        *,
        timeout_s: float | None = None,
        completer: Completer | None = None,
        profile: _ProfileRange | None = None,
        source_rank: int = -1,
        device: torch.device | None = None,
        what: str = "",
        on_timeout: Callable[[], None] | None = None,
        stream: torch.cuda.Stream | None = None,
        more_streams: Sequence = (),
    ) -> None:
        super().__init__()
        self._stream = stream
        self._more_streams = list(more_streams)  # works combined: their other streams
        # A CUDA work keeps the core's handles (and so the tensors they hold)
        # until it is dropped, not just until the collective is enqueued.
        self._keep = list(waits) if stream is not None else None
        self._what = what or "the operation"
        self._on_timeout = on_timeout
        self._outputs: list[torch.Tensor] = list(outputs)
        self._waits = list(waits)
        self._finish = finish
        self._timeout_s = timeout_s
        self._completer = completer
        self._profile = profile
        self._src_rank = source_rank
        self._device = device if device is not None or stream is None else stream.device
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._future: torch.futures.Future | None = None
        self._done = False
        if not self._waits:
            self._settle()

    # -- completion -----------------------------------------------------

    def _wait_all(self, timeout_s: float | None) -> BaseException | None:
        """Waits for every waitable; returns the first error (None if none).
        Raises the core's TimeoutError when `timeout_s` passes first."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        # The core's handles of a CUDA collective order nothing on their own:
        # this work orders its waiter's stream itself (wait()).
        quiet = ringcc.cuda_stream(self._stream) if self._stream is not None else contextlib.nullcontext()
        with quiet:
            return self._wait_each(deadline, timeout_s)

    def _wait_each(self, deadline, timeout_s) -> BaseException | None:
        for waitable in self._waits:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                waitable.wait(remaining)
            except _core.TimeoutError as error:
                if waitable.done():  # the operation itself timed out: it has failed
                    return error
                if self._on_timeout is not None:
                    self._on_timeout()
                raise _core.TimeoutError(
                    f"{self._what}: Timed out after {timeout_s:g} s waiting for the other ranks "
                    f"(the wait's or the process group's timeout); the operation is still queued, "
                    f"so the group should be destroyed"
                ) from None
            except BaseException as error:  # noqa: BLE001 - kept, raised from wait()
                if not waitable.done():
                    # Not the operation's error: a signal handler's, raised
                    # while waiting. The operation goes on; wait() again.
                    raise
                return error
        return None

    def _settle(self, error: BaseException | None = None) -> None:
        """Runs the finish step once, records the outcome, completes the future."""
        with self._lock:
            if self._done:
                return
            if error is None and self._finish is not None:
                try:
                    with torch.no_grad(), self._on_stream():
                        self._finish()
                except BaseException as finish_error:  # noqa: BLE001
                    error = finish_error
            self._finish = None
            self._waits = []
            self._error = None if error is None else as_dist_error(error)
            self._done = True
            future = self._future
        if self._profile is not None:
            self._profile.close()
            self._profile = None
        if future is not None:
            self._complete_future(future)

    def _on_stream(self):
        """The work's stream as torch's current one (CUDA works)."""
        return torch.cuda.stream(self._stream) if self._stream is not None else contextlib.nullcontext()

    def _complete_future(self, future) -> None:
        if future.done():
            return
        if self._error is not None:
            future.set_exception(self._error)
        else:
            # A CUDA future records its events on the current stream.
            with self._on_stream():
                future.set_result(self._outputs)

    def _complete(self, timeout_s: float | None) -> None:
        if self._done:
            return
        limit = timeout_s if timeout_s is not None else self._timeout_s
        error = self._wait_all(limit)
        self._settle(error)

    def _fail(self, error: BaseException) -> None:
        self._settle(error)

    # -- torch.distributed.Work -------------------------------------------

    def wait(self, timeout=None) -> bool:
        """Blocks until the operation completed; raises its error.

        Without a timeout the process group's (init_process_group's
        `timeout`) applies; past it, ringcc.TimeoutError is raised."""
        if not self._done:
            self._complete(timeout_seconds(timeout))
        if self._error is not None:
            raise self._error
        self._order_current_stream()
        return True

    def _order_current_stream(self) -> None:
        """The waiting thread's current stream waits for the work's stream."""
        stream = self._stream
        if stream is not None:
            current = torch.cuda.current_stream(stream.device)
            for s in [stream, *self._more_streams]:
                if current != s:
                    current.wait_stream(s)

    def is_completed(self) -> bool:
        if self._done:
            return True
        if all(w.done() for w in self._waits):
            self._complete(None)
            return True
        return False

    def is_success(self) -> bool:
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def result(self) -> list[torch.Tensor]:
        self.wait()
        return self._outputs

    def source_rank(self) -> int:
        """The rank a receive got its message from."""
        if self._src_rank < 0:
            raise ValueError("source_rank() is only available on works of recv and recv_anysource")
        return self._src_rank

    def _source_rank(self) -> int:  # what torch.distributed.recv(src=None) calls
        return self.source_rank()

    def synchronize(self) -> None:
        """CUDA: blocks until the operation completed, on the device too.
        CPU: nothing is queued on a stream (as gloo's)."""
        if self._stream is None:
            return None
        self.wait()
        for stream in [self._stream, *self._more_streams]:
            stream.synchronize()

    def block_current_stream(self) -> None:
        self.wait()

    def get_future(self) -> torch.futures.Future:
        """A future completed with the list of output tensors (or the error)."""
        with self._lock:
            future = self._future
            if future is None:
                if self._stream is not None:
                    future = self._future = torch.futures.Future(devices=[self._stream.device])
                else:
                    future = self._future = torch.futures.Future()
                if self._done:
                    self._complete_future(future)
                    return future
            else:
                return future
        # Still running: someone must complete the future.
        if self._waits and all(hasattr(w, "future") for w in self._waits):
            remaining = [len(self._waits)]
            lock = threading.Lock()

            def on_done(_):
                with lock:
                    remaining[0] -= 1
                    last = remaining[0] == 0
                if last:
                    self._complete(None)

            for w in self._waits:
                w.future.add_done_callback(on_done)
        elif self._completer is not None:
            self._completer.add(self)
        else:
            Completer.shared().add(self)
        return future

    def __del__(self):
        profile = getattr(self, "_profile", None)
        if profile is not None:
            profile.close()


def completed_work(outputs: Sequence[torch.Tensor] = (), error: BaseException | None = None) -> RingWork:
    work = RingWork(outputs)
    if error is not None:
        work._error = error
    return work


class Completer:
    """A thread that completes, in issue order, the works whose future was
    asked for before they finished (one per process group: collectives of a
    group complete in issue order, so waiting in that order costs nothing)."""

    _shared: Completer | None = None
    _shared_lock = threading.Lock()

    def __init__(self, name: str = "ringcc-completer") -> None:
        self._name = name
        self._queue: queue.SimpleQueue[RingWork | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @classmethod
    def shared(cls) -> Completer:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = Completer("ringcc-completer-shared")
            return cls._shared

    def add(self, work: RingWork) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._queue.put(work)

    def _run(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                return
            try:
                work._complete(None)
            except BaseException as error:  # noqa: BLE001 - e.g. the group's timeout passed
                work._fail(error)

    def stop(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                self._queue.put(None)
