"""The base of backend "ring"'s process group (ProcessGroupRing, backend.py):
the group's communicator and state, its identity for c10d, and the
machinery every operation goes through: issuing core calls inline or
queued (on a side stream for CUDA tensors), timeouts, an operation that
fails on this rank failing on every rank, coalescing, and works made of
works."""

from __future__ import annotations

import datetime
import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from ringcc import _core, _exit_on_sigterm
from ringcc.failed_calls import fail_on_every_rank
from ringcc.torch.errors import as_dist_error
from ringcc.torch.fresh_store import fresh_prefix
from ringcc.torch.process_group.tensors import CPU, device_of, on_stream
from ringcc.torch.work import Completer, RingWork, profile_range

_LOGGER = logging.getLogger("ringcc.torch")

BACKEND_NAME = "ring"


def raise_as_dist_error(error: BaseException):
    """Raises `error`, as a torch.distributed.DistBackendError that is also
    the ringcc error when it is a failure of the job (ringcc/torch/errors.py)."""
    mapped = as_dist_error(error)
    if mapped is error:
        raise error
    raise mapped from error


# --------------------------------------------------------------------------
# Operations that fail on this rank
#
# An operation that raises before it issued its core collective fails that
# collective on every rank (ringcc/failed_calls.py), through its
# group's communicator, in issue order.

_issued = threading.local()  # per thread: core collectives issued so far


def note_issued() -> None:
    _issued.count = getattr(_issued, "count", 0) + 1


def fails_on_every_rank(kind: str):
    """Decorator of a ProcessGroupRing operation that issues one core
    collective of `kind` ("allreduce", "allgather", ...): an error it raises
    before issuing it fails that collective on every rank."""

    def decorate(method):
        @functools.wraps(method)
        def operation(self, *args, **kwargs):
            before = getattr(_issued, "count", 0)
            try:
                return method(self, *args, **kwargs)
            except Exception as error:
                if getattr(_issued, "count", 0) == before and not getattr(error, "_ringcc_reported", False):
                    error._ringcc_reported = True
                    self._report_failed(error, kind)
                raise

        return operation

    return decorate


# --------------------------------------------------------------------------
# The group


LIVE_GROUPS: weakref.WeakSet[GroupBase] = weakref.WeakSet()
_TIMEOUT_ENVS = ("RINGCC_COLLECTIVE_TIMEOUT_S", "RINGCC_TIMEOUT_S", "HOROVOD_GLOO_TIMEOUT_SECONDS")
_timeout_env_lock = threading.Lock()


def _adopt_timeout(seconds: float) -> None:
    """Makes the core's bound on a collective's waits the group's timeout
    when the user set none (the core reads it per operation); the
    rendezvous keeps its own, shorter bound (RINGCC_TIMEOUT_S)."""
    with _timeout_env_lock:
        if not any(os.environ.get(name) for name in _TIMEOUT_ENVS):
            os.environ["RINGCC_COLLECTIVE_TIMEOUT_S"] = f"{seconds:g}"


class GroupBase(dist.ProcessGroup):
    """What every operation of ProcessGroupRing (backend.py) goes through:
    the group's communicator and state, its identity for c10d, and the
    machinery that issues an operation and makes its RingWork."""

    def __init__(self, store, rank: int, size: int, timeout: datetime.timedelta | None = None) -> None:
        super().__init__(rank, size)
        self._store = store
        self._rank = rank
        self._size = size
        if timeout is None:
            timeout = datetime.timedelta(minutes=30)
        self._timeout = timeout
        self._timeout_s = max(timeout.total_seconds(), 0.001)
        self._group_name = ""
        self._group_desc = ""
        self._completer = Completer(f"ringcc-completer-{rank}")
        self._coalescing: list[RingWork] | None = None
        self._closed = False
        self._stuck = False
        self._cuda_index: int | None = None  # the CUDA device of this process's collectives
        self._side: torch.cuda.Stream | None = None
        _adopt_timeout(self._timeout_s)
        _exit_on_sigterm()
        self._core_timeout_s = _core.collective_timeout_s()
        # torchrun keeps its store across restarts: meet where no earlier attempt wrote.
        store = self._store = dist.PrefixStore(fresh_prefix(store, rank, size, _core.setup_timeout_s()), store)
        self._comm = _core.Communicator(rank, size, store)
        if rank == 0 and _LOGGER.isEnabledFor(logging.INFO):
            _LOGGER.info("process group %s", self._comm.describe())
        # As torch's own backends: ranks must agree on sizes, not on shapes
        # (gloo and NCCL let a (2, 3) meet a (3, 2)); docs/torch.md.
        self._comm.compare_shapes = False
        LIVE_GROUPS.add(self)

    def __repr__(self) -> str:
        return f"ProcessGroupRing(rank={self._rank}, size={self._size}, name={self._group_name!r})"

    # -- identity (c10d calls these; without them pg.group_name raises and
    #    functional collectives, torch.compile and DTensor fail) -------------

    def getBackendName(self) -> str:
        return BACKEND_NAME

    def setGroupName(self, name: str) -> None:
        self._group_name = name

    def getGroupName(self) -> str:
        return self._group_name

    def setGroupDesc(self, desc: str) -> None:
        self._group_desc = desc

    def getGroupDesc(self) -> str:
        return self._group_desc

    @property
    def transport_name(self) -> str:
        """What carries this group's data: "shm", "tcp" or "shm+tcp"."""
        return self._comm.transport_name

    @property
    def timeout(self) -> datetime.timedelta:
        return self._timeout

    # -- the machinery every operation goes through -------------------------

    def _issue(
        self,
        name: str,
        opts,
        outputs: Sequence[torch.Tensor],
        start: Callable[[bool], list | None],
        finish: Callable[[], None] | None = None,
        device: torch.device = CPU,
    ) -> RingWork:
        """Runs start(async_op): it issues the core call(s) and returns their
        handles (async) or None (ran inline, done). Then a RingWork.

        A synchronous request (opts.asyncOp False) runs inline on this
        thread when the core's own bound on waits (collective_timeout_s) is no
        longer than the group's timeout; otherwise it is queued and waited
        for with the group's timeout.

        CUDA tensors (`device`): an inline request runs on the current
        stream. Anything queued runs on the group's side stream, which
        first waits for the current stream (as torch's nccl backend runs on
        its own stream): the current stream goes on while the collective
        waits for the core's queue and the peers; the work's wait() makes
        the waiting stream wait for the side stream, synchronize() blocks."""
        if self._closed:
            raise RuntimeError(f"{self!r} has been shut down")
        sync = getattr(opts, "asyncOp", True) is False
        timeout_s = self._op_timeout(opts)
        inline = sync and self._inline_ok(opts)
        stream = None
        if device.type == "cuda":
            current = torch.cuda.current_stream(device)
            if inline:
                stream = current
            else:
                stream = self._side_stream(device)
                stream.wait_stream(current)
        profile = profile_range(f"{BACKEND_NAME}:{name}")
        note_issued()
        try:
            if stream is None:
                handles = start(not inline)
            else:
                with torch.cuda.stream(stream):  # the core takes torch's current stream
                    handles = start(not inline)
        except BaseException as error:
            if profile is not None:
                profile.close()
            raise_as_dist_error(error)
        if inline:
            try:
                if finish is not None:
                    with torch.no_grad(), on_stream(stream):
                        finish()
            except BaseException as error:
                raise_as_dist_error(error)
            finally:
                if profile is not None:
                    profile.close()
            work = RingWork(outputs, stream=stream)
        else:
            if stream is not None:
                # The caller may drop its outputs before the side stream is
                # done with them: their memory is not reused until then.
                for t in outputs:
                    if t.is_cuda:
                        t.record_stream(stream)
            work = RingWork(
                outputs,
                handles or [],
                finish,
                timeout_s=timeout_s,
                completer=self._completer,
                profile=profile,
                what=self._what(name),
                on_timeout=self._timed_out,
                stream=stream,
            )
            if sync:
                work.wait()
        if self._coalescing is not None:
            self._coalescing.append(work)
        return work

    def _device(self, tensors: Sequence[torch.Tensor], what: str, sparse_ok: bool = False) -> torch.device:
        """The device of a call's tensors (see device_of); a process runs
        its CUDA collectives on one device."""
        device = device_of(tensors, what, sparse_ok)
        if device.type == "cuda":
            if self._cuda_index is None:
                self._cuda_index = device.index
            elif device.index != self._cuda_index:
                raise ValueError(
                    f"{what}: backend 'ring' runs this process's CUDA collectives on "
                    f"cuda:{self._cuda_index} (one device per process), got a tensor on {device}"
                )
        return device

    def _side_stream(self, device: torch.device) -> torch.cuda.Stream:
        if self._side is None:
            self._side = torch.cuda.Stream(device)
        return self._side

    def _what(self, name: str) -> str:
        return f"ring {name} on rank {self._rank} of group {self._group_name!r}"

    def _timed_out(self) -> int:
        """An operation outlived its wait: shutdown() must not wait for it.
        Returns the rank the core's running collective waits for (-1: none,
        or the transport cannot tell), for the timeout's message."""
        self._stuck = True
        try:
            return self._comm.waiting_for
        except Exception:  # noqa: BLE001 - the message goes without it
            return -1

    def _inline_ok(self, opts) -> bool:
        """Whether a synchronous request may run on the caller's thread: the
        core bounds every wait by its collective timeout, so when that is no longer
        than the operation's timeout, the operation's timeout holds anyway."""
        return self._op_timeout(opts) >= self._core_timeout_s

    def _op_timeout(self, opts) -> float:
        timeout = getattr(opts, "timeout", None)
        if isinstance(timeout, datetime.timedelta) and timeout.total_seconds() > 0:
            return timeout.total_seconds()
        return self._timeout_s

    def _report_failed(self, error: BaseException, kind: str) -> None:
        """Takes part in the next collective in issue order as a failed
        participant (see "Operations that fail on this rank")."""
        if self._closed:
            return
        fail_on_every_rank(error, kind, comm=self._comm)

    # -- checks of a call's arguments ------------------------------------------

    def _check_rank(self, rank: int, what: str) -> None:
        if not 0 <= rank < self._size:
            raise ValueError(f"{what} rank {rank} is not in a group of {self._size}")

    def _check_root_list(self, what: str, root: int, lists, role: str, like: torch.Tensor) -> None:
        """gather/scatter: the root passes one list of a tensor per rank; the others pass none."""
        self._check_rank(root, "root")
        if self._rank == root:
            if len(lists) != 1:
                raise ValueError(f"{what}: the root needs one list of {role} tensors")
            self._check_list(list(lists[0]), f"{what} {role} list", like)
        elif lists and any(len(t) for t in lists):
            raise ValueError(f"{what}: only the root takes {role} tensors")

    def _check_list(self, tensors, what: str, like: torch.Tensor | None = None) -> None:
        if len(tensors) != self._size:
            raise ValueError(f"{what} has {len(tensors)} tensors; the group has {self._size} ranks")
        if like is not None:
            for t in tensors:
                if t.dtype != like.dtype:
                    raise TypeError(f"{what}: dtype {t.dtype} differs from the input's {like.dtype}")

    @staticmethod
    def _check_dtypes(a: torch.Tensor, b: torch.Tensor) -> None:
        if a.dtype != b.dtype:
            raise TypeError(f"output dtype {a.dtype} differs from input dtype {b.dtype}")

    # -- operations made of operations -------------------------------------------

    def _each(self, name, opts, calls):
        """Several operations as one work (each issued asynchronously)."""
        sync = getattr(opts, "asyncOp", True) is False
        works = [fn(*args, None) for fn, args in calls]  # opts None: async
        outputs = [t for w in works for t in w._outputs]
        waits = [WorkWaitable(w) for w in works]
        work = RingWork(
            outputs, waits, timeout_s=self._op_timeout(opts), completer=self._completer, **streams_of(works)
        )
        if sync:
            work.wait()
        return work

    # -- coalescing (torch's C++ startCoalescing/endCoalescing) ---------------

    def start_coalescing(self, device=None) -> None:
        self._coalescing = []

    def end_coalescing(self, device=None):
        works, self._coalescing = self._coalescing or [], None
        outputs = [t for w in works for t in w._outputs]
        return RingWork(
            outputs,
            [WorkWaitable(w) for w in works],
            timeout_s=self._timeout_s,
            completer=self._completer,
            **streams_of(works),
        )


class AsyncOf:
    """Options that read like `opts` but always ask for an asynchronous op."""

    def __init__(self, opts) -> None:
        self._opts = opts

    def __getattr__(self, name):
        if name == "asyncOp":
            return True
        return getattr(self._opts, name)


def streams_of(works: Sequence[RingWork]) -> dict:
    """The CUDA streams of works combined into one (RingWork's stream and
    more_streams): the combined work's wait orders the waiter after each."""
    streams = []
    for w in works:
        if w._stream is not None and all(w._stream != s for s in streams):
            streams.append(w._stream)
    return {"stream": streams[0], "more_streams": streams[1:]} if streams else {}


class WorkWaitable:
    """A RingWork seen as a waitable (for works made of works): waiting for
    it orders no stream (the combined work does that)."""

    __slots__ = ("work",)

    def __init__(self, work: RingWork) -> None:
        self.work = work

    def wait(self, timeout=None):
        work = self.work
        if not work._done:
            work._complete(timeout if timeout is not None and timeout > 0 else None)
        if work._error is not None:
            raise work._error
        return True

    def done(self) -> bool:
        return self.work.is_completed()
