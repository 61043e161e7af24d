"""ringcc: collective communication (allreduce, allgather, broadcast, ...)
over shared memory and TCP, for NumPy arrays and anything exposing DLPack or
the buffer protocol. See docs/api.md for the whole API."""

import os as _os

from ringcc._log import get_logger as _get_logger

_get_logger()  # the "ringcc" logger: level from RINGCC_LOG_LEVEL, the core's line format

_EXPORTS = (
    "Handle",
    "InternalError",
    "InvalidArgumentError",
    "MismatchError",
    "NotInitializedError",
    "PeerFailureError",
    "RingccError",
    "TimeoutError",
    "UnsupportedTypeError",
    "build_info",
    "cross_rank",
    "cross_size",
    "is_initialized",
    "local_rank",
    "local_size",
    "poll",
    "rank",
    "shutdown",
    "size",
    "synchronize",
    "transport_name",
    "gpu_backend",
    "DeviceArray",
    "wait_policy",
)

try:
    from ringcc import _core
except ImportError as _error:  # a missing or broken build: say so when used, not at import

    class _MissingCore:
        def __init__(self, error):
            self._error = error

        def __getattr__(self, name):
            raise ImportError(
                f"ringcc's compiled core (ringcc._core) could not be loaded: {self._error}; "
                "reinstall ringcc (pip install .) for this Python"
            )

    _core = _MissingCore(_error)

    def __getattr__(name):
        if name in _EXPORTS:
            return getattr(_core, name)  # raises the ImportError above
        raise AttributeError(f"module 'ringcc' has no attribute {name!r}")

    __version__ = "unknown"
else:
    from ringcc import mpi_library as _mpi_library

    _mpi_library.register(_core)  # before anything asks the core about MPI
    globals().update({_name_: getattr(_core, _name_) for _name_ in _EXPORTS})
    __version__ = _core.build_info()["version"]


def init(comm=None, timeout=None):
    """Joins the job. Under ringrun, torchrun or a launcher that sets
    MASTER_ADDR, the job comes from the environment. Under mpirun, mpiexec or
    srun (MPI launchers) it comes from MPI: rank and size of MPI_COMM_WORLD,
    no MASTER_ADDR needed; ringcc initialises MPI unless the user (mpi4py)
    already did. `comm`: an mpi4py communicator (or its Fortran handle,
    comm.py2f()) whose ranks form the job instead of MPI_COMM_WORLD.
    In a worker of ringrun's elastic mode, the rank, size and store come
    from the elastic driver (ringcc/elastic/worker.py).

    `timeout` (seconds, or a datetime.timedelta): how long a collective
    waits for a live peer before it fails with TimeoutError (it sets
    RINGCC_COLLECTIVE_TIMEOUT_S for this process; default 10 minutes). A
    dead peer fails every rank at once whatever the bound; joining the job
    keeps its own bound (RINGCC_TIMEOUT_S, 60 s)."""
    if timeout is not None:
        _set_collective_timeout(timeout)
    _exit_on_sigterm()
    if comm is None:
        if _os.environ.get("RINGCC_ELASTIC_DRIVER") and not _core.is_initialized():
            from ringcc.elastic import worker as _elastic_worker

            return _elastic_worker.init(_core.init, _core)
        from ringcc import torchrun as _torchrun

        with _torchrun.store_port():
            return _core.init()
    return _core.init(_mpi_handle(comm))


def _set_collective_timeout(timeout) -> None:
    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise InvalidArgumentError(
            f"timeout must be a positive number of seconds or a datetime.timedelta, got {timeout!r}"
        )
    _os.environ["RINGCC_COLLECTIVE_TIMEOUT_S"] = f"{float(seconds):g}"


def _mpi_handle(comm):
    if isinstance(comm, int) and not isinstance(comm, bool):
        return comm
    py2f = getattr(comm, "py2f", None)
    if py2f is None:
        raise InvalidArgumentError(
            f"comm must be an mpi4py communicator (or its py2f() handle), got {type(comm).__name__}"
        )
    return int(py2f())


def mpi_built():
    """True when ringcc's MPI plugin is installed and loads (so ringcc can
    bootstrap under mpirun and RINGCC_TRANSPORT=mpi can work)."""
    try:
        return bool(_core.mpi_built())
    except ImportError:
        return False


def mpi_info():
    """What ringcc found of MPI: {"built", "plugin", "library", "libmpi", "abi",
    "found_by", "tried", "error"} (docs/api.md, "MPI found at run time")."""
    return dict(_core.mpi_info())


from ringcc.func_run import RunError, run  # noqa: E402,F401  (horovod.run: a function on N ranks)
from ringcc.gpu_arrays import cuda_stream  # noqa: E402,F401
from ringcc.gpu_libraries import cuda_info, nccl_built, nccl_info  # noqa: E402,F401  (found at run time)

# Reduction operators (the values the core uses).
Sum = 0
Average = 1
Min = 2
Max = 3
Product = 4

_OPS = {
    "sum": Sum,
    "average": Average,
    "avg": Average,
    "mean": Average,
    "min": Min,
    "max": Max,
    "product": Product,
    "prod": Product,
}


def _op(op):
    if isinstance(op, str):
        try:
            return _OPS[op.lower()]
        except KeyError:
            raise InvalidArgumentError(f"unknown reduction {op!r}; use one of {sorted(_OPS)}") from None
    if isinstance(op, int) and not isinstance(op, bool) and Sum <= op <= Product:
        return op
    raise InvalidArgumentError(f"unknown reduction {op!r}; use ringcc.Sum, Average, Min, Max or Product")


# The collectives below pass their arguments to the core as given: it
# converts and checks them, and a bad one (on any rank) fails the call on
# every rank (see docs/api.md, "Errors").


def allreduce(tensor, op=Sum, *, prescale_factor=1.0, postscale_factor=1.0, out=None):
    """Reduces `tensor` over all ranks; returns a new array (or `out`)."""
    return _core._allreduce(tensor, out, op, prescale_factor, postscale_factor, False, False)


def allreduce_(tensor, op=Sum, *, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces `tensor` over all ranks in place; returns `tensor`."""
    return _core._allreduce(tensor, None, op, prescale_factor, postscale_factor, True, False)


def allreduce_async(tensor, op=Sum, *, name=None, prescale_factor=1.0, postscale_factor=1.0, out=None):
    """Starts an allreduce; returns a Handle. With a `name`, the background
    engine matches it by name across ranks (any enqueue order) and fuses it
    with other ready tensors; without one, collectives run in issue order."""
    return _core._allreduce(tensor, out, op, prescale_factor, postscale_factor, False, True, name)


def allreduce_async_(tensor, op=Sum, *, name=None, prescale_factor=1.0, postscale_factor=1.0):
    """Starts an in-place allreduce of `tensor`; returns a Handle whose result
    is `tensor`. With a `name`, the background engine matches it by name
    across ranks (any enqueue order) and fuses it with other ready tensors."""
    return _core._allreduce(tensor, None, op, prescale_factor, postscale_factor, True, True, name)


try:
    # The per-tensor path of training loops: the compiled allreduce_async_
    # takes the common arguments (an int op, a str name) itself and hands
    # everything else to the function above.
    allreduce_async_ = _core._allreduce_async_inplace(allreduce_async_)
    # ... and the named out-of-place one (the output allocated in the core).
    allreduce_async = _core._fast_path("allreduce_async", allreduce_async)
    # ... and the blocking in-place one of small allreduces in loops.
    allreduce_ = _core._fast_path("allreduce_", allreduce_)
except ImportError:  # no compiled core: the function above says so when called
    pass


def grouped_allreduce(tensors, op=Sum, *, prescale_factor=1.0, postscale_factor=1.0):
    """Fused allreduce of a list; returns a list of new arrays."""
    return _core._grouped_allreduce(tensors, op, prescale_factor, postscale_factor, False, False)


def grouped_allreduce_(tensors, op=Sum, *, prescale_factor=1.0, postscale_factor=1.0):
    """Fused allreduce of a list, in place; returns the list."""
    return _core._grouped_allreduce(tensors, op, prescale_factor, postscale_factor, True, False)


def grouped_allreduce_async(tensors, op=Sum, *, prescale_factor=1.0, postscale_factor=1.0):
    return _core._grouped_allreduce(tensors, op, prescale_factor, postscale_factor, False, True)


def grouped_allreduce_async_(tensors, op=Sum, *, prescale_factor=1.0, postscale_factor=1.0):
    return _core._grouped_allreduce(tensors, op, prescale_factor, postscale_factor, True, True)


def allgather(tensor, *, out=None):
    """Concatenates every rank's `tensor` along axis 0 (lengths may differ)."""
    return _core._allgather(tensor, out, False)


def allgather_async(tensor, *, name=None, out=None):
    return _core._allgather(tensor, out, True, name)


def broadcast(tensor, root=0, *, out=None):
    """Returns root's `tensor` on every rank (a new array, or `out`)."""
    return _core._broadcast(tensor, out, root, False, False)


def broadcast_(tensor, root=0):
    """Overwrites `tensor` with root's, in place; returns `tensor`."""
    return _core._broadcast(tensor, None, root, True, False)


def broadcast_async(tensor, root=0, *, name=None, out=None):
    return _core._broadcast(tensor, out, root, False, True, name)


def broadcast_async_(tensor, root=0, *, name=None):
    return _core._broadcast(tensor, None, root, True, True, name)


try:
    # Named broadcasts of NumPy arrays take the compiled path (see allreduce_async).
    broadcast_async = _core._fast_path("broadcast_async", broadcast_async)
    broadcast_async_ = _core._fast_path("broadcast_async_", broadcast_async_)
    # ... and the blocking in-place one of small broadcasts in loops (see allreduce_).
    broadcast_ = _core._fast_path("broadcast_", broadcast_)
    # ... and the blocking allgather into a given `out`.
    allgather = _core._fast_path("allgather", allgather)
except ImportError:
    pass


def reduce_scatter(tensor, op=Sum, *, prescale_factor=1.0, postscale_factor=1.0, out=None):
    """Reduces over ranks, then rank r keeps its block of axis 0 (lower
    ranks take one more row when the rows do not divide evenly)."""
    return _core._reduce_scatter(tensor, out, op, prescale_factor, postscale_factor, False)


def reduce_scatter_async(tensor, op=Sum, *, name=None, prescale_factor=1.0, postscale_factor=1.0, out=None):
    return _core._reduce_scatter(tensor, out, op, prescale_factor, postscale_factor, True, name)


def join():
    """Blocks until every rank has called join(); meanwhile this rank adds
    zeros to the other ranks' named allreduces, and their other named
    collectives raise MismatchError naming the joined ranks (as Horovod's
    hvd.join does for uneven data). Returns the last rank to join, the same
    on every rank."""
    return _core.join()


def start_timeline(path):
    """Starts writing a Chrome-trace timeline of named collectives to path
    (rank 0). RINGCC_TIMELINE=path does the same from the start."""
    _core.start_timeline(str(path))


def stop_timeline():
    """Stops the timeline and closes its file."""
    _core.stop_timeline()


def engine_stats():
    """Counters of the background engine: cycles, mean negotiation time
    (all cycles, and those served by the response cache), fused collectives."""
    return _core.engine_stats()


def alltoall(tensor, splits=None, *, out=None):
    """Sends splits[j] rows of `tensor` to rank j (equal splits when None).
    Returns the received rows in rank order; with `splits` given, returns
    (output, received_splits)."""
    output, received = _core._alltoall(tensor, splits, out, False)
    return output if splits is None else (output, received)


class _AlltoallHandle:
    """Handle whose wait() unpacks alltoall's result like alltoall() does."""

    def __init__(self, handle, with_splits):
        self._handle = handle
        self._with_splits = with_splits

    def done(self):
        return self._handle.done()

    def wait(self, timeout=None):
        output, received = self._handle.wait(timeout)
        return (output, received) if self._with_splits else output


def alltoall_async(tensor, splits=None, *, name=None, out=None):
    return _AlltoallHandle(_core._alltoall(tensor, splits, out, True, name), splits is not None)


def barrier():
    """Returns once every rank has called barrier()."""
    _core._barrier(False)


def barrier_async():
    return _core._barrier(True)


# --------------------------------------------------------------------------
# Leaving: a process that ends on an uncaught exception (KeyboardInterrupt
# included) aborts its communicators first, so its peers raise
# PeerFailureError naming it at once instead of waiting for it; any other
# exit leaves the job in an orderly way. Either way the process ends within
# RINGCC_TIMEOUT_S.

import sys as _sys  # noqa: E402

_aborted_on_exit = False

# Under ringrun, which sets RINGCC_RINGRUN_REPORTS=1 for its ranks, ringrun
# reports an interrupt (one line) and names the rank that failed first, so a
# rank prints no traceback that would only repeat that: none for a
# KeyboardInterrupt, none for an exception that another rank's failure
# caused (PeerFailureError: its abort's warning is its one line). The abort
# lines are still logged: ringrun reads them, and shows none once it has
# said that it interrupted the job. Taken out of the environment here, so
# that processes the rank starts behave as usual.
_ringrun_reports = _os.environ.pop("RINGCC_RINGRUN_REPORTS", "") == "1"


def _interactive():
    return bool(getattr(_sys, "ps1", None)) or bool(_sys.flags.interactive)


def _consequent(error):
    """True for an error that another rank's failure caused (JAX and MXNet
    report the core's error inside their own exception types)."""
    return isinstance(error, PeerFailureError) or "ringcc.PeerFailureError" in str(error)


def _no_traceback_under_ringrun(exc_type, error):
    """True when ringrun reports this exit itself: an interrupt, or the
    failure of another rank (an exception of the program's own is shown)."""
    if not _ringrun_reports:
        return False
    return (isinstance(exc_type, type) and issubclass(exc_type, KeyboardInterrupt)) or _consequent(error)


def _abort_on_exit(exc_type, error):
    """Aborts this process's communicators for an uncaught `error`; False
    when there were none to abort (nothing was logged)."""
    global _aborted_on_exit
    if _aborted_on_exit:
        return True
    _aborted_on_exit = True
    text = " ".join(str(error).split())
    if len(text) > 300:
        text = text[:297] + "..."
    reason = f"exiting on an uncaught {getattr(exc_type, '__name__', exc_type)}" + (f": {text}" if text else "")
    # A rank that dies of another's failure is not the first failure.
    first = not _consequent(error)
    try:
        return bool(_core._abort(reason, first))
    except BaseException:  # noqa: BLE001 - the process is ending either way
        return False


def _excepthook(exc_type, error, traceback):
    aborted = False
    if not _interactive():  # at a prompt an error does not end the process
        aborted = _abort_on_exit(exc_type, error)
        if _no_traceback_under_ringrun(exc_type, error):
            if not aborted and _consequent(error):  # no abort line said it: the exception's own line
                import traceback as _traceback

                lines = _traceback.format_exception_only(exc_type, error)
                _sys.stderr.write(lines[-1] if lines else f"{exc_type.__name__}\n")
            return
    _previous_excepthook(exc_type, error, traceback)


def _shutdown_at_exit():
    # An uncaught exception ended the program (when something replaced our
    # excepthook, this is where we learn of it).
    error = getattr(_sys, "last_exc", None) or getattr(_sys, "last_value", None)
    if error is not None and not _interactive():
        _abort_on_exit(type(error), error)
    try:
        if _core.is_initialized():
            _core.shutdown()
    except BaseException:  # noqa: BLE001 - the process is ending; nothing useful to report
        pass
    try:
        _core._mpi_finalize_if_ours()  # only when ringcc initialised MPI
    except Exception:
        pass


def _exit_on_sigterm():
    """Makes SIGTERM (how ringrun, torchrun and SLURM stop a rank) end this
    process through Python's exit path rather than at once: its
    communicators abort, so the peers fail now naming it, and what it made
    in /dev/shm is removed. Left alone when the program has a SIGTERM
    handler of its own, or outside the main thread (which cannot set one)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def stop(signum, _frame):
        signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        try:
            _core._abort("stopped by SIGTERM", False)
        except BaseException:  # noqa: BLE001 - the process is ending either way
            pass
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def _in_exit_path(frame):
    """True while `frame` runs inside an excepthook (ours, or the one that
    wraps it, as torch.distributed's) or ringcc's exit handler."""
    codes = {_excepthook.__code__, _shutdown_at_exit.__code__, getattr(_sys.excepthook, "__code__", None)}
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def _sigint_from_ringrun(signum, frame):
    """SIGINT under ringrun: KeyboardInterrupt as usual, except while the
    process already reports an uncaught exception (a PeerFailureError that
    another interrupted rank's abort caused) or exits, where it would only
    break that report with a second traceback."""
    if not _in_exit_path(frame) and not _sys.is_finalizing():
        raise KeyboardInterrupt


def _install_sigint_under_ringrun():
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not the program's own
        signal.signal(signal.SIGINT, _sigint_from_ringrun)


_previous_excepthook = _sys.excepthook
_sys.excepthook = _excepthook
if _ringrun_reports:
    _install_sigint_under_ringrun()

import atexit as _atexit  # noqa: E402

_atexit.register(_shutdown_at_exit)
