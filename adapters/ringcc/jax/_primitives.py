"""JAX primitives of ringcc.jax and their rules: abstract evaluation, lowering
to the XLA FFI handlers of ringcc._core (bindings/jax_ffi.cc), JVP and
transpose, and batching.

Ordering. Every primitive carries `RingccEffect`, an *ordered* JAX effect.
JAX threads one XLA token per ordered effect through a traced computation in
program order, and from one dispatched computation to the next (its runtime
tokens), and each lowering here passes that token into its custom call and
takes the new one from it. So within a jitted function the ringcc collectives
form a chain that XLA cannot reorder or run concurrently, and two jitted (or
eager) calls run their collectives in the order Python issued them, on every
rank. `has_side_effect=True` keeps XLA from dropping a collective whose
result is unused (barrier(), or a result only some ranks read).

Public JAX API only: jax.extend.core.Primitive, jax.ffi,
jax.interpreters.{ad,batching,mlir}, jax.core.ShapedArray. JAX has no public
way to declare an ordered effect, so `RingccEffect` derives from the class of
the effect that `jax.debug.callback(..., ordered=True)` carries, read from a
traced jaxpr (`ordered_effect_class`). JAX registers effects by class and
checks them with isinstance, so the subclass is what that one is: ordered,
lowerable, allowed in control flow (scan, while, cond), in custom_jvp /
custom_vjp and in jax.checkpoint, and kept by partial evaluation when its
result is unused. It has its own token chain (tokens are kept per effect
object), apart from jax.debug's.
"""

import functools
import inspect
import weakref

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import ShapedArray
from jax.extend import core as _jex
from jax.interpreters import ad as _ad
from jax.interpreters import batching as _batching
from jax.interpreters import mlir as _mlir

import ringcc
from ringcc import _core
from ringcc.jax._token_guard import guard_failed_tokens

# The element types the core moves and reduces (bindings/jax_ffi.cc maps the
# same ones from XLA's).
SUPPORTED_DTYPES = tuple(
    np.dtype(d)
    for d in (jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64, jnp.int8, jnp.uint8, jnp.int32, jnp.int64)
)


def ordered_effect_class():
    """The class of the effect of jax.debug.callback(..., ordered=True)."""
    jaxpr = jax.make_jaxpr(lambda: jax.debug.callback(lambda: None, ordered=True))()
    classes = {type(e) for e in jaxpr.effects}
    if len(classes) != 1:
        raise ImportError(
            "ringcc.jax cannot find JAX's ordered effect (the effect of "
            f"jax.debug.callback(ordered=True) is {sorted(map(str, classes))}); this jax "
            f"{jax.__version__} is outside the versions ringcc.jax supports"
        )
    return classes.pop()


class RingccEffect(ordered_effect_class()):
    """The ordered effect of every ringcc collective."""

    def __str__(self):
        return "ringcc"


effect = RingccEffect()
# JAX's token aval (jax.ffi compares against this very object).
_ABSTRACT_TOKEN = jax.make_jaxpr(jax.lax.create_token)().out_avals[0]


guard_failed_tokens(effect)


def _register_targets():
    targets = _core.jax_ffi_targets()
    for name, capsule in targets.items():
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")
    # The CUDA platform's handlers take XLA's stream; JAX keeps them until
    # its CUDA plugin loads (registering them costs nothing without one).
    cuda = getattr(_core, "jax_ffi_cuda_targets", dict)()
    for name, capsule in cuda.items():
        jax.ffi.register_ffi_target(name, capsule, platform="CUDA")
    if cuda:
        # The handlers reach the core directly: it learns here where the
        # packages' NCCL and NVRTC are (nothing is loaded yet).
        from ringcc import gpu_libraries

        gpu_libraries.configure()
    return targets, cuda


TARGETS, CUDA_TARGETS = _register_targets()


# ---------------------------------------------------------------- checks


def comm_size_rank():
    """(size, rank) of the communicator of ringcc.init(); raises before it."""
    if not ringcc.is_initialized():
        raise ringcc.NotInitializedError(
            "ringcc is not initialized: call ringcc.init() before using ringcc.jax "
            "(the number of ranks shapes some results)"
        )
    return ringcc.size(), ringcc.rank()


def check_dtype(name, aval):
    if np.dtype(aval.dtype) not in SUPPORTED_DTYPES:
        raise ringcc.UnsupportedTypeError(
            f"ringcc.jax.{name}: dtype {aval.dtype} is not supported; use one of "
            + ", ".join(str(d) for d in SUPPORTED_DTYPES)
        )


def rows_of(shape):
    """(rows along axis 0, the shape after axis 0); a scalar is one row."""
    if len(shape) == 0:
        return 1, ()
    return shape[0], tuple(shape[1:])


def block_rows(rows, n, r):
    """Rows rank r keeps in reduce_scatter (the core's block_rows)."""
    return rows // n + (1 if r < rows % n else 0)


# ---------------------------------------------------------------- lowering


# How errors name a collective (the handlers' `label` attribute): its place
# among the ringcc collectives of the function being lowered, "the 5th
# ringcc collective of jit(step)", counted per lowered module as the
# lowering walks the computation in program order. A jitted function that
# another calls several times is lowered once: its collectives have one
# label for every call.
_EAGER_NAME = "ringcc_eager_call"  # the function an eager call jits (_compiled)
_lowered_counts = weakref.WeakKeyDictionary()  # MLIR module -> ringcc collectives lowered into it


def _ordinal(k):
    if 10 <= k % 100 <= 20:
        return f"{k}th"
    return f"{k}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th') }"


def _function_name(module):
    """jit(step) for the module JAX names jit_step."""
    attr = module.operation.attributes["sym_name"]
    name = getattr(attr, "value", None) or str(attr).strip('"')
    return f"jit({name[4:]})" if name.startswith("jit_") else name


def _label(ctx):
    try:
        module = ctx.module_context.module
        function = _function_name(module)
        if function == f"jit({_EAGER_NAME})":
            return "an eager ringcc.jax call"
        count = _lowered_counts.get(module, 0) + 1
        _lowered_counts[module] = count
    except Exception:  # noqa: BLE001 - a label is worth no failed lowering
        return "a ringcc.jax collective"
    return f"the {_ordinal(count)} ringcc collective of {function}"


def _lower(target, *, alias=False):
    """Lowering to the FFI target: (x..., token) -> (y..., token)."""
    rule_plain = jax.ffi.ffi_lowering(target, has_side_effect=True)
    rule_alias = jax.ffi.ffi_lowering(target, has_side_effect=True, operand_output_aliases={0: 0})

    def lowering(ctx, *operands, **attrs):
        aliased = attrs.pop("alias", False)
        attrs["label"] = _label(ctx)
        token = ctx.tokens_in.get(effect)
        sub = ctx.replace(avals_in=(*ctx.avals_in, _ABSTRACT_TOKEN), avals_out=(*ctx.avals_out, _ABSTRACT_TOKEN))
        rule = rule_alias if (alias and aliased) else rule_plain
        *results, token = rule(sub, *operands, token, **attrs)
        ctx.set_tokens_out(ctx.tokens_in.update_tokens(_mlir.TokenSet({effect: token})))
        return results

    return lowering


def _unsupported_platform(name):
    def lowering(ctx, *args, **kwargs):
        raise NotImplementedError(
            f"ringcc.jax.{name} runs on the CPU and CUDA platforms (its XLA FFI handlers are "
            "registered for 'cpu' and 'CUDA'); place the arrays on a CPU or CUDA device"
        )

    return lowering


@functools.cache
def _compiled(p, params):
    """The primitive with these params as a jitted function (what eager calls run)."""
    kwargs = dict(params)

    def call(*args):
        return p.bind(*args, **kwargs)

    call.__name__ = call.__qualname__ = _EAGER_NAME  # its collective's label says "eager"
    return jax.jit(call)


# Lowered for every use: JAX otherwise lowers equal uses of a primitive
# once and calls that (its lowering cache), which would give them one label.
_PER_USE = {"cacheable": False} if "cacheable" in inspect.signature(_mlir.register_lowering).parameters else {}


def _primitive(name, abstract_eval, lowering_attrs, alias=False, multiple_results=False):
    p = _jex.Primitive(f"ringcc_{name}")
    p.multiple_results = multiple_results
    p.def_impl(lambda *args, **params: _compiled(p, tuple(sorted(params.items())))(*args))
    p.def_effectful_abstract_eval(abstract_eval)
    lower = _lower(f"ringcc_{name}", alias=alias)

    def lowering(ctx, *operands, **params):
        return lower(ctx, *operands, **lowering_attrs(params))

    # The same custom call on CPU and CUDA: each platform has its handler.
    _mlir.register_lowering(p, lowering, platform="cpu", **_PER_USE)
    if f"ringcc_{name}" in CUDA_TARGETS:
        _mlir.register_lowering(p, lowering, platform="cuda", **_PER_USE)
    for platform in ("rocm", "tpu") if f"ringcc_{name}" in CUDA_TARGETS else ("cuda", "rocm", "tpu"):
        _mlir.register_lowering(p, _unsupported_platform(name), platform=platform)
    return p


# ---------------------------------------------------------------- primitives
# Params are plain Python ints and floats: the lowering passes them as i64
# and f64 attributes (what the handlers bind).


def _same_shape(name):
    def abstract_eval(x, **params):
        check_dtype(name, x)
        return ShapedArray(x.shape, x.dtype), {effect}

    return abstract_eval


allreduce_p = _primitive(
    "allreduce",
    _same_shape("allreduce"),
    lambda p: dict(op=int(p["op"]), prescale=float(p["prescale"]), postscale=float(p["postscale"]), alias=p["alias"]),
    alias=True,
)

broadcast_p = _primitive(
    "broadcast", _same_shape("broadcast"), lambda p: dict(root=int(p["root"]), alias=p["alias"]), alias=True
)


def _allgather_abstract_eval(x, *, size):
    check_dtype("allgather", x)
    rows, rest = rows_of(x.shape)
    return ShapedArray((size * rows, *rest), x.dtype), {effect}


allgather_p = _primitive("allgather", _allgather_abstract_eval, lambda p: {})


def _reduce_scatter_abstract_eval(x, *, op, prescale, postscale, size, rank):
    check_dtype("reduce_scatter", x)
    rows, rest = rows_of(x.shape)
    return ShapedArray((block_rows(rows, size, rank), *rest), x.dtype), {effect}


reduce_scatter_p = _primitive(
    "reduce_scatter",
    _reduce_scatter_abstract_eval,
    lambda p: dict(op=int(p["op"]), prescale=float(p["prescale"]), postscale=float(p["postscale"])),
)


def _alltoall_abstract_eval(x, *, size):
    check_dtype("alltoall", x)
    rows, rest = rows_of(x.shape)
    return ShapedArray((rows, *rest), x.dtype), {effect}


alltoall_p = _primitive("alltoall", _alltoall_abstract_eval, lambda p: dict(nranks=int(p["size"])))


def _barrier_abstract_eval():
    return [], {effect}


barrier_p = _primitive("barrier", _barrier_abstract_eval, lambda p: {}, multiple_results=True)


# A collective whose arguments are wrong on this rank (found while tracing).
# Raising then would leave the other ranks waiting for it, as this rank
# would never run it; so it is run, in its place in program order, as a
# collective that fails on every rank (bindings/jax_ffi.cc, FailImpl). Its
# result has the collective's shape and is never written.

_KINDS = {"allreduce": 1, "allgather": 2, "broadcast": 3, "reduce_scatter": 4, "alltoall": 5, "barrier": 6}


def _fail_abstract_eval(*, kind, error_class, reason, shape, dtype):
    return ShapedArray(shape, dtype), {effect}


fail_p = _primitive(
    "fail",
    _fail_abstract_eval,
    lambda p: dict(kind=_KINDS[p["kind"]], error_class=p["error_class"], reason=p["reason"]),
)


def fail(kind, error, shape=(), dtype=np.float32):
    """The result of collective `kind` that `error` stopped on this rank: it
    fails on every rank when the computation runs (see fail_p)."""
    if isinstance(error, ringcc.RingccError):
        error_class, reason = f"ringcc.{type(error).__name__}", str(error)
    else:
        error_class, reason = "", f"{type(error).__name__}: {error}"
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        dtype = np.dtype(np.float32)
    return fail_p.bind(
        kind=kind, error_class=error_class, reason=reason, shape=tuple(int(d) for d in shape), dtype=dtype
    )


def _fail_jvp(primals, tangents, **params):
    y = fail_p.bind(**params)
    return y, _ad.Zero.from_primal_value(y)


_ad.primitive_jvps[fail_p] = _fail_jvp
_batching.primitive_batchers[fail_p] = lambda args, dims, **params: (fail_p.bind(**params), _batching.not_mapped)


# ---------------------------------------------------------------- autodiff
# The collectives that are linear in their input get JVP = the collective of
# the tangent, and a transpose rule (reverse mode, jax.grad):
#   allreduce(sum or average)  -> itself (its matrix is symmetric)
#   allgather                  -> reduce_scatter(sum) with equal blocks
#   reduce_scatter(sum/avg)    -> allgather (times 1/size for average)
#   alltoall                   -> alltoall (equal splits: its own inverse)
#   broadcast(root)            -> sum-allreduce, kept on the root only
# Min, max and product are not linear: differentiating them raises.

_LINEAR_OPS = (ringcc.Sum, ringcc.Average)
_OP_NAMES = {
    ringcc.Sum: "sum",
    ringcc.Average: "average",
    ringcc.Min: "min",
    ringcc.Max: "max",
    ringcc.Product: "product",
}


def _zero_ct(x):
    """A symbolic zero cotangent for the undefined primal x."""
    aval = x.aval
    to_ct = getattr(aval, "to_ct_aval", None) or aval.to_tangent_aval  # older jax: to_tangent_aval
    return _ad.Zero(to_ct())


def _check_linear(name, op):
    if op not in _LINEAR_OPS:
        raise NotImplementedError(
            f"ringcc.jax.{name} with op={_OP_NAMES.get(op, op)!r} cannot be differentiated: "
            "only sum and average are linear (their JVP and transpose are defined)"
        )


def _linear_jvp(p, name):
    def jvp(primals, tangents, **params):
        if "op" in params:
            _check_linear(name, params["op"])
        (x,), (t,) = primals, tangents
        y = p.bind(x, **params)
        if type(t) is _ad.Zero:
            return y, _ad.Zero.from_primal_value(y)
        return y, p.bind(_ad.instantiate_zeros(t), **params)

    return jvp


def _allreduce_transpose(ct, x, *, op, prescale, postscale, alias):
    _check_linear("allreduce", op)
    if type(ct) is _ad.Zero:
        return [_zero_ct(x)]
    return [allreduce_p.bind(ct, op=op, prescale=prescale, postscale=postscale, alias=True)]


def _broadcast_transpose(ct, x, *, root, alias):
    if type(ct) is _ad.Zero:
        return [_zero_ct(x)]
    total = allreduce_p.bind(ct, op=ringcc.Sum, prescale=1.0, postscale=1.0, alias=True)
    _, rank = comm_size_rank()
    return [total if rank == root else jnp.zeros_like(total)]


def _equal_blocks(name, rows, size):
    if rows % size != 0:
        raise NotImplementedError(
            f"ringcc.jax.{name} can be transposed (reverse-mode differentiation) only when "
            f"the first dimension ({rows}) divides evenly over the {size} ranks"
        )


def _allgather_transpose(ct, x, *, size):
    if type(ct) is _ad.Zero:
        return [_zero_ct(x)]
    _, rank = comm_size_rank()
    # The cotangent has size * rows rows: equal blocks, one per rank.
    out = reduce_scatter_p.bind(ct, op=ringcc.Sum, prescale=1.0, postscale=1.0, size=size, rank=rank)
    return [out.reshape(x.aval.shape)]


def _reduce_scatter_transpose(ct, x, *, op, prescale, postscale, size, rank):
    _check_linear("reduce_scatter", op)
    rows, _ = rows_of(x.aval.shape)
    _equal_blocks("reduce_scatter", rows, size)
    if type(ct) is _ad.Zero:
        return [_zero_ct(x)]
    scale = prescale * postscale / (size if op == ringcc.Average else 1)
    out = allgather_p.bind(ct, size=size)
    if scale != 1.0:
        out = out * jnp.asarray(scale, out.dtype)
    return [out.reshape(x.aval.shape)]


def _alltoall_transpose(ct, x, *, size):
    if type(ct) is _ad.Zero:
        return [_zero_ct(x)]
    return [alltoall_p.bind(ct, size=size)]


_ad.primitive_jvps[allreduce_p] = _linear_jvp(allreduce_p, "allreduce")
_ad.primitive_transposes[allreduce_p] = _allreduce_transpose
_ad.primitive_jvps[broadcast_p] = _linear_jvp(broadcast_p, "broadcast")
_ad.primitive_transposes[broadcast_p] = _broadcast_transpose
_ad.primitive_jvps[allgather_p] = _linear_jvp(allgather_p, "allgather")
_ad.primitive_transposes[allgather_p] = _allgather_transpose
_ad.primitive_jvps[reduce_scatter_p] = _linear_jvp(reduce_scatter_p, "reduce_scatter")
_ad.primitive_transposes[reduce_scatter_p] = _reduce_scatter_transpose
_ad.primitive_jvps[alltoall_p] = _linear_jvp(alltoall_p, "alltoall")
_ad.primitive_transposes[alltoall_p] = _alltoall_transpose


# ---------------------------------------------------------------- vmap
# Every rank must vmap with the same batch size. allreduce and broadcast are
# elementwise over ranks, so the batch dimension just rides along. allgather,
# reduce_scatter and alltoall work along axis 0 of each example: the batch
# dimension moves to axis 1 (a scalar example becomes one row) and the result
# is batched along axis 1.


def _elementwise_batcher(p):
    def batcher(args, dims, **params):
        (x,), (d,) = args, dims
        return p.bind(x, **params), d

    return batcher


def _rows_batcher(p):
    def batcher(args, dims, **params):
        (x,), (d,) = args, dims
        x = jnp.moveaxis(x, d, 0)
        if x.ndim == 1:
            x = x[None, :]  # scalar examples: one row each
        else:
            x = jnp.moveaxis(x, 0, 1)  # (rows, batch, ...)
        return p.bind(x, **params), 1

    return batcher


_batching.primitive_batchers[allreduce_p] = _elementwise_batcher(allreduce_p)
_batching.primitive_batchers[broadcast_p] = _elementwise_batcher(broadcast_p)
_batching.primitive_batchers[allgather_p] = _rows_batcher(allgather_p)
_batching.primitive_batchers[reduce_scatter_p] = _rows_batcher(reduce_scatter_p)
_batching.primitive_batchers[alltoall_p] = _rows_batcher(alltoall_p)
