"""Runs ringcc collectives inside MXNet's dependency engine.

MXNet executes NDArray operations asynchronously: a Python call only pushes
an operation onto the engine, which runs it once the operations it depends
on have written their outputs. A collective on an NDArray must take part in
that order, or it would read a gradient that backward() has not produced yet,
or a later operation would read the result before the collective wrote it.

push() hands MXNet an asynchronous operation (MXEnginePushAsyncND) that
reads the `const` arrays and writes the `mutable` ones. When the engine runs
it (on one of its worker threads, once those arrays are ready) it starts the
ringcc collectives on zero-copy NumPy views of the arrays' memory
(MXNDArrayGetData) as *named* collectives: ringcc's background engine matches
them across ranks by name, whatever order the MXNet engines of the ranks run
them in, and fuses those that are ready together. A completion thread waits
for them and then tells MXNet that the operation has finished, which releases
the operations waiting on its outputs. The Python thread that pushed never
blocks.

A collective that fails does so asynchronously: the operation completes in
MXNet's engine with the error (a C++ dmlc::Error, as MXNet's own operators
fail), which MXNet keeps on the operation's outputs and raises, as the MXNet
class of the ringcc error (errors.py), at the first wait on one of them
(wait_to_read(), asnumpy(), a later operation's result, mx.nd.waitall());
operations that read a failed output fail with the same error. Nothing is
kept for later calls: the error belongs to that operation's outputs only.
It is also logged (logger "ringcc.mxnet", stderr) when it happens.

start_now() runs the collectives of process sets other than the global one:
those run on the set's own communicator in the order each rank issues them,
so they start on the caller's thread, in program order, once their arrays
are ready; an engine operation on the arrays then completes when they have
finished (with their error, as above).

RINGCC_MXNET_ASYNC=0 runs every collective synchronously instead: the caller
waits for the arrays (wait_to_read / wait_to_write), runs the collective and
returns when it has finished (simpler to debug, no overlap). MXNet's
NaiveEngine (MXNET_ENGINE_TYPE=NaiveEngine) runs operations inline; there the
operation waits for its collectives before it returns.
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import logging
import os
import queue
import threading
from collections.abc import Callable, Sequence

import mxnet as mx
import numpy as np
from mxnet.base import check_call

import ringcc
from ringcc.mxnet import errors

_log = logging.getLogger("ringcc.mxnet")

# ---------------------------------------------------------------------------
# MXNet's C API (include/mxnet/c_api.h, include/mxnet/engine.h of MXNet 1.9)

# typedef void (*EngineAsyncFunc)(void* rctx, void* on_complete, void* param);
_ASYNC_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
# CallbackOnComplete::callback_: void (*)(Engine*, void* param, const dmlc::Error*)
_COMPLETE_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


class _CallbackOnComplete(ctypes.Structure):
    """mxnet::engine::CallbackOnComplete: three pointers, in this order."""

    _fields_ = [("callback", ctypes.c_void_p), ("engine", ctypes.c_void_p), ("param", ctypes.c_void_p)]


class _Context(ctypes.Structure):
    """mxnet::Context: {DeviceType dev_type; int32_t dev_id;} (kCPU = 1)."""

    _fields_ = [("dev_type", ctypes.c_int), ("dev_id", ctypes.c_int)]


# A private handle on libmxnet, so that setting argtypes does not touch MXNet's own.
_LIB = ctypes.CDLL(mx.base._LIB._name)
_PUSH = _LIB.MXEnginePushAsyncND
_PUSH.restype = ctypes.c_int
_PUSH.argtypes = [
    _ASYNC_FUNC,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.c_bool,
]
_GET_DATA = _LIB.MXNDArrayGetData
_GET_DATA.restype = ctypes.c_int
_GET_DATA.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
_WAIT_TO_READ = _LIB.MXNDArrayWaitToRead
_WAIT_TO_READ.argtypes = [ctypes.c_void_p]
_WAIT_TO_WRITE = _LIB.MXNDArrayWaitToWrite
_WAIT_TO_WRITE.argtypes = [ctypes.c_void_p]

_CPU = _Context(1, 0)

_CPU_TYPES = ("cpu", "cpu_pinned", "cpu_shared")


def _runtime_error_functions():
    """libstdc++'s std::runtime_error constructor (from a C string) and
    destructor, or None when they cannot be found.

    An operation completes with an error by passing MXNet's engine a
    `const dmlc::Error*`; the engine copies it (std::make_exception_ptr) as a
    dmlc::Error, which adds nothing to std::runtime_error: the copy reads only
    the message. A std::runtime_error made by libstdc++ itself (MXNet's
    wheels link the same libstdc++.so.6) is therefore what it needs."""
    try:
        std = ctypes.CDLL("libstdc++.so.6")
        construct = std._ZNSt13runtime_errorC1EPKc
        destroy = std._ZNSt13runtime_errorD1Ev
    except (OSError, AttributeError):  # pragma: no cover - another C++ library
        return None
    construct.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    construct.restype = None
    destroy.argtypes = [ctypes.c_void_p]
    destroy.restype = None
    return construct, destroy


_RUNTIME_ERROR = _runtime_error_functions()
_RUNTIME_ERROR_BYTES = 64  # sizeof(std::runtime_error) is 16 on 64-bit Linux

# ---------------------------------------------------------------------------
# dtypes

_BFLOAT16_MX = np.dtype([("bfloat16", np.uint16)])  # how MXNet 1.9 spells bfloat16
_SUPPORTED = {np.dtype(n) for n in ("float16", "float32", "float64", "int8", "uint8", "int32", "int64")}


def numpy_dtype(array) -> np.dtype:
    """The NumPy dtype whose view ringcc reduces for an NDArray (raises for others)."""
    dt = np.dtype(array.dtype)
    if dt in _SUPPORTED:
        return dt
    if dt == _BFLOAT16_MX:
        try:
            import ml_dtypes
        except ImportError:
            raise ringcc.UnsupportedTypeError(
                "bfloat16 NDArrays need the ml_dtypes package (pip install ml_dtypes)"
            ) from None
        return np.dtype(ml_dtypes.bfloat16)
    raise ringcc.UnsupportedTypeError(
        f"ringcc.mxnet does not support NDArrays of dtype {dt}; supported: float16, bfloat16, "
        "float32, float64, int8, uint8, int32, int64"
    )


def check_array(array, what: str = "tensor") -> None:
    """Raises for what ringcc cannot run on: not an NDArray, not in host
    memory, sparse, unsupported dtype."""
    if not isinstance(array, mx.nd.NDArray):
        raise ringcc.UnsupportedTypeError(f"{what} must be an mxnet NDArray, got {type(array).__name__}")
    if not on_host(array):
        raise ringcc.InvalidArgumentError(
            f"{what} is on {array.context}; ringcc.mxnet runs collectives of CPU arrays only "
            "(its GPU arrays are not supported): copy it with .copyto(mx.cpu()) first"
        )
    if array.stype != "default":
        raise ringcc.UnsupportedTypeError(
            f"{what} is a sparse NDArray ({array.stype}); ringcc.mxnet reduces dense arrays "
            "only: convert with .tostype('default')"
        )
    numpy_dtype(array)


def host_view(array) -> np.ndarray:
    """A NumPy array over the NDArray's own memory (no copy, no wait: the
    caller knows the array is ready, e.g. inside an engine operation)."""
    dt = numpy_dtype(array)
    shape = tuple(array.shape)
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return np.empty(shape, dtype=dt)
    ptr = ctypes.c_void_p()
    check_call(_GET_DATA(array.handle, ctypes.byref(ptr)))
    if not ptr.value:
        raise ringcc.InternalError("MXNDArrayGetData returned no memory for a non-empty NDArray")
    raw = (ctypes.c_uint8 * (count * dt.itemsize)).from_address(ptr.value)
    return np.frombuffer(raw, dtype=dt).reshape(shape)


def on_host(array) -> bool:
    return array.context.device_type in _CPU_TYPES


# ---------------------------------------------------------------------------
# Asynchronous errors

# Errors that could not travel with their operation through MXNet's engine
# (no C++ runtime to make a dmlc::Error, or an internal error of an
# operation): check_errors() raises them.
_errors: list[BaseException] = []
_errors_lock = threading.Lock()


def _record(op: _Op, error: BaseException) -> None:
    """Keeps the first error of an operation: it completes with it."""
    if op.error is None:
        op.error = error
    _log.warning("ringcc.mxnet: the operation %r failed: %s: %s", op.label, type(error).__name__, error)


def _keep_undelivered(error: BaseException) -> None:
    with _errors_lock:
        _errors.append(error)


def check_errors() -> None:
    """Raises the first error of an asynchronous ringcc.mxnet operation that
    MXNet's engine could not carry to the operation's outputs (and forgets
    the others). Errors that it carries (all of them where MXNet runs on
    libstdc++, as its wheels do) are raised at the first wait on a result of
    the failed operation instead."""
    with _errors_lock:
        if not _errors:
            return
        first = _errors[0]
        _errors.clear()
    raise errors.as_mxnet_error(first)


# ---------------------------------------------------------------------------
# Operations


class _Op:
    """One operation pushed to MXNet's engine.

    start(views, handles) runs on an engine worker thread with NumPy views
    of `arrays` (same order) and appends to `handles` the ringcc handles to
    wait for (those appended before an error are still waited for)."""

    __slots__ = ("label", "arrays", "start", "done", "handles", "error")
    # done: (callback, engine, param) of the engine's CallbackOnComplete until fired

    def __init__(self, label: str, arrays: Sequence, start: Callable[[list[np.ndarray], list], None] | None):
        self.label = label
        self.arrays = list(arrays)  # keeps the NDArrays alive until the operation completes
        self.start = start  # None: the collectives started already (start_now), in handles
        self.done = None  # (callback, engine, param) of the engine's CallbackOnComplete
        self.handles: list = []
        self.error: BaseException | None = None  # the first error: the operation completes with it


_ops = {}  # id -> _Op, while MXNet holds the operation
_ids = itertools.count(1)
_ops_lock = threading.Lock()


def _fire(op: _Op) -> None:
    """Tells MXNet's engine that the operation has completed (once), with
    its error if it failed."""
    if op.done is None:
        return
    callback, engine, param = op.done
    op.done = None
    op.arrays = []
    if op.error is None:
        _COMPLETE_FUNC(callback)(engine, param, None)
        return
    if _RUNTIME_ERROR is None:  # pragma: no cover - MXNet on another C++ runtime
        _keep_undelivered(op.error)
        _COMPLETE_FUNC(callback)(engine, param, None)
        return
    construct, destroy = _RUNTIME_ERROR
    error = ctypes.create_string_buffer(_RUNTIME_ERROR_BYTES)
    construct(error, errors.engine_message(op.error).encode("utf-8", "replace"))
    try:
        # The engine copies the error before this returns.
        _COMPLETE_FUNC(callback)(engine, param, ctypes.addressof(error))
    finally:
        destroy(error)


@_ASYNC_FUNC
def _run(_rctx, on_complete, param):  # called by an MXNet engine thread
    cb = _CallbackOnComplete.from_address(on_complete)
    done = (cb.callback, cb.engine, cb.param)  # a copy: *on_complete lives on the caller's stack
    op = None
    try:
        with _ops_lock:
            op = _ops.pop(param)
        op.done = done
        if op.start is not None:
            try:
                op.start([host_view(a) for a in op.arrays], op.handles)
            except BaseException as error:  # noqa: BLE001 - reported, and the operation must complete
                _record(op, error)
        if _inline_engine():
            _wait_all(op)
            error, op.error = op.error, None
            _fire(op)
            op.error = error  # raised by _push_op, at the call
        elif not op.handles:
            _fire(op)
        else:
            _completer.submit(op)
    except BaseException as error:  # noqa: BLE001 - never leave MXNet waiting
        _log.error("ringcc.mxnet: internal error in an engine operation: %s: %s", type(error).__name__, error)
        _keep_undelivered(error)
        if op is None or op.done is not None:
            if op is not None:
                op.done = None
            _COMPLETE_FUNC(done[0])(done[1], done[2], None)


def _wait_all(op: _Op) -> None:
    for handle in op.handles:
        try:
            handle.wait()
        except BaseException as error:  # noqa: BLE001
            _record(op, error)


def _inline_engine() -> bool:
    return os.environ.get("MXNET_ENGINE_TYPE", "") == "NaiveEngine"


class _Completer:
    """A thread that waits for the ringcc handles of started operations and
    completes each operation in MXNet's engine as soon as all of its
    collectives have finished (in any order: named collectives may finish
    out of the order they started in)."""

    POLL_S = 0.002

    def __init__(self):
        self._queue: queue.SimpleQueue[_Op | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, op: _Op) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name="ringcc-mxnet-completer", daemon=True)
                    self._thread.start()
        self._queue.put(op)

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=10)
            self._thread = None

    @staticmethod
    def _finished(op: _Op) -> bool:
        """Collects the results of the finished handles; True once all are."""
        remaining = []
        for handle in op.handles:
            if handle.done():
                try:
                    handle.wait()
                except BaseException as error:  # noqa: BLE001
                    _record(op, error)
            else:
                remaining.append(handle)
        op.handles = remaining
        return not remaining

    def _loop(self) -> None:
        pending: list[_Op] = []
        stopping = False
        while True:
            try:
                # Take what was started, blocking only when nothing is pending.
                try:
                    while True:
                        item = self._queue.get(block=not pending and not stopping)
                        if item is None:
                            stopping = True
                        else:
                            pending.append(item)
                        if not pending and stopping:
                            return
                except queue.Empty:
                    pass
                still = []
                for op in pending:
                    if self._finished(op):
                        _fire(op)
                    else:
                        still.append(op)
                pending = still
                if stopping and not pending:
                    return
                if pending:
                    # Sleep in ringcc (GIL released) until the oldest one finishes, or briefly.
                    try:
                        pending[0].handles[0].wait(self.POLL_S)
                    except BaseException:  # noqa: BLE001 - a timeout; _finished reports errors
                        pass
            except BaseException as error:  # noqa: BLE001 - the thread must go on
                _log.error("ringcc.mxnet: internal error in the completion thread: %s: %s", type(error).__name__, error)


_completer = _Completer()


def synchronous() -> bool:
    return os.environ.get("RINGCC_MXNET_ASYNC", "1").strip().lower() in ("0", "false", "no", "off")


def _dedupe(arrays) -> list:
    seen, out = set(), []
    for a in arrays:
        key = a.handle.value
        if key not in seen:
            seen.add(key)
            out.append(a)
    return out


def _vars(const: Sequence, mutable: Sequence) -> tuple[list, list]:
    """The arrays an operation reads and writes, each once (written wins)."""
    mutable = _dedupe(mutable)
    writes = {a.handle.value for a in mutable}
    return [a for a in _dedupe(const) if a.handle.value not in writes], mutable


def wait_ready(const: Sequence, mutable: Sequence) -> None:
    """Blocks until `const` can be read and `mutable` written; raises the
    error an earlier operation left on one of them."""
    for a in const:
        check_call(_WAIT_TO_READ(a.handle))
    for a in mutable:
        check_call(_WAIT_TO_WRITE(a.handle))


def _finish_now(handles: list, first: BaseException | None) -> None:
    """Waits for started collectives; raises the first error (`first` first)."""
    for handle in handles:
        try:
            handle.wait()
        except BaseException as error:  # noqa: BLE001
            first = first or error
    if first is not None:
        raise errors.as_mxnet_error(first)


def push(
    label: str,
    const: Sequence,
    mutable: Sequence,
    arrays: Sequence,
    start: Callable[[list[np.ndarray], list], None],
    priority: int = 0,
) -> None:
    """Runs start(views of `arrays`, handles) once `const` are ready to read and
    `mutable` to write (every array in `arrays` must be in one of them;
    all on the host). Returns at once; later MXNet operations on `mutable`
    wait for the collectives that start() began, and the first wait on one
    of them raises their error."""
    const, mutable = _vars(const, mutable)
    if synchronous():
        wait_ready(const, mutable)
        handles: list = []
        first = None
        try:
            start([host_view(a) for a in arrays], handles)
        except BaseException as error:  # noqa: BLE001 - raised once the started ones finish
            first = error
        _finish_now(handles, first)
        return
    _push_op(_Op(label, arrays, start), const, mutable, priority)


def start_now(
    label: str,
    const: Sequence,
    mutable: Sequence,
    arrays: Sequence,
    start: Callable[[list[np.ndarray], list], None],
    priority: int = 0,
) -> None:
    """Runs start(views of `arrays`, handles) on this thread at once
    (collectives that must start in program order) and returns; later MXNet
    operations on `mutable` wait for those collectives, and the first wait
    on one of them raises their error. The caller has waited for the
    arrays (wait_ready()) first."""
    const, mutable = _vars(const, mutable)
    op = _Op(label, arrays, None)
    try:
        start([host_view(a) for a in arrays], op.handles)
    except BaseException as error:  # noqa: BLE001 - raised once the started ones finish
        _finish_now(op.handles, error)
    if synchronous():
        _finish_now(op.handles, None)
        return
    _push_op(op, const, mutable, priority)


def _push_op(op: _Op, const: list, mutable: list, priority: int) -> None:
    c_const = (ctypes.c_void_p * max(len(const), 1))(*[a.handle.value for a in const])
    c_mut = (ctypes.c_void_p * max(len(mutable), 1))(*[a.handle.value for a in mutable])
    op_id = next(_ids)
    with _ops_lock:
        _ops[op_id] = op
    try:
        check_call(
            _PUSH(
                _run,
                ctypes.c_void_p(op_id),
                None,
                ctypes.addressof(_CPU),
                c_const,
                len(const),
                c_mut,
                len(mutable),
                None,
                int(priority),
                ("ringcc:" + op.label).encode(),
                False,
            )
        )
    except BaseException:
        with _ops_lock:
            _ops.pop(op_id, None)
        raise
    if _inline_engine() and op.error is not None:
        # NaiveEngine ran the operation inside the push and drops the error
        # an operation completes with: raise it here, at the call.
        error, op.error = op.error, None
        raise errors.as_mxnet_error(error)


def wait_all() -> None:
    """Waits for every pending MXNet operation (ours included):
    `mx.nd.waitall()`, which raises the first error of an operation that no
    wait raised yet (a ringcc error as its MXNet class); then check_errors()."""
    mx.nd.waitall()
    check_errors()


def _drain_at_exit() -> None:
    # Runs before ringcc's own exit handler (registered earlier): lets the
    # collectives still in MXNet's engine finish while ringcc is up.
    try:
        if ringcc.is_initialized():
            mx.nd.waitall()
    except Exception:  # noqa: BLE001 - the process is ending
        pass
    _completer.stop()
    with _errors_lock:
        pending = list(_errors)
        _errors.clear()
    for error in pending:
        _log.error("ringcc.mxnet: unreported asynchronous error: %s: %s", type(error).__name__, error)


atexit.register(_drain_at_exit)
