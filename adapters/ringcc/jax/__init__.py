"""ringcc collectives for JAX: eager, inside jax.jit, differentiable.

    import jax, jax.numpy as jnp
    import ringcc, ringcc.jax as rj

    ringcc.init()                      # each process is one rank (ringrun, mpirun, SLURM)

    @jax.jit
    def step(g):
        return rj.allreduce(g, op="average")

Each collective lowers to an XLA FFI custom call whose handler, compiled into
ringcc._core, runs the C++ core directly on XLA's buffers (CPU platform; on
CUDA, on the device buffers, enqueued on XLA's stream): no
Python callback and no copy through NumPy. Collectives run in program order on
every rank: they carry an ordered JAX effect, so XLA threads a token through
them (see docs/jax.md). Shapes must match across ranks where the NumPy API
would require it; all ranks run the same program.

allreduce, broadcast, allgather, reduce_scatter and alltoall (sum/average for
the reductions) can be differentiated (jax.grad, jax.jvp) and vmapped.

Tested with jax >= 0.6 and < 0.13 (ringcc._versions.TESTED_JAX); importing
ringcc.jax with another jax logs a warning (logger "ringcc.jax"). Only JAX's
public API is used (see _primitives.py), except to restart ringcc's token
chain after a call that failed on a GPU (see _token_guard.py).
"""

try:
    import jax as _jax
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "ringcc.jax needs JAX: install it with `pip install jax` (CPU wheels). ringcc's other APIs work without it."
    ) from _e

import ringcc as _ringcc
from ringcc import _core
from ringcc._log import get_logger as _get_logger
from ringcc._versions import TESTED_JAX as _TESTED_JAX
from ringcc._versions import in_range as _in_range


def _check_jax_version(version=None):
    """Logs a warning when jax is outside the range ringcc.jax is tested with;
    returns the warning (None inside the range)."""
    version = _jax.__version__ if version is None else version
    low, high = _TESTED_JAX
    if _in_range(version, low, high):
        return None
    message = (
        f"ringcc.jax is tested with jax >= {low} and < {high}; this is jax {version}, "
        "which may not work with it (ringcc's JAX adapter uses jax.extend, jax.ffi and "
        "jax.interpreters, whose details change between releases)"
    )
    _get_logger("ringcc.jax").warning(message)
    return message


_check_jax_version()

_HOW_TO_BUILD = (
    "this build of ringcc has no XLA FFI handlers, so ringcc.jax is unavailable. "
    "They are compiled against the XLA FFI headers that jaxlib ships and are part of "
    "every normal `pip install` where a jaxlib wheel exists (jaxlib is a build-time "
    "requirement). To get them: reinstall ringcc with jaxlib available to the build, "
    "e.g. `pip install --no-cache-dir --force-reinstall ringcc` (or `pip install .` in a "
    "checkout), or for a build without isolation `pip install jaxlib` first and build "
    "with -DRINGCC_JAX_FFI=ON (or point RINGCC_XLA_FFI_INCLUDE_DIR at a directory "
    "holding xla/ffi/api/ffi.h). See docs/jax.md."
)

if not getattr(_core, "jax_ffi_targets", dict)():
    raise ImportError(_HOW_TO_BUILD)

# Imported only once the handlers are known to be there (above).
import jax.numpy as _jnp  # noqa: E402

from ringcc import (  # noqa: E402
    Average,
    Max,
    Min,
    Product,
    Sum,
    init,
    is_initialized,
    rank,
    shutdown,
    size,
)
from ringcc.jax import _primitives as _p  # noqa: E402

__all__ = [
    "Average",
    "Max",
    "Min",
    "Product",
    "Sum",
    "allgather",
    "allreduce",
    "alltoall",
    "barrier",
    "broadcast",
    "ffi_api_version",
    "init",
    "is_initialized",
    "rank",
    "reduce_scatter",
    "shutdown",
    "size",
]


def _array(x):
    return x if isinstance(x, _jax.Array) else _jnp.asarray(x)


def _tracing():
    """Whether a JAX transformation (jit, grad, vmap ...) is tracing this call:
    an array made now is then one of its tracers."""
    return isinstance(_jax.lax.full((), 0, _jnp.int8), _jax.core.Tracer)


# Arguments that are wrong on this rank do not raise here, while tracing:
# this rank would then never run the collective and the others would wait
# for it. The collective runs instead as one that fails on every rank (see
# _primitives.fail), raised by XLA as its runtime error, as any error inside
# a collective is (docs/jax.md, "Errors").


def _checked(kind, check, shape_of, x):
    """check() -> the primitive's params, or the failing collective's result
    (shape shape_of(), of x's dtype) when it raises."""
    try:
        return check(), None
    except Exception as error:  # noqa: BLE001 - every argument error fails the call everywhere
        try:
            shape, dtype = shape_of(), x.dtype
        except Exception:  # noqa: BLE001 - x itself is unusable
            shape, dtype = (), "float32"
        return None, _p.fail(kind, error, shape, dtype)


def _input(x):
    """x as a JAX array (None when it cannot be one: the caller's check raises)."""
    try:
        return _array(x)
    except Exception:  # noqa: BLE001
        return None


def _usable(name, x, original):
    if x is None:
        _array(original)  # raises what jnp.asarray raised
    _p.check_dtype(name, x)


def allreduce(x, op="sum", *, prescale_factor=1.0, postscale_factor=1.0, alias=True):
    """Reduces `x` over all ranks; returns an array of x's shape and dtype.

    op: "sum" (default), "average", "min", "max", "product" or ringcc.Sum, ...
    Result = postscale_factor * reduce(prescale_factor * x over ranks).

    alias=True lets XLA write the result into x's buffer (input_output_aliases):
    no copy and no new buffer when x is dead afterwards - an intermediate of the
    jitted function, or an argument donated with jax.jit(..., donate_argnums=...).
    When XLA cannot reuse x (a non-donated argument, or x used later) it copies x
    first; pass alias=False to reduce out of place instead (no copy, a new
    output buffer). Differentiable for sum and average: the transpose of a
    sum-allreduce is a sum-allreduce.
    """
    _p.comm_size_rank()
    original, x = x, _input(x)

    def check():
        _usable("allreduce", x, original)
        return dict(
            op=_ringcc._op(op), prescale=float(prescale_factor), postscale=float(postscale_factor), alias=bool(alias)
        )

    params, failed = _checked("allreduce", check, lambda: x.shape, x)
    return failed if params is None else _p.allreduce_p.bind(x, **params)


def broadcast(x, root=0, *, alias=True):
    """root's `x` on every rank (every rank passes an array of the same shape
    and dtype). alias as in allreduce."""
    n, _ = _p.comm_size_rank()
    original, x = x, _input(x)

    def check():
        _usable("broadcast", x, original)
        r = int(root)
        if not 0 <= r < n:
            raise _ringcc.InvalidArgumentError(f"broadcast: root rank {r} is out of range for {n} ranks")
        return dict(root=r, alias=bool(alias))

    params, failed = _checked("broadcast", check, lambda: x.shape, x)
    return failed if params is None else _p.broadcast_p.bind(x, **params)


def allgather(x):
    """Every rank's `x` concatenated along axis 0 in rank order: shape
    (size * x.shape[0], *x.shape[1:]); a scalar counts as one row. Every rank
    must pass the same shape (JAX shapes are static)."""
    n, _ = _p.comm_size_rank()
    original, x = x, _input(x)

    def check():
        _usable("allgather", x, original)
        return dict(size=n)

    def shape():
        rows, rest = _p.rows_of(x.shape)
        return (n * rows, *rest)

    params, failed = _checked("allgather", check, shape, x)
    return failed if params is None else _p.allgather_p.bind(x, **params)


def reduce_scatter(x, op="sum", *, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces `x` over ranks, then rank r keeps its block of axis 0: blocks are
    as even as possible, lower ranks get one more row (as ringcc.reduce_scatter),
    so the result's shape depends on the rank."""
    n, r = _p.comm_size_rank()
    original, x = x, _input(x)

    def check():
        _usable("reduce_scatter", x, original)
        return dict(
            op=_ringcc._op(op), prescale=float(prescale_factor), postscale=float(postscale_factor), size=n, rank=r
        )

    def shape():
        rows, rest = _p.rows_of(x.shape)
        return (_p.block_rows(rows, n, r), *rest)

    params, failed = _checked("reduce_scatter", check, shape, x)
    return failed if params is None else _p.reduce_scatter_p.bind(x, **params)


def alltoall(x):
    """Rank r sends block j of axis 0 (x.shape[0] // size rows) to rank j and
    returns the blocks it received, in rank order; x.shape[0] must divide
    evenly over the ranks."""
    n, _ = _p.comm_size_rank()
    original, x = x, _input(x)

    def check():
        _usable("alltoall", x, original)
        rows, _ = _p.rows_of(x.shape)
        if x.ndim == 0 or rows % n != 0:
            raise _ringcc.InvalidArgumentError(
                f"alltoall: the first dimension ({rows if x.ndim else 'a scalar'}) does not divide "
                f"evenly over {n} ranks"
            )
        return dict(size=n)

    def shape():
        rows, rest = _p.rows_of(x.shape)
        return (rows, *rest)

    params, failed = _checked("alltoall", check, shape, x)
    return failed if params is None else _p.alltoall_p.bind(x, **params)


def barrier():
    """Returns once every rank has reached it. Eagerly it blocks (after
    every earlier ringcc.jax collective of this process); inside jit it orders
    like any other collective."""
    _p.comm_size_rank()
    _p.barrier_p.bind()
    if not _tracing():
        _jax.effects_barrier()


def ffi_api_version():
    """(major, minor) XLA FFI API version of the headers the handlers were built with."""
    return _core.jax_ffi_api_version()


def _drain_at_exit():
    # Runs before ringcc's own atexit shutdown (registered earlier, so later):
    # collectives JAX dispatched but has not run yet finish first.
    try:
        if _ringcc.is_initialized():
            _jax.effects_barrier()
    except Exception:  # the process is ending; nothing useful to report
        pass


import atexit as _atexit  # noqa: E402

_atexit.register(_drain_at_exit)
