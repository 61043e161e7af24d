"""The ringcc.tensorflow (and ringcc.keras on TensorFlow) cases, run inside
one group of ranks:

    ringrun -np N python tests/frameworks/tensorflow/tensorflow_cases.py --out DIR [--cases PATTERNS]

Every collective against NumPy, eagerly and inside tf.function (graph
mode); the gradients of the collectives; DistributedGradientTape and
DistributedOptimizer against training on the averaged gradients; fusion
(the engine's statistics); ops that ranks run in opposite orders on a
one-thread executor; errors; objects; process sets; a TF1
MonitoredTrainingSession with its hooks; Keras' model.fit with the
DistributedOptimizer and callbacks. Inputs come from a per-case seed, so
every rank can rebuild any rank's input. tests/frameworks/tensorflow/test_tensorflow.py
parametrizes its tests from CASES.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))  # tests/harness
from rank_harness import CaseList, check_close, check_equal, expect, expect_error, expect_threads_agree, run_cases  # noqa: E402

tf = hvd = ringcc = None  # imported by on_import(), so that pytest can read CASES without TensorFlow

CASES = CaseList()
case = CASES.case

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64"]
OPS = ["sum", "average", "min", "max", "product"]


def np_dtype(name):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def rank_input(ctx, rank, shape, dtype, op="sum", salt=0):
    rng = ctx.rng(rank, salt)
    if op == "product":
        values = rng.choice([-1, 1, 2] if dtype not in ("uint8",) else [1, 2], size=shape)
        if ctx.size > 3:
            values = rng.choice([-1, 1] if dtype != "uint8" else [1], size=shape)
    else:
        values = rng.integers(0 if dtype == "uint8" else -3, 4, size=shape)
    return values.astype(np_dtype(dtype))


def reference(ctx, shape, dtype, op, salt=0):
    data = [rank_input(ctx, r, shape, dtype, op, salt).astype(np.float64) for r in range(ctx.size)]
    stack = np.stack(data)
    want = {
        "sum": stack.sum(0),
        "average": stack.sum(0) / ctx.size,
        "min": stack.min(0),
        "max": stack.max(0),
        "product": stack.prod(0),
    }[op]
    if op == "average" and np_dtype(dtype).kind in "iu":
        want = np.trunc(want)
    return want


HVD_OPS = {}


def hvd_op(op):
    return {"sum": hvd.Sum, "average": hvd.Average, "min": hvd.Min, "max": hvd.Max, "product": hvd.Product}[op]


def check_reduced(got, want, dtype, what):
    got = np.asarray(got)
    if np_dtype(dtype).kind == "f":
        rtol = 1e-2 if dtype in ("float16", "bfloat16") else 1e-6
        check_close(got, want, np.maximum(np.abs(want), 1.0), rtol, what, want_dtype=np_dtype(dtype))
    else:
        check_equal(got, want.astype(np_dtype(dtype)), what)


# --------------------------------------------------------------------------
# Allreduce


def _allreduce_case(mode):
    def run(ctx):
        shape = (5, 3)
        for dtype in DTYPES:
            for op in OPS:
                x = tf.constant(rank_input(ctx, ctx.rank, shape, dtype, op))
                if mode == "eager":
                    got = hvd.allreduce(x, op=hvd_op(op), name=f"ar.{dtype}.{op}")
                else:
                    fn = tf.function(lambda t, o=op: hvd.allreduce(t, op=hvd_op(o)))
                    got = fn(x)
                check_reduced(got.numpy(), reference(ctx, shape, dtype, op), dtype, f"{mode} {dtype} {op}")

    return run


CASES.add("allreduce/eager", _allreduce_case("eager"))
CASES.add("allreduce/graph", _allreduce_case("graph"))


@case("allreduce/graph-holds-the-op")
def _(ctx):
    fn = tf.function(lambda t: hvd.allreduce(t))
    graph = fn.get_concrete_function(tf.TensorSpec([4], tf.float32)).graph
    types = [op.type for op in graph.get_operations()]
    expect("RingccAllreduce" in types, f"the traced graph holds no RingccAllreduce op: {types}")
    got = fn(tf.ones([4]) * (ctx.rank + 1)).numpy()
    check_close(got, np.full(4, (ctx.size + 1) / 2.0), np.ones(4), 1e-6, "graph allreduce")


@case("allreduce/scale-factors-and-fp16")
def _(ctx):
    x = tf.constant(rank_input(ctx, ctx.rank, (7,), "float32"))
    want = reference(ctx, (7,), "float32", "sum")
    got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
    check_close(got.numpy(), want * 1.5, np.maximum(np.abs(want), 1), 1e-6, "scaled sum")
    got = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    expect(got.dtype == tf.float32, f"fp16 compression returns {got.dtype}")
    check_close(got.numpy(), want, np.maximum(np.abs(want), 1), 1e-3, "fp16 compressed sum")
    got = hvd.allreduce(x, average=False)
    check_close(got.numpy(), want, np.maximum(np.abs(want), 1), 1e-6, "average=False")


@case("allreduce/other-dtypes")
def _(ctx):
    x = tf.constant(rank_input(ctx, ctx.rank, (6,), "int32"), dtype=tf.int16)
    got = hvd.allreduce(x, op=hvd.Sum)
    expect(got.dtype == tf.int16, f"int16 result dtype {got.dtype}")
    check_equal(got.numpy(), reference(ctx, (6,), "int32", "sum").astype(np.int16), "int16 sum")


@case("allreduce/indexed-slices")
def _(ctx):
    params = tf.Variable(np.arange(12, dtype=np.float32).reshape(6, 2))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(params, [ctx.rank % 6, 5]))
    grad = tape.gradient(loss, params)
    expect(isinstance(grad, tf.IndexedSlices), f"tf.gather's gradient is {type(grad).__name__}")
    reduced = hvd.allreduce(grad, op=hvd.Sum)
    dense = tf.convert_to_tensor(reduced).numpy()
    want = np.zeros((6, 2), np.float32)
    for r in range(ctx.size):
        want[r % 6] += 1
        want[5] += 1
    check_close(dense, want, np.ones_like(want), 1e-6, "IndexedSlices allreduce")


@case("grouped_allreduce/eager-and-graph")
def _(ctx):
    shapes = [(3,), (2, 2), (5, 1, 2), ()]
    xs = [tf.constant(rank_input(ctx, ctx.rank, s, "float32", salt=i)) for i, s in enumerate(shapes)]
    wants = [reference(ctx, s, "float32", "average", salt=i) for i, s in enumerate(shapes)]
    for mode, fn in (("eager", lambda ts: hvd.grouped_allreduce(ts)), ("graph", tf.function(hvd.grouped_allreduce))):
        got = fn(xs)
        for i, (g, w) in enumerate(zip(got, wants)):
            check_close(g.numpy(), w, np.maximum(np.abs(w), 1), 1e-6, f"{mode} grouped tensor {i}")


# --------------------------------------------------------------------------
# Allgather, broadcast, alltoall, reducescatter


@case("allgather/uneven-eager-and-graph")
def _(ctx):
    rows = [r + 1 for r in range(ctx.size)]
    x = tf.constant(np.full((rows[ctx.rank], 3), ctx.rank, np.int32))
    want = np.concatenate([np.full((rows[r], 3), r, np.int32) for r in range(ctx.size)])
    check_equal(hvd.allgather(x).numpy(), want, "eager allgather")
    fn = tf.function(hvd.allgather, input_signature=[tf.TensorSpec([None, 3], tf.int32)])
    out = fn(x)
    check_equal(out.numpy(), want, "graph allgather")
    static = fn.get_concrete_function().structured_outputs
    expect(static.shape.as_list() == [None, 3], f"static shape {static.shape}")
    got = hvd.grouped_allgather([x, tf.constant([float(ctx.rank)])])
    check_equal(got[0].numpy(), want, "grouped allgather 0")
    check_equal(got[1].numpy(), np.arange(ctx.size, dtype=np.float32), "grouped allgather 1")
    check_equal(hvd.allgather(tf.constant(ctx.rank)).numpy(), np.arange(ctx.size, dtype=np.int32), "scalar")
    b = hvd.allgather(tf.constant([ctx.rank % 2 == 0]))
    check_equal(b.numpy(), np.array([r % 2 == 0 for r in range(ctx.size)]), "bool allgather")


@case("broadcast/eager-graph-variables")
def _(ctx):
    root = ctx.size - 1
    x = tf.constant(rank_input(ctx, ctx.rank, (4, 2), "float64"))
    want = rank_input(ctx, root, (4, 2), "float64")
    check_equal(hvd.broadcast(x, root).numpy(), want, "eager broadcast")
    check_equal(tf.function(lambda t: hvd.broadcast(t, root))(x).numpy(), want, "graph broadcast")
    v = [tf.Variable(rank_input(ctx, ctx.rank, (3,), "float32", salt=i)) for i in range(3)]
    hvd.broadcast_variables(v, root_rank=0)
    for i, var in enumerate(v):
        check_equal(var.numpy(), rank_input(ctx, 0, (3,), "float32", salt=i), f"variable {i}")
    w = tf.Variable(rank_input(ctx, ctx.rank, (3,), "float32", salt=9))

    @tf.function
    def assign_in_graph():
        hvd.broadcast_variables([w], root_rank=root)

    assign_in_graph()
    check_equal(w.numpy(), rank_input(ctx, root, (3,), "float32", salt=9), "graph broadcast_variables")


@case("alltoall/splits")
def _(ctx):
    n = ctx.size
    splits = [(ctx.rank + j) % 3 for j in range(n)]
    rows = sum(splits)
    x = tf.constant(np.arange(rows * 2, dtype=np.float32).reshape(rows, 2) + 100 * ctx.rank)
    out, received = hvd.alltoall(x, splits=splits)
    want_rows, want_splits = [], []
    for r in range(n):
        r_splits = [(r + j) % 3 for j in range(n)]
        start = sum(r_splits[: ctx.rank])
        block = np.arange(sum(r_splits) * 2, dtype=np.float32).reshape(-1, 2)[start : start + r_splits[ctx.rank]]
        want_rows.append(block + 100 * r)
        want_splits.append(r_splits[ctx.rank])
    check_equal(out.numpy(), np.concatenate(want_rows), "alltoall output")
    check_equal(received.numpy(), np.array(want_splits, np.int64), "received splits")
    out2, rec2 = tf.function(lambda t, s: hvd.alltoall(t, splits=s))(x, tf.constant(splits, tf.int32))
    check_equal(out2.numpy(), np.concatenate(want_rows), "graph alltoall")
    even = tf.constant(np.full((2 * n, 1), ctx.rank, np.int64))
    out3, rec3 = hvd.alltoall(even)
    check_equal(out3.numpy(), np.repeat(np.arange(n, dtype=np.int64), 2).reshape(-1, 1), "equal splits")


@case("reducescatter/eager-graph-grouped")
def _(ctx):
    rows = 2 * ctx.size + 1
    x = tf.constant(rank_input(ctx, ctx.rank, (rows, 2), "float32"))
    want = reference(ctx, (rows, 2), "float32", "sum")
    mine = rows // ctx.size + (1 if ctx.rank < rows % ctx.size else 0)
    first = ctx.rank * (rows // ctx.size) + min(ctx.rank, rows % ctx.size)
    block = want[first : first + mine]
    got = hvd.reducescatter(x, op=hvd.Sum)
    check_close(got.numpy(), block, np.maximum(np.abs(block), 1), 1e-6, "eager reducescatter")
    got = tf.function(lambda t: hvd.reducescatter(t, op=hvd.Average))(x)
    check_close(got.numpy(), block / ctx.size, np.maximum(np.abs(block), 1), 1e-6, "graph reducescatter average")
    a, b = hvd.grouped_reducescatter([x, x * 2], op=hvd.Sum)
    check_close(b.numpy(), 2 * block, np.maximum(np.abs(block), 1), 1e-6, "grouped reducescatter")
    expect_error(ValueError, ["rank 0"], lambda: hvd.reducescatter(tf.constant(1.0)), "0-d reducescatter")


@case("threads/unnamed-calls-pair-by-thread", min_size=2)
def _(ctx):
    # Two threads of every rank call unnamed collectives at once: each call
    # must pair with the same thread's call on the peers (named alike),
    # never with the other thread's, whose values differ.
    def work(k):
        for i in range(8):
            x = tf.fill([4], float(100 * k + ctx.rank))
            total = sum(100 * k + r for r in range(ctx.size))
            got = hvd.allreduce(x, op=hvd.Sum).numpy()
            packed = hvd.grouped_allreduce([x] * 9, op=hvd.Sum)[-1].numpy()
            root = hvd.broadcast(x, root_rank=ctx.size - 1).numpy()
            if not (np.all(got == total) and np.all(packed == total) and np.all(root == 100 * k + ctx.size - 1)):
                raise AssertionError(f"call {i}: {got[0]}, {packed[0]}, {root[0]} (sum {total})")

    expect_threads_agree(work)


@case("barrier-and-join")
def _(ctx):
    hvd.barrier()
    tf.function(hvd.barrier)()
    last = hvd.join()
    expect(0 <= last < ctx.size, f"join returned {last}")


# --------------------------------------------------------------------------
# Gradients


@case("gradients/collectives")
def _(ctx):
    n = ctx.size
    x = tf.Variable(np.arange(2 * n * 2, dtype=np.float32).reshape(2 * n, 2) + ctx.rank)
    for mode in ("eager", "graph"):

        def grads(fn):
            def compute():
                with tf.GradientTape() as tape:
                    y = fn(x)
                    weights = tf.reshape(tf.cast(tf.range(tf.size(y)), y.dtype), tf.shape(y))
                    loss = tf.reduce_sum(y * weights)
                return tape.gradient(loss, x)

            return (tf.function(compute) if mode == "graph" else compute)().numpy()

        weights = np.arange(2 * n * 2, dtype=np.float32).reshape(2 * n, 2)
        # allreduce(Sum): the gradient is the Sum-allreduce of the incoming one.
        g = grads(lambda t: hvd.allreduce(t, op=hvd.Sum))
        check_close(g, weights * n, np.maximum(weights * n, 1), 1e-6, f"{mode} allreduce grad")
        g = grads(lambda t: hvd.allreduce(t, op=hvd.Average))
        check_close(g, weights, np.maximum(weights, 1), 1e-6, f"{mode} average grad")
        # broadcast: Average of the gradient on the root, zeros elsewhere.
        g = grads(lambda t: hvd.broadcast(t, 0))
        check_close(g, weights if ctx.rank == 0 else 0 * weights, np.maximum(weights, 1), 1e-6, f"{mode} bcast grad")
        # allgather: Average of the gradient, this rank's rows.
        gw = np.arange(2 * n * 2 * n, dtype=np.float32).reshape(2 * n * n, 2)
        g = grads(lambda t: hvd.allgather(t))
        rows = slice(ctx.rank * 2 * n, (ctx.rank + 1) * 2 * n)
        check_close(g, gw[rows], np.maximum(gw[rows], 1), 1e-6, f"{mode} allgather grad")
        # reducescatter(Sum): the allgather of the blocks' gradients, times the size.
        g = grads(lambda t: hvd.reducescatter(t, op=hvd.Sum))
        block = np.arange(2 * 2, dtype=np.float32).reshape(2, 2)
        check_close(
            g, np.tile(block, (n, 1)) * n, np.maximum(np.tile(block, (n, 1)) * n, 1), 1e-6, f"{mode} reducescatter grad"
        )
        # alltoall: the alltoall back with the received splits.
        g = grads(lambda t: hvd.alltoall(t)[0])
        back = np.tile(weights[2 * ctx.rank : 2 * ctx.rank + 2], (n, 1))
        check_close(g, back, np.maximum(back, 1), 1e-6, f"{mode} alltoall grad")


# --------------------------------------------------------------------------
# Training


def _model_data(ctx, rank):
    rng = ctx.rng(rank, 7)
    return rng.normal(size=(16, 4)).astype(np.float32), rng.normal(size=(16, 1)).astype(np.float32)


def _reference_grads(ctx, w, b):
    gw, gb = [], []
    for r in range(ctx.size):
        x, y = _model_data(ctx, r)
        err = x @ w + b - y
        gw.append(2 * x.T @ err / x.shape[0])
        gb.append(2 * err.sum(0) / x.shape[0])
    return np.mean(gw, 0), np.mean(gb, 0)


@case("DistributedGradientTape/eager-graph-options")
def _(ctx):
    w0 = np.linspace(-1, 1, 4, dtype=np.float32).reshape(4, 1)
    b0 = np.array([0.5], np.float32)
    x, y = _model_data(ctx, ctx.rank)
    want_w, want_b = _reference_grads(ctx, w0, b0)
    options = [
        {},
        {"compression": hvd.Compression.fp16},
        {"gradient_predivide_factor": 2.0},
        {"num_groups": 2},
        {"op": hvd.Sum},
    ]
    for opts in options:
        for mode in ("eager", "graph"):
            w, b = tf.Variable(w0), tf.Variable(b0)

            def step():
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
                tape = hvd.DistributedGradientTape(tape, **opts)
                return tape.gradient(loss, [w, b])

            gw, gb = (tf.function(step) if mode == "graph" else step)()
            scale = ctx.size if opts.get("op") == hvd.Sum else 1
            rtol = 2e-3 if "compression" in opts else 1e-5
            what = f"{mode} {opts}"
            check_close(gw.numpy(), want_w * scale, np.maximum(np.abs(want_w * scale), 1), rtol, f"{what} w")
            check_close(gb.numpy(), want_b * scale, np.maximum(np.abs(want_b * scale), 1), rtol, f"{what} b")


@case("DistributedGradientTape/sparse-and-partial")
def _(ctx):
    emb = tf.Variable(np.ones((5, 2), np.float32))
    local = tf.keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros")
    local.build((None, 2))
    for sparse_as_dense in (False, True):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.gather(emb, [ctx.rank % 5]))
        tape = hvd.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense)
        (g,) = tape.gradient(loss, [emb])
        dense = tf.convert_to_tensor(g).numpy()
        want = np.zeros((5, 2), np.float32)
        for r in range(ctx.size):
            want[r % 5] += 1.0 / ctx.size
        check_close(dense, want, np.ones_like(want), 1e-6, f"sparse_as_dense={sparse_as_dense}")
    inputs = tf.constant([[1.0 + ctx.rank, 2.0]])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(local(inputs)) + tf.reduce_sum(emb)
    tape = hvd.PartialDistributedGradientTape(tape, local_layers=[local])
    gk, gb, ge = tape.gradient(loss, [local.kernel, local.bias, emb])
    check_close(gk.numpy(), np.array([[1.0 + ctx.rank], [2.0]]) / ctx.size, np.ones((2, 1)), 1e-6, "local kernel")
    check_close(ge.numpy(), np.ones((5, 2)), np.ones((5, 2)), 1e-6, "shared variable")


@case("DistributedOptimizer/v1-backward-passes", max_size=2)
def _(ctx):
    w0 = np.linspace(-1, 1, 4, dtype=np.float32).reshape(4, 1)
    x, y = _model_data(ctx, ctx.rank)
    for bpps in (1, 2):
        w = tf.Variable(w0)
        opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1), backward_passes_per_step=bpps)
        for _ in range(bpps):
            opt.minimize(lambda: tf.reduce_mean(tf.square(tf.matmul(x, w) - y)), var_list=[w])
        gw, _ = _reference_grads(ctx, w0, np.zeros(1, np.float32))
        want = w0 - 0.1 * gw * bpps  # summed over the passes, not averaged
        check_close(w.numpy(), want, np.maximum(np.abs(want), 1), 1e-5, f"backward_passes_per_step={bpps}")
    # average_aggregated_gradients: the passes' gradients averaged.
    w = tf.Variable(w0)
    opt = hvd.DistributedOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1), backward_passes_per_step=2, average_aggregated_gradients=True
    )
    for _ in range(2):
        opt.minimize(lambda: tf.reduce_mean(tf.square(tf.matmul(x, w) - y)), var_list=[w])
    want = w0 - 0.1 * gw
    check_close(w.numpy(), want, np.maximum(np.abs(want), 1), 1e-5, "average_aggregated_gradients=True")


@case("sessions/monitored-training-session")
def _(ctx):
    # The seeds' TF1 recipe: a graph trained by a MonitoredTrainingSession
    # with BroadcastGlobalVariablesHook(0) and the v1 DistributedOptimizer,
    # whose 300 gradients are packed by the grouped op. Variables start
    # different on every rank, so a missing broadcast shows in the result.
    steps, lr, count = 3, 0.1, 300
    graph = tf.Graph()
    with graph.as_default():
        step = tf.compat.v1.train.get_or_create_global_step()
        start = [np.full(64, ctx.rank * 10.0 + i % 3, np.float32) for i in range(count)]
        variables = [tf.compat.v1.get_variable(f"v{i}", initializer=v) for i, v in enumerate(start)]
        loss = tf.add_n([tf.reduce_sum(v * float(ctx.rank + 1)) for v in variables])
        opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(lr))
        train = opt.minimize(loss, global_step=step)
        hooks = [hvd.BroadcastGlobalVariablesHook(0), tf.compat.v1.train.StopAtStepHook(last_step=steps)]
        runs = 0
        with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks) as session:
            while not session.should_stop():
                session.run(train)
                runs += 1
            got = session._tf_sess().run(variables)
        expect(runs == steps, f"the session ran {runs} steps, not {steps}")
        mean_grad = (ctx.size + 1) / 2.0
        for i in (0, 1, 2, count - 1):
            want = np.full(64, i % 3 - steps * lr * mean_grad, np.float32)
            check_close(got[i], want, np.ones(64), 1e-5, f"variable {i} after {steps} steps")

        # A shape that differs by rank fails session.run on every rank with
        # ringcc's message, and the session's graph stays usable.
        bad = hvd.allreduce(tf.ones([2 + ctx.rank]), name="session.bad.shape")
        good = hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="session.after")
        with tf.compat.v1.Session(graph=graph) as session:
            if ctx.size > 1 and not os.environ.get("NO_MISMATCH"):
                fragments = ["ringcc.MismatchError", "session.bad.shape", "shape"]
                expect_error(tf.errors.InvalidArgumentError, fragments, lambda: session.run(bad), "a mismatch")
            check_close(session.run(good), np.full(2, ctx.size), np.ones(2), 1e-6, "after the mismatch")


@case("fusion/many-variables-in-one-step")
def _(ctx):
    variables = [tf.Variable(tf.ones([256]) * (i % 7)) for i in range(200)]

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.add_n([tf.reduce_sum(v * float(ctx.rank + 1)) for v in variables])
        tape = hvd.DistributedGradientTape(tape)
        return tape.gradient(loss, variables)

    step()  # traced; names cached by the engine
    before = ringcc.engine_stats()
    grads = step()
    after = ringcc.engine_stats()
    want = (ctx.size + 1) / 2.0
    check_close(grads[-1].numpy(), np.full(256, want), np.ones(256), 1e-6, "a fused gradient")
    tensors = after["tensors"] - before["tensors"]
    fused = after["fused_collectives"] - before["fused_collectives"]
    cycles = after["cycles"] - before["cycles"]
    ctx.note(f"one step: {tensors} tensors, {fused} fused collectives, {cycles} cycles")
    # Packed by the op (grouped_allreduce_op): 200 KiB is one pack, its
    # layout checked by the engine's negotiation (no second tensor).
    expect(tensors == 1, f"the step's 200 gradients reached the engine as {tensors} tensors, not one pack")
    expect(fused <= 1, f"200 gradients of 1 KiB ran as {fused} fused collectives")


@case("fusion/separate-ops-in-one-function")
def _(ctx):
    # A step that reduces each gradient with an allreduce of its own, as
    # Horovod scripts do: TensorFlow must not chain the ops in program order
    # (each would wait for the one before), so that they reach the engine
    # together and fuse.
    count = 48
    xs = [tf.Variable(np.full(64, float(i), np.float32)) for i in range(count)]

    @tf.function
    def step():
        return [hvd.allreduce(x * float(ctx.rank + 1), op=hvd.Sum, name=f"separate.{i}") for i, x in enumerate(xs)]

    graph = step.get_concrete_function().graph
    chained = [op.name for op in graph.get_operations() if op.type == "RingccAllreduce" and op.control_inputs]
    expect(not chained, f"TensorFlow chained the allreduces: {chained[:4]} wait for others")
    step()  # names cached by the engine
    least = count
    for _ in range(3):
        before = ringcc.engine_stats()
        got = step()
        after = ringcc.engine_stats()
        scale = ctx.size * (ctx.size + 1) / 2
        check_close(got[-1].numpy(), np.full(64, (count - 1) * scale), np.ones(64), 1e-6, "the last allreduce")
        least = min(least, after["cycles"] - before["cycles"])
    ctx.note(f"{count} allreduces in {least} cycles at least")
    expect(least <= count // 4, f"{count} separate allreduces of one function took {least} engine cycles at least")


@case("fusion/packs-keep-shapes-values-and-dtypes")
def _(ctx):
    # 12 tensors of several shapes (a scalar among them) and two dtypes,
    # packed in parts of at most 64 bytes (the threshold as read while
    # tracing), each op reduces as it would alone; then tensors whose
    # sizes are only known when the function runs (not packed).
    shapes = [[3, 4], [5], [], [2, 2, 2], [7], [1, 1], [16], [2, 3], [4], [9], [1], [3, 3]]
    tensors = [
        tf.cast(tf.reshape(tf.range(int(np.prod(shape, dtype=np.int64))), shape), tf.float32 if i % 3 else tf.int32)
        + (ctx.rank + 1) * (i + 1)
        for i, shape in enumerate(shapes)
    ]
    from ringcc.tensorflow import _ops

    job_threshold = _ops._fusion_threshold
    _ops._fusion_threshold = lambda: 64
    try:
        for op, combine in ((hvd.Sum, np.sum), (hvd.Max, np.max), (hvd.Min, np.min), (hvd.Average, np.mean)):
            fn = tf.function(lambda ts, op=op: hvd.grouped_allreduce(ts, op=op, name=f"packs.{op}"))
            got = fn(tensors)
            for i, (shape, t, g) in enumerate(zip(shapes, tensors, got)):
                base = t.numpy() - (ctx.rank + 1) * (i + 1)
                want = combine([base + (r + 1) * (i + 1) for r in range(ctx.size)], axis=0).astype(
                    g.dtype.as_numpy_dtype
                )
                expect(g.dtype == t.dtype and list(g.shape) == shape, f"op {op} tensor {i}: {g.dtype} {g.shape}")
                check_close(
                    g.numpy(), want, np.ones_like(want, np.float64), 1e-5, f"op {op} tensor {i} of shape {shape}"
                )
    finally:
        _ops._fusion_threshold = job_threshold

    @tf.function(input_signature=[[tf.TensorSpec([None], tf.float32)] * 8 + [tf.TensorSpec([None, 2], tf.float32)]])
    def unknown(ts):
        return hvd.grouped_allreduce(ts, op=hvd.Sum, name="packs.unknown")

    inputs = [tf.fill([i + 1], float(ctx.rank + i)) for i in range(8)] + [tf.ones([3, 2]) * ctx.rank]
    got = unknown(inputs)
    for i in range(8):
        want = np.full(i + 1, sum(r + i for r in range(ctx.size)), np.float32)
        check_close(got[i].numpy(), want, np.ones(i + 1), 1e-6, f"unknown size, tensor {i}")
    check_close(got[8].numpy(), np.full([3, 2], sum(range(ctx.size)), np.float32), np.ones([3, 2]), 1e-6, "[None, 2]")


@case("bench/tape-floors-run-what-their-steps-run", max_size=2)
def _(ctx):
    # The tape bench's figure is a step's time less its floor's: after
    # TensorFlow's graph optimizer, each floor must run the ops of its step
    # but the collective (ringcc.bench.tensorflow_allreduce.tape_functions).
    from collections import Counter

    from tensorflow.python.eager import context

    from ringcc.bench.tensorflow_allreduce import tape_functions

    variables = [tf.Variable(np.full(64, i % 5, np.float32)) for i in range(40)]
    concat = tf.Variable(np.ones(64 * 40, np.float32))
    functions = tape_functions(tf, hvd, variables, concat)

    def executed(key):
        # The optimized graphs of the function's first call (traced and
        # instantiated then): the op types it runs, with their counts.
        run = context.context()
        run.enable_run_metadata()
        try:
            functions[key]().numpy()
            graphs = run.export_run_metadata().function_graphs
        finally:
            run.disable_run_metadata()
        return sum((Counter(n.op for n in g.post_optimization_graph.node) for g in graphs), Counter())

    ran = {key: executed(key) for key in ("tape", "floor", "one", "one_floor")}
    ctx.note(f"tape {dict(ran['tape'])}; floor {dict(ran['floor'])}")
    for step, floor, collective in (
        ("tape", "floor", "RingccPackedAllreduce"),
        ("one", "one_floor", "RingccAllreduce"),
    ):
        only_step = ran[step] - ran[floor]
        only_floor = ran[floor] - ran[step]
        expect(only_step[collective] == 1, f"{step}: its optimized graph runs {only_step[collective]} {collective} ops")
        # Besides the collective the step may split its packed result; the
        # floor returns its first gradient through one Identity.
        expect(
            set(only_step) <= {collective, "SplitV", "Const"},
            f"{step} runs ops its floor does not: {dict(only_step)}",
        )
        expect(
            set(only_floor) <= {"Identity"} and only_floor["Identity"] <= 1,
            f"{floor} runs ops {step} does not: {dict(only_floor)}",
        )
        expect(
            ran[floor]["ReadVariableOp"] >= ran[step]["ReadVariableOp"] > 0,
            f"{floor} reads fewer variables than {step}",
        )


@case("fusion/packs-eagerly-and-beside-other-tensors")
def _(ctx):
    # Eagerly, a group cut into several packs runs one op per pack, each
    # under a name of its own (named and unnamed groups).
    from ringcc.tensorflow import _ops

    tensors = [tf.fill([i % 5 + 1, 2], float(ctx.rank + i)) for i in range(10)]
    job_threshold = _ops._fusion_threshold
    _ops._fusion_threshold = lambda: 48
    try:
        for name in ("eager.packs", None):
            got = hvd.grouped_allreduce(tensors, op=hvd.Sum, name=name)
            for i, g in enumerate(got):
                want = np.full([i % 5 + 1, 2], sum(r + i for r in range(ctx.size)), np.float32)
                check_close(g.numpy(), want, np.ones_like(want), 1e-6, f"eager packs ({name}), tensor {i}")
    finally:
        _ops._fusion_threshold = job_threshold

    # A pack and a tensor of its own, both enqueued while the engine runs a
    # long allreduce, run next as one fused collective: the pack's tensors
    # are read where they lie beside the other tensor's buffer.
    @tf.function
    def both(ts, other):
        return hvd.grouped_allreduce(ts, op=hvd.Sum, name="beside.pack"), hvd.allreduce(
            other, op=hvd.Sum, name="beside.alone"
        )

    other = tf.fill([300], float(ctx.rank) + 0.5)
    big = np.ones(8 << 20, np.float32)
    both(tensors, other)  # traced before the tries: tracing outlasts the long allreduce
    fused_once = False
    for attempt in range(12):
        if fused_once:
            break
        handle = ringcc.allreduce_async(big, name="beside.big")
        before = ringcc.engine_stats()
        packed, alone = both(tensors, other)
        ringcc.synchronize(handle)
        after = ringcc.engine_stats()
        for i, g in enumerate(packed):
            want = np.full([i % 5 + 1, 2], sum(r + i for r in range(ctx.size)), np.float32)
            check_close(g.numpy(), want, np.ones_like(want), 1e-6, f"pack beside a tensor, tensor {i}")
        want = np.full([300], sum(r + 0.5 for r in range(ctx.size)), np.float32)
        check_close(alone.numpy(), want, np.ones_like(want), 1e-6, "the tensor beside a pack")
        fused_once = fused_once or after["fused_collectives"] - before["fused_collectives"] == 1
    expect(fused_once, "in 12 tries the pack and the other tensor never ran as one fused collective")


@case("gradients/packed-grouped-allreduce")
def _(ctx):
    # Eight tensors or more of known shapes travel as one pack: its gradient
    # is the allreduce of the incoming gradients, split back to each input.
    shapes = [[2, 3], [4], [1, 1], [5], [3, 2], [2], [6], [1, 4], [3]]
    xs = [tf.Variable(np.full(shape, float(i + ctx.rank), np.float32)) for i, shape in enumerate(shapes)]
    weights = [np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + i for i, shape in enumerate(shapes)]
    for op, factor in ((hvd.Sum, ctx.size), (hvd.Average, 1)):
        for mode in ("eager", "graph"):

            def compute(op=op):
                with tf.GradientTape() as tape:
                    ys = hvd.grouped_allreduce(xs, op=op)
                    loss = tf.add_n([tf.reduce_sum(y * w) for y, w in zip(ys, weights)])
                return tape.gradient(loss, xs)

            grads = (tf.function(compute) if mode == "graph" else compute)()
            for i, (g, w) in enumerate(zip(grads, weights)):
                check_close(g.numpy(), w * factor, np.maximum(w * factor, 1), 1e-6, f"{mode} op {op} input {i}")


@case("graph/opposite-orders-on-one-thread")
def _(ctx):
    # Eight independent allreduces whose inputs become ready in opposite
    # orders on even and odd ranks (a chain of i, or 7 - i, steps before
    # allreduce i), on an executor of one thread (tensorflow_cases runs so):
    # a blocking kernel would hold that thread waiting for a tensor the
    # other rank has not reached; the asynchronous ones all complete.
    xs = [tf.constant([float(i + ctx.rank)]) for i in range(8)]

    @tf.function
    def independent():
        outs = []
        for i in range(8):
            t = xs[i]
            for _ in range(i if ctx.rank % 2 == 0 else 7 - i):
                t = tf.sqrt(tf.square(t) + 1.0) - 1.0 + t - tf.sqrt(tf.square(t) + 1.0) + 1.0
            outs.append(hvd.allreduce(t, op=hvd.Sum, name=f"order.{i}"))
        return outs

    got = independent()
    for i, g in enumerate(got):
        want = sum(i + r for r in range(ctx.size))
        check_close(g.numpy(), np.array([want], np.float64), np.ones(1), 1e-5, f"tensor {i}")


# --------------------------------------------------------------------------
# Errors


@case("errors/mismatch-eager-and-graph", min_size=2)
def _(ctx):
    x = tf.ones([3 + ctx.rank])
    error, _ = expect_error(
        ringcc.MismatchError, ["ringcc.MismatchError", "shape"], lambda: hvd.allreduce(x, name="bad.shape"), "eager"
    )
    expect(error is None or isinstance(error, tf.errors.InvalidArgumentError), "also tf.errors.InvalidArgumentError")
    expect(error is None or isinstance(error, hvd.HorovodInternalError), "also HorovodInternalError")
    fn = tf.function(lambda t: hvd.allreduce(t, name="bad.graph"))
    expect_error(tf.errors.InvalidArgumentError, ["ringcc.MismatchError"], lambda: fn(x), "graph")
    # The job stays usable.
    got = hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="after.mismatch")
    check_close(got.numpy(), np.full(2, ctx.size), np.ones(2), 1e-6, "after a mismatch")


@case("errors/packed-shapes-that-differ", min_size=2)
def _(ctx):
    # Eight tensors of as many elements on every rank, the first [2, 3] on
    # even ranks and [3, 2] on odd ones: packed, the engine sees the same
    # flat sizes, and the engine's comparison of the packs' layouts fails
    # every rank instead of a silent mix of rows.
    tensors = [tf.ones([2, 3] if ctx.rank % 2 == 0 else [3, 2])] + [tf.ones([4])] * 7
    fn = tf.function(lambda ts: hvd.grouped_allreduce(ts, op=hvd.Sum, name="bad.packed"))
    expect_error(
        tf.errors.InvalidArgumentError,
        [
            "ringcc.MismatchError",
            "disagree on the shapes of the tensors packed into it",
            "bad.packed",
            "this rank: 8 tensors of float32 packed",
            "[2, 3]" if ctx.rank % 2 == 0 else "[3, 2]",
        ],
        lambda: fn(tensors),
        "packed grouped allreduce",
    )
    got = hvd.grouped_allreduce([tf.ones([2])] * 8, op=hvd.Sum, name="after.packed")
    check_close(got[-1].numpy(), np.full(2, ctx.size), np.ones(2), 1e-6, "after a packed mismatch")


def _fails_from_rank_1(ctx, call, own, what):
    """call() fails within 10 s on every rank, as a TensorFlow error: on rank
    1, whose argument is wrong, with `own` in its message; on the others
    with a MismatchError saying rank 1 could not start it."""
    if ctx.rank == 1:
        fragments, what = own, f"rank 1, {what}"
    else:
        fragments, what = ["ringcc.MismatchError", "rank 1 could not start"], f"others, {what}"
    _, seconds = expect_error(tf.errors.OpError, fragments, call, what)
    expect(seconds < 10, f"{what}: the error took {seconds:.1f} s")


@case("errors/grouped-arguments-refused-on-one-rank", min_size=2)
def _(ctx):
    # Rank 1 names a reduction that does not exist in grouped calls: it
    # raises its own error (eagerly ringcc.InvalidArgumentError, as a
    # single call does; in a graph when the function runs), and the other
    # ranks a MismatchError naming it, all at once, whether the group is
    # named or not, packed or not, of one dtype or two; so do the single
    # calls unnamed in a graph, whose names exist only once their ops are
    # built. Then the job goes on.
    op = "bogus" if ctx.rank == 1 else hvd.Sum
    groups = (
        ("3 named", [tf.ones([4])] * 3, "refused.three"),
        ("3 unnamed", [tf.ones([4])] * 3, None),
        ("9 packed", [tf.ones([4])] * 9, "refused.packed"),
        ("9 packed unnamed", [tf.ones([4])] * 9, None),
        ("2 dtypes", [tf.ones([4]), tf.ones([4], tf.int32)], "refused.dtypes"),
    )
    for what, group, name in groups:
        calls = (
            ("grouped_allreduce", lambda g=group, n=name: hvd.grouped_allreduce(g, op=op, name=n)),
            (
                "grouped_reducescatter",
                lambda g=group, n=name: hvd.grouped_reducescatter(g, op=op, name=n and f"{n}.scatter"),
            ),
        )
        if what == "3 unnamed":
            # The single calls too: unnamed in a graph, no name exists before
            # the op is built.
            calls += (
                ("allreduce", lambda g=group: hvd.allreduce(g[0], op=op)),
                ("reducescatter", lambda g=group: hvd.reducescatter(g[0], op=op)),
                ("broadcast", lambda g=group: hvd.broadcast(g[0], "bogus" if ctx.rank == 1 else 0)),
            )
        for kind, call in calls:
            for how, run in (("eager", call), ("graph", tf.function(call))):
                label = f"{kind} of {what} ({how})"
                # A root that is no int is a ValueError, an unknown reduction
                # ringcc's InvalidArgumentError (eagerly).
                refused = "'bogus'" if kind == "broadcast" else "unknown reduction 'bogus'"
                if ctx.rank == 1:
                    own = ringcc.InvalidArgumentError if kind != "broadcast" else ValueError
                    own = own if how == "eager" else tf.errors.InvalidArgumentError
                    _, seconds = expect_error(own, [refused], run, f"rank 1, {label}")
                else:
                    fragments = ["ringcc.MismatchError", "rank 1 could not start", refused]
                    _, seconds = expect_error(tf.errors.OpError, fragments, run, f"others, {label}")
                expect(seconds < 10, f"{label}: the error took {seconds:.1f} s")
    got = hvd.grouped_allreduce([tf.ones([2])] * 9, op=hvd.Sum, name="refused.packed")
    check_close(got[-1].numpy(), np.full(2, ctx.size), np.ones(2), 1e-6, "the same name afterwards")


@case("errors/failed-single-call-fails-the-peers-group", min_size=2)
def _(ctx):
    # Rank 1 makes the single call under the name the others give a grouped
    # call, with a reduction that does not exist: it takes part in the
    # group's first collective as a failed participant and knows nothing of
    # the group's others. The others' engines give those up at once, so the
    # grouped call fails within seconds rather than at the stall timeout,
    # eagerly and in a graph; then both forms run again under the name.
    rows = 2 * ctx.size
    for how in ("eager", "graph"):
        name = f"failed.single.{how}"

        def grouped(n=name):
            return hvd.grouped_allreduce([tf.ones([rows])] * 3, op=hvd.Sum, name=n)

        def single(op, n=name):
            return hvd.allreduce(tf.ones([rows]), op=op, name=n)

        if how == "graph":
            grouped, single = tf.function(grouped), tf.function(single)
        if ctx.rank == 1:
            own = ringcc.InvalidArgumentError if how == "eager" else tf.errors.InvalidArgumentError
            expect_error(own, ["unknown reduction 'bogus'"], lambda: single("bogus"), f"rank 1, {how}")
        else:
            fragments = ["ringcc.MismatchError", "rank 1 could not start", "unknown reduction 'bogus'"]
            _, seconds = expect_error(tf.errors.OpError, fragments, grouped, f"others, {how}")
            expect(seconds < 10, f"{how}: the error took {seconds:.1f} s")
        got = grouped()
        expect(len(got) == 3, f"{how}: the grouped call again gave {len(got)} results")
        check_close(got[-1].numpy(), np.full(rows, ctx.size), np.ones(rows), 1e-6, f"{how}: the group again")
        check_close(single(hvd.Sum).numpy(), np.full(rows, ctx.size), np.ones(rows), 1e-6, f"{how}: single again")


@case("errors/tensor-unconvertible-on-one-rank", min_size=2)
def _(ctx):
    # Rank 1 passes something that is no tensor, alone or in a group: it
    # raises the conversion's error (eagerly as TensorFlow raised it, in a
    # graph when the function runs), and every other rank a MismatchError
    # naming it, at once, named or not (in a graph too, where an unnamed
    # op's name is its node's), packed or not; the same call then runs.
    rows = 2 * ctx.size

    def fails_from_rank_1(label, run):
        if ctx.rank == 1:
            _, seconds = expect_error(Exception, ["convert"], run, f"rank 1, {label}")
        else:
            fragments = ["ringcc.MismatchError", "rank 1 could not start", "convert"]
            _, seconds = expect_error(tf.errors.OpError, fragments, run, f"others, {label}")
        expect(seconds < 10, f"{label}: the error took {seconds:.1f} s")

    def group(count, bad):
        items = [tf.ones([rows]) for _ in range(count)]
        if bad and ctx.rank == 1:
            items[1] = object()
        return items

    kinds = (
        ("grouped_allreduce", lambda g, n: hvd.grouped_allreduce(g, op=hvd.Sum, name=n)),
        ("grouped_allgather", lambda g, n: hvd.grouped_allgather(g, name=n and f"{n}.gather")),
        ("grouped_reducescatter", lambda g, n: hvd.grouped_reducescatter(g, op=hvd.Sum, name=n and f"{n}.scatter")),
    )
    for what, count, name in (
        ("3 named", 3, "unconvertible.three"),
        ("3 unnamed", 3, None),
        ("9 packed", 9, "unconvertible.packed"),
        ("9 packed unnamed", 9, None),
    ):
        for kind, call in kinds:
            fails_from_rank_1(f"{kind} of {what} (eager)", lambda c=call, k=count, n=name: c(group(k, True), n))
            got = call(group(count, False), name)
            expect(len(got) == count, f"{kind} of {what}: the same call again gave {len(got)} results")
            fails_from_rank_1(
                f"{kind} of {what} (graph)", tf.function(lambda c=call, k=count, n=name: c(group(k, True), n))
            )
    singles = (
        ("allreduce", lambda x, n: hvd.allreduce(x, op=hvd.Sum, name=n)),
        ("allgather", lambda x, n: hvd.allgather(x, name=n)),
        ("broadcast", lambda x, n: hvd.broadcast(x, 0, name=n)),
        ("reducescatter", lambda x, n: hvd.reducescatter(x, op=hvd.Sum, name=n)),
        ("alltoall", lambda x, n: hvd.alltoall(x, name=n)),
    )
    for kind, call in singles:
        for name in (f"unconvertible.{kind}", None):
            label = f"{kind}, {'named' if name else 'unnamed'}"

            def one(c=call, n=name):
                return c(object() if ctx.rank == 1 else tf.ones([rows]), n)

            fails_from_rank_1(f"{label} (eager)", one)
            call(tf.ones([rows]), name)  # the same call again
            fails_from_rank_1(f"{label} (graph)", tf.function(one))
    bad_splits = object() if ctx.rank == 1 else [2] * ctx.size
    fails_from_rank_1("alltoall's splits", lambda: hvd.alltoall(tf.ones([rows]), splits=bad_splits))
    check_close(hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy(), np.full(2, ctx.size), np.ones(2), 1e-6, "after")


@case("errors/failed-participant", min_size=2)
def _(ctx):
    # Rank 1 passes a dtype the core cannot reduce: it fails at once with its
    # own error, and every other rank with a MismatchError naming it.
    x = tf.constant([True, False]) if ctx.rank == 1 else tf.constant([1.0, 0.0])
    if ctx.rank == 1:
        expect_error(ringcc.UnsupportedTypeError, ["bool"], lambda: hvd.allreduce(x, name="bad.dtype"), "rank 1")
    else:
        expect_error(ringcc.MismatchError, ["rank 1"], lambda: hvd.allreduce(x, name="bad.dtype"), "others")
    got = hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="after.failed")
    check_close(got.numpy(), np.full(2, ctx.size), np.ones(2), 1e-6, "after a failed participant")
    # A dtype that no collective moves (complex, string) fails the same way,
    # eagerly and in a graph, at once: the ops accept every dtype so that the
    # kernel can tell the peers, which would otherwise wait for rank 1 until
    # the timeout.
    cases = (
        ("complex64", tf.constant([1j], tf.complex64), lambda t, n: hvd.allreduce(t, name=n)),
        ("string", tf.constant(["a"]), lambda t, n: hvd.broadcast(t, 0, name=n)),
    )
    for dtype, bad, run in cases:
        x = bad if ctx.rank == 1 else tf.constant([1.0])
        calls = (
            ("eager", lambda x=x, run=run, n=f"bad.{dtype}": run(x, n)),
            ("graph", tf.function(lambda x=x, run=run, n=f"bad.{dtype}.graph": run(x, n))),
        )
        for how, call in calls:
            _fails_from_rank_1(ctx, call, ["ringcc.UnsupportedTypeError", f"has dtype {dtype}"], f"{dtype}, {how}")
    got = hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="after.unsupported")
    check_close(got.numpy(), np.full(2, ctx.size), np.ones(2), 1e-6, "after unsupported dtypes")
    # A tensor of rank 0 to scatter on rank 1 alone, eagerly, in a graph and
    # in a group: its kernel refuses it as a failed participant (in the
    # group the others may hear first that the groups' shapes differ).
    x = tf.constant(1.0) if ctx.rank == 1 else tf.ones([ctx.size])
    calls = (
        ("eager", lambda: hvd.reducescatter(x, op=hvd.Sum, name="bad.scatter")),
        ("graph", tf.function(lambda: hvd.reducescatter(x, op=hvd.Sum, name="bad.scatter.graph"))),
        ("grouped", lambda: hvd.grouped_reducescatter([tf.ones([ctx.size]), x], op=hvd.Sum, name="bad.scatters")),
    )
    for how, call in calls:
        if ctx.rank == 1:
            fragments, what = ["ringcc.InvalidArgumentError", "rank 0 has no rows to scatter"], f"rank 1, {how}"
        else:
            because = "rank 1 could not start" if how != "grouped" else "rank 1"
            fragments, what = ["ringcc.MismatchError", because], f"others, {how}"
        _, seconds = expect_error(tf.errors.OpError, fragments, call, what)
        expect(seconds < 10, f"scalar to scatter, {what}: the error took {seconds:.1f} s")
    got = hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="after.scalar.scatter")
    check_close(got.numpy(), np.full(2, ctx.size), np.ones(2), 1e-6, "after a scalar to scatter")
    # Arguments that Python refuses on rank 1 alone (an unknown reduction, a
    # root that is no integer): rank 1 raises its own error, every other rank
    # a MismatchError naming it and why, eagerly, named and unnamed.
    bad_op = "bogus" if ctx.rank == 1 else hvd.Sum
    bad_root = "a" if ctx.rank == 1 else 0
    calls = (
        ("op, named", "unknown reduction", lambda: hvd.allreduce(tf.ones([2]), op=bad_op, name="bad.op")),
        ("op, unnamed", "unknown reduction", lambda: hvd.allreduce(tf.ones([2]), op=bad_op)),
        ("root", "invalid literal", lambda: hvd.broadcast(tf.ones([2]), bad_root, name="bad.root")),
        ("op, scatter", "unknown reduction", lambda: hvd.reducescatter(tf.ones([ctx.size]), op=bad_op, name="bad.rs")),
    )
    for what, why, call in calls:
        if ctx.rank == 1:
            expect_error(Exception, [why], call, f"rank 1, {what}")
        else:
            _, seconds = expect_error(ringcc.MismatchError, ["rank 1 could not start", why], call, f"others, {what}")
            expect(seconds < 10, f"{what}: the error took {seconds:.1f} s")
    got = hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="after.bad.arguments")
    check_close(got.numpy(), np.full(2, ctx.size), np.ones(2), 1e-6, "after bad arguments")
    # alltoall splits that are wrong on rank 1 alone (more rows than the
    # tensor has, a negative split, one split too few), eagerly and in a
    # graph: its kernel refuses them as a failed participant.
    n = ctx.size
    rows = tf.ones([2 * n, 3])
    good = [2] * n
    wrong = {"too many rows": [3] + [2] * (n - 1), "negative": [-1, 3] + [2] * (n - 2), "too few": [2] * (n - 1)}
    for what, bad in wrong.items():
        splits = bad if ctx.rank == 1 else good
        calls = (
            ("eager", lambda s=splits, w=what: hvd.alltoall(rows, splits=s, name=f"bad.splits.{w}")),
            ("graph", tf.function(lambda s=splits, w=what: hvd.alltoall(rows, splits=s, name=f"bad.splits.{w}.g"))),
        )
        for how, call in calls:
            _fails_from_rank_1(ctx, call, ["split"], f"splits {what}, {how}")
    got = hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="after.bad.splits")
    check_close(got.numpy(), np.full(2, ctx.size), np.ones(2), 1e-6, "after bad splits")


HOROVOD_TF_NAMES = (
    "init shutdown is_initialized size rank local_size local_rank cross_size cross_rank is_homogeneous "
    "mpi_built mpi_enabled mpi_threads_supported gloo_built gloo_enabled nccl_built ddl_built ccl_built "
    "cuda_built rocm_built start_timeline stop_timeline size_op rank_op local_rank_op local_size_op "
    "allreduce grouped_allreduce allgather grouped_allgather broadcast broadcast_ alltoall reducescatter "
    "grouped_reducescatter barrier join broadcast_variables broadcast_global_variables broadcast_object "
    "broadcast_object_fn allgather_object DistributedGradientTape PartialDistributedGradientTape "
    "DistributedOptimizer BroadcastGlobalVariablesHook Compression ProcessSet add_process_set "
    "remove_process_set global_process_set Sum Average Min Max Product Adasum HorovodInternalError "
    "HostsUpdatedInterrupt elastic keras"
).split()
HOROVOD_KERAS_NAMES = (
    "init shutdown is_initialized size rank local_size local_rank cross_size cross_rank DistributedOptimizer "
    "broadcast_global_variables broadcast_variables load_model allreduce allgather broadcast broadcast_object "
    "allgather_object callbacks elastic"
).split()


@case("api/horovod-names")
def _(ctx):
    import ringcc.keras as khvd

    missing = [n for n in HOROVOD_TF_NAMES if not hasattr(hvd, n)]
    expect(not missing, f"ringcc.tensorflow lacks {missing}")
    missing = [n for n in HOROVOD_KERAS_NAMES if not hasattr(khvd, n)]
    expect(not missing, f"ringcc.keras lacks {missing}")
    for name in (
        "BroadcastGlobalVariablesCallback MetricAverageCallback LearningRateWarmupCallback "
        "LearningRateScheduleCallback BestModelCheckpoint"
    ).split():
        expect(hasattr(khvd.callbacks, name), f"ringcc.keras.callbacks lacks {name}")
    for name in "run KerasState TensorFlowKerasState CommitStateCallback UpdateBatchStateCallback".split():
        expect(hasattr(khvd.elastic, name), f"ringcc.keras.elastic lacks {name}")
    for name in "run TensorFlowKerasState TensorFlowState UpdateEpochStateCallback".split():
        expect(hasattr(hvd.elastic, name), f"ringcc.tensorflow.elastic lacks {name}")
    expect(hvd.keras.DistributedOptimizer is khvd.DistributedOptimizer, "ringcc.tensorflow.keras is ringcc.keras")
    import keras

    wrapped = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
    expect(isinstance(wrapped, khvd._DistributedOptimizerMixin), "hvd.DistributedOptimizer(a Keras optimizer)")
    expect(hvd.size_op().numpy() == ctx.size and hvd.rank_op().numpy() == ctx.rank, "size_op, rank_op")
    expect(hvd.Compression.fp16.compress(tf.ones([2]))[0].dtype == tf.float16, "Compression.fp16")
    expect_error(NotImplementedError, ["Adasum"], lambda: hvd.allreduce(tf.ones([2]), op=hvd.Adasum), "Adasum")


@case("errors/not-initialized-raises-before")
def _(ctx):
    expect(hvd.is_initialized(), "initialized")
    expect(hvd.rank() == ctx.rank and hvd.size() == ctx.size, "rank and size")


# --------------------------------------------------------------------------
# Objects and process sets


@case("objects/broadcast-and-allgather")
def _(ctx):
    got = hvd.broadcast_object({"rank": ctx.rank, "list": list(range(ctx.rank + 2))}, root_rank=0)
    expect(got == {"rank": 0, "list": [0, 1]}, f"broadcast_object {got}")
    got = hvd.allgather_object(("r", ctx.rank))
    expect(got == [("r", r) for r in range(ctx.size)], f"allgather_object {got}")
    got = hvd.broadcast_object(None if ctx.rank else "root", root_rank=0, name="named")
    expect(got == "root", f"named broadcast_object {got}")
    root = ctx.size - 1
    got = hvd.broadcast_object_fn(root_rank=root)({"from": ctx.rank})
    expect(got == {"from": root}, f"broadcast_object_fn(root_rank={root}) gave {got}")


@case("objects/broadcast-global-variables")
def _(ctx):
    import keras

    import ringcc.keras as khvd

    # Keras: the model's variables and its optimizer's, from the root.
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.optimizer.build(model.trainable_variables)
    for v in model.variables + list(model.optimizer.variables):
        v.assign(np.full(v.shape, float(ctx.rank + 1), v.dtype))
    khvd.broadcast_global_variables(0, model)
    for v in model.variables + list(model.optimizer.variables):
        expect(np.all(np.asarray(v.numpy()) == 1.0), f"Keras variable {v.path} after the broadcast: {v.numpy()}")
    expect_error(ValueError, ["needs the model"], lambda: khvd.broadcast_global_variables(0), "no model")

    # TF1: every global variable of the default graph, as an op to run.
    graph = tf.Graph()
    with graph.as_default():
        starts = [np.full(4, ctx.rank + i, np.float32) for i in range(3)]
        variables = [tf.compat.v1.get_variable(f"g{i}", initializer=start) for i, start in enumerate(starts)]
        broadcast = hvd.broadcast_global_variables(ctx.size - 1)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(broadcast)
            got = session.run(variables)
    for i, value in enumerate(got):
        check_equal(value, np.full(4, ctx.size - 1 + i, np.float32), f"TF1 global variable {i}")


@case("process-sets/two-ranks", min_size=3)
def _(ctx):
    ps = hvd.add_process_set([0, 2])
    if ctx.rank in (0, 2):
        x = tf.constant([float(ctx.rank + 1)])
        check_close(hvd.allreduce(x, op=hvd.Sum, process_set=ps).numpy(), np.array([4.0]), np.ones(1), 1e-6, "eager")
        fn = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, process_set=ps))
        check_close(fn(x).numpy(), np.array([4.0]), np.ones(1), 1e-6, "graph")
        got = hvd.allgather(tf.constant([ctx.rank]), process_set=ps)
        check_equal(got.numpy(), np.array([0, 2], np.int32), "allgather on the set")
        got = hvd.broadcast(tf.constant([ctx.rank]), 2, process_set=ps)
        check_equal(got.numpy(), np.array([2], np.int32), "broadcast on the set")
        # A tensor of rank 0 has no rows to scatter, on a set as on the job:
        # refused on the rank that passed it, a MismatchError on the other.
        expect_error(
            ValueError, ["rank 0"], lambda: hvd.reducescatter(tf.constant(1.0), process_set=ps), "0-d on the set"
        )
        mine = tf.constant(1.0) if ctx.rank == 0 else tf.ones([2])
        error_class, fragments = (ValueError, ["rank 0"]) if ctx.rank == 0 else (ringcc.MismatchError, ["rank 0"])
        expect_error(error_class, fragments, lambda: hvd.reducescatter(mine, process_set=ps), "0-d on one rank")
        got = hvd.allreduce(tf.ones([1]), op=hvd.Sum, process_set=ps)
        check_close(got.numpy(), np.array([2.0]), np.ones(1), 1e-6, "the set goes on")
    hvd.remove_process_set(ps)


@case("process-sets/groups-of-different-lengths", min_size=3)
def _(ctx):
    # On a process set (collectives in issue order) rank 1's groups lack a
    # tensor: every grouped call fails on both members before any of its
    # collectives starts, eagerly and in a graph, so that neither returns
    # with the other's tensors and the set's next calls stay in step.
    pair = hvd.add_process_set([0, 1])
    if ctx.rank in (0, 1):
        group = [tf.ones([4, 3]) * (i + 1) for i in range(2 if ctx.rank else 3)]
        calls = [
            ("grouped_allreduce", lambda: hvd.grouped_allreduce(group, op=hvd.Sum, process_set=pair)),
            ("grouped_allgather", lambda: hvd.grouped_allgather(group, process_set=pair)),
            ("grouped_reducescatter", lambda: hvd.grouped_reducescatter(group, op=hvd.Sum, process_set=pair)),
        ]
        fragments = ["differ in length", f"this rank: {2 if ctx.rank else 3} tensors", "hold 2 to 3"]
        for what, call in calls:
            for how, run in (("eager", call), ("graph", tf.function(call))):
                # In a graph: TensorFlow's error, carrying ringcc's class and message.
                error_class, more = (ringcc.MismatchError, [])
                if how == "graph":
                    error_class, more = tf.errors.InvalidArgumentError, ["MismatchError"]
                seconds = expect_error(error_class, fragments + more, run, f"{what} on a set ({how})")[1]
                expect(seconds < 10, f"{what} on a set ({how}): the error took {seconds:.1f} s")
                got = hvd.allreduce(tf.ones([2]), op=hvd.Sum, process_set=pair)
                check_close(got.numpy(), np.full(2, 2.0), np.ones(2), 1e-6, f"the set goes on after {what} ({how})")
        # Rank 1 names a reduction that does not exist: it raises its own
        # error, and rank 0 hears of it in the group's length check.
        op = "bogus" if ctx.rank == 1 else hvd.Sum
        same = [tf.ones([4, 3])] * 3
        calls = [
            ("grouped_allreduce", lambda: hvd.grouped_allreduce(same, op=op, process_set=pair)),
            ("grouped_reducescatter", lambda: hvd.grouped_reducescatter(same, op=op, process_set=pair)),
        ]
        for what, call in calls:
            if ctx.rank == 1:
                _, seconds = expect_error(ringcc.InvalidArgumentError, ["bogus"], call, f"rank 1, {what} on a set")
            else:
                fragments = ["rank 1 could not start", "bogus"]
                _, seconds = expect_error(ringcc.MismatchError, fragments, call, f"rank 0, {what} on a set")
            expect(seconds < 10, f"{what} refused on a set: the error took {seconds:.1f} s")
            got = hvd.allreduce(tf.ones([2]), op=hvd.Sum, process_set=pair)
            check_close(got.numpy(), np.full(2, 2.0), np.ones(2), 1e-6, f"the set goes on after {what} refused")
        # A root outside the set on rank 1 alone.
        call = lambda: hvd.broadcast(tf.ones([2]), 2 if ctx.rank == 1 else 0, process_set=pair)  # noqa: E731
        if ctx.rank == 1:
            _, seconds = expect_error(ValueError, ["root_rank 2 is not in"], call, "rank 1, a root outside the set")
        else:
            fragments = ["rank 1 could not start", "root_rank 2 is not in"]
            _, seconds = expect_error(ringcc.MismatchError, fragments, call, "rank 0, a root outside the set")
        expect(seconds < 10, f"a root outside the set: the error took {seconds:.1f} s")
        got = hvd.allreduce(tf.ones([2]), op=hvd.Sum, process_set=pair)
        check_close(got.numpy(), np.full(2, 2.0), np.ones(2), 1e-6, "the set goes on after a root outside it")
    hvd.remove_process_set(pair)


# --------------------------------------------------------------------------
# Keras (TensorFlow backend). The Keras and optimizer cases run in the
# group of 2 only: what they check does not depend on the number of ranks,
# and tracing model.fit is the slowest part of a group.


@case("keras/fit-distributed-optimizer-callbacks", max_size=2)
def _(ctx):
    import keras

    import ringcc.keras as khvd

    keras.utils.set_random_seed(1234 + ctx.rank)  # different initial weights on every rank
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    opt = khvd.DistributedOptimizer(keras.optimizers.Adam(0.01 * ctx.size))
    model.compile(optimizer=opt, loss="mse")
    x, y = _model_data(ctx, ctx.rank)
    history = model.fit(
        x,
        y,
        batch_size=4,
        epochs=3,
        verbose=0,
        callbacks=[
            khvd.callbacks.BroadcastGlobalVariablesCallback(0),
            khvd.callbacks.MetricAverageCallback(),
            khvd.callbacks.LearningRateWarmupCallback(initial_lr=0.01 * ctx.size, warmup_epochs=2, steps_per_epoch=4),
        ],
    )
    losses = history.history["loss"]
    flat = np.concatenate([w.ravel() for w in model.get_weights()])
    everyone = hvd.allgather(tf.constant(flat[None, :])).numpy()
    expect(np.array_equal(everyone[0], everyone[-1]), "the ranks' weights differ after fit")
    all_losses = hvd.allgather(tf.constant(np.array([losses], np.float64))).numpy()
    expect(np.allclose(all_losses[0], all_losses[-1]), f"MetricAverageCallback: losses differ {all_losses}")
    expect(isinstance(model.optimizer, khvd._DistributedOptimizerMixin), "the model's optimizer is distributed")
    path = os.path.join(os.environ.get("RINGCC_TF_TMP", "/tmp"), f"ringcc-keras-model-{os.getpid()}.keras")
    model.save(path)
    loaded = khvd.load_model(path)
    os.remove(path)
    expect(isinstance(loaded.optimizer, khvd._DistributedOptimizerMixin), "load_model's optimizer is distributed")
    expect(type(loaded.optimizer).__name__ == "Adam", f"loaded optimizer {type(loaded.optimizer)}")
    loaded.fit(x, y, batch_size=8, epochs=1, verbose=0)
    flat = np.concatenate([w.ravel() for w in loaded.get_weights()])
    everyone = hvd.allgather(tf.constant(flat[None, :])).numpy()
    expect(np.array_equal(everyone[0], everyone[-1]), "the loaded model trains in step")


@case("keras/schedule-checkpoint-elastic-state", max_size=2)
def _(ctx):
    import keras

    import ringcc.keras as khvd

    keras.utils.set_random_seed(99 + ctx.rank)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=khvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    x, y = _model_data(ctx, ctx.rank)
    rates = []

    class Rates(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            rates.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))

    out = os.environ.get("RINGCC_TF_TMP", "/tmp")
    best = os.path.join(out, f"ringcc-best-{os.getpid()}-rank{ctx.rank}.keras")
    state = khvd.elastic.KerasState(model, batch=0, epoch=0)
    commits = []
    original_save = state.save

    def counting_save():
        commits.append(state.batch)
        original_save()

    state.save = counting_save
    model.fit(
        x,
        y,
        batch_size=4,
        epochs=4,
        verbose=0,
        callbacks=[
            khvd.callbacks.BroadcastGlobalVariablesCallback(0),
            khvd.callbacks.LearningRateScheduleCallback(
                initial_lr=0.1, multiplier=lambda epoch: 0.5**epoch, start_epoch=1, end_epoch=3
            ),
            Rates(),
            khvd.callbacks.BestModelCheckpoint(best, monitor="loss"),
            khvd.elastic.UpdateBatchStateCallback(state),
            khvd.elastic.UpdateEpochStateCallback(state),
            khvd.elastic.CommitStateCallback(state, batches_per_commit=2),
        ],
    )
    check_close(np.array(rates), np.array([0.1, 0.05, 0.025, 0.025]), np.ones(4), 1e-6, "scheduled learning rates")
    expect(os.path.exists(best) == (ctx.rank == 0), f"BestModelCheckpoint wrote {best}: {os.path.exists(best)}")
    if os.path.exists(best):
        os.remove(best)
    # 4 batches an epoch: a commit after batches 2 and 4 and at the epoch's end.
    expect(len(commits) == 4 * 3, f"CommitStateCallback committed {len(commits)} times in 4 epochs")
    expect(state.epoch == 4 and state.batch == 0, f"state after fit: epoch {state.epoch}, batch {state.batch}")
    committed = [np.array(w) for w in model.get_weights()]
    model.set_weights([np.zeros_like(w) for w in committed])
    state.epoch = 17
    state.restore()
    for got, want in zip(model.get_weights(), committed):
        check_equal(got, want, "KerasState.restore")
    expect(state.epoch == 4, f"KerasState.restore left epoch {state.epoch}")
    if ctx.rank != 0:
        model.set_weights([w + ctx.rank for w in committed])
        state.epoch = ctx.rank
    state.sync()
    flat = np.concatenate([w.ravel() for w in model.get_weights()])
    everyone = hvd.allgather(tf.constant(flat[None, :])).numpy()
    expect(all(np.array_equal(everyone[0], row) for row in everyone), "KerasState.sync left the ranks' weights apart")
    expect(state.epoch == 4, f"KerasState.sync gave epoch {state.epoch}")


@case("elastic/tensorflow-state")
def _(ctx):
    # TensorFlowState: sync() takes rank 0's variables and objects, commit()
    # keeps what restore() returns to, restore() undoes what came after.
    v = tf.Variable(np.full(3, float(ctx.rank + 5), np.float32))
    state = hvd.elastic.TensorFlowState([v], epoch=ctx.rank, batch=10 * ctx.rank)
    state.sync()
    check_equal(v.numpy(), np.full(3, 5.0, np.float32), "the variable after sync()")
    expect((state.epoch, state.batch) == (0, 0), f"epoch and batch after sync(): {state.epoch}, {state.batch}")
    v.assign(np.full(3, 7.0, np.float32))
    state.epoch = 2
    state.commit()
    v.assign(np.full(3, -1.0, np.float32))
    state.epoch = 3
    state.restore()
    check_equal(v.numpy(), np.full(3, 7.0, np.float32), "the variable after restore()")
    expect(state.epoch == 2, f"epoch after restore(): {state.epoch}, not the committed 2")


@case("elastic/op-errors-count-as-job-failures", max_size=2)
def _(ctx):
    from ringcc.keras.elastic import _convert_failure
    from ringcc.tensorflow._ops import convert_error

    for tf_class, text, job_failure in (
        (tf.errors.AbortedError, "ringcc.PeerFailureError: rank 1 exited", True),
        (tf.errors.InvalidArgumentError, "ringcc.MismatchError: ranks disagree on 'x'", True),
        (tf.errors.InvalidArgumentError, "Incompatible shapes", False),
    ):
        graph_error = tf_class(None, None, "{{function_node f}} " + text + "\n\t [[{{node RingccAllreduce}}]]")
        converted = _convert_failure(graph_error)
        expect(
            isinstance(converted, hvd.HorovodInternalError) == job_failure,
            f"{text!r} became {type(converted).__mro__}",
        )
        expect(isinstance(converted, tf_class), f"{text!r} is no longer a {tf_class.__name__}")
        if job_failure:
            expect(str(converted).startswith(text.split(":")[0]), f"converted message {converted}")
    expect(convert_error(ValueError("x")).__class__ is ValueError, "other errors pass unchanged")


def on_import(rc):
    global tf, hvd, ringcc
    ringcc = rc
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as _tf

    _tf.config.threading.set_inter_op_parallelism_threads(1)
    _tf.config.threading.set_intra_op_parallelism_threads(1)
    tf = _tf
    import ringcc.tensorflow as _hvd

    hvd = _hvd


if __name__ == "__main__":
    sys.exit(run_cases(CASES, on_import=on_import))
