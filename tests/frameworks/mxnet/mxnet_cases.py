"""The ringcc.mxnet cases, run inside one group of ranks, in the MXNet venv:

    $V/bin/python -m ringcc.launcher -np 2 $V/bin/python tests/frameworks/mxnet/mxnet_cases.py --out DIR

The kvstore "ring" (registration, broadcast, pushpull of one key, of several
keys, over several devices), gluon.Trainer with it (instance and string form)
against a single-process run on the concatenated batch, DistributedTrainer,
DistributedOptimizer, broadcast_parameters (deferred initialisation too), the
Horovod-style collectives against NumPy (alltoall, reducescatter and the
grouped forms too), process sets, the object collectives, compression, the
synchronous mode, and errors: where they surface (at the call, or at the
first wait on the failed operation's result, never later) and their classes
(MXNet's and ringcc's at once).
Inputs come from per-case seeds, so every rank can rebuild every rank's data.
tests/frameworks/mxnet/test_mxnet.py parametrizes its tests from CASES (without importing MXNet).
"""

from __future__ import annotations

import inspect
import os
import sys
import time
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

mx = gluon = autograd = rmx = ringcc = None  # imported by main(): pytest reads CASES without MXNet

CASES = CaseList()


def case(name, **options):
    """A case that ends once MXNet's engine has run everything it pushed
    (ringcc.mxnet collectives included): the harness's own collectives follow."""

    def register(fn):
        def run(ctx):
            try:
                fn(ctx)
            finally:
                try:
                    mx.nd.waitall()
                    rmx.check_errors()
                except Exception as error:  # noqa: BLE001 - recorded here
                    fail(f"after the case: {type(error).__name__}: {error}")

        CASES.add(name, run, **options)
        return fn

    return register


DTYPES = ["float16", "float32", "float64", "int8", "uint8", "int32", "int64"]
RTOL = {"float16": 1e-3, "float32": 1e-6, "float64": 1e-14}


# Rank inputs: small integers, exact in every dtype and for every op.
data, all_inputs = exact_input, exact_inputs


def reduce_np(arrays, op):
    stack = np.stack([a.astype(np.float64) for a in arrays])
    if op == "sum":
        return stack.sum(0)
    if op == "average":
        return stack.sum(0) / len(arrays)
    return {"min": stack.min, "max": stack.max, "product": stack.prod}[op](0)


def check_reduced(got, arrays, op, what):
    """got: an NDArray; arrays: the ranks' NumPy inputs."""
    dt = arrays[0].dtype
    want = reduce_np(arrays, op)
    got = got.asnumpy()
    if dt.kind in "iu":
        if op == "average":
            return check_close(got, np.trunc(want), np.ones_like(want), 1.0, what, dt)
        return check_equal(got, want.astype(dt), what)
    if op == "average":  # a division: rounded
        return check_close(got, want, np.abs(want) + 1e-3, RTOL[dt.name], what, dt)
    return check_equal(got, want.astype(dt), what)  # small integers: exact in floats too


def nd(array, ctx=None):
    return mx.nd.array(array, ctx=ctx or mx.cpu(), dtype=array.dtype)


# MXNet's NaiveEngine runs every operation inside the call that pushes it.
NAIVE = os.environ.get("MXNET_ENGINE_TYPE", "") == "NaiveEngine"


def first_output(result):
    return result[0] if isinstance(result, (list, tuple)) else result


def expect_failed_op(error_class, fragments, call, what, wait=None):
    """call() starts an operation that fails. With MXNet's threaded engine
    the call returns, and the first wait on its result (wait(), by default
    wait_to_read() of its first output) raises the error; a second wait
    returns. NaiveEngine runs the operation inside the call, which raises.
    Returns the error (None when none came)."""
    if NAIVE:
        return expect_error(error_class, fragments, call, f"{what} (NaiveEngine: at the call)")[0]
    try:
        result = call()
    except Exception as error:  # noqa: BLE001 - recorded
        fail(f"{what}: the call raised {type(error).__name__}: {error}; the wait on its result should")
        return None
    waiter = wait or first_output(result).wait_to_read
    error = expect_error(error_class, fragments, waiter, f"{what}: the first wait")[0]
    if wait is None:
        try:
            waiter()
        except Exception as again:  # noqa: BLE001 - recorded
            fail(f"{what}: a second wait raised again: {type(again).__name__}: {again}")
    return error


def expect_mxnet_classes(error, ringcc_class, what):
    """The error is at once MXNet's (as Horovod's users catch it) and ringcc's."""
    if error is None:
        return
    expect(isinstance(error, mx.base.MXNetError), f"{what}: {type(error).__mro__} is not an MXNetError")
    expect(isinstance(error, RuntimeError), f"{what}: {type(error).__name__} is not a RuntimeError")
    expect(isinstance(error, ringcc_class), f"{what}: {type(error).__name__} is not a {ringcc_class.__name__}")


# ----------------------------------------------------------------- the kvstore


@case("kvstore/registered")
def _(ctx):
    kv = mx.kv.create("ring")
    expect(isinstance(kv, rmx.RingKVStore), f"mx.kv.create('ring') gave {type(kv)}, not ringcc's kvstore")
    expect(mx.kvstore.KVStoreBase.kv_registry.get("ring") is rmx.Ring, "registry entry 'ring'")
    expect(isinstance(mx.kv.create("Ring"), rmx.RingKVStore), "the name is not case sensitive")
    expect(kv.type == "ring", f"type {kv.type!r}")
    expect(kv.rank == ctx.rank and kv.num_workers == ctx.size, f"rank {kv.rank} of {kv.num_workers}")
    expect(kv.rank == rmx.rank() and kv.num_workers == rmx.size(), "rank/size of ringcc.mxnet")
    expect(kv.local_rank == ringcc.local_rank(), "local_rank")
    expect(
        kv.is_capable("optimizer") is False and kv.is_capable("OPTIMIZER") is False,
        "is_capable('optimizer') must be False",
    )
    expect_error(ValueError, ["Unknown capability"], lambda: kv.is_capable("telepathy"), "unknown capability")
    expect_error(
        NotImplementedError, ["update_on_kvstore"], lambda: kv.set_optimizer(mx.optimizer.SGD()), "set_optimizer"
    )
    expect_error(
        NotImplementedError, ["save_states"], lambda: kv.save_optimizer_states("/nonexistent"), "save_optimizer_states"
    )
    # MXNet falls back to a native kvstore for names it does not know: "ring"
    # must not be one of them (that is what the registration is for).
    expect(not isinstance(kv, mx.kvstore.KVStore), "a native kvstore came back")


for _dtype in DTYPES:

    @case(f"kvstore/pushpull/{_dtype}")
    def _(ctx, dtype=_dtype):
        kv = mx.kv.create("ring")
        xs = all_inputs(ctx, (3, 4), dtype)
        value = nd(xs[ctx.rank])
        kv.pushpull(7, value)
        check_reduced(value, xs, "sum", f"pushpull {dtype} in place")
        # with out=: the value stays, out gets the sum
        ys = all_inputs(ctx, (5,), dtype, salt=1)
        value, out = nd(ys[ctx.rank]), mx.nd.zeros((5,), dtype=dtype)
        kv.pushpull("w", value, out=out)
        check_reduced(out, ys, "sum", f"pushpull {dtype} out=")
        check_equal(value.asnumpy(), ys[ctx.rank], f"pushpull {dtype}: value unchanged with out=")


@case("kvstore/pushpull/several-devices")
def _(ctx):
    """One key with a value per local device (cpu(0), cpu(1)): summed locally and over ranks."""
    kv = mx.kv.create("ring")
    xs = [all_inputs(ctx, (6,), "float32", salt=s) for s in range(2)]
    values = [nd(xs[0][ctx.rank], mx.cpu(0)), nd(xs[1][ctx.rank], mx.cpu(1))]
    kv.pushpull(0, values)
    want = reduce_np(xs[0] + xs[1], "sum").astype(np.float32)
    for i, v in enumerate(values):
        check_equal(v.asnumpy(), want, f"device {i}")
        expect(v.context == mx.cpu(i), f"device {i}: context {v.context}")
    outs = [mx.nd.zeros((6,), ctx=mx.cpu(0)), mx.nd.zeros((6,), ctx=mx.cpu(1))]
    values = [nd(xs[0][ctx.rank], mx.cpu(0)), nd(xs[1][ctx.rank], mx.cpu(1))]
    kv.pushpull(0, values, out=outs)
    for i, o in enumerate(outs):
        check_equal(o.asnumpy(), want, f"out {i}")
    check_equal(values[0].asnumpy(), xs[0][ctx.rank], "values unchanged with out=")


@case("kvstore/pushpull/key-list-fused")
def _(ctx):
    """A list of keys is one operation: its tensors are negotiated together and fused."""
    kv = mx.kv.create("ring")
    shapes = [(4,), (2, 3), (5,), (1,), (3, 3)]
    xs = [all_inputs(ctx, s, "float32", salt=i) for i, s in enumerate(shapes)]
    values = [nd(x[ctx.rank]) for x in xs]
    before = ringcc.engine_stats()["fused_collectives"]
    kv.pushpull(list(range(10, 15)), values)
    for i, v in enumerate(values):
        check_reduced(v, xs[i], "sum", f"key {10 + i}")
    fused = ringcc.engine_stats()["fused_collectives"] - before
    expect(fused >= 1, f"5 keys in one pushpull: {fused} fused collectives")
    ctx.note(f"5 keys in one pushpull: {fused} fused collective(s)")
    # with outs, and a list of devices per key
    outs = [mx.nd.zeros(s) for s in shapes]
    values = [nd(x[ctx.rank]) for x in xs]
    kv.pushpull(list(range(10, 15)), [[v] for v in values], out=[[o] for o in outs])
    for i, o in enumerate(outs):
        check_reduced(o, xs[i], "sum", f"key {10 + i} out=")
    expect_error(
        ringcc.InvalidArgumentError,
        ["same key twice"],
        lambda: kv.pushpull([1, 1], [mx.nd.ones(1), mx.nd.ones(1)]),
        "duplicate keys",
    )
    expect_error(
        ringcc.InvalidArgumentError, ["one per key"], lambda: kv.pushpull([1, 2], [mx.nd.ones(1)]), "too few values"
    )


@case("kvstore/pushpull/many-keys-per-key-calls-fuse")
def _(ctx):
    """What Trainer does: one pushpull call per key; ringcc still fuses the ready ones."""
    kv = mx.kv.create("ring")
    before = ringcc.engine_stats()
    xs = [all_inputs(ctx, (64,), "float32", salt=i) for i in range(40)]
    values = [nd(x[ctx.rank]) for x in xs]
    for i, v in enumerate(values):
        kv.pushpull(100 + i, v, priority=-i)
    for i, v in enumerate(values):
        check_reduced(v, xs[i], "sum", f"key {100 + i}")
    after = ringcc.engine_stats()
    ctx.note(
        f"40 per-key pushpull calls: {after['tensors'] - before['tensors']} tensors in "
        f"{after['fused_collectives'] - before['fused_collectives']} fused collectives"
    )


@case("kvstore/two-trainers-same-keys")
def _(ctx):
    """Two kvstores (as two Trainers have) use the same keys at once, without waiting in between."""
    kvs = [mx.kv.create("ring"), mx.kv.create("ring")]
    xs = [all_inputs(ctx, (1000,), "float32", salt=s) for s in range(4)]
    values = [nd(x[ctx.rank]) for x in xs]
    for i, v in enumerate(values):
        kvs[i % 2].pushpull(i // 2, v)  # keys 0, 0, 1, 1 on alternating kvstores
    for i, v in enumerate(values):
        check_reduced(v, xs[i], "sum", f"value {i}")


@case("kvstore/pushpull/ordered-with-mxnet-ops")
def _(ctx):
    """The engine orders pushpull after the ops that write its input and
    before those that read its output, without any explicit wait."""
    kv = mx.kv.create("ring")
    n = 1 << 18
    a = mx.nd.ones((n,)) * (ctx.rank + 1)
    for _ in range(3):
        a = a * 2  # pending MXNet work
        kv.pushpull(0, a)  # reads a once ready, writes it
        a = a + 1  # must see the sum
    # each round: every rank doubles, the ranks sum, every rank adds 1
    x = [float(r + 1) for r in range(ctx.size)]
    for _ in range(3):
        x = [sum(2 * v for v in x) + 1] * ctx.size
    got = a.asnumpy()
    expect(bool(np.all(got == x[0])), f"chained result {got[:3]}..., expected {x[0]}")


@case("kvstore/broadcast")
def _(ctx):
    kv = mx.kv.create("ring")
    xs = all_inputs(ctx, (2, 5), "float64")
    value = nd(xs[ctx.rank])
    outs = [value, mx.nd.zeros((2, 5), dtype="float64", ctx=mx.cpu(1))]
    kv.broadcast("b", value, outs)  # value among outs, as Trainer passes it
    for i, o in enumerate(outs):
        check_equal(o.asnumpy(), xs[0], f"broadcast out {i}")
    value = nd(xs[ctx.rank])
    out = mx.nd.zeros((2, 5), dtype="float64")
    kv.broadcast(3, value, out)
    check_equal(out.asnumpy(), xs[0], "broadcast into another array")
    check_equal(value.asnumpy(), xs[ctx.rank], "broadcast: value unchanged when not among outs")
    v = nd(xs[ctx.rank])
    kv.init("init-key", v)
    check_equal(v.asnumpy(), xs[0], "init: rank 0's value in place")


# ----------------------------------------------------------------- training


IN, HIDDEN, OUT, BATCH, STEPS = 6, 10, 3, 4, 6
OPT = ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3})


def make_net(ctx_list=None):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(HIDDEN, in_units=IN, activation="tanh"), gluon.nn.Dense(OUT, in_units=HIDDEN))
    net.initialize(mx.init.Zero(), ctx=ctx_list or [mx.cpu()])
    return net


def initial_values(ctx, rank):
    """Rank `rank`'s initial parameters (they differ between ranks)."""
    rng = ctx.rng(rank, salt=99)
    shapes = [(HIDDEN, IN), (HIDDEN,), (OUT, HIDDEN), (OUT,)]
    return [rng.normal(scale=0.5, size=s).astype(np.float32) for s in shapes]


def set_params(net, values):
    for p, v in zip(net.collect_params().values(), values):
        p.set_data(mx.nd.array(v))


def params_of(net):
    return [p.data().asnumpy() for p in net.collect_params().values()]


def batches(ctx):
    """STEPS global batches of BATCH rows per rank (identical on every rank)."""
    rng = ctx.rng(0, salt=7)
    return [
        (
            rng.normal(size=(BATCH * ctx.size, IN)).astype(np.float32),
            rng.integers(0, OUT, size=BATCH * ctx.size).astype(np.float32),
        )
        for _ in range(STEPS)
    ]


def train(net, trainer, data_batches, rows, step_size, ctx_list=None):
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    ctx_list = ctx_list or [mx.cpu()]
    losses = []
    for x, y in data_batches:
        xs = np.array_split(x[rows], len(ctx_list))
        ys = np.array_split(y[rows], len(ctx_list))
        with autograd.record():
            ls = [loss_fn(net(mx.nd.array(a, ctx=c)), mx.nd.array(b, ctx=c)) for a, b, c in zip(xs, ys, ctx_list)]
        for loss in ls:
            loss.backward()
        trainer.step(step_size)
        losses.append(float(sum(loss.sum().asscalar() for loss in ls)))
    return losses


def reference(ctx, init_rank=0):
    """Single process, no kvstore, on the concatenated batches."""
    net = make_net()
    set_params(net, initial_values(ctx, init_rank))
    trainer = gluon.Trainer(net.collect_params(), OPT[0], dict(OPT[1]), kvstore=None)
    train(net, trainer, batches(ctx), slice(None), BATCH * ctx.size)
    return params_of(net)


def check_trained(ctx, net, what):
    got = params_of(net)
    # identical on every rank, bit for bit
    flat = np.concatenate([g.ravel() for g in got])[None]
    gathered = ringcc.allgather(flat)
    for r in range(ctx.size):
        check_equal(gathered[r], flat[0], f"{what}: parameters of rank {r} vs rank {ctx.rank}")
    # the same as one process training on the concatenated batch
    for i, (g, w) in enumerate(zip(got, reference(ctx))):
        check_close(
            g,
            w.astype(np.float64),
            np.abs(w.astype(np.float64)) + 1e-3,
            2e-5,
            f"{what}: parameter {i} vs the single-process run",
            np.float32,
        )


def my_rows(ctx):
    return slice(ctx.rank * BATCH, (ctx.rank + 1) * BATCH)


@case("trainer/kvstore-instance")
def _(ctx):
    net = make_net()
    set_params(net, initial_values(ctx, 0))
    kv = mx.kv.create("ring")
    trainer = gluon.Trainer(net.collect_params(), OPT[0], dict(OPT[1]), kvstore=kv)
    train(net, trainer, batches(ctx), my_rows(ctx), BATCH * ctx.size)
    expect(trainer._kvstore is kv, f"the Trainer's kvstore is {trainer._kvstore!r}")
    expect(trainer._update_on_kvstore is False, "update_on_kvstore")
    check_trained(ctx, net, "Trainer(kvstore=mx.kv.create('ring'))")


@case("trainer/kvstore-string")
def _(ctx):
    """kvstore="ring" with one device: MXNet would drop a kvstore given by name; ours stays."""
    net = make_net()
    set_params(net, initial_values(ctx, 0))
    trainer = gluon.Trainer(net.collect_params(), OPT[0], dict(OPT[1]), kvstore="ring")
    train(net, trainer, batches(ctx), my_rows(ctx), BATCH * ctx.size)
    expect(
        isinstance(trainer._kvstore, rmx.RingKVStore), f"Trainer(kvstore='ring') runs with kvstore {trainer._kvstore!r}"
    )
    check_trained(ctx, net, "Trainer(kvstore='ring')")


@case("trainer/broadcasts-initial-parameters")
def _(ctx):
    """Different initial parameters per rank: the Trainer's first step
    broadcasts rank 0's (learning rate 0: nothing else changes them)."""
    net = make_net()
    set_params(net, initial_values(ctx, ctx.rank))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.0}, kvstore=mx.kv.create("ring"))
    train(net, trainer, batches(ctx)[:1], my_rows(ctx), BATCH * ctx.size)
    for i, (g, w) in enumerate(zip(params_of(net), initial_values(ctx, 0))):
        check_equal(g, w, f"parameter {i} after the first step")


@case("trainer/two-devices-per-rank")
def _(ctx):
    devices = [mx.cpu(0), mx.cpu(1)]
    net = make_net(devices)
    for p, v in zip(net.collect_params().values(), initial_values(ctx, 0)):
        p.set_data(mx.nd.array(v))
    trainer = gluon.Trainer(net.collect_params(), OPT[0], dict(OPT[1]), kvstore=mx.kv.create("ring"))
    train(net, trainer, batches(ctx), my_rows(ctx), BATCH * ctx.size, devices)
    for p in net.collect_params().values():
        a, b = (d.asnumpy() for d in p.list_data())
        check_equal(a, b, f"{p.name}: the two devices")
    check_trained(ctx, net, "two devices per rank")


@case("trainer/update-on-kvstore-refused")
def _(ctx):
    net = make_net()
    trainer = gluon.Trainer(
        net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=mx.kv.create("ring"), update_on_kvstore=True
    )
    expect_error(
        ValueError,
        ["update_on_kvstore=False"],
        lambda: train(net, trainer, batches(ctx)[:1], my_rows(ctx), BATCH),
        "update_on_kvstore=True",
    )


@case("trainer/distributed-trainer")
def _(ctx):
    net = make_net()
    set_params(net, initial_values(ctx, ctx.rank))
    rmx.broadcast_parameters(net.collect_params(), root_rank=0)
    trainer = rmx.DistributedTrainer(net.collect_params(), OPT[0], dict(OPT[1]))
    train(net, trainer, batches(ctx), my_rows(ctx), BATCH)  # the local batch size
    check_trained(ctx, net, "DistributedTrainer")


@case("trainer/distributed-trainer-groups")
def _(ctx):
    net = make_net()
    set_params(net, initial_values(ctx, 0))
    trainer = rmx.DistributedTrainer(
        net.collect_params(), OPT[0], dict(OPT[1]), num_groups=2, gradient_predivide_factor=2.0, prefix="g"
    )
    train(net, trainer, batches(ctx), my_rows(ctx), BATCH)
    check_trained(ctx, net, "DistributedTrainer(num_groups=2, gradient_predivide_factor=2)")


@case("trainer/distributed-optimizer")
def _(ctx):
    net = make_net()
    set_params(net, initial_values(ctx, 0))
    opt = rmx.DistributedOptimizer(mx.optimizer.create(OPT[0], **OPT[1]))
    trainer = gluon.Trainer(net.collect_params(), opt, kvstore=None)
    train(net, trainer, batches(ctx), my_rows(ctx), BATCH)
    check_trained(ctx, net, "Trainer(DistributedOptimizer(sgd), kvstore=None)")
    expect(abs(opt.learning_rate - 0.1) < 1e-12, f"learning_rate through the wrapper: {opt.learning_rate}")
    opt.set_learning_rate(0.05)
    expect(opt._optimizer.lr == 0.05, "set_learning_rate reaches the wrapped optimizer")
    # Trainer.save_states pickles the optimizer with its states; load them into a new trainer
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ringcc-mxnet-states-{os.getpid()}")
    try:
        trainer.save_states(path)
        fresh = gluon.Trainer(net.collect_params(), rmx.DistributedOptimizer(mx.optimizer.SGD()), kvstore=None)
        fresh.load_states(path)
        loaded = fresh._optimizer
        expect(isinstance(loaded, rmx.DistributedOptimizer), f"loaded optimizer: {type(loaded).__name__}")
        expect(
            abs(loaded.learning_rate - 0.05) < 1e-12 and loaded.momentum == 0.9,
            f"loaded lr {loaded.learning_rate}, momentum {loaded.momentum}",
        )
        expect(abs(loaded.rescale_grad - opt.rescale_grad) < 1e-12, "rescale_grad kept as saved")
    finally:
        if os.path.exists(path):
            os.remove(path)


@case("trainer/two-distributed-trainers")
def _(ctx):
    """Two DistributedTrainers (a GAN's) on one net's two layers, stepped back to back."""
    net = make_net()
    set_params(net, initial_values(ctx, 0))
    params = list(net.collect_params().values())
    first = rmx.DistributedTrainer(params[:2], OPT[0], dict(OPT[1]))
    second = rmx.DistributedTrainer(params[2:], OPT[0], dict(OPT[1]))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for x, y in batches(ctx):
        with autograd.record():
            loss = loss_fn(net(mx.nd.array(x[my_rows(ctx)])), mx.nd.array(y[my_rows(ctx)]))
        loss.backward()
        first.step(BATCH)
        second.step(BATCH)
    check_trained(ctx, net, "two DistributedTrainers")


@case("broadcast-parameters/deferred-init")
def _(ctx):
    """A Parameter whose shape is known only at the first forward is broadcast when initialised."""
    mx.random.seed(1000 + ctx.rank)  # different initial values per rank
    net = gluon.nn.Dense(4)
    net.initialize(mx.init.Uniform())
    rmx.broadcast_parameters(net.collect_params(), prefix="deferred.")
    net(mx.nd.ones((2, 3)))
    for p in net.collect_params().values():
        mine = p.data().asnumpy()[None]
        gathered = ringcc.allgather(mine)
        check_equal(gathered[0], gathered[-1], f"{p.name} on rank 0 and rank {ctx.size - 1}")
    plain = {"a": mx.nd.ones((3,)) * ctx.rank, "b": mx.nd.ones((2, 2)) * (ctx.rank + 5)}
    rmx.broadcast_parameters(plain, root_rank=ctx.size - 1)
    check_equal(plain["a"].asnumpy(), np.full(3, ctx.size - 1, np.float32), "dict of NDArrays: a")
    check_equal(plain["b"].asnumpy(), np.full((2, 2), ctx.size + 4, np.float32), "dict of NDArrays: b")
    expect_error(ValueError, ["invalid params"], lambda: rmx.broadcast_parameters([1]), "a list")


@case("trainer/convolution")
def _(ctx):
    """Convolution (oneDNN layouts inside MXNet) with the kvstore: ranks stay identical."""
    mx.random.seed(5)
    net = gluon.nn.HybridSequential()
    net.add(
        gluon.nn.Conv2D(4, 3, in_channels=1, activation="relu"),
        gluon.nn.Flatten(),
        gluon.nn.Dense(OUT, in_units=4 * 4 * 4),
    )
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.01}, kvstore=mx.kv.create("ring"))
    rng = ctx.rng(ctx.rank, salt=3)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(3):
        x = mx.nd.array(rng.normal(size=(4, 1, 6, 6)))
        y = mx.nd.array(rng.integers(0, OUT, size=4))
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(4 * ctx.size)
    flat = np.concatenate([p.data().asnumpy().ravel() for p in net.collect_params().values()])[None]
    gathered = ringcc.allgather(flat)
    check_equal(gathered[0], gathered[-1], "convolution net parameters on rank 0 and the last rank")


@case("module/fit-with-kvstore")
def _(ctx):
    """The Module API with the kvstore, as an instance and by name: ranks stay identical."""
    data = mx.sym.Variable("data")
    out = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(data, num_hidden=OUT, name="fc"), name="softmax")
    rng = ctx.rng(ctx.rank, salt=11)
    x = rng.normal(size=(16, IN)).astype(np.float32)
    y = rng.integers(0, OUT, size=16).astype(np.float32)
    for kvstore in (mx.kv.create("ring"), "ring"):
        mx.random.seed(3)  # the same initial parameters on every rank (see docs/mxnet.md)
        mod = mx.mod.Module(out, context=mx.cpu())
        mod.fit(
            mx.io.NDArrayIter(x, y, batch_size=4),
            num_epoch=2,
            kvstore=kvstore,
            optimizer="sgd",
            optimizer_params={"learning_rate": 0.1},
        )
        expect(isinstance(mod._kvstore, rmx.RingKVStore), f"kvstore={kvstore!r}: Module used {mod._kvstore!r}")
        weight = mod.get_params()[0]["fc_weight"].asnumpy().ravel()[None]
        gathered = ringcc.allgather(weight)
        check_equal(gathered[0], gathered[-1], f"kvstore={kvstore!r}: fc_weight on rank 0 and the last rank")


# ----------------------------------------------------------------- Horovod-style ops

for _dtype in DTYPES:

    @case(f"ops/allreduce/{_dtype}")
    def _(ctx, dtype=_dtype):
        xs = all_inputs(ctx, (2, 3), dtype)
        x = nd(xs[ctx.rank])
        got = rmx.allreduce(x, op="sum")
        check_reduced(got, xs, "sum", f"allreduce sum {dtype}")
        check_equal(x.asnumpy(), xs[ctx.rank], "input unchanged")
        expect(got.dtype == np.dtype(dtype) and got.context == x.context, f"dtype {got.dtype}, context {got.context}")
        if np.dtype(dtype).kind == "f":
            check_reduced(rmx.allreduce(x), xs, "average", f"allreduce default (average) {dtype}")
        y = nd(xs[ctx.rank])
        out = rmx.allreduce_(y, average=False, name=f"inplace.{dtype}")
        expect(out is y, "allreduce_ returns its argument")
        check_reduced(y, xs, "sum", f"allreduce_ {dtype}")


for _op in ("average", "min", "max", "product"):

    @case(f"ops/allreduce/op-{_op}")
    def _(ctx, op=_op):
        for dtype in ("float32", "int32"):
            xs = all_inputs(ctx, (7,), dtype, op=op)
            check_reduced(rmx.allreduce(nd(xs[ctx.rank]), op=op), xs, op, f"{op} {dtype}")


@case("ops/allreduce/scale-factors-and-names")
def _(ctx):
    xs = all_inputs(ctx, (4,), "float64")
    got = rmx.allreduce(nd(xs[ctx.rank]), op=rmx.Sum, prescale_factor=0.5, postscale_factor=3.0, name="scaled")
    check_equal(got.asnumpy(), 1.5 * reduce_np(xs, "sum"), "prescale 0.5, postscale 3")
    expect_error(
        ringcc.InvalidArgumentError,
        ["not both"],
        lambda: rmx.allreduce(nd(xs[0]), average=True, op="sum"),
        "average= and op=",
    )
    # many in flight at once, unnamed and named, read afterwards
    outs = [rmx.allreduce(nd(xs[ctx.rank]) * i, op="sum") for i in range(20)]
    outs += [rmx.allreduce(nd(xs[ctx.rank]) * i, op="sum", name=f"n{i}") for i in range(20)]
    for i, o in enumerate(outs):
        check_equal(o.asnumpy(), (i % 20) * reduce_np(xs, "sum"), f"in flight #{i}")


@case("ops/allreduce/large")
def _(ctx):
    n = 1 << 20
    x = mx.nd.ones((n,)) * (ctx.rank + 1)
    rmx.allreduce_(x, op="sum")
    expect(bool(np.all(x.asnumpy() == ctx.size * (ctx.size + 1) / 2)), "4 MiB allreduce_")


@case("ops/grouped-allreduce")
def _(ctx):
    shapes = [(3,), (2, 2), (1,), (4, 1)]
    xs = [all_inputs(ctx, s, "float32", salt=i) for i, s in enumerate(shapes)]
    got = rmx.grouped_allreduce([nd(x[ctx.rank]) for x in xs], op="sum")
    for i, g in enumerate(got):
        check_reduced(g, xs[i], "sum", f"grouped_allreduce #{i}")
    ins = [nd(x[ctx.rank]) for x in xs]
    out = rmx.grouped_allreduce_(ins, name="grp")
    expect(all(a is b for a, b in zip(out, ins)), "grouped_allreduce_ returns its arguments")
    for i, g in enumerate(ins):
        check_reduced(g, xs[i], "average", f"grouped_allreduce_ (average) #{i}")


@case("ops/broadcast")
def _(ctx):
    for root in range(ctx.size):
        xs = all_inputs(ctx, (2, 3), "int64", salt=root)
        x = nd(xs[ctx.rank])
        got = rmx.broadcast(x, root_rank=root)
        check_equal(got.asnumpy(), xs[root], f"broadcast root {root}")
        check_equal(x.asnumpy(), xs[ctx.rank], "input unchanged")
        y = nd(xs[ctx.rank])
        expect(rmx.broadcast_(y, root, name=f"b{root}") is y, "broadcast_ returns its argument")
        check_equal(y.asnumpy(), xs[root], f"broadcast_ root {root}")
    expect_error(
        ringcc.InvalidArgumentError,
        ["out of range"],
        lambda: rmx.broadcast(mx.nd.ones(2), root_rank=ctx.size),
        "bad root",
    )


@case("ops/allgather")
def _(ctx):
    xs = [data(ctx, r, (r + 1, 3), "float32") for r in range(ctx.size)]
    got = rmx.allgather(nd(xs[ctx.rank]))
    check_equal(got.asnumpy(), np.concatenate(xs), "allgather of different lengths")
    ys = [data(ctx, r, (2,), "int8", salt=1) for r in range(ctx.size)]
    got = rmx.allgather(nd(ys[ctx.rank]), name="g8")
    check_equal(got.asnumpy(), np.concatenate(ys), "allgather int8")
    pending = mx.nd.ones((3,)) * 2  # an allgather after pending work reads the finished input
    check_equal(
        rmx.allgather(pending * (ctx.rank + 1)).asnumpy(),
        np.concatenate([np.full(3, 2.0 * (r + 1), np.float32) for r in range(ctx.size)]),
        "allgather of a pending result",
    )


@case("ops/synchronous-mode")
def _(ctx):
    """RINGCC_MXNET_ASYNC=0: the calls wait for their inputs and finish before returning."""
    os.environ["RINGCC_MXNET_ASYNC"] = "0"
    try:
        xs = all_inputs(ctx, (5,), "float32")
        check_reduced(rmx.allreduce(nd(xs[ctx.rank]), op="sum"), xs, "sum", "sync allreduce")
        kv = mx.kv.create("ring")
        v = nd(xs[ctx.rank]) * 2
        kv.pushpull(1, v)
        check_equal(v.asnumpy(), 2 * reduce_np(xs, "sum").astype(np.float32), "sync pushpull")
        b = nd(xs[ctx.rank])
        kv.broadcast(1, b, b)
        check_equal(b.asnumpy(), xs[0], "sync broadcast")
    finally:
        del os.environ["RINGCC_MXNET_ASYNC"]


@case("ops/synchronous-mode-mismatch", min_size=2)
def _(ctx):
    os.environ["RINGCC_MXNET_ASYNC"] = "0"
    try:
        expect_error(
            ringcc.MismatchError,
            ["sync-mismatch"],
            lambda: rmx.allreduce(mx.nd.ones((2 + ctx.rank,)), name="sync-mismatch"),
            "a mismatch raises at the call",
        )
    finally:
        del os.environ["RINGCC_MXNET_ASYNC"]


@case("ops/same-count-different-shapes", min_size=2)
def _(ctx):
    """Ranks whose tensors hold as many elements in different shapes (a
    transposed kernel) get a MismatchError naming both shapes, on every
    path: named and unnamed allreduce, broadcast, allgather past the first
    dimension, the kvstore."""
    odd = ctx.rank % 2 == 1
    kv = mx.kv.create("ring")

    def pushpull_out(key, value):
        out = mx.nd.zeros(value.shape)
        kv.pushpull(key, value, out=out)
        return out

    calls = [
        ("allreduce", lambda: rmx.allreduce(mx.nd.ones((3, 2) if odd else (2, 3)))),
        ("named allreduce", lambda: rmx.allreduce(mx.nd.ones((3, 2) if odd else (2, 3)), name="layer.kernel")),
        ("broadcast", lambda: rmx.broadcast(mx.nd.ones((3, 2) if odd else (2, 3)), root_rank=0)),
        ("allgather", lambda: rmx.allgather(mx.nd.ones((2, 3, 2) if odd else (2, 6)))),
        ("kvstore pushpull", lambda: pushpull_out("shape.kv", mx.nd.ones((3, 2) if odd else (2, 3)))),
    ]
    for what, call in calls:
        if what == "allgather":  # blocks until done (docs/mxnet.md): raises at the call
            error = expect_error(ringcc.MismatchError, ["[2, 6]", "[2, 3, 2]"], call, what)[0]
        else:
            error = expect_failed_op(ringcc.MismatchError, ["[2, 3]", "[3, 2]"], call, what)
        expect_mxnet_classes(error, ringcc.MismatchError, what)
    x = mx.nd.ones((2, 3))
    rmx.allreduce_(x, op="sum")
    check_equal(x.asnumpy(), np.full((2, 3), ctx.size, np.float32), "an allreduce after the shape errors")


@case("ops/groups-of-different-lengths", min_size=2)
def _(ctx):
    """The last rank's group lacks its last tensor: every collective the
    ranks share fails with MismatchError on every rank (each carries its
    group's length) rather than reducing whichever tensors share a
    position, and the last rank fails the others' last collective, which it
    never started, so that no rank waits for the timeout and the same call
    runs again under the same name."""
    n = ctx.size
    short = ctx.rank == n - 1

    def group(count=None):
        return [mx.nd.full((2 * n, 3), i + 1) for i in range(count or (2 if short else 3))]

    calls = [
        ("grouped_allreduce", lambda g: rmx.grouped_allreduce(g, name="gl.ar")),
        ("grouped_allreduce_", lambda g: rmx.grouped_allreduce_(g, name="gl.ar_")),
        ("grouped_allgather", lambda g: rmx.grouped_allgather(g, name="gl.ag")),
        ("grouped_reducescatter", lambda g: rmx.grouped_reducescatter(g, name="gl.rs", op="sum")),
    ]
    for what, call in calls:
        start = time.monotonic()
        if what == "grouped_allgather":  # blocks until done: raises at the call
            error = expect_error(ringcc.MismatchError, ["grouped with it"], lambda: call(group()), what)[0]
        else:
            error = expect_failed_op(ringcc.MismatchError, ["grouped with it"], lambda: call(group()), what)
        expect(error is None or "rank 0: 3" in str(error), f"{what}: message lacks rank 0's group: {error}")
        seconds = time.monotonic() - start
        expect(seconds < 10, f"{what}: the error took {seconds:.1f} s")
        got = call(group(3))
        expect(len(got) == 3, f"{what} again: {len(got)} results")
        mx.nd.waitall()
        x = mx.nd.ones((2,))
        rmx.allreduce_(x, op="sum")
        check_equal(x.asnumpy(), np.full(2, n, np.float32), f"an allreduce after {what}")
    # A group of one tensor where the others' hold two.
    start = time.monotonic()
    one = [mx.nd.ones((2 * n, 3)) for _ in range(1 if short else 2)]
    call_one = lambda: rmx.grouped_allreduce(one, name="gl.one")  # noqa: E731
    expect_failed_op(ringcc.MismatchError, ["grouped with it"], call_one, "a group of one")
    expect(time.monotonic() - start < 10, f"a group of one: the error took {time.monotonic() - start:.1f} s")
    got = rmx.grouped_allreduce(group(2), name="gl.one")
    check_equal(got[1].asnumpy(), np.full((2 * n, 3), 2, np.float32), "a group of two again (Average)")


def _three_rows(rows):
    """A group of three tensors of `rows` rows, the same on every rank."""
    return [mx.nd.full((rows, 3), i + 1) for i in range(3)]


def _both_forms_again(what, grouped, one):
    """After a failed pair of calls: the grouped and the single form run
    again on every rank (nothing of the failed calls is left in flight)."""
    got = grouped()
    expect(len(got) == 3, f"{what}: the grouped call again gave {len(got)} results")
    mx.nd.waitall()
    one()
    mx.nd.waitall()


def _job_goes_on(n, what):
    x = mx.nd.ones((2,))
    rmx.allreduce_(x, op="sum")
    check_equal(x.asnumpy(), np.full(2, n, np.float32), what)


@case("ops/single-and-grouped-calls-under-one-name", min_size=2)
def _(ctx):
    """The last rank makes the single call under the name its peers give a
    grouped call. The group's first collective takes the single call's
    name, so both meet on it and raise MismatchError on every rank at once
    (not at the stall timeout); the single rank then fails the group's
    other collectives, which it never starts, so that both forms run again
    at once under the same names."""
    n = ctx.size
    single = ctx.rank == n - 1
    rows = 2 * n

    def group():
        return _three_rows(rows)

    calls = [
        (
            "allreduce against grouped_allreduce",
            lambda: rmx.allreduce(mx.nd.ones((rows, 3)), name="sg.ar", op="sum"),
            lambda: rmx.grouped_allreduce(group(), name="sg.ar", op="sum"),
        ),
        (
            "allreduce_ against grouped_allreduce_",
            lambda: rmx.allreduce_(mx.nd.ones((rows, 3)), name="sg.ar_", op="sum"),
            lambda: rmx.grouped_allreduce_(group(), name="sg.ar_", op="sum"),
        ),
        (
            "allgather against grouped_allgather",
            lambda: rmx.allgather(mx.nd.ones((rows, 3)), name="sg.ag"),
            lambda: rmx.grouped_allgather(group(), name="sg.ag"),
        ),
        (
            "reducescatter against grouped_reducescatter",
            lambda: rmx.reducescatter(mx.nd.ones((rows, 3)), name="sg.rs", op="sum"),
            lambda: rmx.grouped_reducescatter(group(), name="sg.rs", op="sum"),
        ),
        (
            "allreduce against grouped_allreduce, the dtypes differing too",
            lambda: rmx.allreduce(mx.nd.ones((rows, 3), dtype="float64"), name="sg.dtype", op="sum"),
            lambda: rmx.grouped_allreduce(group(), name="sg.dtype", op="sum"),
        ),
    ]
    for what, one, grouped in calls:
        start = time.monotonic()
        call = one if single else grouped
        if "allgather" in what:  # blocks until done: raises at the call
            error = expect_error(ringcc.MismatchError, ["grouped with it"], call, what)[0]
        else:
            error = expect_failed_op(ringcc.MismatchError, ["grouped with it"], call, what)
        seconds = time.monotonic() - start
        expect(seconds < 10, f"{what}: the error took {seconds:.1f} s")
        expect(error is None or f"rank {n - 1}: 0" in str(error), f"{what}: message lacks the single call: {error}")
        _both_forms_again(what, grouped, one)
    _job_goes_on(n, "an allreduce after the single and grouped calls")


@case("ops/failed-single-call-fails-the-peers-group", min_size=2)
def _(ctx):
    """The last rank makes the single call under the name its peers give a
    grouped call, and its argument check fails: it takes part in the
    group's first collective as a failed participant and knows nothing of
    the group's others. The peers' engines give those up at once, so the
    grouped call fails within seconds rather than at the stall timeout, and
    both forms run again at once under the same names."""
    n = ctx.size
    single = ctx.rank == n - 1
    rows = 2 * n

    def group():
        return _three_rows(rows)

    calls = [
        (
            "allreduce (average and op) against grouped_allreduce",
            lambda: rmx.allreduce(mx.nd.ones((rows, 3)), average=True, op="sum", name="fg.ar"),
            lambda: rmx.grouped_allreduce(group(), name="fg.ar", op="sum"),
            lambda: rmx.allreduce(mx.nd.ones((rows, 3)), name="fg.ar", op="sum"),
        ),
        (
            "allreduce_ (unknown op) against grouped_allreduce_",
            lambda: rmx.allreduce_(mx.nd.ones((rows, 3)), name="fg.ar_", op="median"),
            lambda: rmx.grouped_allreduce_(group(), name="fg.ar_", op="sum"),
            lambda: rmx.allreduce_(mx.nd.ones((rows, 3)), name="fg.ar_", op="sum"),
        ),
    ]
    for what, bad, grouped, good in calls:
        start = time.monotonic()
        if single:
            expect_error(ringcc.InvalidArgumentError, [], bad, what)
        else:
            error = expect_failed_op(ringcc.MismatchError, [f"rank {n - 1} could not start"], grouped, what)
            seconds = time.monotonic() - start
            expect(seconds < 10, f"{what}: the error took {seconds:.1f} s")
            expect(error is None or "tensor 'mx.allreduce.fg." in str(error), f"{what}: names no tensor: {error}")
        mx.nd.waitall()
        _both_forms_again(what, grouped, good)
    _job_goes_on(n, "an allreduce after the failed calls")


@case("ops/completion-poll-keeps-the-error-report")
def _(ctx):
    """The completion thread polls a collective's handle with a short
    timed wait before it collects the result. The poll's TimeoutError is no
    error of the collective: the handle that reports a failed call's rest
    to the peers (single calls against grouped ones, groups of different
    lengths) must keep its report for the collective's own error, which
    comes later; were it spent on the poll, the peers would wait for the
    rest until the stall timeout."""
    from ringcc.mxnet import ops as mx_ops

    class Handle:
        def __init__(self):
            self.waits = 0

        def done(self):
            return self.waits >= 2

        def wait(self, *timeout):
            self.waits += 1
            if timeout and self.waits == 1:
                raise ringcc.TimeoutError("the collective did not complete within the wait's timeout")
            raise ringcc.MismatchError("tensor 'mx.reducescatter.x': ranks disagree")

    told = []
    handle = mx_ops._Telling(Handle(), told.append)
    expect_error(ringcc.TimeoutError, ["wait's timeout"], lambda: handle.wait(0.002), "the poll")
    expect(told == [], f"the poll's timeout was reported as the collective's error: {told}")
    for attempt in ("the first wait", "a second wait"):
        expect_error(ringcc.MismatchError, ["ranks disagree"], handle.wait, attempt)
    expect(
        len(told) == 1 and isinstance(told[0], ringcc.MismatchError),
        f"the collective's error was reported {len(told)} times: {told}",
    )


@case("ops/groups-of-different-lengths/process-set", min_size=3)
def _(ctx):
    """On a process set (collectives in issue order) rank 1's groups lack a
    tensor: every grouped call raises MismatchError on both members before
    any of its collectives starts, so that neither returns with the other's
    tensors and the set's next calls stay in step."""
    members = [0, 1]
    pair = rmx.add_process_set(members)
    try:
        if ctx.rank in members:

            def group():
                return [mx.nd.full((4, 3), i + 1) for i in range(2 if ctx.rank else 3)]

            calls = [
                ("grouped_allreduce", lambda: rmx.grouped_allreduce(group(), op=rmx.Sum, process_set=pair)),
                ("grouped_allreduce_", lambda: rmx.grouped_allreduce_(group(), op=rmx.Sum, process_set=pair)),
                ("grouped_allgather", lambda: rmx.grouped_allgather(group(), process_set=pair)),
                ("grouped_reducescatter", lambda: rmx.grouped_reducescatter(group(), op=rmx.Sum, process_set=pair)),
            ]
            for what, call in calls:
                fragments = ["differ in length", f"this rank: {2 if ctx.rank else 3} tensors", "hold 2 to 3"]
                seconds = expect_error(ringcc.MismatchError, fragments, call, f"{what} on a set")[1]
                expect(seconds < 10, f"{what} on a set: the error took {seconds:.1f} s")
                x = mx.nd.ones((2,))
                rmx.allreduce_(x, op=rmx.Sum, process_set=pair)
                check_equal(x.asnumpy(), np.full(2, 2, np.float32), f"the set goes on after {what}")
    finally:
        rmx.remove_process_set(pair)


@case("ops/errors")
def _(ctx):
    expect_error(
        ringcc.UnsupportedTypeError,
        ["sparse"],
        lambda: rmx.allreduce(mx.nd.sparse.zeros("row_sparse", (4, 2))),
        "sparse NDArray",
    )
    expect_error(ringcc.UnsupportedTypeError, ["NDArray"], lambda: rmx.allreduce(np.ones(3)), "a NumPy array")
    try:
        odd = mx.nd.ones((2,), dtype="int16")
    except Exception:  # noqa: BLE001 - this MXNet has no int16 NDArrays
        odd = None
    if odd is not None:
        expect_error(ringcc.UnsupportedTypeError, ["int16"], lambda: rmx.allreduce(odd), "int16")
    expect_error(ringcc.InvalidArgumentError, ["name"], lambda: rmx.allreduce(mx.nd.ones(2), name=""), "empty name")
    kv = mx.kv.create("ring")
    expect_error(
        ringcc.InvalidArgumentError, ["keys are ints or strings"], lambda: kv.pushpull(1.5, mx.nd.ones(2)), "float key"
    )


@case("ops/one-rank-arguments", min_size=2)
def _(ctx):
    """The last rank passes an argument only it finds wrong: it raises its own
    error at once, and the same collective fails on every other rank (its
    error comes with the first wait on its result, here wait_all, naming the
    last rank); the calls after that, generated names included, are in step."""
    n, last = ctx.size, ctx.size - 1
    bad = ctx.rank == last
    kv = mx.kv.create("ring")
    calls = [
        (
            "allreduce of a NumPy array",
            ringcc.UnsupportedTypeError,
            "NDArray",
            lambda: rmx.allreduce(np.ones(3) if bad else mx.nd.ones((3,)), op="sum"),
        ),
        (
            "broadcast_ from a root out of range",
            ringcc.InvalidArgumentError,
            "out of range",
            lambda: rmx.broadcast_(mx.nd.ones((3,)), root_rank=n if bad else 0),
        ),
        (
            "grouped_allreduce_ with a NumPy array",
            ringcc.UnsupportedTypeError,
            "NDArray",
            lambda: rmx.grouped_allreduce_([mx.nd.ones((2,)), np.ones(2) if bad else mx.nd.ones((2,))], op="sum"),
        ),
        (
            "kvstore pushpull into an out of another shape",
            ringcc.InvalidArgumentError,
            "out has shape",
            lambda: kv.pushpull("one-rank", mx.nd.ones((4,)), out=mx.nd.zeros((5,) if bad else (4,))),
        ),
        (
            "kvstore broadcast of a NumPy array",
            ringcc.UnsupportedTypeError,
            "NDArray",
            lambda: kv.broadcast("one-rank-b", np.ones(4) if bad else mx.nd.ones((4,)), mx.nd.zeros((4,))),
        ),
    ]
    for what, own, fragment, call in calls:
        if bad:
            expect_error(own, [fragment], call, f"{what} (rank {last}'s own error)")
        else:
            expect_failed_op(
                ringcc.MismatchError,
                [f"rank {last} could not start", fragment],
                call,
                f"{what} (rank {last}'s bad argument)",
                wait=rmx.wait_all,
            )
        x = mx.nd.full((2,), ctx.rank + 1)
        rmx.allreduce_(x, op="sum")
        check_equal(x.asnumpy(), np.full(2, n * (n + 1) / 2, np.float32), f"an allreduce after {what}")


# ----------------------------------------------------------------- the rest of Horovod's API


@case("api/horovod-names")
def _(ctx):
    """Every name of horovod.mxnet, with Horovod's arguments in Horovod's order."""
    names = (
        "Compression allgather_object broadcast_object allgather grouped_allgather allreduce allreduce_ "
        "grouped_allreduce grouped_allreduce_ alltoall broadcast broadcast_ reducescatter grouped_reducescatter "
        "init shutdown is_initialized start_timeline stop_timeline size local_size cross_size rank local_rank "
        "cross_rank mpi_threads_supported mpi_enabled mpi_built gloo_enabled gloo_built nccl_built ddl_built "
        "ccl_built cuda_built rocm_built ProcessSet global_process_set add_process_set remove_process_set "
        "Average Sum Adasum Min Max Product DistributedOptimizer DistributedTrainer broadcast_parameters"
    ).split()
    missing = [n for n in names if not hasattr(rmx, n)]
    expect(not missing, f"ringcc.mxnet lacks {missing}")
    arguments = {
        "allreduce": "tensor average name priority prescale_factor postscale_factor process_set op",
        "allreduce_": "tensor average name priority prescale_factor postscale_factor process_set op",
        "grouped_allreduce": "tensors average name priority prescale_factor postscale_factor process_set op",
        "grouped_allreduce_": "tensors average name priority prescale_factor postscale_factor process_set op",
        "allgather": "tensor name priority process_set",
        "grouped_allgather": "tensors name priority process_set",
        "broadcast": "tensor root_rank name priority process_set",
        "broadcast_": "tensor root_rank name priority process_set",
        "alltoall": "tensor splits name priority process_set",
        "reducescatter": "tensor op name priority process_set prescale_factor postscale_factor",
        "grouped_reducescatter": "tensors op name priority process_set prescale_factor postscale_factor",
        "broadcast_object": "obj root_rank name",
        "allgather_object": "obj name",
        "DistributedOptimizer": "optimizer gradient_predivide_factor num_groups process_set",
        "DistributedTrainer": "params optimizer optimizer_params compression gradient_predivide_factor prefix "
        "num_groups process_set",
        "broadcast_parameters": "params root_rank prefix",
    }
    for name, wanted in arguments.items():
        got = list(inspect.signature(getattr(rmx, name, lambda: None)).parameters)
        want = wanted.split()
        expect(got[: len(want)] == want, f"{name}{tuple(got)}: Horovod's arguments are {tuple(want)}")
    expect(rmx.nccl_built() == 0 and rmx.gloo_built() is False and rmx.ccl_built() is False, "nccl/gloo/ccl built")
    expect(rmx.cuda_built() is False and rmx.rocm_built() is False and rmx.ddl_built() is False, "cuda/rocm/ddl")
    expect(rmx.mpi_built() == ringcc.mpi_built(), "mpi_built is ringcc's")
    expect(rmx.global_process_set.size() == ctx.size and rmx.global_process_set.included(), "the global set")
    expect_error(NotImplementedError, ["Adasum"], lambda: rmx.allreduce(mx.nd.ones(2), op=rmx.Adasum), "Adasum")


def alltoall_rows(r, n, dtype):
    """Rank r's alltoall input: splits[j] = (r + j) % 3 + 1 rows for rank j, each [r, j, k]."""
    splits = [(r + j) % 3 + 1 for j in range(n)]
    rows = [[r, j, k] for j in range(n) for k in range(splits[j])]
    return np.array(rows, dtype=dtype), splits


def alltoall_expected(me, ranks, dtype):
    """What the rank at position `me` of `ranks` receives from alltoall_rows inputs."""
    n = len(ranks)
    parts, received = [], []
    for r in ranks:
        rows, splits = alltoall_rows(r, n, dtype)
        start = sum(splits[:me])
        parts.append(rows[start : start + splits[me]])
        received.append(splits[me])
    return np.concatenate(parts), np.array(received, dtype=np.int32)


@case("ops/alltoall")
def _(ctx):
    n = ctx.size
    for dtype in ("float32", "int64"):
        rows, splits = alltoall_rows(ctx.rank, n, dtype)
        want, want_received = alltoall_expected(ctx.rank, list(range(n)), dtype)
        for form, given in (("int32 NDArray", mx.nd.array(splits, dtype="int32")), ("list", splits)):
            got, received = rmx.alltoall(nd(rows), given, name=f"a2a.{dtype}.{form}")
            check_equal(got.asnumpy(), want, f"alltoall {dtype}, splits as {form}")
            check_equal(received.asnumpy(), want_received, f"alltoall {dtype}: received splits ({form})")
            expect(got.context == mx.cpu() and received.dtype == np.int32, f"{got.context}, {received.dtype}")
    # equal splits: rank r's rows j*2, j*2+1 go to rank j
    x = np.arange(2 * n * 3, dtype=np.float64).reshape(2 * n, 3) + 100 * ctx.rank
    got = rmx.alltoall(nd(x))
    want = np.concatenate(
        [(np.arange(2 * n * 3.0).reshape(2 * n, 3) + 100 * r)[2 * ctx.rank : 2 * ctx.rank + 2] for r in range(n)]
    )
    check_equal(got.asnumpy(), want, "alltoall with equal splits")


def block(rows, n, r):
    """Rank r's block of `rows` rows in reducescatter: lower ranks take one more."""
    sizes = [rows // n + (1 if q < rows % n else 0) for q in range(n)]
    return slice(sum(sizes[:r]), sum(sizes[: r + 1]))


@case("ops/reducescatter")
def _(ctx):
    n, me = ctx.size, ctx.rank
    rows = 2 * n + 1  # uneven: the lower ranks take one more row
    for op, dtype in (("sum", "int32"), ("sum", "float32"), ("average", "float64"), ("max", "int64")):
        xs = all_inputs(ctx, (rows, 3), dtype, op=op)
        got = rmx.reducescatter(nd(xs[me]), op=op, name=f"rs.{op}.{dtype}")
        check_reduced(got, [x[block(rows, n, me)] for x in xs], op, f"reducescatter {op} {dtype}")
        expect(got.dtype == np.dtype(dtype), f"reducescatter {op} {dtype}: dtype {got.dtype}")
    xs = all_inputs(ctx, (2 * n, 2), "float64", salt=3)
    got = rmx.reducescatter(nd(xs[me]), op=rmx.Sum, prescale_factor=0.5, postscale_factor=3.0)
    want = 1.5 * reduce_np([x[block(2 * n, n, me)] for x in xs], "sum")
    check_equal(got.asnumpy(), want, "reducescatter with prescale 0.5, postscale 3")
    check_reduced(rmx.reducescatter(nd(xs[me])), [x[block(2 * n, n, me)] for x in xs], "average", "default: Average")
    shapes = [(2 * n, 2), (n + 1,), (n, 2, 2)]
    groups = [all_inputs(ctx, s, "float32", salt=10 + i) for i, s in enumerate(shapes)]
    got = rmx.grouped_reducescatter([nd(g[me]) for g in groups], op=rmx.Sum, name="grs")
    for i, (g, shape) in enumerate(zip(groups, shapes)):
        check_reduced(got[i], [x[block(shape[0], n, me)] for x in g], "sum", f"grouped_reducescatter #{i}")
    scalar = mx.nd.array(ctx.rank, dtype="float32")
    expect_error(ValueError, ["scalar"], lambda: rmx.reducescatter(scalar), "a 0-dim tensor (as Horovod: ValueError)")
    expect_error(ValueError, ["scalar"], lambda: rmx.grouped_reducescatter([mx.nd.ones((n,)), scalar]), "grouped")


@case("ops/grouped-allgather")
def _(ctx):
    specs = [((1, 3), "float32"), ((2,), "int8"), ((1, 2, 2), "float64")]
    inputs = [
        [data(ctx, r, (r + s[0][0],) + s[0][1:], s[1], salt=i) for r in range(ctx.size)] for i, s in enumerate(specs)
    ]
    got = rmx.grouped_allgather([nd(x[ctx.rank]) for x in inputs], name="gag")
    expect(len(got) == len(specs), f"{len(got)} results")
    for i, (g, x) in enumerate(zip(got, inputs)):
        check_equal(g.asnumpy(), np.concatenate(x), f"grouped_allgather #{i}")
    expect(rmx.grouped_allgather([]) == [], "an empty group")


def _with_process_sets(ctx, body):
    """Runs body(my set, its ranks, the even set) with the even and the odd
    ranks registered as process sets, then removes them."""
    even = [r for r in range(ctx.size) if r % 2 == 0]
    odd = [r for r in range(ctx.size) if r % 2 == 1]
    even_set = rmx.add_process_set(even)
    odd_set = rmx.add_process_set(rmx.ProcessSet(odd))
    try:
        mine, members = (even_set, even) if ctx.rank in even else (odd_set, odd)
        body(mine, members, even_set)
    finally:
        expect(rmx.remove_process_set(odd_set) and rmx.remove_process_set(even_set), "remove_process_set")
    from ringcc.process_sets import process_sets

    expect(len(process_sets()) == 1, "only the global set is left")


@case("process-sets/collectives", min_size=2)
def _(ctx):
    """Every collective on the set of the even ranks and on that of the odd
    ones at once, many in flight before any result is read."""

    def body(mine, members, _even):
        me, k = members.index(ctx.rank), len(members)
        expect(mine.size() == k and mine.rank() == me and mine.included(), f"{mine}: size, rank")
        xs = [data(ctx, r, (3, 4), "float32") for r in members]
        ys = [data(ctx, r, (2,), "int32", salt=1) for r in members]
        rows = 2 * k + 1
        zs = [data(ctx, r, (rows, 2), "float64", salt=2) for r in members]
        root = members[-1]
        # in flight together, read afterwards
        summed = rmx.allreduce(nd(xs[me]), op=rmx.Sum, name="ps.sum", process_set=mine)
        inplace = rmx.allreduce_(nd(ys[me]), op=rmx.Average, process_set=mine)
        grouped = rmx.grouped_allreduce([nd(xs[me]), nd(ys[me])], op=rmx.Max, process_set=mine)
        broadcast = rmx.broadcast(nd(xs[me]), root_rank=root, process_set=mine)
        scattered = rmx.reducescatter(nd(zs[me]), op=rmx.Sum, process_set=mine)
        check_reduced(summed, xs, "sum", "allreduce on the set")
        check_reduced(inplace, ys, "average", "allreduce_ (average) on the set")
        check_reduced(grouped[0], xs, "max", "grouped_allreduce #0 on the set")
        check_reduced(grouped[1], ys, "max", "grouped_allreduce #1 on the set")
        check_equal(broadcast.asnumpy(), xs[-1], f"broadcast from global rank {root} on the set")
        check_reduced(scattered, [z[block(rows, k, me)] for z in zs], "sum", "reducescatter on the set")
        grs = rmx.grouped_reducescatter([nd(zs[me]), nd(zs[me])], op=rmx.Average, process_set=mine)
        for i, g in enumerate(grs):
            check_reduced(g, [z[block(rows, k, me)] for z in zs], "average", f"grouped_reducescatter #{i} on the set")
        gathered = [data(ctx, r, (members.index(r) + 1, 2), "float32", salt=4) for r in members]
        check_equal(rmx.allgather(nd(gathered[me]), process_set=mine).asnumpy(), np.concatenate(gathered), "allgather")
        got = rmx.grouped_allgather([nd(gathered[me]), nd(ys[me])], process_set=mine)
        check_equal(got[1].asnumpy(), np.concatenate(ys), "grouped_allgather on the set")
        rows_in, splits = alltoall_rows(ctx.rank, k, "float32")
        want, want_received = alltoall_expected(me, members, "float32")
        got, received = rmx.alltoall(nd(rows_in), mx.nd.array(splits, dtype="int32"), process_set=mine)
        check_equal(got.asnumpy(), want, "alltoall on the set")
        check_equal(received.asnumpy(), want_received, "alltoall on the set: received splits")
        obj = rmx.broadcast_object({"from": ctx.rank} if ctx.rank == root else None, root_rank=root, process_set=mine)
        expect(obj == {"from": root}, f"broadcast_object on the set: {obj}")
        objs = rmx.allgather_object(("rank", ctx.rank), process_set=mine)
        expect(objs == [("rank", r) for r in members], f"allgather_object on the set: {objs}")

    _with_process_sets(ctx, body)
    outside = [r for r in range(ctx.size) if r != ctx.rank]
    expect_error(
        ValueError, [], lambda: rmx.allreduce(mx.nd.ones(2), process_set=rmx.ProcessSet(outside)), "unregistered"
    )


@case("process-sets/training", min_size=2)
def _(ctx):
    """DistributedOptimizer and DistributedTrainer on the even ranks' set:
    those average their gradients over the set; the others update with their
    own, unscaled."""

    def body(mine, members, even_set):
        grad_of = {r: float(r + 1) for r in range(ctx.size)}
        even = even_set.ranks
        mean = sum(grad_of[r] for r in even) / len(even)
        want = -mean if ctx.rank in even else -grad_of[ctx.rank]
        opt = rmx.DistributedOptimizer(mx.optimizer.SGD(learning_rate=1.0), process_set=even_set)
        w = mx.nd.zeros((3,))
        opt.update(0, w, mx.nd.full((3,), grad_of[ctx.rank]), opt.create_state(0, w))
        check_equal(w.asnumpy(), np.full(3, want, np.float32), "DistributedOptimizer(process_set=even)")
        p = gluon.Parameter("w", shape=(3,), init=mx.init.Zero())
        p.initialize(ctx=mx.cpu())
        trainer = rmx.DistributedTrainer([p], "sgd", {"learning_rate": 1.0}, process_set=even_set)
        with autograd.record():
            loss = (p.data() * grad_of[ctx.rank]).sum()
        loss.backward()
        trainer.step(1)
        check_equal(p.data().asnumpy(), np.full(3, want, np.float32), "DistributedTrainer(process_set=even)")

    _with_process_sets(ctx, body)


class _Unpickled:
    """Unpickling it sets builtins._ringcc_test_unpickled (shows whether a rank unpickled it)."""

    def __reduce__(self):
        return (exec, ("import builtins; builtins._ringcc_test_unpickled = True",))


def _unpickled() -> bool:
    import builtins

    return bool(getattr(builtins, "_ringcc_test_unpickled", False))


def _forget_unpickled() -> None:
    import builtins

    builtins._ringcc_test_unpickled = False


@case("objects/broadcast-allgather")
def _(ctx):
    for root in range(ctx.size):
        obj = {"root": root, "values": [1, 2.5, "x" * root]} if ctx.rank == root else None
        got = rmx.broadcast_object(obj, root_rank=root)
        expect(got == {"root": root, "values": [1, 2.5, "x" * root]}, f"broadcast_object from {root}: {got}")
    got = rmx.broadcast_object(np.arange(3) * ctx.rank, root_rank=ctx.size - 1, name="named")
    check_equal(got, np.arange(3) * (ctx.size - 1), "a named broadcast_object")
    got = rmx.allgather_object({"rank": ctx.rank, "pad": "y" * 100 * ctx.rank})
    expect(got == [{"rank": r, "pad": "y" * 100 * r} for r in range(ctx.size)], f"allgather_object: {got}")
    expect(rmx.allgather_object(None, name="nones") == [None] * ctx.size, "allgather_object of None")


@case("objects/unpicklable-and-forged", min_size=2)
def _(ctx):
    """A rank that cannot pickle its object raises its error, the others a
    MismatchError naming it; a payload whose MAC is not the job's is refused
    (PeerFailureError) and never unpickled; the calls after both work."""
    import threading

    from ringcc import _objects

    last = ctx.size - 1
    mine = threading.Lock() if ctx.rank == last else "fine"
    if ctx.rank == last:
        expect_error(TypeError, [], lambda: rmx.allgather_object(mine), "allgather_object of a lock (own error)")
    else:
        error = expect_error(
            ringcc.MismatchError, [f"rank {last} could not start"], lambda: rmx.allgather_object(mine), "unpicklable"
        )[0]
        expect_mxnet_classes(error, ringcc.MismatchError, "allgather_object of an unpicklable object")
    # The same object, with the job's MAC: unpickled (so the check below would see it).
    _forget_unpickled()
    rmx.broadcast_object(_Unpickled() if ctx.rank == 0 else None, root_rank=0)
    expect(_unpickled() == (ctx.rank != 0), f"an authenticated payload is unpickled: {_unpickled()}")
    _forget_unpickled()
    real = _objects.mac_words
    if ctx.rank == 0:
        _objects.mac_words = lambda data, key=None: real(data, b"a key that is not the job's")
    try:
        if ctx.rank == 0:
            rmx.broadcast_object(_Unpickled(), root_rank=0)
        else:
            error = expect_error(
                ringcc.PeerFailureError,
                ["from rank 0 failed authentication", "not unpickled"],
                lambda: rmx.broadcast_object(None, root_rank=0),
                "a forged broadcast_object",
            )[0]
            expect_mxnet_classes(error, ringcc.PeerFailureError, "a forged broadcast_object")
        # Every rank refuses rank 0's part of an allgather_object (rank 0 its own too).
        expect_error(
            ringcc.PeerFailureError,
            ["from rank 0 failed authentication"],
            lambda: rmx.allgather_object(_Unpickled() if ctx.rank == 0 else "plain"),
            "a forged allgather_object",
        )
    finally:
        _objects.mac_words = real
    expect(not _unpickled(), "a payload that failed authentication was unpickled")
    expect(rmx.broadcast_object("after" if ctx.rank == 0 else None) == "after", "broadcast_object after the refusal")


@case("compression/fp16")
def _(ctx):
    """Compression.fp16 as Horovod's; DistributedTrainer(compression=fp16)
    sends the gradients as float16 and writes them back as float32."""
    for dtype in ("float16", "float32", "float64"):
        t = mx.nd.ones((3, 2), dtype=dtype)
        c, context = rmx.Compression.fp16.compress(t)
        expect(c.dtype == np.float16, f"fp16 compress of {dtype}: {c.dtype}")
        d = rmx.Compression.fp16.decompress(c, context)
        expect(d.dtype == np.dtype(dtype) and bool((d.asnumpy() == 1).all()), f"fp16 decompress to {dtype}: {d.dtype}")
    for dtype in ("uint8", "int8", "int32", "int64"):
        t = mx.nd.ones((3,), dtype=dtype)
        c, context = rmx.Compression.fp16.compress(t)
        expect(
            c.dtype == np.dtype(dtype) and rmx.Compression.fp16.decompress(c, context).dtype == np.dtype(dtype), dtype
        )
    t = mx.nd.ones((2,))
    expect(rmx.Compression.none.compress(t) == (t, None) and rmx.Compression.none.decompress(t, None) is t, "none")
    # Gradients 1 + (rank + 1) * 2**-13 are 1.0 in float16: through fp16 the
    # sum is exactly ctx.size; in float32 it would not be.
    p = gluon.Parameter("w", shape=(4,), init=mx.init.Zero())
    p.initialize(ctx=mx.cpu())
    trainer = rmx.DistributedTrainer([p], "sgd", {"learning_rate": 1.0}, compression=rmx.Compression.fp16)
    with autograd.record():
        loss = (p.data() * (1 + (ctx.rank + 1) * 2.0**-13)).sum()
    loss.backward()
    trainer.step(1)
    check_equal(p.grad().asnumpy(), np.full(4, ctx.size, np.float32), "the gradient, summed as float16, in float32")
    check_equal(p.data().asnumpy(), np.full(4, -1.0, np.float32), "the update with the float16 average")
    expect_error(TypeError, ["compression"], lambda: rmx.DistributedTrainer([p], "sgd", compression="fp16"), "a string")


# ----------------------------------------------------------------- errors as Horovod raises them


@case("errors/raised-by-the-failing-call", min_size=2)
def _(ctx):
    """An operation that fails between ranks raises at the first wait on its
    result (wait_to_read, asnumpy; NaiveEngine: at the call), as an error
    that is MXNet's and ringcc's at once; the next, unrelated call succeeds,
    and nothing is left behind for later calls or mx.nd.waitall()."""
    n = ctx.size
    kv = mx.kv.create("ring")

    def pushpull_out(key, value):
        out = mx.nd.zeros(value.shape)
        kv.pushpull(key, value, out=out)
        return out

    def follow_up(what):
        x = mx.nd.full((2,), ctx.rank + 1)
        rmx.allreduce_(x, op="sum")
        check_equal(x.asnumpy(), np.full(2, n * (n + 1) / 2, np.float32), f"an allreduce after {what}")
        try:
            mx.nd.waitall()
            rmx.check_errors()
        except Exception as error:  # noqa: BLE001 - recorded
            fail(f"after {what}, mx.nd.waitall() raised what was left behind: {type(error).__name__}: {error}")

    odd = ctx.rank % 2 == 1
    failing = [
        ("allreduce of different shapes", lambda: rmx.allreduce(mx.nd.ones((3 + ctx.rank,)), name="err.shape")),
        ("allreduce of different dtypes", lambda: rmx.allreduce(mx.nd.ones((4,), dtype="int32" if odd else "float32"))),
        ("allreduce_ in place", lambda: rmx.allreduce_(mx.nd.ones((2, 2 + ctx.rank)), name="err.inplace")),
        ("broadcast from different roots", lambda: rmx.broadcast(mx.nd.ones((3,)), root_rank=ctx.rank)),
        ("grouped_allreduce", lambda: rmx.grouped_allreduce([mx.nd.ones((2,)), mx.nd.ones((1 + ctx.rank,))])),
        ("reducescatter", lambda: rmx.reducescatter(mx.nd.ones((4, 1 + ctx.rank)), name="err.rs")),
        ("kvstore pushpull", lambda: pushpull_out("err.kv", mx.nd.ones((2 + ctx.rank,)))),
    ]
    for what, call in failing:
        error = expect_failed_op(ringcc.MismatchError, [], call, what)
        expect_mxnet_classes(error, ringcc.MismatchError, what)
        follow_up(what)
    if NAIVE:
        return
    # The failure happens while unrelated calls run: they succeed, and its
    # own wait raises it.
    bad = rmx.allreduce(mx.nd.ones((5 + ctx.rank,)), name="err.pending")
    rmx.allreduce(mx.nd.ones((2,)), op="sum").wait_to_read()  # the failure has happened by now
    good = rmx.allreduce(mx.nd.ones((2,)), op="sum")
    check_equal(good.asnumpy(), np.full(2, n, np.float32), "an unrelated call while a failure is pending")
    error = expect_error(ringcc.MismatchError, ["err.pending"], bad.asnumpy, "asnumpy() of the failed call")[0]
    expect_mxnet_classes(error, ringcc.MismatchError, "asnumpy() of the failed call")
    # An operation that reads a failed result fails with its error.
    derived = rmx.allreduce(mx.nd.ones((6 + ctx.rank,)), name="err.read") * 2
    expect_error(ringcc.MismatchError, ["err.read"], derived.wait_to_read, "an operation reading the failed result")
    follow_up("an operation reading a failed result")
    if n >= 3:  # the even ranks' set has two members
        even = rmx.add_process_set([r for r in range(n) if r % 2 == 0])
        odd_set = rmx.add_process_set([r for r in range(n) if r % 2 == 1])
        try:
            if ctx.rank in even.ranks:
                what = "allreduce of different shapes on a process set"
                error = expect_failed_op(
                    ringcc.MismatchError, [], lambda: rmx.allreduce(mx.nd.ones((1 + ctx.rank,)), process_set=even), what
                )
                expect_mxnet_classes(error, ringcc.MismatchError, what)
                x = rmx.allreduce(mx.nd.ones((2,)), op=rmx.Sum, process_set=even)
                check_equal(x.asnumpy(), np.full(2, 2, np.float32), "an allreduce on the set after its failure")
        finally:
            rmx.remove_process_set(odd_set)
            rmx.remove_process_set(even)
        follow_up("the process set's failure")


@case("errors/raised-at-the-call")
def _(ctx):
    """Errors raised at the call are MXNet's and ringcc's at once too (a
    Horovod user catches MXNetError); Horovod's ValueError stays one."""
    error, _ = expect_error(ringcc.UnsupportedTypeError, ["NDArray"], lambda: rmx.allreduce(np.ones(3)), "NumPy")
    expect_mxnet_classes(error, ringcc.UnsupportedTypeError, "a NumPy array")
    splits = mx.nd.ones((ctx.size,), dtype="float32")
    error = expect_error(
        ringcc.InvalidArgumentError, ["int32"], lambda: rmx.alltoall(mx.nd.ones((ctx.size,)), splits), "float splits"
    )[0]
    expect_mxnet_classes(error, ringcc.InvalidArgumentError, "float splits")
    expect(isinstance(error, ValueError), "InvalidArgumentError stays a ValueError")
    if ctx.size > 1:
        error = expect_error(
            ringcc.InvalidArgumentError, [], lambda: rmx.alltoall(mx.nd.ones((ctx.size + 1,))), "rows not divisible"
        )[0]
        expect_mxnet_classes(error, ringcc.InvalidArgumentError, "alltoall of rows the ranks do not divide")
        error = expect_error(
            ringcc.MismatchError, [], lambda: rmx.allgather(mx.nd.ones((2, 3 + ctx.rank))), "allgather mismatch"
        )[0]
        expect_mxnet_classes(error, ringcc.MismatchError, "allgather of different trailing dimensions")
    expect(
        issubclass(rmx.MismatchError, ringcc.MismatchError) and issubclass(rmx.MismatchError, mx.base.MXNetError),
        "rmx.MismatchError",
    )
    x = mx.nd.full((2,), ctx.rank + 1)
    rmx.allreduce_(x, op="sum")
    check_equal(x.asnumpy(), np.full(2, ctx.size * (ctx.size + 1) / 2, np.float32), "an allreduce after them")


# ----------------------------------------------------------------- main


def on_import(ringcc_module):
    global mx, gluon, autograd, rmx, ringcc
    import mxnet

    import ringcc.mxnet

    mx, gluon, autograd = mxnet, mxnet.gluon, mxnet.autograd
    rmx, ringcc = ringcc.mxnet, ringcc_module

    mx.random.seed(0)


if __name__ == "__main__":
    sys.exit(run_cases(CASES, on_import=on_import))
