"""The ringcc.jax cases, run inside one group of ranks:

    ringrun -np N python tests/frameworks/jax/jax_cases.py --out DIR [--cases PATTERNS]

Every collective is checked against NumPy, eagerly and inside jax.jit; then
several collectives in one jitted function, asynchronous dispatch, grad, jvp,
vmap, donation (in-place), errors. Inputs come from a per-case seed, so every
rank can rebuild any rank's input and the expected result.
tests/frameworks/jax/test_jax.py parametrizes its tests from CASES.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))  # tests/harness
from rank_harness import (  # noqa: E402
    CaseList,
    check_close,
    check_equal,
    exact_input,
    exact_inputs,
    expect,
    expect_error,
    fail,
    run_cases,
)

jax = jnp = rj = ringcc = None  # imported by main(), so that pytest can read CASES without jax

CASES = CaseList()


def _add(name, fn, **options):
    """Adds a case that ends once this rank's ringcc.jax collectives have run
    (JAX dispatches asynchronously; the harness's own NumPy collectives follow)."""

    def run(ctx):
        try:
            fn(ctx)
        finally:
            try:
                jax.effects_barrier()
            except Exception:  # a failed computation: already recorded by the case
                pass

    CASES.add(name, run, **options)


def case(name, **options):
    def register(fn):
        _add(name, fn, **options)
        return fn

    return register


def expect_failure(fragments, call, what):
    """call() must raise the runtime error of a collective that failed (XLA's
    class, which varies between jax releases) with every fragment in its
    message (ringcc's class name among them)."""
    try:
        result = call()
        jax.block_until_ready(result)
    except Exception as error:  # noqa: BLE001 - jax's runtime error type varies between releases
        message = str(error)
        for fragment in fragments:
            expect(fragment in message, f"{what}: {type(error).__name__} message lacks {fragment!r}: {message!r}")
        return
    fail(f"{what}: expected an error, but the call returned")


DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64"]
OPS = ["sum", "average", "min", "max", "product"]
RTOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-6, "float64": 1e-14}
MODES = ["eager", "jit"]


def np_dtype(name):
    return np.dtype(jnp.dtype(name))


def data(ctx, rank, shape, dtype, salt=0, op="sum"):
    """Rank `rank`'s input (small integers, exact in every dtype and op), for a jnp dtype name."""
    return exact_input(ctx, rank, shape, np_dtype(dtype), salt, op)


def all_inputs(ctx, shape, dtype, salt=0, op="sum"):
    return exact_inputs(ctx, shape, np_dtype(dtype), salt, op)


def reference_reduce(arrays, op, dtype):
    stack = np.stack([a.astype(np.float64) for a in arrays])
    if op in ("sum", "average"):
        out = stack.sum(0)
        if op == "average":
            out = out / len(arrays)
    elif op == "min":
        out = stack.min(0)
    elif op == "max":
        out = stack.max(0)
    else:
        out = stack.prod(0)
    return out


def run_mode(mode, fn, x, *args, **kwargs):
    """fn(x, *args, **kwargs), eagerly or jitted over x (the rest static)."""
    if mode == "jit":
        return jax.jit(lambda v: fn(v, *args, **kwargs))(x)
    return fn(x, *args, **kwargs)


def host(x):
    return np.asarray(jax.device_get(x))


def check_reduced(got, arrays, op, dtype, what):
    dt = np_dtype(dtype)
    want = reference_reduce(arrays, op, dtype)
    if dt.kind in "iu":
        if op == "average":
            want = np.trunc(want)  # the core truncates integer averages
            return check_close(host(got), want, np.ones_like(want), 1.0, what, dt)
        return check_equal(host(got), want.astype(dt), what)
    scale = np.stack([np.abs(a.astype(np.float64)) for a in arrays]).sum(0) + 1.0
    return check_close(host(got), want, scale, RTOL[dtype], what, dt)


# ----------------------------------------------------------------- allreduce

for _dtype in DTYPES:
    for _mode in MODES:

        def _case(ctx, dtype=_dtype, mode=_mode):
            xs = all_inputs(ctx, (3, 5), dtype)
            got = run_mode(mode, rj.allreduce, jnp.asarray(xs[ctx.rank]))
            check_reduced(got, xs, "sum", dtype, f"allreduce {dtype} {mode}")

        _add(f"allreduce/{_dtype}/sum/{_mode}", _case)

for _op in OPS[1:]:  # sum: above
    for _dtype in ("float32", "int32"):
        for _mode in MODES:

            def _case(ctx, op=_op, dtype=_dtype, mode=_mode):
                xs = all_inputs(ctx, (7,), dtype, op=op)
                got = run_mode(mode, rj.allreduce, jnp.asarray(xs[ctx.rank]), op)
                check_reduced(got, xs, op, dtype, f"allreduce {dtype} {op} {mode}")

            _add(f"allreduce/{_dtype}/{_op}/{_mode}", _case)


@case("allreduce/scalar-and-empty")
def _(ctx):
    s = rj.allreduce(jnp.float32(ctx.rank + 1))
    expect(host(s).shape == () and float(s) == ctx.size * (ctx.size + 1) / 2, f"scalar allreduce: {s}")
    e = jax.jit(rj.allreduce)(jnp.zeros((0, 3), jnp.float32))
    expect(e.shape == (0, 3), f"empty allreduce shape {e.shape}")


@case("allreduce/scale-factors")
def _(ctx):
    xs = all_inputs(ctx, (4,), "float32")
    got = jax.jit(lambda v: rj.allreduce(v, prescale_factor=0.5, postscale_factor=3.0))(xs[ctx.rank])
    want = 3.0 * 0.5 * np.sum(np.stack(xs).astype(np.float64), 0)
    check_close(host(got), want, np.abs(want) + 1, 1e-6, "prescale/postscale")


@case("allreduce/large-4MiB")
def _(ctx):
    n = 1 << 20  # 4 MiB of float32: more than one shared-memory piece
    x = jnp.full((n,), float(ctx.rank + 1), jnp.float32)
    got = jax.jit(rj.allreduce)(x)
    expect(bool(np.all(host(got) == ctx.size * (ctx.size + 1) / 2)), "large allreduce")


# ----------------------------------------------------------------- allgather

for _shape in [(), (3,), (2, 3), (0, 2)]:
    for _mode in MODES:

        def _case(ctx, shape=_shape, mode=_mode):
            xs = all_inputs(ctx, shape, "float32")
            got = run_mode(mode, rj.allgather, jnp.asarray(xs[ctx.rank]))
            want = np.concatenate([np.atleast_1d(x) for x in xs], axis=0)
            check_equal(host(got), want, f"allgather {shape} {mode}")

        _add(f"allgather/{'x'.join(map(str, _shape)) or 'scalar'}/{_mode}", _case)


@case("allgather/int8-and-bfloat16")
def _(ctx):
    for dtype in ("int8", "bfloat16", "int64"):
        xs = all_inputs(ctx, (2, 2), dtype)
        got = jax.jit(rj.allgather)(jnp.asarray(xs[ctx.rank]))
        check_equal(host(got), np.concatenate(xs), f"allgather {dtype}")


# ----------------------------------------------------------------- broadcast

for _mode in MODES:

    def _case(ctx, mode=_mode):
        for root in range(ctx.size):
            xs = all_inputs(ctx, (2, 4), "float64", salt=root)
            got = run_mode(mode, rj.broadcast, jnp.asarray(xs[ctx.rank]), root)
            check_equal(host(got), xs[root], f"broadcast root {root} {mode}")

    _add(f"broadcast/{_mode}", _case)


@case("broadcast/bad-root")
def _(ctx):
    # Argument errors are raised when the collective runs, on every rank
    # (where ringcc.jax finds them while tracing, the collective fails).
    expect_failure(
        ["ringcc.InvalidArgumentError", "out of range"],
        lambda: rj.broadcast(jnp.zeros(2), ctx.size),
        "broadcast root == size",
    )


# ----------------------------------------------------------------- reduce_scatter


def block(rows, n, r):
    base, extra = divmod(rows, n)
    first = r * base + min(r, extra)
    return first, base + (1 if r < extra else 0)


for _rows in (8, 5, 1):
    for _op in ("sum", "average", "max"):
        for _mode in MODES:

            def _case(ctx, rows=_rows, op=_op, mode=_mode):
                dtype = "float32"
                xs = all_inputs(ctx, (rows, 3), dtype)
                got = run_mode(mode, rj.reduce_scatter, jnp.asarray(xs[ctx.rank]), op)
                first, count = block(rows, ctx.size, ctx.rank)
                want_all = reference_reduce(xs, op, dtype)
                want = want_all[first : first + count]
                scale = np.stack([np.abs(a) for a in xs]).sum(0)[first : first + count] + 1
                check_close(host(got), want, scale, 1e-6, f"reduce_scatter rows {rows} {op} {mode}", np.float32)

            _add(f"reduce_scatter/rows{_rows}/{_op}/{_mode}", _case)


# ----------------------------------------------------------------- alltoall

for _mode in MODES:

    def _case(ctx, mode=_mode):
        n = ctx.size
        xs = all_inputs(ctx, (2 * n, 3), "int32")
        got = run_mode(mode, rj.alltoall, jnp.asarray(xs[ctx.rank]))
        want = np.concatenate([xs[src][2 * ctx.rank : 2 * ctx.rank + 2] for src in range(n)])
        check_equal(host(got), want, f"alltoall {mode}")

    _add(f"alltoall/{_mode}", _case)


@case("alltoall/uneven-rows", min_size=2)
def _(ctx):
    expect_failure(
        ["ringcc.InvalidArgumentError", "divide evenly"],
        lambda: rj.alltoall(jnp.zeros((ctx.size + 1, 2))),
        "alltoall uneven",
    )


# ----------------------------------------------------------------- barrier


@case("barrier/eager-and-jit")
def _(ctx):
    rj.barrier()

    @jax.jit
    def f(x):
        rj.barrier()  # result unused: kept by has_side_effect and the token
        return x + 1

    expect(float(f(jnp.float32(1))) == 2.0, "jit with barrier")
    rj.barrier()


# ----------------------------------------------------------------- ordering


@case("ordering/several-in-one-jit")
def _(ctx):
    n, r = ctx.size, ctx.rank
    a = all_inputs(ctx, (4,), "float32", salt=1)
    b = all_inputs(ctx, (2, 2), "int32", salt=2)
    c = all_inputs(ctx, (3,), "float64", salt=3)
    d = all_inputs(ctx, (5, 2), "float32", salt=4)
    e = all_inputs(ctx, (n, 2), "int64", salt=5)

    @jax.jit
    def f(a, b, c, d, e):
        # Independent collectives of different sizes and kinds: XLA could run
        # them in any order, the token keeps program order on every rank.
        ra = rj.allreduce(a)
        rb = rj.allgather(b)
        rc = rj.broadcast(c, root=n - 1)
        rd = rj.reduce_scatter(d, "sum")
        rj.barrier()
        re = rj.alltoall(e)
        rm = rj.allreduce(a, "max")
        return ra, rb, rc, rd, re, rm

    ra, rb, rc, rd, re, rm = f(a[r], b[r], c[r], d[r], e[r])
    check_close(host(ra), reference_reduce(a, "sum", "float32"), np.ones(4) * 200, 1e-6, "allreduce")
    check_equal(host(rb), np.concatenate(b), "allgather")
    check_equal(host(rc), c[n - 1], "broadcast")
    first, count = block(5, n, r)
    check_close(
        host(rd),
        reference_reduce(d, "sum", "float32")[first : first + count],
        np.ones((count, 2)) * 200,
        1e-6,
        "reduce_scatter",
    )
    check_equal(host(re), np.concatenate([e[s][r : r + 1] for s in range(n)]), "alltoall")
    check_equal(host(rm), np.max(np.stack(a), 0), "allreduce max")


@case("ordering/many-independent-allreduces")
def _(ctx):
    # 24 independent allreduces of different sizes: any reordering between
    # ranks would pair different sizes and raise a mismatch (or deadlock).
    sizes = [1 + (7 * i) % 23 for i in range(24)]
    xs = [np.full((s,), float(ctx.rank + i), np.float32) for i, s in enumerate(sizes)]

    @jax.jit
    def f(*args):
        return [rj.allreduce(x) for x in args]

    outs = f(*xs)
    for i, (s, o) in enumerate(zip(sizes, outs)):
        want = sum(float(rank + i) for rank in range(ctx.size))
        expect(host(o).shape == (s,) and bool(np.all(host(o) == want)), f"allreduce #{i}")


@case("ordering/async-dispatch")
def _(ctx):
    # Several jitted and eager calls dispatched without waiting: the runtime
    # token of the ordered effect chains them in issue order.
    f = jax.jit(lambda v: rj.allreduce(v) + 0)
    g = jax.jit(lambda v: rj.allgather(v))
    pending = []
    for i in range(10):
        x = jnp.full((1 + i,), float(ctx.rank + i), jnp.float32)
        pending.append((i, "ar", f(x)))
        pending.append((i, "ag", g(x)))
        pending.append((i, "eager", rj.allreduce(x, "max")))
    for i, kind, y in pending:
        y = host(y)
        if kind == "ar":
            expect(bool(np.all(y == sum(rank + i for rank in range(ctx.size)))), f"#{i} allreduce")
        elif kind == "ag":
            expect(y.shape == ((1 + i) * ctx.size,), f"#{i} allgather shape {y.shape}")
        else:
            expect(bool(np.all(y == ctx.size - 1 + i)), f"#{i} eager max")


@case("ordering/scan-and-cond")
def _(ctx):
    @jax.jit
    def f(x):
        def body(carry, _):
            carry = rj.allreduce(carry, "average") + 1.0
            return carry, rj.allgather(carry[:1])

        return jax.lax.scan(body, x, None, length=4)

    carry, ys = f(jnp.full((3,), float(ctx.rank), jnp.float32))
    mean0 = (ctx.size - 1) / 2
    expect(np.allclose(host(carry), mean0 + 4), f"scan carry {host(carry)}")
    expect(host(ys).shape == (4, ctx.size), f"scan ys shape {host(ys).shape}")


@case("ordering/checkpoint-and-custom-jvp")
def _(ctx):
    # jax.checkpoint (remat) and custom_jvp around collectives: the effect is
    # allowed there, and the recomputed forward pass issues its collective on
    # every rank alike.
    n = ctx.size
    f = jax.checkpoint(lambda v: jnp.sin(rj.allreduce(v)))
    x = jnp.full((4,), 0.1 * (ctx.rank + 1), jnp.float32)
    g = host(jax.jit(jax.grad(lambda v: f(v).sum()))(x))
    total = 0.1 * n * (n + 1) / 2
    expect(np.allclose(g, n * np.cos(total), rtol=1e-5), f"grad through checkpoint {g}")

    @jax.custom_jvp
    def twice(v):
        return 2.0 * rj.allreduce(v)

    twice.defjvp(lambda p, t: (twice(p[0]), 2.0 * rj.allreduce(t[0])))
    g = host(jax.grad(lambda v: twice(v).sum())(x))
    expect(np.allclose(g, 2.0 * n), f"grad through custom_jvp {g}")


# ----------------------------------------------------------------- autodiff


@case("grad/allreduce-sum")
def _(ctx):
    n = ctx.size
    xs = [np.linspace(-1, 1, 6).astype(np.float32) * (r + 1) for r in range(n)]
    s = np.sum(xs, 0)

    def loss(x):
        return jnp.sum(rj.allreduce(x) ** 2)

    for mode in MODES:
        g = (jax.jit(jax.grad(loss)) if mode == "jit" else jax.grad(loss))(xs[ctx.rank])
        # Every rank's loss is sum(S^2); d/dx_r of the sum over ranks' losses = n * 2S.
        check_close(host(g), n * 2 * s, np.abs(n * 2 * s) + 1, 1e-6, f"grad {mode}")


@case("grad/allreduce-average-and-value")
def _(ctx):
    n = ctx.size
    x = jnp.full((3,), float(ctx.rank + 1), jnp.float32)
    w = jnp.asarray([1.0, 2.0, 3.0], jnp.float32) * (ctx.rank + 1)

    def loss(v):
        return jnp.sum(w * rj.allreduce(v, "average"))

    value, g = jax.jit(jax.value_and_grad(loss))(x)
    mean = (n + 1) / 2
    expect(abs(float(value) - mean * 6 * (ctx.rank + 1)) < 1e-4, f"value {float(value)}")
    # cotangent w_r reaches x_q through the average: sum_r w_r / n
    want = np.array([1.0, 2.0, 3.0]) * (n * (n + 1) / 2) / n
    check_close(host(g), want, want + 1, 1e-6, "average grad")


@case("grad/jvp-allreduce")
def _(ctx):
    x = jnp.ones((4,), jnp.float32) * ctx.rank
    t = jnp.ones((4,), jnp.float32)
    y, ty = jax.jit(lambda a, b: jax.jvp(rj.allreduce, (a,), (b,)))(x, t)
    expect(bool(np.all(host(ty) == ctx.size)), f"jvp tangent {host(ty)}")
    expect(bool(np.all(host(y) == ctx.size * (ctx.size - 1) / 2)), f"jvp primal {host(y)}")


@case("grad/allgather-reduce_scatter-alltoall-broadcast")
def _(ctx):
    n, r = ctx.size, ctx.rank
    rows = 2
    ws = [np.arange(n * rows * 3, dtype=np.float32).reshape(n * rows, 3) * (q + 1) for q in range(n)]
    x = jnp.ones((rows, 3), jnp.float32)
    g = jax.grad(lambda v: jnp.sum(jnp.asarray(ws[r]) * rj.allgather(v)))(x)
    want = sum(w[r * rows : (r + 1) * rows] for w in ws)  # transpose of allgather: reduce_scatter
    check_close(host(g), want, np.abs(want) + 1, 1e-6, "allgather grad")

    big = jnp.ones((n * rows, 3), jnp.float32)
    v = [np.arange(rows * 3, dtype=np.float32).reshape(rows, 3) + q for q in range(n)]
    g = jax.jit(jax.grad(lambda u: jnp.sum(jnp.asarray(v[r]) * rj.reduce_scatter(u))))(big)
    check_equal(host(g), np.concatenate(v), "reduce_scatter grad (allgather)")

    g = jax.grad(lambda u: jnp.sum(jnp.asarray(ws[r]) * rj.alltoall(u)))(big)
    want = np.concatenate([ws[q][r * rows : (r + 1) * rows] for q in range(n)])
    check_equal(host(g), want, "alltoall grad (alltoall)")

    root = n - 1
    g = jax.grad(lambda u: jnp.sum(jnp.asarray(v[r]) * rj.broadcast(u, root)))(x)
    want = sum(v) if r == root else np.zeros_like(v[0])
    check_equal(host(g), want, "broadcast grad")


@case("grad/max-raises")
def _(ctx):
    expect_error(
        NotImplementedError,
        ["cannot be differentiated"],
        lambda: jax.grad(lambda v: jnp.sum(rj.allreduce(v, "max")))(jnp.ones(3)),
        "grad of max",
    )


# ----------------------------------------------------------------- vmap


@case("vmap/allreduce-allgather")
def _(ctx):
    r = ctx.rank
    xs = all_inputs(ctx, (4, 3), "float32")  # batch 4 of 3-vectors
    got = jax.jit(jax.vmap(rj.allreduce))(xs[r])
    check_equal(host(got), np.sum(np.stack(xs), 0), "vmap allreduce")
    got = jax.vmap(rj.allgather)(xs[r])  # per example: (3,) -> (3n,)
    want = np.concatenate(xs, axis=1)
    check_equal(host(got), want, "vmap allgather")
    got = jax.jit(jax.vmap(rj.allgather, in_axes=1, out_axes=1))(xs[r])  # batch of 3 4-vectors
    check_equal(host(got), np.concatenate(xs, axis=0), "vmap allgather in_axes=1")
    got = jax.vmap(rj.allgather)(xs[r][:, 0])  # scalar examples
    check_equal(host(got), np.stack([x[:, 0] for x in xs], axis=1), "vmap allgather of scalars")


@case("vmap/reduce_scatter-alltoall-broadcast")
def _(ctx):
    n, r = ctx.size, ctx.rank
    xs = all_inputs(ctx, (2, n * 2), "int32")  # batch 2 of (2n,) rows
    got = jax.vmap(rj.reduce_scatter)(xs[r])
    total = np.sum(np.stack(xs), 0).astype(np.int32)
    check_equal(host(got), total[:, 2 * r : 2 * r + 2], "vmap reduce_scatter")
    got = jax.jit(jax.vmap(rj.alltoall))(xs[r])
    want = np.concatenate([xs[s][:, 2 * r : 2 * r + 2] for s in range(n)], axis=1)
    check_equal(host(got), want, "vmap alltoall")
    got = jax.vmap(lambda v: rj.broadcast(v, 0))(xs[r])
    check_equal(host(got), xs[0], "vmap broadcast")


# ----------------------------------------------------------------- donation


@case("donation/in-place")
def _(ctx):
    x = jnp.full((1 << 16,), float(ctx.rank + 1), jnp.float32)
    before = x.unsafe_buffer_pointer()
    f = jax.jit(rj.allreduce, donate_argnums=0)
    y = f(x)
    expect(bool(np.all(host(y) == ctx.size * (ctx.size + 1) / 2)), "donated allreduce value")
    expect(y.unsafe_buffer_pointer() == before, "the result of a donated allreduce should reuse the input's buffer")
    expect(x.is_deleted(), "the donated input should be deleted")
    g = jax.jit(lambda v: rj.broadcast(v, 0), donate_argnums=0)
    z = jnp.full((8,), float(ctx.rank), jnp.float32)
    ptr = z.unsafe_buffer_pointer()
    w = g(z)
    expect(w.unsafe_buffer_pointer() == ptr and bool(np.all(host(w) == 0)), "donated broadcast")
    # Without donation the input stays intact.
    a = jnp.full((4,), 1.0, jnp.float32)
    b = jax.jit(rj.allreduce)(a)
    expect(bool(np.all(host(a) == 1.0)) and bool(np.all(host(b) == ctx.size)), "non-donated input intact")
    c = jax.jit(lambda v: rj.allreduce(v, alias=False))(a)
    expect(bool(np.all(host(c) == ctx.size)), "alias=False")


# ----------------------------------------------------------------- errors


@case("errors/unsupported-dtype")
def _(ctx):
    expect_failure(["ringcc.UnsupportedTypeError", "bool"], lambda: rj.allreduce(jnp.zeros(3, bool)), "bool allreduce")
    expect_failure(
        ["ringcc.UnsupportedTypeError", "complex64"],
        lambda: jax.jit(rj.allgather)(jnp.zeros(3, jnp.complex64)),
        "complex allgather",
    )


@case("errors/mismatch-then-usable", min_size=2)
def _(ctx):
    # Rank 0 passes a different shape: every rank gets the core's MismatchError
    # through XLA, and the communicator stays usable.
    x = jnp.ones((3 if ctx.rank == 0 else 4,), jnp.float32)
    try:
        host(jax.jit(rj.allreduce)(x))
        fail("a mismatched allreduce returned")
    except Exception as error:  # jax's runtime error type varies between releases
        expect("ringcc.MismatchError" in str(error), f"mismatch message: {error}")
    y = jax.jit(rj.allreduce)(jnp.ones((2,), jnp.float32))
    expect(bool(np.all(host(y) == ctx.size)), "usable after a mismatch")


def _dims(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


@case("errors/shape-same-count", min_size=2)
def _(ctx):
    # As many elements on every rank, in different shapes: every rank gets a
    # MismatchError naming each rank's shape (allgather: the dimensions after
    # the first), eagerly and jitted; then the communicator is usable.
    def shapes(a, b):
        return lambda r: a if r % 2 == 0 else b

    calls = [
        ("allreduce", shapes((2, 3), (3, 2)), rj.allreduce, "disagree on the shape ("),
        ("broadcast", shapes((2, 3), (3, 2)), lambda v: rj.broadcast(v, 0), "disagree on the shape ("),
        ("allgather", shapes((2, 6), (2, 3, 2)), rj.allgather, "shape after the first dimension"),
    ]
    for what, shape_of, fn, phrase in calls:
        mine = shape_of(ctx.rank)
        listed = [f"rank {r}: {_dims(shape_of(r))}" for r in range(ctx.size)]
        for mode, f in (("eager", fn), ("jit", jax.jit(fn))):
            x = jnp.ones(mine, jnp.float32)
            label = "an eager ringcc.jax call" if mode == "eager" else "1st ringcc collective of jit("
            expect_failure(
                ["ringcc.MismatchError", phrase, label, f"shape {_dims(mine)}"] + listed,
                lambda: host(f(x)),
                f"{mode} {what} of {mine}",
            )
    y = jax.jit(rj.allreduce)(jnp.ones((2, 3), jnp.float32))
    expect(bool(np.all(host(y) == ctx.size)), "usable after the mismatches")


@case("errors/mismatch-names-the-leaf", min_size=2)
def _(ctx):
    # A jitted step allreduces seven parameters (jax.tree.map over a dict, in
    # its sorted keys' order); one of them has another shape on rank 0. Every
    # rank's error names that collective's place in the jitted function and
    # the shapes.
    shapes = [(4, 4), (8,), (16, 2), (3, 3), (32,), (5,), (2, 2, 2)]
    if ctx.rank != 0:
        shapes[4] = (36,)
    params = {f"p{i}": jnp.full(s, float(ctx.rank + 1), jnp.float32) for i, s in enumerate(shapes)}

    @jax.jit
    def train_step(p):
        grads = jax.tree.map(lambda v: v * 2.0, p)
        return jax.tree.map(lambda g: rj.allreduce(g, "average"), grads)

    expect_failure(
        [
            "ringcc.MismatchError",
            "the 5th ringcc collective of jit(train_step)",
            f"shape {_dims(shapes[4])}",
            "rank 0: [32]",
            "rank 1: [36]",
        ],
        lambda: jax.tree.map(host, train_step(params)),
        "a jitted step whose 5th allreduce differs",
    )
    y = jax.jit(rj.allreduce)(jnp.ones((2,), jnp.float32))
    expect(bool(np.all(host(y) == ctx.size)), "usable after the mismatch")


@case("errors/failed-token-not-kept")
def _(ctx):
    # On a GPU a failed collective leaves JAX an output token that holds its
    # error; JAX would hand that token to the next ringcc call, which would
    # raise the old error forever. Plant such a token (a CPU computation
    # fails synchronously and leaves none) and expect the next call to work.
    from jax._src import core as jax_core
    from jax._src import dispatch

    from ringcc.jax import _primitives

    class FailedBuffer:
        def block_until_ready(self):
            raise RuntimeError("INVALID_ARGUMENT: ringcc.MismatchError: the earlier failure")

    dispatch.runtime_tokens.current_tokens[_primitives.effect] = jax_core.Token(FailedBuffer())
    y = jax.jit(rj.allreduce)(jnp.ones((2,), jnp.float32))
    expect(bool(np.all(host(y) == ctx.size)), f"after a failed token: {host(y)}")
    kept = dispatch.runtime_tokens.current_tokens.get(_primitives.effect)
    expect(not isinstance(getattr(kept, "_buf", None), FailedBuffer), "the failed token is still current")


@case("errors/one-rank-arguments", min_size=2)
def _(ctx):
    # The last rank passes an argument only it finds wrong (while tracing):
    # it raises its own error, every other rank a MismatchError naming it,
    # for the same collective, and the collectives that follow stay in step.
    bad = ctx.rank == ctx.size - 1
    n, last = ctx.size, ctx.size - 1
    x = jnp.full((2 * n,), ctx.rank + 1.0, jnp.float32)
    calls = [
        (
            "root out of range",
            "ringcc.InvalidArgumentError",
            ["out of range"],
            lambda: rj.broadcast(x, n + 3 if bad else 0),
        ),
        (
            "unknown op, jitted",
            "ringcc.InvalidArgumentError",
            ["unknown reduction"],
            lambda: jax.jit(lambda v: rj.allreduce(v, "median" if bad else "sum"))(x),
        ),
        (
            "unsupported dtype",
            "ringcc.UnsupportedTypeError",
            ["bool"],
            lambda: rj.allgather(jnp.zeros(2, bool) if bad else jnp.zeros(2)),
        ),
        (
            "uneven alltoall",
            "ringcc.InvalidArgumentError",
            ["divide evenly"],
            lambda: rj.alltoall(jnp.ones(2 * n + 1) if bad else jnp.ones(2 * n)),
        ),
        (
            "prescale factor not a number",
            "ValueError",
            ["could not convert"],
            lambda: rj.reduce_scatter(x, prescale_factor="x" if bad else 1.0),
        ),
        ("not an array", "TypeError", ["abc"], lambda: rj.allreduce("abc" if bad else x)),
    ]
    for what, own, fragments, call in calls:
        if bad:
            expect_failure([own] + fragments, call, f"{what} (this rank's own)")
        else:
            expect_failure(
                ["ringcc.MismatchError", f"rank {last} could not start"] + fragments, call, f"{what} (rank {last}'s)"
            )
        got = host(rj.allreduce(jnp.full((3,), ctx.rank + 1.0, jnp.float32)))
        expect(bool(np.all(got == n * (n + 1) / 2)), f"allreduce after {what}: {got}")


@case("platform/as-expected")
def platform(ctx):
    # RINGCC_TEST_EXPECT_JAX_PLATFORM (tests/gpu: "gpu"): the arrays of
    # these cases, and the collectives' results, live on that platform.
    want = os.environ.get("RINGCC_TEST_EXPECT_JAX_PLATFORM", "cpu")
    x = jnp.arange(4, dtype=jnp.float32) + ctx.rank
    y = jax.jit(lambda v: rj.allreduce(v, op="sum"))(x)
    got = {d.platform for d in y.devices()}
    expect(
        jax.default_backend() == want and got == {want},
        f"default backend {jax.default_backend()}, result on {got}; expected {want}",
    )
    check_equal(host(y), np.arange(4, dtype=np.float32) * ctx.size + sum(range(ctx.size)), "allreduce")


@case("lowering/cuda-platform")
def lowering_cuda(ctx):
    # On a machine without a GPU, JAX still lowers for the CUDA platform:
    # each collective becomes a custom call of the same target (ringcc's
    # CUDA handler takes XLA's stream), threaded by the ordered effect's
    # token from one to the next. ROCm has no handler: a clear error.
    def f(x):
        a = rj.allreduce(x, op="average")
        b = rj.allgather(a)
        c = rj.broadcast(b, root=0)
        return rj.reduce_scatter(c, op="sum"), rj.alltoall(c)

    targets = ("ringcc_allreduce", "ringcc_allgather", "ringcc_broadcast", "ringcc_reduce_scatter", "ringcc_alltoall")
    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in targets]
    spec = jax.ShapeDtypeStruct((2 * ctx.size, 3), jnp.float32)
    exported = jax.export.export(jax.jit(f), platforms=["cuda"], disabled_checks=checks)(spec)
    calls = [line for line in exported.mlir_module().splitlines() if "stablehlo.custom_call" in line]
    found = [t for t in targets if any(f"@{t}(" in line for line in calls)]
    expect(found == list(targets), f"custom calls for CUDA: {found}")
    expect(all("!stablehlo.token" in line for line in calls), "every custom call takes the effect's token")
    expect_error(
        NotImplementedError,
        ["CPU and CUDA platforms"],
        lambda: jax.export.export(jax.jit(f), platforms=["rocm"], disabled_checks=checks)(spec),
        "lowering for ROCm",
    )


def on_import(rc):
    """Imports jax (64-bit types on) and ringcc.jax once ringcc is imported, before init()."""
    global jax, jnp, rj, ringcc
    ringcc = rc
    import jax as _jax

    _jax.config.update("jax_enable_x64", True)  # float64 and int64 stay 64-bit
    import jax.numpy as _jnp

    jax, jnp = _jax, _jnp
    try:
        import ringcc.jax as _rj
    except ImportError as error:
        raise SystemExit(f"ringcc.jax unavailable: {error}")
    rj = _rj


if __name__ == "__main__":
    sys.exit(run_cases(CASES, on_import=on_import))
