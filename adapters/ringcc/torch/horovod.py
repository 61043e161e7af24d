"""Horovod's PyTorch API over ringcc: a Horovod script changes one import.

    import ringcc.torch as hvd            # was: import horovod.torch as hvd

    hvd.init()
    sampler = DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

Launch with `ringrun -np N python train.py` (or torchrun, mpirun, srun:
`ringcc.init()` reads their variables). See docs/torch.md, "Horovod API".

How it runs. Collectives on the global process set go through ringcc's
background engine as named collectives, as Horovod's do: a tensor is matched
across ranks by its name (any enqueue order), ready allreduces are fused, and
`join()` lets finished ranks stand in with zeros in allreduces (the others'
other collectives raise meanwhile, as in Horovod). A call without a name gets
`<op>.noname.<n>` from a per-process counter, so unnamed calls must be issued
in the same order on every rank (as in Horovod). Blocking calls are the
asynchronous ones followed by `synchronize()`. Collectives on other process
sets run on the set's own communicator in issue order (see process_sets.py).

Tensors reach the core through DLPack, zero-copy when they are contiguous
and of a dtype the core handles (float16, bfloat16, float32, float64, int8,
uint8, int32, int64), on the CPU or a CUDA device; in-place calls then
write into the tensor's own memory. Anything else is staged through a
contiguous copy on the tensor's device: non-contiguous tensors, int16
reductions (in int32), complex Sum/Average (as real pairs), and other
dtypes for broadcast/allgather/alltoall (moved as bytes).

CUDA tensors stay on their device (the core's GPU backends). A named
collective (the global set) runs when the engine gets to it, on the
process's side stream for the device, after the work queued on the
tensor's current stream when it was enqueued; `synchronize(handle)` makes
the current stream wait for it (it does not block for the device), so what
follows on that stream sees the result. Collectives on other process sets
run on the tensor's current stream, in issue order.

Errors raised from `synchronize()`/`Handle.wait()` (peer failure, ranks that
disagree on a tensor's shape or dtype, internal errors) are at once
`HorovodInternalError` (a RuntimeError), `torch.distributed.DistBackendError`
and the ringcc error they come from (`ringcc.PeerFailureError`,
`ringcc.MismatchError`, ...). A wait that ran out
(`RINGCC_TIMEOUT_S`, `RINGCC_STALL_SHUTDOWN_S`) stays `ringcc.TimeoutError`
(a TimeoutError: Python cannot make one class both that and a RuntimeError).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import torch

import ringcc
from ringcc import _core
from ringcc.torch import process_sets as _process_sets
from ringcc.torch import staging
from ringcc.torch.compression import (  # noqa: F401  (re-exported)
    BF16Compressor,
    Compression,
    Compressor,
    FP16Compressor,
    NoneCompressor,
)
from ringcc.torch.dtypes import CORE_DTYPE_CODES, CORE_DTYPES
from ringcc.torch.errors import as_dist_error
from ringcc.torch.failed_calls import fail_on_every_rank
from ringcc.torch.output_rows import OUTPUT_ROWS
from ringcc.torch.process_sets import (  # noqa: F401  (re-exported)
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)

# --------------------------------------------------------------------------
# Reduction operators (ringcc's values; Horovod scripts only compare them)

Sum = ringcc.Sum
Average = ringcc.Average
Min = ringcc.Min
Max = ringcc.Max
Product = ringcc.Product
# Horovod's Adasum is not implemented by ringcc: the name exists so that
# scripts which mention it import, and using it raises NotImplementedError.
Adasum = 5

_OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max", Product: "Product", Adasum: "Adasum"}


def handle_average_backwards_compatibility(op, average):
    """Horovod's rule for the deprecated `average=` argument: None and None
    mean Average; `average` alone picks Average or Sum (with a warning)."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one of them.")
        return op
    if average is not None:
        warnings.warn(
            "Parameter `average` has been replaced with `op` and will be removed", DeprecationWarning, stacklevel=3
        )
        return Average if average else Sum
    return Average


def _core_op(op) -> int:
    if op == Adasum:
        raise NotImplementedError("ringcc does not implement Adasum; use hvd.Average or hvd.Sum")
    if isinstance(op, str):
        return ringcc._op(op)
    if op not in (Sum, Average, Min, Max, Product):
        raise ValueError(f"unknown reduction op {op!r}; use hvd.Sum, hvd.Average, hvd.Min, hvd.Max or hvd.Product")
    return int(op)


# --------------------------------------------------------------------------
# Errors


# Shared with ringcc.elastic (hvd.elastic catches and raises them).
from ringcc.elastic import HorovodInternalError, HostsUpdatedInterrupt  # noqa: E402,F401


def _internal_error(error: BaseException) -> BaseException:
    """`error` as an instance of a class that is also HorovodInternalError and
    torch.distributed.DistBackendError."""
    if isinstance(error, HorovodInternalError) or not isinstance(error, ringcc.RingccError):
        return error
    if isinstance(error, ringcc.NotInitializedError) and _core.is_initialized():
        # The engine stopped on a failure while ringcc is still initialized:
        # the core reports collectives enqueued after that as "shut down"
        # (NotInitializedError) instead of the failure itself. Say what it is.
        error = ringcc.PeerFailureError(
            f"ringcc's engine stopped after a failure of the job (a peer died or aborted; "
            f"ringcc's log names the rank), so this collective cannot run: {error}"
        )
    return as_dist_error(error, (HorovodInternalError,))


class NotInitializedError(ringcc.NotInitializedError, ValueError):
    """Raised by calls that need `hvd.init()` first (a ValueError as in
    Horovod, and a ringcc.NotInitializedError)."""


def _require_init() -> None:
    if not _core.is_initialized():
        raise NotInitializedError("Horovod (ringcc.torch) has not been initialized; use hvd.init().")


# --------------------------------------------------------------------------
# Lifetime and topology

_names = itertools.count()


def _reset_names(start: int = 0) -> None:
    """Restarts the counter of generated names (tests use it to realign ranks)."""
    global _names
    _names = itertools.count(start)


def init(comm=None, process_sets=None):
    """Joins the job (`ringcc.init()`: ringrun, torchrun, Open MPI, PMI or
    SLURM variables; a lone process is rank 0 of 1). Calling it again is a
    no-op.

    `comm`: only None, or a list of every rank, is accepted (ringcc has no
    MPI, and cannot run Horovod on a subset of the job). `process_sets`: a
    list of ProcessSet to register (every rank passes the same list), or
    "dynamic" (accepted; ringcc always allows add_process_set)."""
    if comm is not None:
        try:
            ranks = sorted(int(r) for r in comm)
        except TypeError:
            raise ValueError(
                "ringcc.torch.init: comm must be None or a list of ranks (ringcc has no MPI communicators)"
            ) from None
    else:
        ranks = None
    first = not _core.is_initialized()
    ringcc.init()
    if ranks is not None and ranks != list(range(ringcc.size())):
        raise ValueError(
            f"ringcc.torch.init: comm={ranks} must list every rank of the job "
            f"(0..{ringcc.size() - 1}); use process sets for subsets"
        )
    _process_sets._on_init(ringcc.size())
    if first:
        _reset_names()
    if process_sets is not None and process_sets != "dynamic":
        for ps in process_sets:
            if isinstance(ps, ProcessSet) and ps.process_set_id is not None:
                continue
            add_process_set(ps)


def shutdown():
    """Leaves the job (process sets first); `init()` may be called again."""
    _process_sets._on_shutdown()
    ringcc.shutdown()


def is_initialized() -> bool:
    return bool(_core.is_initialized())


def rank() -> int:
    _require_init()
    return ringcc.rank()


def size() -> int:
    _require_init()
    return ringcc.size()


def local_rank() -> int:
    _require_init()
    return ringcc.local_rank()


def local_size() -> int:
    _require_init()
    return ringcc.local_size()


def cross_rank() -> int:
    _require_init()
    return ringcc.cross_rank()


def cross_size() -> int:
    _require_init()
    return ringcc.cross_size()


def is_homogeneous() -> bool:
    """True when every host runs the same number of ranks."""
    _require_init()
    return ringcc.local_size() * ringcc.cross_size() == ringcc.size()


# What this build has, answered truthfully for ringcc: its transports are its
# own shared memory and TCP; it has no MPI, Gloo, NCCL, oneCCL, DDL, CUDA or
# ROCm code, so every one of these is False.
def mpi_built() -> bool:
    return False


def mpi_enabled() -> bool:
    return False


def mpi_threads_supported() -> bool:
    """False: there is no MPI. (Horovod raises ValueError when MPI is not
    enabled; ringcc answers False so that scripts branching on it go on.)"""
    return False


def gloo_built() -> bool:
    return False


def gloo_enabled() -> bool:
    return False


def nccl_built() -> bool:
    """True when ringcc found a usable NCCL (libnccl.so.2) at run time
    (ringcc.nccl_info()): CUDA tensors on distinct GPUs go through it."""
    return bool(ringcc.nccl_info()["found"])


def ddl_built() -> bool:
    return False


def ccl_built() -> bool:
    return False


def cuda_built() -> bool:
    """True when ringcc found the CUDA driver (libcuda.so.1) at run time
    (ringcc.cuda_info()): collectives take CUDA tensors."""
    return bool(ringcc.cuda_info()["found"])


def rocm_built() -> bool:
    return False


def start_timeline(file_path, mark_cycles=False):
    """Writes a Chrome-trace timeline of the engine's named collectives to
    `file_path` (rank 0). `mark_cycles` is accepted and ignored."""
    _require_init()
    ringcc.start_timeline(str(file_path))


def stop_timeline():
    _require_init()
    ringcc.stop_timeline()


# --------------------------------------------------------------------------
# Handles


class Handle:
    """What the `*_async` calls return: pass it to `poll()` and
    `synchronize()`. (Horovod's handles are ints; this is an object with
    `done()`, `wait()`, and calling it waits too.)"""

    __slots__ = ("_waits", "_finish", "_finished", "_result", "_error", "__weakref__")

    def __init__(self, waits: Sequence, finish: Callable[[list], object] | None = None) -> None:
        self._waits = list(waits)
        self._finish = finish
        self._finished = False
        self._result = None
        self._error = None

    def done(self) -> bool:
        return self._finished or all(w.done() for w in self._waits)

    def wait(self):
        if not self._finished:
            try:
                results = [w.wait() for w in self._waits]
                self._result = self._finish(results) if self._finish is not None else (results[0] if results else None)
            except ringcc.RingccError as error:
                self._error = _internal_error(error)
            except HorovodInternalError as error:
                self._error = error
            self._finished = True
            self._waits = []
            self._finish = None
        if self._error is not None:
            raise self._error
        return self._result

    __call__ = wait


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
            raise _internal_error(error) from None
    if isinstance(handle, Handle):
        return handle.wait()
    if callable(handle):  # e.g. a closure made by Horovod-style code
        return handle()
    return handle.wait()


def _name(kind: str, name: str | None) -> str:
    # An empty name is no name, as in Horovod.
    if name is None or (isinstance(name, str) and not name):
        return f"{kind}.noname.{next(_names)}"
    return f"{kind}.{name}"


def _set_label(kind: str, name) -> str | None:
    """How the errors of a call on a process set other than the global one
    name its tensor: by the name the global set would give it, else (None)
    by its place in issue order on the set."""
    if name is None or (isinstance(name, str) and not name):
        return None
    return f"tensor '{kind}.{name}'"


def _is_global(process_set) -> bool:
    """Whether a call on `process_set` runs on the global set. Anything that
    is not a ProcessSet counts as the global set here (its name is taken as
    the global set's calls take theirs); _check_process_set() rejects it."""
    if process_set is global_process_set or process_set is None:
        return True
    return not isinstance(process_set, ProcessSet) or process_set.process_set_id == 0


def _check_process_set(process_set) -> None:
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
# another process set (ringcc/torch/failed_calls.py). Errors the core raises
# while taking the tensors are reported by the core itself.


def _report_failed(error: BaseException, kind: str, names=(), process_set=None, calls: int = 1) -> None:
    """Takes part, as a failed participant, in the calls `error` stopped on
    this rank: the engine's collectives `names` (global set), or `calls`
    collectives in issue order on `process_set`."""
    if not _core.is_initialized():
        return
    try:
        glob = process_set is None or _is_global(process_set)
        comm = None if glob else process_set._communicator()
    except Exception:  # nothing to tell (a set this rank is not in)
        return
    fail_on_every_rank(error, kind, names, comm, calls)


def _enqueue(call: Callable[[], object]):
    """Runs a core enqueue; a failure of the job is a HorovodInternalError."""
    _require_init()
    try:
        return call()
    except (ringcc.PeerFailureError, ringcc.InternalError) as error:
        raise _internal_error(error) from None


# --------------------------------------------------------------------------
# Tensors as the core takes them

_CORE_DTYPES = CORE_DTYPES
# dtypes whose late-allocated outputs (NumPy arrays) torch can wrap
_NUMPY_DTYPES = _CORE_DTYPES - {torch.bfloat16}
# allreduce_async_'s direct path: the core's dtype code of each core dtype,
# the ops it takes as they are, the core's handle and entry point.
_DIRECT_DTYPE_CODES = CORE_DTYPE_CODES
_DIRECT_OPS = frozenset((Sum, Average, Min, Max, Product))
_CoreHandle = _core.Handle
_allreduce_async_raw = _core._allreduce_async_raw
_broadcast_async_raw = _core._broadcast_async_raw
_comm_allreduce_async_raw = _core._comm_allreduce_async_raw
_allgather_async_raw = _core._allgather_async_raw
_STRIDED = torch.strided
_core_synchronize = _core.synchronize


def _direct_code(tensor, op=Sum):
    """Which door a call takes: the core's dtype code of `tensor` when the
    direct paths (the core's raw entry points) take it as it is, a dense
    contiguous CPU torch.Tensor of a core dtype, reduced (for a reduction)
    by an int op the core takes as it is; None when the call takes the
    general path."""
    if (
        type(op) is int
        and op in _DIRECT_OPS
        and isinstance(tensor, torch.Tensor)
        and tensor.is_cpu
        and tensor.layout == _STRIDED
        and tensor.is_contiguous()
    ):
        return _DIRECT_DTYPE_CODES.get(tensor.dtype)
    return None


def _check_tensor(tensor, what: str) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.layout != torch.strided:
        raise ValueError(
            f"{what}: {tensor.layout} tensors are not supported here "
            "(use sparse_allreduce_async for sparse COO tensors)"
        )
    return tensor.detach()


def _as_torch(x) -> torch.Tensor:
    """A result the core allocated: a NumPy array (host) or already a torch
    tensor (CUDA, allocated by torch on the input's device)."""
    return x if isinstance(x, torch.Tensor) else torch.from_numpy(x)


def _plain_contiguous(t: torch.Tensor) -> torch.Tensor:
    """`t` (detached) contiguous on its own device (the CPU or CUDA): t
    itself when it already is. Other devices go through the CPU."""
    if t.device.type not in ("cpu", "cuda"):
        t = t.cpu()
    return t.contiguous()


def _check_reducible(t: torch.Tensor, op: int, what: str) -> None:
    """Raises when _reduce_wire cannot carry `t` for `op`."""
    dtype = t.dtype
    if dtype in _CORE_DTYPES or dtype == torch.int16:
        return
    if dtype.is_complex:
        if op not in (Sum, Average):
            raise TypeError(f"{what}: complex tensors support Sum and Average only")
        return
    raise TypeError(
        f"{what}: dtype {dtype} is not supported for reductions (supported: "
        "float16, bfloat16, float32, float64, int8, uint8, int16, int32, int64, "
        "complex64/128 with Sum or Average)"
    )


def _reduce_wire(t: torch.Tensor, op: int, what: str) -> torch.Tensor:
    """A CPU contiguous tensor of a core dtype carrying `t` for a reduction
    (t's own memory when possible)."""
    _check_reducible(t, op, what)
    dtype = t.dtype
    if dtype in _CORE_DTYPES:
        return _plain_contiguous(t)
    if dtype == torch.int16:
        return _plain_contiguous(t).to(torch.int32)
    return torch.view_as_real(_plain_contiguous(t))


def _from_reduce_wire(w: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if like.dtype.is_complex:
        w = torch.view_as_complex(w)
    elif w.dtype != like.dtype:
        w = w.to(like.dtype)
    w = w.view(like.shape)
    if like.device.type != "cpu":
        w = w.to(like.device)
    return w


def _move_wire(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor that carries `t` for broadcast, allgather or
    alltoall: t itself (as rows) for the core's dtypes whose late-allocated
    outputs torch can take (on the CPU NumPy's, so not bfloat16; on CUDA all
    of them), else its bytes as (rows, bytes per row) uint8, sharing t's
    memory when possible."""
    t = _plain_contiguous(t)
    moved = _CORE_DTYPES if t.is_cuda else _NUMPY_DTYPES
    if t.dtype in moved:
        return t if t.dim() else t.reshape(1)
    return staging.in_units(t.reshape(staging.rows(t)), moved)


def _from_move_wire(w: torch.Tensor, like: torch.Tensor, first_dim: int | None = None) -> torch.Tensor:
    """The inverse of _move_wire for an output of `first_dim` rows (default: like's)."""
    tail = tuple(like.shape[1:]) if like.dim() else ()
    w = staging.from_units(w, like.dtype)
    if first_dim is None:
        shape = tuple(like.shape)
    else:
        shape = (first_dim,) + tail
    w = w.reshape(shape)
    if like.device.type != "cpu":
        w = w.to(like.device)
    return w


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.device == b.device and a.data_ptr() == b.data_ptr() and a.is_contiguous() and b.is_contiguous()


def _set_rank(process_set, global_rank: int, what: str) -> int:
    """A global rank as its position in a non-global process set."""
    try:
        return process_set.ranks.index(int(global_rank))
    except ValueError:
        raise ValueError(f"{what}: rank {global_rank} is not in {process_set}") from None


# --------------------------------------------------------------------------
# allreduce


def _fail_unstarted(error: BaseException, kind: str, name, process_set, core_kind: str) -> None:
    """For an entry point whose own argument handling failed before its call
    took its name: takes the name as the call would have, and fails the
    call on every rank (see "calls that fail on this rank")."""
    glob = _is_global(process_set)
    _report_failed(error, core_kind, [_name(kind, name)] if glob else [], process_set)


def _group_names(kind: str, name, process_set, tensors, base_kind=None):
    """(the list of tensors, the base name on the global set or None, the
    engine's names of the group's collectives: kind.base.i) of a grouped
    call. When the list cannot be made, the call fails on every rank as one
    collective (this rank cannot tell how many its peers start)."""
    glob = _is_global(process_set)
    base = _name(base_kind or f"grouped_{kind}", name) if glob else None
    try:
        tensors = list(tensors)
    except Exception as error:
        _report_failed(error, kind, [f"{kind}.{base}.0"] if glob else [], process_set)
        raise
    names = [f"{kind}.{base}.{i}" for i in range(len(tensors))] if glob else []
    return tensors, base, names


def _fail_group_unstarted(error, kind: str, base_kind: str, name, process_set, tensors) -> None:
    """_fail_unstarted for a grouped call: every collective of the group (one
    when the list itself is unusable; a grouped allreduce on a non-global set
    is one call of the core)."""
    glob = _is_global(process_set)
    base = _name(base_kind, name) if glob else None
    count = len(tensors) if isinstance(tensors, list) else 1
    _report_failed(
        error,
        kind,
        [f"{kind}.{base}.{i}" for i in range(count)] if glob else [],
        process_set,
        calls=1 if kind == "allreduce" else count,
    )


def _start_each(tensors, names, process_set, core_kind: str, start_one) -> list:
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
            _report_failed(error, core_kind, names[i + 1 :], process_set, calls=rest)
            raise
    return handles


def _allreduce_start(
    tensor, name, op, prescale_factor, postscale_factor, process_set, inplace: bool, what: str, average=None
) -> Handle:
    glob = _is_global(process_set)
    full = _name("allreduce", name) if glob else None
    label = None if glob else _set_label("allreduce", name)
    try:
        _check_process_set(process_set)
        op = handle_average_backwards_compatibility(op, average)
        t = _check_tensor(tensor, what)
        op = _core_op(op)
        wire = _reduce_wire(t, op, what)
        pre, post = float(prescale_factor), float(postscale_factor)
        if inplace:
            direct = (
                _shares_memory(wire, t)
                and t.dtype == wire.dtype
                or (t.dtype.is_complex and t.device.type in ("cpu", "cuda") and t.is_contiguous())
            )
            out = None
        else:
            direct = False
            out = torch.empty(wire.shape, dtype=wire.dtype, device=wire.device)
        comm = None if glob else process_set._communicator()
    except Exception as error:
        _report_failed(error, "allreduce", [full], process_set)
        raise
    if glob:
        h = _enqueue(lambda: _core._allreduce(wire, out, op, pre, post, inplace, True, full))
    else:
        h = _enqueue(lambda: comm.allreduce(wire, out, op, pre, post, inplace, True, label))

    if inplace:

        def finish(_):
            if not direct:
                with torch.no_grad():
                    tensor.copy_(_from_reduce_wire(wire, t))
            return tensor
    else:

        def finish(_):
            return _from_reduce_wire(out, t)

    return Handle([h], finish)


def allreduce_async(
    tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
) -> Handle:
    """Starts an allreduce of `tensor` (not modified); returns a Handle whose
    result is a new tensor. op defaults to Average. The operation is keyed
    by `name` (generated when None); shape and dtype must match across ranks."""
    return _allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor, process_set, False)


def allreduce_async_(
    tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Starts an in-place allreduce: the result is written into `tensor`'s
    own memory, and the handle's result is `tensor`. Wait with
    `synchronize(handle)`, test with `poll(handle)`."""
    return _allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor, process_set, True)


def _allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor, process_set, in_place):
    """allreduce_async(_): the direct path where it takes the call, else the general one."""
    if average is None:
        reduce_op = Average if op is None else op
        if process_set is global_process_set:
            direct = _direct_allreduce_ if in_place else _direct_allreduce
            handle = direct(tensor, "allreduce", name, reduce_op, prescale_factor, postscale_factor)
        else:
            handle = _direct_set_allreduce(
                tensor, process_set, name, reduce_op, prescale_factor, postscale_factor, in_place
            )
        if handle is not None:
            return handle
    what = "allreduce_async_" if in_place else "allreduce_async"
    return _allreduce_start(tensor, name, op, prescale_factor, postscale_factor, process_set, in_place, what, average)


def _direct_set_allreduce(tensor, process_set, name, op, prescale_factor, postscale_factor, inplace: bool):
    """_direct_allreduce(_) on a process set this rank is in: in issue order
    on the set's communicator, by address. None when not such a case."""
    comm = getattr(process_set, "_comm", None) if isinstance(process_set, ProcessSet) else None
    if comm is None or process_set.process_set_id is None:
        return None
    code = _direct_code(tensor, op)
    if code is None:
        return None
    try:
        label = None if name is None else _set_label("allreduce", name)
        if inplace:
            return _comm_allreduce_async_raw(
                comm, tensor, tensor.data_ptr(), tensor.shape, code, op, prescale_factor, postscale_factor, label
            )
        return _comm_allreduce_async_raw(
            comm,
            OUTPUT_ROWS,
            0,
            tensor.shape,
            code,
            op,
            prescale_factor,
            postscale_factor,
            label,
            tensor,
            tensor.data_ptr(),
        )
    except (ringcc.PeerFailureError, ringcc.InternalError) as error:
        raise _internal_error(error) from None


def _direct_allreduce(tensor, kind, name, op, prescale_factor, postscale_factor):
    """_direct_allreduce_ out of place: the result goes to a new tensor
    (a row of OUTPUT_ROWS) that the handle returns; `tensor` is only read."""
    code = _direct_code(tensor, op)
    if code is None:
        return None
    try:
        return _allreduce_async_raw(
            OUTPUT_ROWS,
            0,
            tensor.shape,
            code,
            op,
            f"{kind}.{name}" if name else _name(kind, name),
            prescale_factor,
            postscale_factor,
            tensor,
            tensor.data_ptr(),
        )
    except ringcc.NotInitializedError:
        return None
    except (ringcc.PeerFailureError, ringcc.InternalError) as error:
        raise _internal_error(error) from None


def _direct_allreduce_(tensor, kind, name, op, prescale_factor, postscale_factor):
    """The common case of a training loop (a dense contiguous CPU tensor of a
    core dtype, an int op, the global process set): the in-place allreduce
    goes to the engine with the tensor's address (no DLPack export, no
    wrapper handle), named as `kind` names it. None when `tensor` is not such
    a case (the caller takes the general path). A bad scale factor fails the
    call under its name (the core does that)."""
    code = _direct_code(tensor, op)
    if code is None:
        return None
    try:
        return _allreduce_async_raw(
            tensor,
            tensor.data_ptr(),
            tensor.shape,
            code,
            op,
            f"{kind}.{name}" if name else _name(kind, name),
            prescale_factor,
            postscale_factor,
        )
    except ringcc.NotInitializedError:
        return None  # the general path says so in Horovod's words
    except (ringcc.PeerFailureError, ringcc.InternalError) as error:
        raise _internal_error(error) from None


class HorovodAllreduce(torch.autograd.Function):
    """allreduce with a gradient: the gradient is allreduced with the same op
    and factors (as in Horovod)."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = op
        ctx.factors = (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        pre, post = ctx.factors
        grad = allreduce(
            grad_output, op=ctx.op, prescale_factor=pre, postscale_factor=post, process_set=ctx.process_set
        )
        return grad, None, None, None, None, None, None


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def allreduce(
    tensor,
    average=None,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduces `tensor` over the ranks (Average unless `op` says otherwise)
    and returns a new tensor; `tensor` is not modified. Differentiable."""
    try:
        op = handle_average_backwards_compatibility(op, average)
        compressed, ctx = compression.compress(tensor)
    except Exception as error:
        _fail_unstarted(error, "allreduce", name, process_set, "allreduce")
        raise
    if _needs_grad(compressed):
        reduced = HorovodAllreduce.apply(compressed, None, name, op, prescale_factor, postscale_factor, process_set)
    else:
        reduced = synchronize(
            allreduce_async(compressed, None, name, op, prescale_factor, postscale_factor, process_set)
        )
    return compression.decompress(reduced, ctx)


def allreduce_(
    tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """In-place allreduce; returns `tensor`."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor, process_set))


# -- grouped allreduce -------------------------------------------------------


def _grouped_allreduce_start(
    tensors, name, op, prescale_factor, postscale_factor, process_set, inplace: bool, what: str, average=None
) -> Handle:
    tensors, base, names = _group_names("allreduce", name, process_set, tensors, base_kind="grouped_allreduce")
    glob = base is not None
    try:
        _check_process_set(process_set)
        op = handle_average_backwards_compatibility(op, average)
        code = _core_op(op)
        plain = [_check_tensor(t, what) for t in tensors]
        for t in plain:
            _check_reducible(t, code, what)
        pre, post = float(prescale_factor), float(postscale_factor)
    except Exception as error:
        # Every tensor of the group fails on every rank before any runs.
        _report_failed(error, "allreduce", names, process_set, calls=1 if tensors else 0)
        raise
    if not tensors:
        return Handle([], lambda _: [])
    if glob:
        # Named tensors of one group: the engine fuses what is ready.
        def start_one(i, t):
            h = _direct_allreduce_(t, "allreduce", f"{base}.{i}", code, pre, post) if inplace else None
            return (
                h if h is not None else _allreduce_start(t, f"{base}.{i}", code, pre, post, process_set, inplace, what)
            )

        handles = _start_each(tensors, names, process_set, "allreduce", start_one)
        return Handle(handles, lambda results: list(results))
    try:
        comm = process_set._communicator()
        wires = [_reduce_wire(t, code, what) for t in plain]
        if not inplace:
            # The communicator reduces in place: never into the caller's inputs.
            wires = [w.clone() if w.data_ptr() == p.data_ptr() else w for w, p in zip(wires, plain)]
    except Exception as error:
        _report_failed(error, "allreduce", [], process_set)
        raise
    h = _enqueue(lambda: comm.grouped_allreduce(wires, code, pre, post, True, True))

    def finish(_):
        results = []
        for t, p, w in zip(tensors, plain, wires):
            if not inplace:
                results.append(_from_reduce_wire(w, p))
                continue
            if not (p.device.type in ("cpu", "cuda") and p.is_contiguous() and w.data_ptr() == p.data_ptr()):
                with torch.no_grad():
                    t.copy_(_from_reduce_wire(w, p))
            results.append(t)
        return results

    return Handle([h], finish)


def grouped_allreduce_async(
    tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
) -> Handle:
    """Starts an allreduce of a list of tensors (not modified), reduced
    together; the Handle's result is a list of new tensors."""
    return _grouped_allreduce_start(
        tensors, name, op, prescale_factor, postscale_factor, process_set, False, "grouped_allreduce_async", average
    )


def grouped_allreduce_async_(
    tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
) -> Handle:
    """In-place form of grouped_allreduce_async."""
    return _grouped_allreduce_start(
        tensors, name, op, prescale_factor, postscale_factor, process_set, True, "grouped_allreduce_async_", average
    )


class HorovodGroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op = op
        ctx.factors = (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return tuple(
            synchronize(
                grouped_allreduce_async(
                    list(tensors), average, name, op, prescale_factor, postscale_factor, process_set
                )
            )
        )

    @staticmethod
    def backward(ctx, *grad_outputs):
        pre, post = ctx.factors
        grads = grouped_allreduce(
            list(grad_outputs), op=ctx.op, prescale_factor=pre, postscale_factor=post, process_set=ctx.process_set
        )
        return (None, None, None, None, None, None, *grads)


def grouped_allreduce(
    tensors,
    average=None,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduces a list of tensors together; returns a list of new tensors.
    Differentiable."""
    try:
        op = handle_average_backwards_compatibility(op, average)
        tensors = list(tensors)
        compressed, ctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    except Exception as error:
        _fail_group_unstarted(error, "allreduce", "grouped_allreduce", name, process_set, tensors)
        raise
    if not tensors:
        return []
    if _needs_grad(*compressed):
        reduced = HorovodGroupedAllreduce.apply(
            None, name, op, prescale_factor, postscale_factor, process_set, *compressed
        )
    else:
        reduced = synchronize(
            grouped_allreduce_async(list(compressed), None, name, op, prescale_factor, postscale_factor, process_set)
        )
    return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]


def grouped_allreduce_(
    tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """In-place grouped allreduce; returns the list."""
    return synchronize(
        grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor, process_set)
    )


# -- sparse ----------------------------------------------------------------


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set) -> Handle:
    """Starts a Sum or Average of a sparse COO tensor: every rank's indices
    and values are allgathered (their counts may differ). The Handle's result
    (synchronize(handle), or handle()) is an uncoalesced sparse tensor."""
    # Generated names only on the global set (the counter must move alike on
    # every rank; other sets' collectives are not matched by name).
    glob = _is_global(process_set)
    base = _name("sparse_allreduce", name) if glob else None
    try:
        _check_process_set(process_set)
        if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
            raise ValueError("sparse_allreduce_async takes a sparse COO tensor")
        op = _core_op(op if op is not None else Average)
        if op not in (Sum, Average):
            raise ValueError("sparse_allreduce_async supports Sum and Average only")
        t = tensor.detach()
        indices = t._indices().transpose(0, 1).contiguous()  # one row per non-zero
        values = t._values().contiguous()
    except Exception as error:
        _report_failed(
            error,
            "allgather",
            [f"allgather.{base}.indices", f"allgather.{base}.values"] if glob else [],
            process_set,
            calls=2,
        )
        raise
    names = [f"allgather.{base}.indices", f"allgather.{base}.values"] if glob else []
    hi, hv = _start_each(
        [(indices, "indices"), (values, "values")],
        names,
        process_set,
        "allgather",
        lambda i, item: allgather_async(item[0], name=base and f"{base}.{item[1]}", process_set=process_set),
    )
    n = size() if glob else process_set.size()

    def finish(results):
        all_indices, all_values = results
        if op == Average:
            all_values = all_values / n
        return torch.sparse_coo_tensor(
            all_indices.transpose(0, 1), all_values, t.size(), device=t.device, check_invariants=False
        )

    return Handle([hi, hv], finish)


# --------------------------------------------------------------------------
# allgather


def _allgather_start(tensor, name, process_set, what: str) -> Handle:
    glob = _is_global(process_set)
    full = _name("allgather", name) if glob else None
    label = None if glob else _set_label("allgather", name)
    try:
        _check_process_set(process_set)
        t = _check_tensor(tensor, what)
        wire = _move_wire(t)
        comm = None if glob else process_set._communicator()
    except Exception as error:
        _report_failed(error, "allgather", [full], process_set)
        raise
    if glob:
        h = _enqueue(lambda: _core._allgather(wire, None, True, full))
    else:
        h = _enqueue(lambda: comm.allgather(wire, None, True, label))

    def finish_rows(results):
        out = _as_torch(results[0])
        total_rows = out.shape[0]
        if t.dim() == 0:
            return _from_move_wire(out, t.reshape(1), total_rows)
        return _from_move_wire(out, t, total_rows)

    return Handle([h], finish_rows)


def allgather_async(tensor, name=None, process_set=global_process_set) -> Handle:
    """Starts an allgather: every rank's `tensor` concatenated along dim 0 in
    rank order (first dimensions may differ). A 0-dim tensor counts as one row."""
    if process_set is global_process_set:
        handle = _direct_allgather(tensor, name)
        if handle is not None:
            return handle
    return _allgather_start(tensor, name, process_set, "allgather_async")


def _direct_allgather(tensor, name):
    """allgather_async of a dense contiguous CPU tensor of a core dtype with
    at least one dimension on the global set: to the engine by address, the
    output (torch.empty) made once the row counts are known; None for
    anything else."""
    code = _direct_code(tensor)
    if code is None or not tensor.dim():
        return None
    tail, dtype = tuple(tensor.shape[1:]), tensor.dtype
    try:
        return _allgather_async_raw(
            tensor,
            tensor.data_ptr(),
            tensor.shape,
            code,
            f"allgather.{name}" if name else _name("allgather", name),
            lambda rows: torch.empty((rows,) + tail, dtype=dtype),
        )
    except ringcc.NotInitializedError:
        return None
    except (ringcc.PeerFailureError, ringcc.InternalError) as error:
        raise _internal_error(error) from None


class HorovodAllgather(torch.autograd.Function):
    """allgather with a gradient: as in Horovod, the incoming gradient is
    averaged over the ranks and this rank's rows are kept."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = int(tensor.shape[0]) if tensor.dim() else 1
        ctx.scalar = tensor.dim() == 0
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        ps = ctx.process_set
        grad_reduced = allreduce(grad_output, op=Average, process_set=ps)
        dims = allgather(torch.tensor([ctx.dim], dtype=torch.int64), process_set=ps)
        r = rank() if _is_global(ps) else ps.rank()
        offset = int(dims[:r].sum()) if r else 0
        grad = grad_reduced.narrow(0, offset, ctx.dim)
        if ctx.scalar:
            grad = grad.reshape(())
        return grad, None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's `tensor` along dim 0; returns a new tensor.
    Differentiable."""
    if _needs_grad(tensor):
        return HorovodAllgather.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set) -> Handle:
    """Starts an allgather of each tensor of a list; the result is a list."""
    tensors, base, names = _group_names("allgather", name, process_set, tensors)
    try:
        _check_process_set(process_set)
        for t in tensors:
            _check_tensor(t, "grouped_allgather_async")
    except Exception as error:
        # Every collective of the group fails on every rank before any runs.
        _report_failed(error, "allgather", names, process_set, calls=len(tensors))
        raise
    handles = _start_each(
        tensors,
        names,
        process_set,
        "allgather",
        lambda i, t: _allgather_start(t, base and f"{base}.{i}", process_set, "grouped_allgather_async"),
    )
    return Handle(handles, lambda results: list(results))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers each tensor of a list; returns a list of new tensors.
    Differentiable (tensor by tensor: each is done before the next starts)."""
    if isinstance(tensors, (list, tuple)) and _needs_grad(*tensors):
        tensors, base, _ = _group_names("allgather", name, process_set, tensors)
        return [HorovodAllgather.apply(t, base and f"{base}.{i}", process_set) for i, t in enumerate(tensors)]
    return synchronize(grouped_allgather_async(tensors, name, process_set))


# --------------------------------------------------------------------------
# broadcast


def _broadcast_start(tensor, root_rank, name, process_set, inplace: bool, what: str) -> Handle:
    glob = _is_global(process_set)
    full = _name("broadcast", name) if glob else None
    label = None if glob else _set_label("broadcast", name)
    try:
        _check_process_set(process_set)
        t = _check_tensor(tensor, what)
        root = int(root_rank)
        wire = _move_wire(t)
        if inplace:
            direct = _shares_memory(wire, t)
            out = None
        else:
            direct = False
            out = torch.empty_like(wire)
        if not glob:
            comm = process_set._communicator()
            set_root = _set_rank(process_set, root, what)
    except Exception as error:
        _report_failed(error, "broadcast", [full], process_set)
        raise
    if glob:
        h = _enqueue(lambda: _core._broadcast(wire, out, root, inplace, True, full))
    else:
        h = _enqueue(lambda: comm.broadcast(wire, out, set_root, inplace, True, label))
    if inplace:

        def finish(_):
            if not direct:
                with torch.no_grad():
                    tensor.copy_(_from_move_wire(wire, t))
            return tensor
    else:

        def finish(_):
            return _from_move_wire(out, t)

    return Handle([h], finish)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set) -> Handle:
    """Starts a broadcast of root_rank's `tensor` (a global rank, also for
    process sets); the Handle's result is a new tensor."""
    if process_set is global_process_set:
        handle = _direct_broadcast(tensor, root_rank, name, False)
        if handle is not None:
            return handle
    return _broadcast_start(tensor, root_rank, name, process_set, False, "broadcast_async")


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set) -> Handle:
    """Starts an in-place broadcast into `tensor`."""
    if process_set is global_process_set:
        handle = _direct_broadcast(tensor, root_rank, name, True)
        if handle is not None:
            return handle
    return _broadcast_start(tensor, root_rank, name, process_set, True, "broadcast_async_")


def _direct_broadcast(tensor, root_rank, name, inplace: bool):
    """broadcast_async(_) of a dense contiguous CPU tensor of a core dtype
    from an int root on the global set: to the engine by address (out of
    place into a row of OUTPUT_ROWS); None for anything else."""
    if type(root_rank) is not int or root_rank < 0:
        return None
    code = _direct_code(tensor)
    if code is None:
        return None
    full = f"broadcast.{name}" if name else _name("broadcast", name)
    try:
        if inplace:
            return _broadcast_async_raw(tensor, tensor.data_ptr(), tensor.shape, code, root_rank, full)
        return _broadcast_async_raw(OUTPUT_ROWS, 0, tensor.shape, code, root_rank, full, tensor, tensor.data_ptr())
    except ringcc.NotInitializedError:
        return None
    except (ringcc.PeerFailureError, ringcc.InternalError) as error:
        raise _internal_error(error) from None


class HorovodBroadcast(torch.autograd.Function):
    """broadcast with a gradient: as in Horovod, the gradient is averaged over
    the ranks and kept on the root only (zeros elsewhere)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if rank() != int(ctx.root_rank):
            grad_reduced = grad_reduced * 0
        return grad_reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's `tensor` on every rank (a new tensor). Differentiable."""
    if _needs_grad(tensor):
        return HorovodBroadcast.apply(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites `tensor` with root_rank's; returns `tensor`."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# --------------------------------------------------------------------------
# alltoall


def _splits_list(splits) -> list[int] | None:
    if splits is None:
        return None
    if isinstance(splits, torch.Tensor):
        return [int(s) for s in splits.reshape(-1).tolist()]
    return [int(s) for s in splits]


def _alltoall_start(tensor, splits, name, process_set, what: str) -> Handle:
    """The Handle's result is always (output, received_splits as int32 tensor)."""
    glob = _is_global(process_set)
    full = _name("alltoall", name) if glob else None
    label = None if glob else _set_label("alltoall", name)
    try:
        _check_process_set(process_set)
        t = _check_tensor(tensor, what)
        wire = _move_wire(t if t.dim() else t.reshape(1))
        split_list = _splits_list(splits)
        comm = None if glob else process_set._communicator()
    except Exception as error:
        _report_failed(error, "alltoall", [full], process_set)
        raise
    if glob:
        h = _enqueue(lambda: _core._alltoall(wire, split_list, None, True, full))
    else:
        h = _enqueue(lambda: comm.alltoall(wire, split_list, None, True, label))
    split_dtype = splits.dtype if isinstance(splits, torch.Tensor) else torch.int32

    def finish(results):
        output, received = results[0]
        out = _as_torch(output)
        like = t if t.dim() else t.reshape(1)
        return (_from_move_wire(out, like, int(out.shape[0])), torch.tensor(list(received), dtype=split_dtype))

    return Handle([h], finish)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set) -> Handle:
    """Starts an alltoall: rank r sends splits[j] rows (dim 0) of `tensor` to
    rank j (equal splits when None). The result is the received rows in rank
    order, and with `splits` given, (output, received_splits)."""
    inner = _alltoall_start(tensor, splits, name, process_set, "alltoall_async")
    if splits is not None:
        return inner
    return Handle([inner], lambda results: results[0][0])


class HorovodAlltoall(torch.autograd.Function):
    """alltoall with a gradient: the gradient goes back the way the rows came."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(_alltoall_start(tensor, splits, name, process_set, "alltoall"))
        ctx.process_set = process_set
        ctx.received = received
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = synchronize(_alltoall_start(grad_output, ctx.received, None, ctx.process_set, "alltoall (backward)"))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Synchronous alltoall (see alltoall_async). Differentiable."""
    if _needs_grad(tensor):
        return HorovodAlltoall.apply(tensor, splits, name, process_set)
    return synchronize(alltoall_async(tensor, splits, name, process_set))


# --------------------------------------------------------------------------
# reducescatter


def _block_rows(rows: int, n: int, r: int) -> int:
    return rows // n + (1 if r < rows % n else 0)


def _reducescatter_start(tensor, name, op, process_set, prescale_factor, postscale_factor, what: str) -> Handle:
    glob = _is_global(process_set)
    full = _name("reducescatter", name) if glob else None
    label = None if glob else _set_label("reducescatter", name)
    try:
        _check_process_set(process_set)
        t = _check_tensor(tensor, what)
        if t.dim() == 0:
            # As in Horovod, whose coordinator refuses a rank-zero tensor.
            raise ValueError(
                f"{what}: a 0-dim tensor cannot be reduce-scattered (its first "
                "dimension is split over the ranks); give it at least one dimension"
            )
        op = _core_op(op)
        wire = _reduce_wire(t, op, what)
        if glob:
            n, r = ringcc.size(), ringcc.rank()
        else:
            comm = process_set._communicator()
            n, r = process_set.size(), process_set.rank()
        rows = _block_rows(int(wire.shape[0]), n, r)
        out = torch.empty((rows,) + tuple(wire.shape[1:]), dtype=wire.dtype, device=wire.device)
        pre, post = float(prescale_factor), float(postscale_factor)
    except Exception as error:
        _report_failed(error, "reduce_scatter", [full], process_set)
        raise
    if glob:
        h = _enqueue(lambda: _core._reduce_scatter(wire, out, op, pre, post, True, full))
    else:
        h = _enqueue(lambda: comm.reduce_scatter(wire, out, op, pre, post, True, label))
    like_shape = (rows,) + tuple(t.shape[1:])

    def finish(_):
        res = out
        if t.dtype.is_complex:
            res = torch.view_as_complex(res)
        elif res.dtype != t.dtype:
            res = res.to(t.dtype)
        res = res.reshape(like_shape)
        if t.device.type != "cpu":
            res = res.to(t.device)
        return res

    return Handle([h], finish)


def reducescatter_async(
    tensor, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0
) -> Handle:
    """Starts a reduce-scatter: the reduction over the ranks, of which rank r
    keeps its block of dim 0 (blocks as even as possible, lower ranks take
    one more row). A 0-dim tensor is refused, as in Horovod."""
    return _reducescatter_start(tensor, name, op, process_set, prescale_factor, postscale_factor, "reducescatter_async")


class HorovodReducescatter(torch.autograd.Function):
    """reducescatter with Horovod's gradient: the incoming gradient, times
    the set's size for Sum (not for Average) and times the scale factors,
    allgathered."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.op = op
        ctx.process_set = process_set
        ctx.scale = float(prescale_factor) * float(postscale_factor)
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.op not in (Sum, Average):
            raise NotImplementedError("the gradient of reducescatter is defined for Sum and Average")
        scale = ctx.scale
        if ctx.op == Sum:
            scale *= size() if _is_global(ctx.process_set) else ctx.process_set.size()
        if scale != 1.0:
            grad_output = grad_output * scale
        return allgather(grad_output, process_set=ctx.process_set), None, None, None, None, None


def reducescatter(
    tensor,
    name=None,
    compression=Compression.none,
    op=Average,
    process_set=global_process_set,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """Synchronous reduce-scatter (see reducescatter_async). Differentiable."""
    try:
        compressed, ctx = compression.compress(tensor)
    except Exception as error:
        _fail_unstarted(error, "reducescatter", name, process_set, "reduce_scatter")
        raise
    if _needs_grad(compressed):
        result = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor, postscale_factor)
    else:
        result = synchronize(reducescatter_async(compressed, name, op, process_set, prescale_factor, postscale_factor))
    return compression.decompress(result, ctx)


def grouped_reducescatter_async(
    tensors, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0
) -> Handle:
    """Starts a reduce-scatter of each tensor of a list; the result is a list."""
    tensors, base, names = _group_names("reducescatter", name, process_set, tensors)
    try:
        _check_process_set(process_set)
        for t in tensors:
            if _check_tensor(t, "grouped_reducescatter_async").dim() == 0:
                # Refused, as in Horovod: the whole group fails.
                raise ValueError(
                    "grouped_reducescatter_async: a 0-dim tensor cannot be "
                    "reduce-scattered; give it at least one dimension"
                )
    except Exception as error:
        # Every collective of the group fails on every rank before any runs.
        _report_failed(error, "reduce_scatter", names, process_set, calls=len(tensors))
        raise
    handles = _start_each(
        tensors,
        names,
        process_set,
        "reduce_scatter",
        lambda i, t: _reducescatter_start(
            t, base and f"{base}.{i}", op, process_set, prescale_factor, postscale_factor, "grouped_reducescatter_async"
        ),
    )
    return Handle(handles, lambda results: list(results))


def grouped_reducescatter(
    tensors,
    name=None,
    compression=Compression.none,
    op=Average,
    process_set=global_process_set,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """Reduce-scatters each tensor of a list; returns a list. Differentiable
    (tensor by tensor: each is done before the next starts)."""
    try:
        tensors = list(tensors)
        compressed, ctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    except Exception as error:
        _fail_group_unstarted(error, "reducescatter", "grouped_reducescatter", name, process_set, tensors)
        raise
    if _needs_grad(*compressed):
        compressed, base, _ = _group_names("reducescatter", name, process_set, compressed)
        results = [
            HorovodReducescatter.apply(t, base and f"{base}.{i}", op, process_set, prescale_factor, postscale_factor)
            for i, t in enumerate(compressed)
        ]
    else:
        results = synchronize(
            grouped_reducescatter_async(list(compressed), name, op, process_set, prescale_factor, postscale_factor)
        )
    return [compression.decompress(r, c) for r, c in zip(results, ctxs)]


# --------------------------------------------------------------------------
# barrier and join


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has called barrier(). On the global
    set this is a named engine collective (issued in order like the others)."""
    glob = _is_global(process_set)
    full = _name("barrier", None) if glob else None
    try:
        _check_process_set(process_set)
        comm = None if glob else process_set._communicator()
    except Exception as error:
        _report_failed(error, "allreduce" if glob else "barrier", [full], process_set)
        raise
    if glob:
        flag = np.zeros(1, dtype=np.int32)
        h = _enqueue(lambda: _core._allreduce(flag, None, Sum, 1.0, 1.0, True, True, full))
    else:
        h = _enqueue(lambda: comm.barrier(True))
    Handle([h]).wait()


# The name of the allreduce that realigns the counters of generated names
# after a join (every name the Horovod API gives starts with its op's kind,
# so none can be this one).
_JOIN_NAMES_REALIGNED = "join.generated_names"


def join(device=-1) -> int:
    """Declares that this rank has no more data, and blocks until every rank
    has joined. Meanwhile this rank takes part in the others' allreduces on
    the global set with zeros (Sum is the sum over the ranks that have not
    joined, Average that sum divided by the size of the job), and their
    other collectives on the global set (allgather, broadcast, alltoall,
    reducescatter) raise a HorovodInternalError (a MismatchError) naming the
    joined ranks, as in Horovod. Returns the last rank to join (the same on
    every rank).

    The unnamed calls the others made while this rank was joined took
    generated names this rank did not: on return every rank's counter of
    generated names is the highest of them, so the unnamed calls that
    follow match again.

    `device` is accepted and ignored: a joined rank stands in for host
    tensors only (the others' collectives of CUDA tensors fail with
    MismatchError saying so). Process sets other than the global one are
    not covered."""
    _require_init()
    try:
        last = int(ringcc.join())
        counter = np.array([next(_names)], dtype=np.int64)
        Handle([_core._allreduce(counter, None, Max, 1.0, 1.0, True, True, _JOIN_NAMES_REALIGNED)]).wait()
    except ringcc.RingccError as error:
        raise _internal_error(error) from None
    _reset_names(int(counter[0]))
    return last


__all__ = [
    # lifetime and topology
    "init",
    "shutdown",
    "is_initialized",
    "rank",
    "size",
    "local_rank",
    "local_size",
    "cross_rank",
    "cross_size",
    "is_homogeneous",
    # build queries
    "mpi_built",
    "mpi_enabled",
    "mpi_threads_supported",
    "gloo_built",
    "gloo_enabled",
    "nccl_built",
    "ddl_built",
    "ccl_built",
    "cuda_built",
    "rocm_built",
    # ops and compression
    "Sum",
    "Average",
    "Min",
    "Max",
    "Product",
    "Adasum",
    "Compression",
    "Compressor",
    "NoneCompressor",
    "FP16Compressor",
    "BF16Compressor",
    "handle_average_backwards_compatibility",
    # collectives
    "Handle",
    "poll",
    "synchronize",
    "allreduce",
    "allreduce_",
    "allreduce_async",
    "allreduce_async_",
    "grouped_allreduce",
    "grouped_allreduce_",
    "grouped_allreduce_async",
    "grouped_allreduce_async_",
    "sparse_allreduce_async",
    "allgather",
    "allgather_async",
    "grouped_allgather",
    "grouped_allgather_async",
    "broadcast",
    "broadcast_",
    "broadcast_async",
    "broadcast_async_",
    "alltoall",
    "alltoall_async",
    "reducescatter",
    "reducescatter_async",
    "grouped_reducescatter",
    "grouped_reducescatter_async",
    "barrier",
    "join",
    "HorovodAllreduce",
    "HorovodGroupedAllreduce",
    "HorovodAllgather",
    "HorovodBroadcast",
    "HorovodAlltoall",
    "HorovodReducescatter",
    # process sets
    "ProcessSet",
    "global_process_set",
    "add_process_set",
    "remove_process_set",
    # timeline and errors
    "start_timeline",
    "stop_timeline",
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
    "NotInitializedError",
]
