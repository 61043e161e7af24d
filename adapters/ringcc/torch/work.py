"""Work objects that backend "ring" hands to torch.distributed.

A `RingWork` is a `torch.distributed.Work` subclass. C++ callers (DDP's
reducer, functional collectives) see only `wait(timeout)` and `get_future()`;
Python callers also get `is_completed()`, `is_success()`, `exception()`,
`result()`, `source_rank()` and `synchronize()`, which behave as gloo's do.

A work waits on zero or more *waitables* (the core's `Handle`s, or futures of
the point-to-point channels), then runs its `finish` step once (copies from
staging buffers into the caller's tensors, under `no_grad`), then its result
is the list of output tensors. The first error is kept and raised from every
`wait()`. A failure of the job is raised as a torch.distributed.DistBackendError
that is also the ringcc error (ringcc/torch/errors.py).

`get_future()` gives a future that is errored, to C++ and Python alike, when
the work fails: torch's `Future.set_exception` only stores the exception as
the value (C++ consumers such as DDP's reducer then see a success holding an
exception), so the future handed out is the child of an internal one through
`then`, whose callback raises the error; torch records that as the child's
error. A future asked for before the work completed is completed by the
group's `Completer` threads, never by a thread that a collective needs (see
Completer). A future asked for during a backward pass is also waited for at
the end of that pass, where a failure is raised as-is (`watch_backward`).

A CUDA work knows the stream its collective is enqueued on (`stream`: the
caller's current stream for a request run inline, else the process group's
side stream). Its `wait()` blocks until the collective is enqueued, then
makes the waiting thread's current stream wait for that stream (an event),
as torch's nccl backend does; `synchronize()` also blocks the host until
the device is done. The finish step runs on that stream, and the future
(`get_future()`) is a CUDA future of its device, completed on it.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import functools
import threading
import time
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

import ringcc
from ringcc import _core
from ringcc.torch.errors import as_dist_error, future_error


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
        on_timeout: Callable[[], int] | None = None,
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
        self._future: torch.futures.Future | None = None  # what get_future() gave out
        self._base: torch.futures.Future | None = None  # what completes it (see get_future)
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
                late = self._on_timeout() if self._on_timeout is not None else -1
                waited_for = f"rank {late}" if late >= 0 else "the other ranks"
                raise _core.TimeoutError(
                    f"{self._what}: Timed out after {timeout_s:g} s waiting for {waited_for} "
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
            asked = self._base is not None
        if self._profile is not None:
            self._profile.close()
            self._profile = None
        if asked:
            self._complete_future()

    def _on_stream(self):
        """The work's stream as torch's current one (CUDA works)."""
        return torch.cuda.stream(self._stream) if self._stream is not None else contextlib.nullcontext()

    def _complete_future(self) -> None:
        """Completes the internal future, which completes (or errors) the one
        get_future() gave out, running their callbacks on this thread."""
        base = self._base
        if base.done():
            return
        if self._error is not None:
            base.set_result(_Failed(future_error(self._error)))
        else:
            # A CUDA future records its events on the current stream.
            with self._on_stream():
                base.set_result(self._outputs)

    def _complete(self, timeout_s: float | None) -> None:
        if self._done:
            return
        limit = timeout_s if timeout_s is not None else self._timeout_s
        error = self._wait_all(limit)
        self._settle(error)

    def _wait_for_future(self) -> BaseException | None:
        """Waits for the work as the group's timeout allows, for its future
        (Completer) or the end of a backward pass (watch_backward); returns
        its error, a timeout included."""
        if self._done:
            return self._error
        try:
            return self._wait_all(self._timeout_s)
        except _core.TimeoutError as timeout:
            return timeout

    def _complete_for_future(self) -> None:
        if not self._done:
            self._settle(self._wait_for_future())

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
        """A future completed with the list of output tensors, or errored
        with the work's error (to C++ consumers too: DDP's reducer raises
        it). Its callbacks run on the thread that completes it: a Completer
        thread, or the thread whose wait() completed the work."""
        with self._lock:
            if self._future is not None:
                return self._future
            if self._stream is not None:
                base = torch.futures.Future(devices=[self._stream.device])
            else:
                base = torch.futures.Future()
            future = self._future = base.then(_outputs_or_raise)
            self._base = base
            done = self._done
        watch_backward(self)
        if done:
            self._complete_future()
            return future
        completer = self._completer if self._completer is not None else Completer.shared()
        if self._waits and all(hasattr(w, "future") for w in self._waits):
            # Point-to-point: the channels' threads complete the transfers in
            # any order; the last one hands the work to the completer, which
            # completes the future on a thread of its own (a callback may
            # issue a transfer on the same channel and wait for it).
            remaining = [len(self._waits)]
            lock = threading.Lock()

            def on_done(_):
                with lock:
                    remaining[0] -= 1
                    last = remaining[0] == 0
                if last:
                    completer.complete_done(self)

            for w in self._waits:
                w.future.add_done_callback(on_done)
        else:
            completer.add(self)
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


class _Failed:
    """The value of a failed work's internal future: the error its child
    (the future handed out) raises."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error

    def __reduce__(self):
        # A CUDA future pickles its value to find its tensors: there are none.
        return (_Failed, (None,))


def _outputs_or_raise(base: torch.futures.Future):
    value = base.value()
    if isinstance(value, _Failed):
        raise value.error
    return value


# How long a completer thread stays idle before it ends (but the last one).
_IDLE_EXIT_S = 60.0

# How long leaving waits for completer threads to finish what they run.
EXIT_WAIT_S = 10.0


class Completer:
    """Completes the futures of works asked for before the works finished.

    One thread at a time, the *leader*, waits for the queued works in issue
    order (a group's collectives complete in that order, so waiting in it
    costs nothing). Completing a future runs its callbacks on the completing
    thread, and a callback may issue a collective and wait for its future
    (PowerSGD's comm hook does), or wait for a future asked for earlier: so
    the leader hands the lead to an idle thread (starting one when none is
    idle) before it completes a future. A thread held up in callbacks then
    holds up no other future, at any depth of nesting. Threads are started
    only while callbacks hold the others up, and an idle one ends after
    _IDLE_EXIT_S but the last: the callbacks of each of PowerSGD's steps
    run on the threads of the step before rather than on new ones. Works
    that finished elsewhere (point-to-point transfers) have their futures
    completed by an idle thread too, never by the thread that ran the
    transfer (complete_done).

    Leaving the group waits (join) for the threads to finish what they run:
    the threads are daemons, and one that is inside torch's Future.set_result
    when the interpreter finalizes ends in pthread_exit as it takes the GIL
    back in a C++ destructor, which aborts the process ("terminate called
    without an active exception")."""

    _shared: Completer | None = None
    _shared_lock = threading.Lock()

    def __init__(self, name: str = "ringcc-completer") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._in_order: collections.deque[RingWork] = collections.deque()  # to wait for, in issue order
        self._done: collections.deque[RingWork] = collections.deque()  # finished; futures to complete
        self._leading = False  # a thread waits for the head of _in_order
        self._idle: list[threading.Event] = []  # idle threads' wake-ups, most recently idle last
        self._stopping = False
        self._started = 0
        self._threads: set[threading.Thread] = set()  # running, idle ones included

    @classmethod
    def shared(cls) -> Completer:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = Completer("ringcc-completer-shared")
            return cls._shared

    @classmethod
    def stop_shared(cls, timeout_s: float) -> list[str]:
        """stop() and join() for the process's shared completer, if any."""
        with cls._shared_lock:
            shared = cls._shared
        if shared is None:
            return []
        shared.stop()
        return shared.join(timeout_s)

    def add(self, work: RingWork) -> None:
        """Completes `work` (waiting for it in issue order), then its future."""
        with self._lock:
            self._in_order.append(work)
            self._call_thread()

    def complete_done(self, work: RingWork) -> None:
        """Completes the future of `work`, whose waitables are done, on a
        thread of the completer's."""
        with self._lock:
            self._done.append(work)
            self._call_thread()

    def stop(self) -> None:
        """The threads end once the works queued so far are completed."""
        with self._lock:
            self._stopping = True
            while self._idle:
                self._idle.pop().set()

    def join(self, timeout_s: float) -> list[str]:
        """After stop(): waits, at most timeout_s, for the threads (but the
        calling one) to end; returns the names of those still running."""
        deadline = time.monotonic() + timeout_s
        me = threading.current_thread()
        while True:
            with self._lock:
                others = [t for t in self._threads if t is not me]
            if not others:
                return []
            left = deadline - time.monotonic()
            if left <= 0:
                return sorted(t.name for t in others)
            others[0].join(left)

    def _has_task(self) -> bool:
        return bool(self._done) or (bool(self._in_order) and not self._leading)

    def _call_thread(self) -> None:
        """(Lock held.) Makes sure a thread takes the next task: an idle one,
        or a new one."""
        if not self._has_task():
            return
        if self._idle:
            self._idle.pop().set()  # the most recently idle: its caches are warm
            return
        self._started += 1
        thread = threading.Thread(target=self._run, name=f"{self._name}-{self._started}", daemon=True)
        self._threads.add(thread)
        try:
            thread.start()
        except BaseException:
            self._threads.discard(thread)
            raise

    def _run(self) -> None:
        try:
            self._serve()
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _serve(self) -> None:
        wake = threading.Event()
        lock = self._lock
        with lock:
            while True:
                if self._done:
                    work = self._done.popleft()
                    lock.release()
                    try:
                        work._complete_for_future()
                    finally:
                        lock.acquire()
                elif self._in_order and not self._leading:
                    work = self._in_order.popleft()
                    self._leading = True
                    lock.release()
                    try:
                        outcome = work._wait_for_future()
                    except BaseException as error:  # noqa: BLE001 - the work's, whatever it is
                        outcome = error
                    finally:
                        lock.acquire()
                        self._leading = False
                        self._call_thread()  # the lead goes on while this thread runs callbacks
                    lock.release()
                    try:
                        work._settle(outcome)
                    finally:
                        lock.acquire()
                elif self._stopping:
                    return
                else:
                    wake.clear()
                    self._idle.append(wake)
                    lock.release()
                    try:
                        called = wake.wait(_IDLE_EXIT_S)
                    finally:
                        lock.acquire()
                    if not called and any(w is wake for w in self._idle):
                        self._idle = [w for w in self._idle if w is not wake]
                        if self._idle:
                            return  # idle for long, and not the last idle thread


# Futures asked for during a backward pass (watch_backward): graph task id ->
# its works, in the order their futures were asked for.
_watch_lock = threading.Lock()
_watched: dict[int, list[RingWork]] = {}
# Backward passes whose final callbacks never ran (one failed before its end)
# are forgotten beyond this many.
_WATCHED_TASKS_KEPT = 16
_graph_task_id = getattr(torch._C, "_current_graph_task_id", None)


def watch_backward(work: RingWork) -> None:
    """When called during a backward pass (DDP's reducer asks for each
    bucket's future from an autograd hook), waits for `work` when the pass
    ends (a final callback of autograd's) and raises its failure from
    backward() as it is.

    A future cannot carry a Python exception to C++: the errored future DDP's
    reducer waits for makes it raise torch's RuntimeError ("Got the following
    error when running the callback: ..."). Raised from the final callback,
    which runs before the reducer's, the error keeps its class through
    autograd: a DistBackendError naming the rank, as with gloo. DDP waits
    for every bucket's future when backward ends anyway."""
    if _graph_task_id is None:
        return
    task = _graph_task_id()
    if task < 0:
        return
    with _watch_lock:
        works = _watched.get(task)
        first = works is None
        if first:
            while len(_watched) >= _WATCHED_TASKS_KEPT:
                del _watched[next(iter(_watched))]
            works = _watched[task] = []
        works.append(work)
    if first:
        try:
            torch.autograd.Variable._execution_engine.queue_callback(functools.partial(_raise_failures, task))
        except RuntimeError:  # not in a backward pass after all
            with _watch_lock:
                _watched.pop(task, None)


def _raise_failures(task: int) -> None:
    with _watch_lock:
        works = _watched.pop(task, [])
    for work in works:
        work._complete_for_future()
        if work._error is not None:
            raise future_error(work._error)
