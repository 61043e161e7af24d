"""torch.distributed backend "ring": a Python ProcessGroup over the ringcc core.

    import torch.distributed as dist
    dist.init_process_group(backend="ring")   # under torchrun or ringrun

Installing ringcc registers the backend through torch's `torch.backends`
entry point (ringcc/torch_entry_point.py); `import ringcc.torch` registers it
too. No part of this is compiled against torch: the core takes CPU tensors
through DLPack, so one ringcc build serves every torch from 2.4 on.

How it fits c10d: `ProcessGroupRing` subclasses `dist.ProcessGroup`, and the
creator that `Backend.register_backend` gets returns it, so c10d uses it as
the group itself. Every collective is a method here (C++ callers such as DDP
and the functional collectives reach them through the pybind11 trampoline);
each returns a `RingWork` (never None: C++ would crash). Rendezvous goes
through the store that c10d hands the creator, so there is no second store
or port. Operations run on the core with the GIL released, in issue order.

An operation issued with `opts.asyncOp == False` (torch's Python API with
async_op=False, torch >= 2.6) runs synchronously and returns a completed
work; everything else is submitted to the core's queue and returns at once.

A failure of the job (dead peer, ranks that disagree, core failure) raises
`torch.distributed.DistBackendError` that is also the ringcc error
(`ringcc.PeerFailureError`, ...), from the call or from the work's wait().
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import datetime
import functools
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from ringcc import _core, _exit_on_sigterm
from ringcc.torch import staging
from ringcc.torch.dtypes import CORE_DTYPES
from ringcc.torch.errors import as_dist_error
from ringcc.torch.failed_calls import error_text, fail_on_every_rank
from ringcc.torch.fresh_store import fresh_prefix
from ringcc.torch.work import Completer, FutureWaitable, RingWork, profile_range

BACKEND_NAME = "ring"


def _raise_as_dist_error(error: BaseException):
    """Raises `error`, as a torch.distributed.DistBackendError that is also
    the ringcc error when it is a failure of the job (ringcc/torch/errors.py)."""
    mapped = as_dist_error(error)
    if mapped is error:
        raise error
    raise mapped from error


DEVICES = ("cpu", "cuda")

log = logging.getLogger("ringcc.torch")

_RedOpType = dist.ReduceOp.RedOpType
# torch's reduction -> the core's (Sum 0, Average 1, Min 2, Max 3, Product 4).
_CORE_OPS = {
    _RedOpType.SUM: 0,
    _RedOpType.AVG: 1,
    _RedOpType.MIN: 2,
    _RedOpType.MAX: 3,
    _RedOpType.PRODUCT: 4,
    _RedOpType.PREMUL_SUM: 0,  # with the factor as prescale
}
# The reductions of the short path in allreduce() (no prescale factor).
# Keyed by the enum's int value (hashing the pybind11 enum costs a microsecond).
_FAST_OPS = {int(kind): op for kind, op in _CORE_OPS.items() if kind != _RedOpType.PREMUL_SUM}
# dtypes the core moves and reduces itself; others move as bytes and reduce
# through the gather-then-reduce fallback.
_CORE_DTYPES = CORE_DTYPES


# --------------------------------------------------------------------------
# Tensors as the core wants them (ringcc/torch/staging.py)

_plain = staging.plain


def _units(t: torch.Tensor) -> torch.Tensor:
    """A 1-D view of contiguous `t` in a dtype the core moves: t itself, or
    its bytes."""
    return staging.in_units(t.reshape(-1))


def _unit_dtype(dtype: torch.dtype) -> torch.dtype:
    return dtype if dtype in _CORE_DTYPES else torch.uint8


def _unit_count(t: torch.Tensor) -> int:
    return t.numel() if t.dtype in _CORE_DTYPES else t.numel() * t.element_size()


def _input_units(t: torch.Tensor) -> torch.Tensor:
    """An input as 1-D core units, copied only when not contiguous."""
    t = _plain(t)
    if not t.is_contiguous():
        t = t.contiguous()
    return _units(t)


def _output_units(t: torch.Tensor) -> torch.Tensor | None:
    """An output as 1-D core units sharing its memory, or None when it must
    be staged (not contiguous)."""
    t = _plain(t)
    return _units(t) if t.is_contiguous() else None


def _store_units(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Copies 1-D core units `src` into tensor `dst` (any layout)."""
    dst.copy_(staging.from_units(src, dst.dtype).view(dst.shape))


def _rows_view(t: torch.Tensor) -> torch.Tensor:
    """Contiguous `t` as (rows, elements per row) in core units, for the
    collectives that split along dim 0 (all_to_all_single)."""
    return staging.in_units(t.reshape(staging.rows(t)))


_CPU = torch.device("cpu")


def _device_of(tensors: Sequence[torch.Tensor], what: str, sparse_ok: bool = False) -> torch.device:
    """The one device of a call's tensors: the CPU or one CUDA device."""
    device = None
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what}: expected tensors, got {type(t).__name__}")
        if t.layout != torch.strided and not (sparse_ok and t.layout == torch.sparse_coo):
            raise ValueError(f"{what}: backend 'ring' does not support {t.layout} tensors here")
        d = t.device
        if device is None:
            device = d
        elif d != device:
            raise ValueError(f"{what}: the tensors of one call must be on one device, got {device} and {d}")
    if device is not None and device.type not in DEVICES:
        raise ValueError(f"{what}: backend 'ring' takes CPU and CUDA tensors, got one on {device}")
    return device if device is not None else _CPU


def _on_stream(stream):
    """Makes `stream` torch's current stream for the block (None: nothing)."""
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def _one(tensors: Sequence[torch.Tensor], what: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise ValueError(
            f"{what}: backend 'ring' takes exactly one tensor per call (one device per process), got {len(tensors)}"
        )
    return tensors[0]


# --------------------------------------------------------------------------
# Reductions


def _reduction(opts) -> tuple[object, float]:
    """(RedOpType, prescale factor) of the options' reduceOp."""
    op = getattr(opts, "reduceOp", dist.ReduceOp.SUM)
    kind = op.op if hasattr(op, "op") else op
    if kind == _RedOpType.PREMUL_SUM:
        if not hasattr(op, "factor"):  # some torch releases keep it from Python
            raise ValueError(
                "PREMUL_SUM with backend 'ring' needs a torch whose ReduceOp shows its factor "
                f"to Python (ReduceOp.factor); torch {torch.__version__}'s does not"
            )
        factor = op.factor
        return kind, float(factor.item() if isinstance(factor, torch.Tensor) else factor)
    return kind, 1.0


def _core_reduces(kind, dtype: torch.dtype) -> bool:
    return kind in _CORE_OPS and dtype in _CORE_DTYPES


def _reduce_locally(stacked: torch.Tensor, kind, factor: float) -> torch.Tensor:
    """Reduces `stacked` (ranks along dim 0) as `kind` does, keeping the dtype."""
    dtype = stacked.dtype
    work = stacked.to(torch.uint8) if dtype == torch.bool else stacked
    n = stacked.shape[0]
    if kind == _RedOpType.SUM:
        result = work.sum(0) if dtype != torch.bool else work.amax(0)
    elif kind == _RedOpType.PREMUL_SUM:
        result = (work * factor).sum(0)
    elif kind == _RedOpType.AVG:
        if dtype.is_floating_point or dtype.is_complex:
            result = work.sum(0) / n
        else:
            result = torch.div(work.sum(0), n, rounding_mode="trunc")
    elif kind == _RedOpType.PRODUCT:
        result = work.prod(0) if dtype != torch.bool else work.amin(0)
    elif kind == _RedOpType.MIN:
        result = work.amin(0)
    elif kind == _RedOpType.MAX:
        result = work.amax(0)
    elif kind in (_RedOpType.BAND, _RedOpType.BOR, _RedOpType.BXOR):
        if dtype.is_floating_point or dtype.is_complex:
            raise ValueError(f"ReduceOp.{kind.name} needs an integer or bool tensor, got {dtype}")
        fn = {_RedOpType.BAND: torch.bitwise_and, _RedOpType.BOR: torch.bitwise_or, _RedOpType.BXOR: torch.bitwise_xor}[
            kind
        ]
        result = work[0].clone()
        for i in range(1, n):
            result = fn(result, work[i])
    else:
        raise ValueError(f"backend 'ring' does not support reduction {kind}")
    return result.to(dtype)


# --------------------------------------------------------------------------
# Operations that fail on this rank
#
# An operation that raises before it issued its core collective fails that
# collective on every rank (ringcc/torch/failed_calls.py), through its
# group's communicator, in issue order.

_issued = threading.local()  # per thread: core collectives issued so far


def _note_issued() -> None:
    _issued.count = getattr(_issued, "count", 0) + 1


def _fails_on_every_rank(kind: str):
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
# Point-to-point


class _Channel:
    """Messages from rank `src` to rank `dst` of a group with one tag, in
    order: a 2-rank communicator of their own (the sender is its rank 0),
    created on first use, and a thread that runs the transfers (a transfer
    is a 2-rank broadcast from the sender). A channel per direction lets
    both ranks send before they receive, as batch_isend_irecv does."""

    def __init__(self, group: ProcessGroupRing, src: int, dst: int, tag: int) -> None:
        self.key = (src, dst, tag)
        self._me = 0 if group._rank == src else 1
        self._store = dist.PrefixStore(f"ringcc-p2p/{src}-{dst}/{tag}/", group._store)
        self._comm = None
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"ringcc-p2p-{src}-{dst}-{tag}")

    def submit(self, fn: Callable) -> concurrent.futures.Future:
        """Runs fn(channel) on the channel's thread, after earlier transfers."""
        return self._executor.submit(fn, self)

    def comm(self):
        """The channel's communicator (joined on first use: blocks until the
        peer joins too)."""
        if self._comm is None:
            comm = _core.Communicator(self._me, 2, self._store)
            comm.compare_shapes = False  # torch's rule: sizes only (see ProcessGroupRing)
            self._comm = comm
        return self._comm

    def close(self) -> None:
        self._executor.shutdown(wait=False)
        comm, self._comm = self._comm, None
        if comm is not None:
            comm.shutdown()


# --------------------------------------------------------------------------
# The process group


_LIVE_GROUPS: weakref.WeakSet[ProcessGroupRing] = weakref.WeakSet()
_TIMEOUT_ENV = "RINGCC_TIMEOUT_S"
_timeout_env_lock = threading.Lock()


def _adopt_timeout(seconds: float) -> None:
    """Makes the core's own bound on waits the group's timeout when the
    user did not set RINGCC_TIMEOUT_S (the core reads it per operation)."""
    with _timeout_env_lock:
        if _TIMEOUT_ENV not in os.environ:
            os.environ[_TIMEOUT_ENV] = f"{seconds:g}"


def _core_timeout_s() -> float:
    try:
        return float(os.environ.get(_TIMEOUT_ENV) or os.environ.get("HOROVOD_GLOO_TIMEOUT_SECONDS") or 60)
    except ValueError:
        return 60.0


class ProcessGroupRing(dist.ProcessGroup):
    """A torch.distributed process group whose operations run on ringcc."""

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
        self._channels: dict[tuple[int, int, int], _Channel] = {}
        self._p2p_lock = threading.Lock()
        self._taken: dict[tuple[int, int], int] = {}  # (src, tag) -> messages received
        self._anysource: concurrent.futures.ThreadPoolExecutor | None = None
        self._coalescing: list[RingWork] | None = None
        self._closed = False
        self._stuck = False
        self._cuda_index: int | None = None  # the CUDA device of this process's collectives
        self._side: torch.cuda.Stream | None = None
        _adopt_timeout(self._timeout_s)
        _exit_on_sigterm()
        self._core_timeout_s = _core_timeout_s()
        # torchrun keeps its store across restarts: meet where no earlier attempt wrote.
        store = self._store = dist.PrefixStore(fresh_prefix(store, rank, size, self._core_timeout_s), store)
        self._comm = _core.Communicator(rank, size, store)
        # As torch's own backends: ranks must agree on sizes, not on shapes
        # (gloo and NCCL let a (2, 3) meet a (3, 2)); docs/torch.md.
        self._comm.compare_shapes = False
        _LIVE_GROUPS.add(self)

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
        device: torch.device = _CPU,
    ) -> RingWork:
        """Runs start(async_op): it issues the core call(s) and returns their
        handles (async) or None (ran inline, done). Then a RingWork.

        A synchronous request (opts.asyncOp False) runs inline on this
        thread when the core's own bound on waits (RINGCC_TIMEOUT_S) is no
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
        _note_issued()
        try:
            if stream is None:
                handles = start(not inline)
            else:
                with torch.cuda.stream(stream):  # the core takes torch's current stream
                    handles = start(not inline)
        except BaseException as error:
            if profile is not None:
                profile.close()
            _raise_as_dist_error(error)
        if inline:
            try:
                if finish is not None:
                    with torch.no_grad(), _on_stream(stream):
                        finish()
            except BaseException as error:
                _raise_as_dist_error(error)
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
        """The device of a call's tensors (see _device_of); a process runs
        its CUDA collectives on one device."""
        device = _device_of(tensors, what, sparse_ok)
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
        core bounds every wait by RINGCC_TIMEOUT_S, so when that is no longer
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

    # -- allreduce -----------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        # The common case, kept short: one dense contiguous CPU tensor that
        # the core reduces, asked for synchronously or not; a CUDA one asked
        # for synchronously (on the current stream).
        if len(tensors) == 1 and opts is not None:
            t = tensors[0]
            op = _FAST_OPS.get(opts.reduceOp.op.value)
            if (
                t.is_cuda
                and op is not None
                and t.dtype in _CORE_DTYPES
                and t.layout == torch.strided
                and getattr(opts, "asyncOp", True) is False
                and t.device.index == self._cuda_index
                and not t.requires_grad
                and t.is_contiguous()
                and not self._closed
                and self._coalescing is None
                and not torch.autograd._profiler_enabled()
                and self._inline_ok(opts)
            ):
                try:
                    self._comm.allreduce(t, None, op, 1.0, 1.0, True, False)
                except _core.RingccError as error:
                    _raise_as_dist_error(error)
                return RingWork((t,), stream=torch.cuda.current_stream(t.device))
            if (
                op is not None
                and t.dtype in _CORE_DTYPES
                and t.is_cpu
                and t.layout == torch.strided
                and not t.requires_grad
                and t.is_contiguous()
                and not self._closed
                and self._coalescing is None
                and not torch.autograd._profiler_enabled()
            ):
                try:
                    if getattr(opts, "asyncOp", True) is False and self._inline_ok(opts):
                        self._comm.allreduce(t, None, op, 1.0, 1.0, True, False)
                        return RingWork((t,))
                    handle = self._comm.allreduce(t, None, op, 1.0, 1.0, True, True)
                except _core.RingccError as error:
                    _raise_as_dist_error(error)
                work = RingWork(
                    (t,),
                    (handle,),
                    None,
                    timeout_s=self._op_timeout(opts),
                    completer=self._completer,
                    what=self._what("all_reduce"),
                    on_timeout=self._timed_out,
                )
                if getattr(opts, "asyncOp", True) is False:
                    work.wait()
                return work
        return self._allreduce_checked(tensors, opts)

    @_fails_on_every_rank("allreduce")
    def _allreduce_checked(self, tensors, opts):
        device = self._device(tensors, "allreduce", sparse_ok=True)
        kind, factor = _reduction(opts)
        if len(tensors) == 1 and tensors[0].is_sparse:
            return self._sparse_allreduce(tensors[0], kind, opts)
        if len(tensors) == 1:
            return self._allreduce_one("all_reduce", tensors[0], kind, factor, opts, device)
        return self._allreduce_many("all_reduce", list(tensors), kind, factor, opts, device)

    @_fails_on_every_rank("allreduce")
    def allreduce_coalesced(self, tensors, opts=None):
        device = self._device(tensors, "allreduce_coalesced")
        kind, factor = _reduction(opts)
        return self._allreduce_many("allreduce_coalesced", list(tensors), kind, factor, opts, device)

    def _allreduce_one(self, name, tensor, kind, factor, opts, device=_CPU):
        if not _core_reduces(kind, tensor.dtype):
            return self._fallback_allreduce(name, [tensor], kind, factor, opts, device)
        op = _CORE_OPS[kind]
        comm = self._comm
        t = _plain(tensor)
        if t.is_contiguous():

            def start(async_op):
                h = comm.allreduce(t, op=op, prescale=factor, inplace=True, async_op=async_op)
                return [h] if async_op else None

            return self._issue(name, opts, [tensor], start, device=device)
        staged = t.contiguous()

        def start(async_op):
            h = comm.allreduce(staged, op=op, prescale=factor, inplace=True, async_op=async_op)
            return [h] if async_op else None

        return self._issue(name, opts, [tensor], start, lambda: tensor.copy_(staged), device=device)

    def _allreduce_many(self, name, tensors, kind, factor, opts, device=_CPU):
        """Fused: the core packs the list into its fusion buffer (CUDA
        tensors: fused on the device)."""
        if not tensors:
            return self._issue(name, opts, [], lambda a: [] if a else None)
        if not all(_core_reduces(kind, t.dtype) for t in tensors):
            return self._fallback_allreduce(name, tensors, kind, factor, opts, device)
        op = _CORE_OPS[kind]
        comm = self._comm
        staged = []
        copies = []
        for t in tensors:
            p = _plain(t)
            if p.is_contiguous():
                staged.append(p)
            else:
                s = p.contiguous()
                staged.append(s)
                copies.append((t, s))

        def start(async_op):
            h = comm.grouped_allreduce(staged, op=op, prescale=factor, inplace=True, async_op=async_op)
            return [h] if async_op else None

        def finish():
            for t, s in copies:
                t.copy_(s)

        return self._issue(name, opts, tensors, start, finish if copies else None, device=device)

    def _sparse_allreduce(self, tensor, kind, opts):
        """Sparse COO SUM (as gloo does it): every rank's indices and values
        are gathered (their counts may differ), summed, and coalesced into
        `tensor` in place."""

        def check():
            if kind != _RedOpType.SUM:
                raise ValueError(f"sparse all_reduce supports SUM only, got {kind}")
            if tensor.dtype not in _CORE_DTYPES:
                raise TypeError(f"sparse all_reduce: unsupported dtype {tensor.dtype}")

        check()
        if tensor.is_cuda:
            return self._sparse_allreduce_through_host(tensor, kind, opts)
        local = _plain(tensor).coalesce()
        indices = local._indices().t().contiguous()  # one row per non-zero
        values = local._values().contiguous()
        comm = self._comm
        # How many non-zeros each rank has (a small blocking exchange), so
        # that the gathers below write straight into tensors of the right size.
        counts = torch.empty(self._size, dtype=torch.int64)
        _note_issued()
        try:
            comm.allgather(torch.tensor([indices.shape[0]], dtype=torch.int64), out=counts)
        except _core.RingccError as error:
            _raise_as_dist_error(error)
        total = int(counts.sum())
        all_indices = torch.empty(total, local.sparse_dim(), dtype=torch.int64)
        all_values = torch.empty((total,) + tuple(values.shape[1:]), dtype=values.dtype)

        def start(async_op):
            handles = [
                comm.allgather(indices, out=all_indices, async_op=async_op),
                comm.allgather(values, out=all_values, async_op=async_op),
            ]
            return handles if async_op else None

        def finish():
            summed = torch.sparse_coo_tensor(all_indices.t(), all_values, tensor.shape).coalesce()
            tensor.copy_(summed)

        return self._issue("all_reduce", opts, [tensor], start, finish)

    def _sparse_allreduce_through_host(self, tensor, kind, opts):
        """A sparse CUDA tensor: summed as a CPU copy, copied back (sparse
        tensors are rare enough in collectives not to have a device path)."""
        host = _plain(tensor).cpu()
        inner = self._sparse_allreduce(host, kind, opts)

        def finish():
            tensor.copy_(host.to(tensor.device))

        work = RingWork(
            [tensor], [_WorkWaitable(inner)], finish, timeout_s=self._op_timeout(opts), completer=self._completer
        )
        if getattr(opts, "asyncOp", True) is False:
            work.wait()
        return work

    def _fallback_allreduce(self, name, tensors, kind, factor, opts, device=_CPU):
        """Reductions the core lacks (bitwise ops, bool, int16, complex, ...):
        gather every rank's bytes, reduce locally."""

        def check():  # e.g. a bitwise reduction of floats
            for t in tensors:
                _reduce_locally(torch.zeros(1, 1, dtype=t.dtype), kind, factor)

        check()
        n = self._size
        packed = (
            torch.cat([_input_units(t).view(torch.uint8) for t in tensors])
            if tensors
            else torch.empty(0, dtype=torch.uint8, device=device)
        )
        gathered = torch.empty(n * packed.numel(), dtype=torch.uint8, device=device)
        comm = self._comm

        def start(async_op):
            h = comm.allgather(packed, out=gathered, async_op=async_op)
            return [h] if async_op else None

        def finish():
            per_rank = gathered.view(n, -1)
            offset = 0
            for t in tensors:
                nbytes = t.numel() * t.element_size()
                stacked = per_rank[:, offset : offset + nbytes].contiguous().view(t.dtype).view((n,) + tuple(t.shape))
                t.copy_(_reduce_locally(stacked, kind, factor))
                offset += nbytes

        return self._issue(name, opts, tensors, start, finish, device=device)

    # -- broadcast -------------------------------------------------------------

    @_fails_on_every_rank("broadcast")
    def broadcast(self, tensors, opts=None):
        device = self._device(tensors, "broadcast")
        root = getattr(opts, "rootRank", 0)
        tensor = _one(tensors, "broadcast")
        self._check_rank(root, "root")
        comm = self._comm
        t = _plain(tensor)
        units = _output_units(t)
        if units is not None:

            def start(async_op):
                h = comm.broadcast(units, root=root, inplace=True, async_op=async_op)
                return [h] if async_op else None

            return self._issue("broadcast", opts, [tensor], start, device=device)
        staged = _input_units(t)

        def start(async_op):
            h = comm.broadcast(staged, root=root, inplace=True, async_op=async_op)
            return [h] if async_op else None

        return self._issue("broadcast", opts, [tensor], start, lambda: _store_units(staged, tensor), device=device)

    def _check_rank(self, rank: int, what: str) -> None:
        if not 0 <= rank < self._size:
            raise ValueError(f"{what} rank {rank} is not in a group of {self._size}")

    # -- reduce ----------------------------------------------------------------

    @_fails_on_every_rank("allreduce")
    def reduce(self, tensors, opts=None):
        """Reduction to the root only: an allreduce whose non-root ranks
        write into scratch, so their tensors stay as they were."""
        device = self._device(tensors, "reduce")
        tensor = _one(tensors, "reduce")
        root = getattr(opts, "rootRank", 0)
        self._check_rank(root, "root")
        kind, factor = _reduction(opts)
        if self._rank == root:
            return self._allreduce_one("reduce", tensor, kind, factor, opts, device)
        scratch = _plain(tensor).clone(memory_format=torch.contiguous_format)
        work = self._allreduce_one("reduce", scratch, kind, factor, opts, device)
        work._outputs = [tensor]
        return work

    # -- allgather -------------------------------------------------------------

    @_fails_on_every_rank("allgather")
    def allgather(self, output_tensors, input_tensors, opts=None):
        """Every rank's input into output_tensors[0][r]; sizes may differ by
        rank (all_gather_v) as long as each output matches its rank's input."""
        inp = _one(input_tensors, "allgather")
        outs = list(_one(output_tensors, "allgather"))
        device = self._device([inp, *outs], "allgather")
        self._check_list(outs, "allgather output list", inp)
        units = _input_units(inp)
        unit = units.dtype
        total = sum(_unit_count(o) for o in outs)
        gathered = torch.empty(total, dtype=unit, device=device)
        comm = self._comm

        def start(async_op):
            h = comm.allgather(units, out=gathered, async_op=async_op)
            return [h] if async_op else None

        def finish():
            offset = 0
            for o in outs:
                n = _unit_count(o)
                _store_units(gathered[offset : offset + n], o)
                offset += n

        return self._issue("all_gather", opts, outs, start, finish, device=device)

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

    @_fails_on_every_rank("allgather")
    def all_gather_single(self, output_tensor, input_tensor, opts=None):
        """all_gather_into_tensor: inputs concatenated in rank order."""
        device = self._device([output_tensor, input_tensor], "all_gather_into_tensor")
        self._check_dtypes(output_tensor, input_tensor)
        units = _input_units(input_tensor)
        comm = self._comm
        out = _output_units(output_tensor)
        if out is not None:

            def start(async_op):
                h = comm.allgather(units, out=out, async_op=async_op)
                return [h] if async_op else None

            return self._issue("_allgather_base", opts, [output_tensor], start, device=device)
        staged = torch.empty(_unit_count(output_tensor), dtype=units.dtype, device=device)

        def start(async_op):
            h = comm.allgather(units, out=staged, async_op=async_op)
            return [h] if async_op else None

        return self._issue(
            "_allgather_base", opts, [output_tensor], start, lambda: _store_units(staged, output_tensor), device=device
        )

    @staticmethod
    def _check_dtypes(a: torch.Tensor, b: torch.Tensor) -> None:
        if a.dtype != b.dtype:
            raise TypeError(f"output dtype {a.dtype} differs from input dtype {b.dtype}")

    @_fails_on_every_rank("allgather")
    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """Several allgathers in one: output_lists[r][i] gets rank r's
        input_list[i]; the inputs' bytes are packed and gathered together."""
        inputs = list(input_list)
        outputs = [list(o) for o in output_lists]
        device = self._device(inputs + [t for o in outputs for t in o], "allgather_coalesced")

        def check():
            if len(outputs) != self._size:
                raise ValueError(f"allgather_coalesced: {len(outputs)} output lists for a group of {self._size} ranks")
            for o in outputs:
                if len(o) != len(inputs):
                    raise ValueError(
                        f"allgather_coalesced: an output list holds {len(o)} tensors for {len(inputs)} inputs"
                    )
                for out, inp in zip(o, inputs):
                    self._check_dtypes(out, inp)

        check()
        packed = (
            torch.cat([_input_units(t).view(torch.uint8) for t in inputs])
            if inputs
            else torch.empty(0, dtype=torch.uint8, device=device)
        )
        sizes = [[t.numel() * t.element_size() for t in o] for o in outputs]
        gathered = torch.empty(sum(map(sum, sizes)), dtype=torch.uint8, device=device)
        comm = self._comm

        def start(async_op):
            h = comm.allgather(packed, out=gathered, async_op=async_op)
            return [h] if async_op else None

        def finish():
            offset = 0
            for r, o in enumerate(outputs):
                for i, t in enumerate(o):
                    nbytes = sizes[r][i]
                    t.copy_(gathered[offset : offset + nbytes].view(t.dtype).view(t.shape))
                    offset += nbytes

        flat_outputs = [t for o in outputs for t in o]
        return self._issue("all_gather_coalesced", opts, flat_outputs, start, finish, device=device)

    def all_gather_single_coalesced(self, output_tensors, input_tensors, opts=None):
        return self._each(
            "all_gather_into_tensor_coalesced",
            opts,
            [(self.all_gather_single, (o, i)) for o, i in zip(output_tensors, input_tensors)],
        )

    def _each(self, name, opts, calls):
        """Several operations as one work (each issued asynchronously)."""
        sync = getattr(opts, "asyncOp", True) is False
        works = [fn(*args, None) for fn, args in calls]  # opts None: async
        outputs = [t for w in works for t in w._outputs]
        waits = [_WorkWaitable(w) for w in works]
        work = RingWork(
            outputs, waits, timeout_s=self._op_timeout(opts), completer=self._completer, **_streams_of(works)
        )
        if sync:
            work.wait()
        return work

    # -- reduce_scatter -------------------------------------------------------

    @_fails_on_every_rank("reduce_scatter")
    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = _one(output_tensors, "reduce_scatter")
        pieces = list(_one(input_tensors, "reduce_scatter"))
        device = self._device([out, *pieces], "reduce_scatter")
        self._check_list(pieces, "reduce_scatter input list", out)
        kind, factor = _reduction(opts)
        sizes = [p.numel() for p in pieces]
        if len(set(sizes)) == 1 and _core_reduces(kind, out.dtype):
            stacked = torch.cat([_input_units(p) for p in pieces]).view(self._size, -1)
            return self._reduce_scatter_rows("reduce_scatter", stacked, out, kind, factor, opts, device)
        # Uneven pieces (reduce_scatter_v) or a reduction the core lacks:
        # reduce everything, keep our piece.
        whole = torch.cat([_input_units(p).view(torch.uint8) for p in pieces]).view(out.dtype)
        return self._reduce_then_keep("reduce_scatter", whole, sizes, out, kind, factor, opts, device)

    @_fails_on_every_rank("reduce_scatter")
    def reduce_scatter_single(self, output_tensor, input_tensor, opts=None):
        """reduce_scatter_tensor: the input holds size x output elements."""
        device = self._device([output_tensor, input_tensor], "reduce_scatter_tensor")

        def check():
            self._check_dtypes(output_tensor, input_tensor)
            if input_tensor.numel() != self._size * output_tensor.numel():
                raise ValueError(
                    f"reduce_scatter_tensor: input has {input_tensor.numel()} elements, "
                    f"expected {self._size} x {output_tensor.numel()}"
                )

        check()
        kind, factor = _reduction(opts)
        if not _core_reduces(kind, output_tensor.dtype):
            whole = _input_units(input_tensor).view(torch.uint8).view(output_tensor.dtype)
            sizes = [output_tensor.numel()] * self._size
            return self._reduce_then_keep(
                "_reduce_scatter_base", whole, sizes, output_tensor, kind, factor, opts, device
            )
        stacked = _input_units(input_tensor).view(self._size, -1)
        return self._reduce_scatter_rows("_reduce_scatter_base", stacked, output_tensor, kind, factor, opts, device)

    def _reduce_scatter_rows(self, name, stacked, out, kind, factor, opts, device=_CPU):
        op = _CORE_OPS[kind]
        comm = self._comm
        direct = _output_units(out)
        target = (
            direct.view(1, -1)
            if direct is not None
            else torch.empty(1, stacked.shape[1], dtype=stacked.dtype, device=device)
        )

        def start(async_op):
            h = comm.reduce_scatter(stacked, out=target, op=op, prescale=factor, async_op=async_op)
            return [h] if async_op else None

        finish = None if direct is not None else (lambda: _store_units(target.view(-1), out))
        return self._issue(name, opts, [out], start, finish, device=device)

    def _reduce_then_keep(self, name, whole, sizes, out, kind, factor, opts, device=_CPU):
        scratch = whole.clone()
        work = self._allreduce_one(name, scratch, kind, factor, _AsyncOf(opts), device)
        begin = sum(sizes[: self._rank])
        piece = sizes[self._rank]

        def finish():
            out.copy_(scratch[begin : begin + piece].view(out.shape))

        combined = RingWork(
            [out],
            [_WorkWaitable(work)],
            finish,
            timeout_s=self._op_timeout(opts),
            completer=self._completer,
            stream=work._stream,
        )
        if getattr(opts, "asyncOp", True) is False:
            combined.wait()
        return combined

    def reduce_scatter_single_coalesced(self, output_tensors, input_tensors, opts=None):
        calls = [(self._reduce_scatter_single_with, (o, i, opts)) for o, i in zip(output_tensors, input_tensors)]
        return self._each("reduce_scatter_tensor_coalesced", opts, calls)

    def _reduce_scatter_single_with(self, out, inp, opts, _none=None):
        return self.reduce_scatter_single(out, inp, _AsyncOf(opts))

    # -- gather / scatter (alltoall with one non-zero row of splits) ----------

    @_fails_on_every_rank("alltoall")
    def gather(self, output_tensors, input_tensors, opts=None):
        inp = _one(input_tensors, "gather")
        root = getattr(opts, "rootRank", 0)
        outs = list(output_tensors[0]) if self._rank == root and output_tensors else []
        device = self._device([inp, *outs], "gather")

        self._check_root_list("gather", root, output_tensors, "output", inp)
        units = _input_units(inp)
        splits = [0] * self._size
        splits[root] = units.numel()
        total = sum(_unit_count(o) for o in outs)
        received = torch.empty(total, dtype=units.dtype, device=device)
        comm = self._comm

        def start(async_op):
            h = comm.alltoall(units, splits=splits, out=received, async_op=async_op)
            return [h] if async_op else None

        def finish():
            offset = 0
            for o in outs:
                n = _unit_count(o)
                _store_units(received[offset : offset + n], o)
                offset += n

        return self._issue("gather", opts, outs, start, finish if outs else None, device=device)

    @_fails_on_every_rank("alltoall")
    def scatter(self, output_tensors, input_tensors, opts=None):
        out = _one(output_tensors, "scatter")
        root = getattr(opts, "rootRank", 0)
        pieces = list(input_tensors[0]) if self._rank == root and input_tensors else []
        device = self._device([out, *pieces], "scatter")

        self._check_root_list("scatter", root, input_tensors, "input", out)
        unit = _unit_dtype(out.dtype)
        if pieces:
            send = torch.cat([_input_units(p) for p in pieces])
            splits = [_unit_count(p) for p in pieces]
        else:
            send = torch.empty(0, dtype=unit, device=device)
            splits = [0] * self._size
        comm = self._comm
        direct = _output_units(out)
        target = direct if direct is not None else torch.empty(_unit_count(out), dtype=unit, device=device)

        def start(async_op):
            h = comm.alltoall(send, splits=splits, out=target, async_op=async_op)
            return [h] if async_op else None

        finish = None if direct is not None else (lambda: _store_units(target, out))
        return self._issue("scatter", opts, [out], start, finish, device=device)

    # -- alltoall ----------------------------------------------------------

    @_fails_on_every_rank("alltoall")
    def alltoall(self, output_tensors, input_tensors, opts=None):
        outs, ins = list(output_tensors), list(input_tensors)
        device = self._device(outs + ins, "alltoall")

        def check():
            self._check_list(outs, "alltoall output list")
            self._check_list(ins, "alltoall input list")
            for o, i in zip(outs, ins):
                self._check_dtypes(o, i)

        check()
        send = torch.cat([_input_units(t) for t in ins])
        splits = [_unit_count(t) for t in ins]
        received = torch.empty(sum(_unit_count(o) for o in outs), dtype=send.dtype, device=device)
        comm = self._comm

        def start(async_op):
            h = comm.alltoall(send, splits=splits, out=received, async_op=async_op)
            return [h] if async_op else None

        def finish():
            offset = 0
            for o in outs:
                n = _unit_count(o)
                _store_units(received[offset : offset + n], o)
                offset += n

        return self._issue("all_to_all", opts, outs, start, finish, device=device)

    @_fails_on_every_rank("alltoall")
    def all_to_all_single(self, output_tensor, input_tensor, output_split_sizes, input_split_sizes, opts=None):
        """all_to_all_single: splits count rows of dim 0 (equal when empty)."""
        device = self._device([output_tensor, input_tensor], "all_to_all_single")
        in_splits = [int(s) for s in input_split_sizes] if input_split_sizes else None
        out_splits = [int(s) for s in output_split_sizes] if output_split_sizes else None

        def check():
            self._check_dtypes(output_tensor, input_tensor)
            rows = input_tensor.shape[0] if input_tensor.dim() else 1
            if in_splits is not None and (len(in_splits) != self._size or sum(in_splits) != rows):
                raise ValueError(
                    f"all_to_all_single: input_split_sizes {in_splits} do not split {rows} rows over {self._size} ranks"
                )
            if in_splits is None and rows % self._size:
                raise ValueError(
                    f"all_to_all_single: {rows} rows do not split evenly over "
                    f"{self._size} ranks; pass input_split_sizes"
                )
            out_rows = output_tensor.shape[0] if output_tensor.dim() else 1
            if out_splits is not None and (len(out_splits) != self._size or sum(out_splits) != out_rows):
                raise ValueError(
                    f"all_to_all_single: output_split_sizes {out_splits} do not split "
                    f"{out_rows} rows over {self._size} ranks"
                )

        check()
        rows = input_tensor.shape[0] if input_tensor.dim() else 1
        splits = in_splits if in_splits is not None else [rows // self._size] * self._size
        send = _rows_view(_plain(input_tensor).contiguous())
        direct = _plain(output_tensor)
        direct = _units(direct) if direct.is_contiguous() else None
        target = (
            direct
            if direct is not None
            else torch.empty(_unit_count(output_tensor), dtype=_unit_dtype(output_tensor.dtype), device=device)
        )
        comm = self._comm
        result = {}

        def start(async_op):
            h = comm.alltoall(send, splits=splits, out=target, async_op=async_op)
            if async_op:
                result["handle"] = h
                return [h]
            result["received"] = h[1]
            return None

        def finish():
            received = result["received"] if "received" in result else result["handle"].wait()[1]
            if out_splits is not None and list(received) != out_splits:
                raise _core.MismatchError(
                    f"all_to_all_single: rank {self._rank} received rows {list(received)} from the "
                    f"ranks but output_split_sizes is {out_splits}"
                )
            if direct is None:
                _store_units(target, output_tensor)

        return self._issue("all_to_all_single", opts, [output_tensor], start, finish, device=device)

    # -- barrier -------------------------------------------------------------

    @_fails_on_every_rank("barrier")
    def barrier(self, opts=None):
        comm = self._comm

        def start(async_op):
            h = comm.barrier(async_op=async_op)
            return [h] if async_op else None

        return self._issue("barrier", opts, [], start)

    # -- point-to-point ------------------------------------------------------

    def _channel(self, src: int, dst: int, tag: int) -> _Channel:
        key = (src, dst, tag)
        channel = self._channels.get(key)
        if channel is None:
            with self._p2p_lock:
                channel = self._channels.get(key)
                if channel is None:
                    channel = self._channels[key] = _Channel(self, src, dst, tag)
        return channel

    def _count_key(self, dst: int, src: int, tag: int) -> str:
        return f"ringcc-p2p-sent/{dst}/{src}/{tag}"

    def _fail_transfer(self, channel: _Channel, error: BaseException, sent_key: str | None) -> None:
        """A send or receive this rank cannot make: its peer's matching one
        fails too (see "Operations that fail on this rank"), in the
        channel's order."""
        text = error_text(error)
        store = self._store

        def transfer(ch):
            if sent_key is not None:
                store.add(sent_key, 1)  # a receive from any source takes it, and fails
            ch.comm().report_error(text, "broadcast")

        channel.submit(transfer)

    def send(self, tensors, dstRank, tag=0):
        if dstRank == self._rank or not 0 <= dstRank < self._size:
            raise ValueError(f"send: invalid destination rank {dstRank} (this is rank {self._rank} of {self._size})")
        store, key = self._store, self._count_key(dstRank, self._rank, tag)
        try:
            tensor = _one(tensors, "send")
            device = self._device([tensor], "send")
            units = _input_units(tensor)
            if device.type == "cuda":
                # Point-to-point goes through host memory: a pair of ranks
                # has no device communicator of its own.
                units = units.cpu()
        except Exception as error:
            self._fail_transfer(self._channel(self._rank, dstRank, tag), error, key)
            raise

        def transfer(channel):
            store.add(key, 1)  # lets recv_anysource find us (before we wait for the peer)
            channel.comm().broadcast(units, root=0, inplace=True)

        profile = profile_range(f"{BACKEND_NAME}:send")
        future = self._channel(self._rank, dstRank, tag).submit(transfer)
        return RingWork([tensor], [FutureWaitable(future)], timeout_s=self._timeout_s, profile=profile)

    def recv(self, tensors, srcRank, tag=0):
        if srcRank == self._rank or not 0 <= srcRank < self._size:
            raise ValueError(f"recv: invalid source rank {srcRank} (this is rank {self._rank} of {self._size})")
        try:
            tensor = _one(tensors, "recv")
            self._device([tensor], "recv")
        except Exception as error:
            with self._p2p_lock:
                self._taken[(srcRank, tag)] = self._taken.get((srcRank, tag), 0) + 1
                self._fail_transfer(self._channel_locked(srcRank, self._rank, tag), error, None)
            raise
        profile = profile_range(f"{BACKEND_NAME}:recv")
        with self._p2p_lock:
            self._taken[(srcRank, tag)] = self._taken.get((srcRank, tag), 0) + 1
            future = self._submit_recv(tensor, srcRank, tag)
        return RingWork(
            [tensor], [FutureWaitable(future)], timeout_s=self._timeout_s, profile=profile, source_rank=srcRank
        )

    def _submit_recv(self, tensor, src, tag):
        cuda = tensor.is_cuda
        direct = None if cuda else _output_units(tensor)
        target = direct if direct is not None else torch.empty(_unit_count(tensor), dtype=_unit_dtype(tensor.dtype))

        def transfer(channel):
            channel.comm().broadcast(target, root=0, inplace=True)
            if direct is None:
                with torch.no_grad():
                    if cuda:
                        # Received in host memory (see send): copied in, and
                        # done before the work completes.
                        with torch.cuda.device(tensor.device):
                            _store_units(target.to(tensor.device), tensor)
                            torch.cuda.current_stream(tensor.device).synchronize()
                    else:
                        _store_units(target, tensor)
            return src

        return self._channel_locked(src, self._rank, tag).submit(transfer)

    def _channel_locked(self, src: int, dst: int, tag: int) -> _Channel:
        """_channel() for a caller that holds _p2p_lock."""
        key = (src, dst, tag)
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = _Channel(self, src, dst, tag)
        return channel

    def recv_anysource(self, tensors, tag=0):
        """Receives from whichever rank has sent this rank a message with
        `tag` that no receive took yet (senders count their messages in the
        store); work.source_rank() tells which."""
        tensor = _one(tensors, "recv_anysource")
        self._device([tensor], "recv_anysource")
        profile = profile_range(f"{BACKEND_NAME}:recvAnySource")
        if self._anysource is None:
            with self._p2p_lock:
                if self._anysource is None:
                    self._anysource = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ringcc-anysource")
        deadline = time.monotonic() + self._timeout_s

        def resolve():
            delay = 0.0005
            while True:
                for src in range(self._size):
                    if src == self._rank:
                        continue
                    sent = self._store.add(self._count_key(self._rank, src, tag), 0)
                    with self._p2p_lock:
                        if sent > self._taken.get((src, tag), 0):
                            self._taken[(src, tag)] = self._taken.get((src, tag), 0) + 1
                            future = self._submit_recv(tensor, src, tag)
                            break
                else:
                    if time.monotonic() > deadline:
                        raise _core.TimeoutError(
                            f"recv_anysource: no message with tag {tag} arrived within {self._timeout_s:g} s"
                        )
                    time.sleep(delay)
                    delay = min(delay * 2, 0.01)
                    continue
                return future.result()

        outer = self._anysource.submit(resolve)
        work = RingWork([tensor], [FutureWaitable(outer)], timeout_s=self._timeout_s, profile=profile)

        def finish():
            work._src_rank = outer.result()

        work._finish = finish
        return work

    # -- coalescing (torch's C++ startCoalescing/endCoalescing) ---------------

    def start_coalescing(self, device=None) -> None:
        self._coalescing = []

    def end_coalescing(self, device=None):
        works, self._coalescing = self._coalescing or [], None
        outputs = [t for w in works for t in w._outputs]
        return RingWork(
            outputs,
            [_WorkWaitable(w) for w in works],
            timeout_s=self._timeout_s,
            completer=self._completer,
            **_streams_of(works),
        )

    # -- names torch used before 2.6 (and still accepts) ---------------------

    def _allgather_base(self, output_tensor, input_tensor, opts=None):
        return self.all_gather_single(output_tensor, input_tensor, opts)

    def _reduce_scatter_base(self, output_tensor, input_tensor, opts=None):
        return self.reduce_scatter_single(output_tensor, input_tensor, opts)

    def alltoall_base(self, output_tensor, input_tensor, output_split_sizes, input_split_sizes, opts=None):
        return self.all_to_all_single(output_tensor, input_tensor, output_split_sizes, input_split_sizes, opts)

    def allgather_into_tensor_coalesced(self, output_tensors, input_tensors, opts=None):
        return self.all_gather_single_coalesced(output_tensors, input_tensors, opts)

    def reduce_scatter_tensor_coalesced(self, output_tensors, input_tensors, opts=None):
        return self.reduce_scatter_single_coalesced(output_tensors, input_tensors, opts)

    # -- lifetime ------------------------------------------------------------

    def shutdown(self) -> None:
        """Leaves the group (destroy_process_group calls this); idempotent."""
        if self._closed:
            return
        self._closed = True
        _LIVE_GROUPS.discard(self)
        self._completer.stop()
        with self._p2p_lock:
            channels = [self._channels[k] for k in sorted(self._channels)]
            self._channels.clear()
            anysource, self._anysource = self._anysource, None
        if anysource is not None:
            anysource.shutdown(wait=False)
        if channels:
            # In a thread of their own, in the same order on every rank; a
            # transfer the peer never matched would hold it up until the
            # core's timeout, so this waits only a little.
            closer = threading.Thread(target=_close_channels, args=(channels,), name="ringcc-p2p-close", daemon=True)
            closer.start()
            closer.join(_CHANNEL_CLOSE_WAIT_S)
        if self._stuck:
            # The core would wait for the stuck operation (until its own
            # timeout); leave it to a background thread.
            threading.Thread(target=self._comm.shutdown, name="ringcc-shutdown", daemon=True).start()
        else:
            self._comm.shutdown()

    def abort(self) -> None:
        self.shutdown()


_CHANNEL_CLOSE_WAIT_S = 5.0


def _close_channels(channels: list[_Channel]) -> None:
    for channel in channels:
        try:
            channel.close()
        except Exception as error:  # noqa: BLE001 - leaving anyway
            log.debug("closing a point-to-point channel: %s", error)


class _AsyncOf:
    """Options that read like `opts` but always ask for an asynchronous op."""

    def __init__(self, opts) -> None:
        self._opts = opts

    def __getattr__(self, name):
        if name == "asyncOp":
            return True
        return getattr(self._opts, name)


def _streams_of(works: Sequence[RingWork]) -> dict:
    """The CUDA streams of works combined into one (RingWork's stream and
    more_streams): the combined work's wait orders the waiter after each."""
    streams = []
    for w in works:
        if w._stream is not None and all(w._stream != s for s in streams):
            streams.append(w._stream)
    return {"stream": streams[0], "more_streams": streams[1:]} if streams else {}


class _WorkWaitable:
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


# --------------------------------------------------------------------------
# torch before 2.7


def _torch_keeps_python_works() -> bool:
    """Whether C++ holds the Python object of a Work that Python hands it
    (c10d's PyWorkHolder, torch 2.7 and later)."""
    major, minor = (
        int("".join(c for c in part if c.isdigit()) or 0) for part in torch.__version__.split("+")[0].split(".")[:2]
    )
    return (major, minor) >= (2, 7)


def _c10d_owned(method):
    """Before torch 2.7 C++ keeps only the C++ half of a Python Work: once
    the RingWork is collected (DDP's constructor drops it at once), C++'s
    wait() is the base Work's, which nothing ever completes. There a
    collective hands back a C++ work wrapping the RingWork's future, which
    C++ owns and whose wait() returns when the collective is done."""
    wrap = torch._C._distributed_c10d._create_work_from_future

    @functools.wraps(method)
    def issue(self, *args, **kwargs):
        work = method(self, *args, **kwargs)
        if isinstance(work, RingWork) and not _from_python_api(sys._getframe(1)):
            return wrap(work.get_future())
        return work

    return issue


def _from_python_api(frame) -> bool:
    """Whether torch.distributed's Python functions (or ringcc's) made the
    call: they keep the RingWork, whose wait() raises the collective's
    error, where the C++ wrapper's wait() would only wait."""
    if frame is None:
        return False
    name = frame.f_code.co_filename.replace(os.sep, "/")
    return name.endswith("/torch/distributed/distributed_c10d.py") or "/ringcc/" in name


def _group_name_property(self) -> str:
    return self._group_name


if not _torch_keeps_python_works():
    for _name in (
        "allreduce",
        "allreduce_coalesced",
        "broadcast",
        "reduce",
        "allgather",
        "_allgather_base",
        "allgather_coalesced",
        "allgather_into_tensor_coalesced",
        "reduce_scatter",
        "_reduce_scatter_base",
        "reduce_scatter_tensor_coalesced",
        "gather",
        "scatter",
        "alltoall",
        "alltoall_base",
        "barrier",
        "send",
        "recv",
        "end_coalescing",
    ):
        setattr(ProcessGroupRing, _name, _c10d_owned(getattr(ProcessGroupRing, _name)))
    # torch 2.5 and 2.6 read a group's name from its C++ backends, which a
    # Python process group has none of.
    ProcessGroupRing._set_group_name = ProcessGroupRing.setGroupName
    ProcessGroupRing._set_group_desc = ProcessGroupRing.setGroupDesc
    ProcessGroupRing.group_name = property(_group_name_property)
    ProcessGroupRing.group_desc = property(ProcessGroupRing.getGroupDesc)


# --------------------------------------------------------------------------
# Registration


def create_process_group(store, rank: int, size: int, timeout) -> ProcessGroupRing:
    """The creator that Backend.register_backend gets: c10d passes the
    group's prefixed store, this rank within the group, the group's size and
    its timeout."""
    return ProcessGroupRing(store, rank, size, timeout)


def is_registered() -> bool:
    return BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {})


def register_backend() -> None:
    """Registers backend "ring" with torch.distributed (idempotent); under
    srun, env:// then finds the job from SLURM (ringcc.slurm_torch)."""
    if os.environ.get("SLURM_PROCID"):
        from ringcc import slurm_torch  # noqa: PLC0415 - only under SLURM

        slurm_torch.install()
    if is_registered():
        return
    dist.Backend.register_backend(BACKEND_NAME, create_process_group, devices=list(DEVICES))


def _shutdown_live_groups() -> None:
    for group in list(_LIVE_GROUPS):
        try:
            group.shutdown()
        except Exception:  # the process is ending
            pass


atexit.register(_shutdown_live_groups)
