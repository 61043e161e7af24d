"""ringcc.tensorflow against TensorFlow's own collectives, in one job:

    ringrun -np 2 python -m ringcc.bench tensorflow_allreduce [--sizes 8,1M,64M] [--repeats 5]

Every rank joins ringcc, then (before any TensorFlow op, as TensorFlow
requires) a tf.distribute.MultiWorkerMirroredStrategy of the same ranks:
ringcc broadcasts free ports for TF_CONFIG, and TensorFlow's workers talk
over gRPC on 127.0.0.1. Then, each timed as the median of --repeats runs
of --iters calls:

* allreduce inside tf.function: `hvd.allreduce(x, op=Sum)` against the
  strategy's `all_reduce(SUM)` with the RING and AUTO implementations;
  time per collective and bus bandwidth (2 (n-1)/n bytes / time). Up to
  1 MiB each function runs --chain (16) allreduces, each on the result of
  the one before, and the time per collective is the function's time over
  --chain: one call of a tf.function costs about 0.5 ms on a 2-core
  machine by itself (TensorFlow's executor), more than the collective it
  holds, so a function of one collective times TensorFlow for both sides.
  The rows "per call" time functions of one collective as well.
* one DistributedGradientTape step's communication over 1,000 float32
  variables of 4 KiB: a tf.function computes the 1,000 gradients from
  variables (a multiply each) and reduces them with the tape's grouped
  allreduce; the same function with `tf.identity_n` in place of the
  allreduce is TensorFlow's own cost, and the communication is the
  difference. Against it, one allreduce of all of them concatenated,
  likewise less its function's own cost. Beside them, the same step with
  one `hvd.allreduce` op per variable (as Horovod scripts often reduce
  gradients), less the same floor. The functions take turns in each
  repeat; the ratio row is the median of the repeats' ratios.
* model.fit of a small dense model on synthetic data: steps per second
  with ringcc.keras.DistributedOptimizer against the same model's train
  step run by the strategy (batch 32 per rank in both; Keras 3's model.fit
  does not run under the strategy, see below), one epoch of each per
  repeat.

Rank 0 prints one table; --csv FILE writes it too.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402

import ringcc  # noqa: E402


def parse_size(text: str) -> int:
    text = text.strip().upper()
    for suffix, factor in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if text.endswith(suffix):
            return int(float(text[:-1]) * factor)
    return int(text)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log(*args):
    print(f"[rank {ringcc.rank()}]", *args, file=sys.stderr, flush=True)


def timed_once(fn, iters: int) -> float:
    """Seconds per call of fn() over `iters` calls, the slowest rank's."""
    ringcc.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return float(ringcc.allreduce(np.array([(time.perf_counter() - start) / iters]), ringcc.Max)[0])


def timed(fn, iters: int, repeats: int) -> float:
    """Median over `repeats` runs of `iters` calls of the slowest rank's
    seconds per call of fn() (the same on every rank)."""
    fn()  # warm up: tracing, names cached, first touch
    return statistics.median(timed_once(fn, iters) for _ in range(repeats))


class Job:
    """What every part of the bench shares: the ranks, TensorFlow, the
    strategy (when timed) and the rows of the table."""

    def __init__(self, args):
        self.args = args
        self.skip = set(filter(None, args.skip.split(",")))
        from .launch_hint import warn_if_alone

        warn_if_alone("tensorflow_allreduce", args.argv)
        ringcc.init()
        self.rank, self.size = ringcc.rank(), ringcc.size()
        ports = np.array([free_port() for _ in range(self.size)] if self.rank == 0 else [0] * self.size, dtype=np.int64)
        ringcc.broadcast_(ports, 0)
        os.environ["TF_CONFIG"] = json.dumps(
            {
                "cluster": {"worker": [f"127.0.0.1:{int(p)}" for p in ports]},
                "task": {"type": "worker", "index": self.rank},
            }
        )
        import tensorflow as tf

        self.tf = tf
        self.strategies = {}
        if "tf" not in self.skip:
            # One strategy per process (TensorFlow's collective ops are set up
            # once); the implementation is an option of each all_reduce call.
            self.strategies["mwms"] = tf.distribute.MultiWorkerMirroredStrategy()
        import ringcc.tensorflow as hvd

        self.hvd = hvd
        hvd.init()
        self.rows = []

    def record(self, name, seconds, nbytes=None):
        size = self.size
        busbw = 2 * (size - 1) / size * nbytes / seconds / 1e9 if nbytes else None
        self.rows.append({"case": name, "seconds": seconds, "busbw_GBps": busbw})
        log(f"{name}: {seconds * 1e6:.1f} us" + (f", busbw {busbw:.2f} GB/s" if busbw else ""))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m ringcc.bench tensorflow_allreduce")
    parser.add_argument("--sizes", default="8,1M,64M")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iters", type=int, default=0, help="calls per repeat (0: by size)")
    parser.add_argument("--chain", type=int, default=16, help="allreduces per tf.function up to 1 MiB")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: tf, tape, fit")
    parser.add_argument("--csv", default=None)
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    return args


def ring_function(job, chain, name):
    tf, hvd = job.tf, job.hvd
    scale = 1.0 / job.size  # keeps the values where they are along a chain

    @tf.function
    def run(t):
        for i in range(chain):
            t = hvd.allreduce(t, op=hvd.Sum, name=f"{name}.{i}")
            if chain > 1:
                t = t * scale
        return t

    return run


def strategy_function(job, strategy, options, chain):
    tf = job.tf
    scale = 1.0 / job.size

    @tf.function
    def run(t):
        def replica(v):
            # Placed on the worker's device: the strategy reduces to the
            # input's device, and a traced input has none.
            with tf.device(strategy.extended.worker_devices[0]):
                v = tf.identity(v)
            ctx = tf.distribute.get_replica_context()
            for _ in range(chain):
                v = ctx.all_reduce(tf.distribute.ReduceOp.SUM, v, options=options)
                if chain > 1:
                    v = v * scale
            return v

        return strategy.run(replica, args=(t,))

    return run


def time_allreduces(job):
    """ringcc's allreduce against the strategy's, per call and in chains."""
    tf, args, strategies, record = job.tf, job.args, job.strategies, job.record
    implementations = (
        ("ring", tf.distribute.experimental.CommunicationImplementation.RING),
        ("auto", tf.distribute.experimental.CommunicationImplementation.AUTO),
    )
    for text in args.sizes.split(","):
        nbytes = parse_size(text)
        n = max(1, nbytes // 4)
        iters = args.iters or (200 if nbytes <= 1024 else 50 if nbytes <= (1 << 20) else 5)
        x = tf.constant(np.ones(n, np.float32))
        chains = [1, args.chain] if nbytes <= (1 << 20) and args.chain > 1 else [1]
        for chain in chains:
            how = "per call" if chain == 1 else f"in a chain of {chain}"
            calls = max(1, iters // chain)
            ring_fn = ring_function(job, chain, f"bench.{chain}")
            record(f"ringcc {text} {how}", timed(lambda: ring_fn(x).numpy(), calls, args.repeats) / chain, nbytes)
            if "mwms" in strategies:
                strategy = strategies["mwms"]
                for impl_name, impl in implementations:
                    options = tf.distribute.experimental.CommunicationOptions(implementation=impl)
                    step = strategy_function(job, strategy, options, chain)
                    record(
                        f"TensorFlow MWMS {impl_name} {text} {how}",
                        timed(lambda: strategy.experimental_local_results(step(x))[0].numpy(), calls, args.repeats)
                        / chain,
                        nbytes,
                    )


def tape_functions(tf, hvd, variables, concat):
    """The tape part's functions, by key: the tape step over `variables`
    ("tape") and its floor, the same step with the first gradient returned
    in place of the reduced ones ("floor"); one allreduce of `concat`
    ("one") and its floor ("one_floor"); an allreduce op per variable
    ("separate", whose floor is the tape's).

    A floor must run every op its step runs but the collective, as
    TensorFlow's graph optimizer leaves them. The optimizer drops ops whose
    outputs nothing reads, so a floor cannot keep gradients that do real
    work (neither `tf.identity_n(...)[0]` nor control dependencies on them
    do): the gradients here are multiplications by one, which it folds
    away in step and floor alike, leaving the reads of the variables in
    both. (Control dependencies would keep an Identity op per gradient
    that the step does not run.) The framework tests compare the optimized
    graphs (tests/frameworks/tensorflow/tensorflow_cases.py, "bench/...")."""
    from ringcc.tensorflow.gradient_tape import allreduce_gradients

    # Each function makes its gradients from the variables inside it, as
    # a train step does: 1,000 tensors passed in as arguments would time
    # TensorFlow's argument handling (about 30 ms) instead.
    @tf.function
    def tape_step():
        return allreduce_gradients([v * 1.0 for v in variables])[0]

    @tf.function
    def tape_floor():
        return tf.identity_n([v * 1.0 for v in variables])[0]

    # Horovod scripts often reduce each gradient with an allreduce of its
    # own: separate ops, which reach the engine together and fuse.
    @tf.function
    def separate_step():
        return [hvd.allreduce(v * 1.0, name=f"bench.separate.{i}") for i, v in enumerate(variables)][0]

    @tf.function
    def concat_step():
        return hvd.allreduce(concat * 1.0, name="bench.concat")

    @tf.function
    def concat_floor():
        return tf.identity(concat * 1.0)

    return {
        "tape": tape_step,
        "floor": tape_floor,
        "one": concat_step,
        "one_floor": concat_floor,
        "separate": separate_step,
    }


def time_tape(job):
    """One DistributedGradientTape step's communication against one
    allreduce of the same bytes concatenated."""
    tf, hvd, args, record = job.tf, job.hvd, job.args, job.record
    variables = [tf.Variable(np.full(1024, i % 5, np.float32)) for i in range(1000)]
    concat = tf.Variable(np.ones(1024 * 1000, np.float32))
    functions = tape_functions(tf, hvd, variables, concat)

    # The functions take turns within each repeat, and each repeat's
    # ratio pairs figures measured seconds apart: this machine's speed
    # drifts by more than the difference being measured.
    times = {key: [] for key in functions}
    for fn in functions.values():
        fn().numpy()  # warm up: tracing, names cached, first touch
    for _ in range(args.repeats):
        for key, fn in functions.items():
            times[key].append(timed_once(lambda: fn().numpy(), 20))
    ratios = [
        (tape - floor) / (one - one_floor)
        for tape, floor, one, one_floor in zip(times["tape"], times["floor"], times["one"], times["one_floor"])
        if one > one_floor
    ]
    median = {key: statistics.median(values) for key, values in times.items()}
    record("tape step: 1,000 variables of 4 KiB", median["tape"])
    record("the same step, no communication", median["floor"])
    record("tape step's communication (difference)", median["tape"] - median["floor"])
    record("one allreduce op per variable", median["separate"])
    record("their communication (difference)", median["separate"] - median["floor"])
    record("one allreduce of them concatenated (4 MB)", median["one"])
    record("the same function, no communication", median["one_floor"])
    record("concatenated allreduce's communication (difference)", median["one"] - median["one_floor"])
    if ratios:
        ratio = statistics.median(ratios)
        job.rows.append({"case": "tape / concatenated communication (ratio)", "seconds": None, "ratio": ratio})
        log(f"tape / concatenated communication, per repeat: {[round(r, 2) for r in ratios]}")


def time_fit(job):
    """model.fit with ringcc.keras against the strategy's train step."""
    tf, args, strategies, rows = job.tf, job.args, job.strategies, job.rows
    rank, size = job.rank, job.size
    import keras

    import ringcc.keras as khvd

    rng = np.random.default_rng(rank)
    features = rng.normal(size=(32 * 200, 32)).astype(np.float32)
    labels = rng.normal(size=(32 * 200, 1)).astype(np.float32)

    def model_of():
        keras.utils.set_random_seed(0)
        return keras.Sequential(
            [
                keras.Input((32,)),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(1),
            ]
        )

    class Clock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 20:
                self.start = time.perf_counter()

        def on_train_end(self, logs=None):
            self.steps_per_s = (self.params["steps"] - 20) / (time.perf_counter() - self.start)

    ours_model = model_of()
    ours_model.compile(optimizer=khvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss="mse")
    theirs_step = None
    if "mwms" in strategies:
        # Keras 3's model.fit does not run under MultiWorkerMirroredStrategy
        # (keras 3.15: its symbolic build reduces the first batch with
        # strategy.reduce, which cannot convert the PerReplica batch), so
        # the strategy runs the train step model.fit would: forward, mean
        # squared error over the global batch, gradients, and the Keras
        # optimizer's apply, which all-reduces them in replica context.
        # It is the same model and per-replica batch without fit's
        # callbacks and bookkeeping: if anything, faster than fit.
        strategy = strategies["mwms"]
        with strategy.scope():
            theirs_model = model_of()
            theirs_optimizer = keras.optimizers.SGD(0.01)
            theirs_optimizer.build(theirs_model.trainable_variables)
        global_batch = 32 * size
        data = tf.data.Dataset.from_tensor_slices((features, labels)).batch(global_batch).repeat()
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        iterator = iter(strategy.experimental_distribute_dataset(data.with_options(options)))

        @tf.function
        def theirs_step():
            def replica(x, y):
                with tf.GradientTape() as tape:
                    error = tf.reduce_mean(tf.square(theirs_model(x, training=True) - y), axis=-1)
                    loss = tf.nn.compute_average_loss(error, global_batch_size=global_batch)
                grads = tape.gradient(loss, theirs_model.trainable_variables)
                theirs_optimizer.apply(grads, theirs_model.trainable_variables)
                return loss

            x, y = next(iterator)
            return strategy.run(replica, args=(x, y))

    steps = len(features) // 32

    def loop_rate():
        theirs_step()  # traced on the first call
        ringcc.barrier()
        start = time.perf_counter()
        for _ in range(steps - 20):
            theirs_step()
        return float(ringcc.allreduce(np.array([(steps - 20) / (time.perf_counter() - start)]), ringcc.Min)[0])

    # One epoch of each per repeat, alternating; the figure is the median
    # over repeats of the slowest rank's steps per second.
    def fit_rate():
        clock = Clock()
        ours_model.fit(features, labels, batch_size=32, epochs=1, verbose=0, callbacks=[clock])
        return float(ringcc.allreduce(np.array([clock.steps_per_s]), ringcc.Min)[0])

    ours, theirs = [], []
    for _ in range(args.repeats):
        ours.append(fit_rate())
        if theirs_step is not None:
            theirs.append(loop_rate())
    ours_rate = statistics.median(ours)
    rows.append({"case": "model.fit ringcc.keras (steps/s)", "seconds": 1.0 / ours_rate, "busbw_GBps": None})
    log(f"model.fit with ringcc: {ours_rate:.1f} steps/s (repeats {[round(r, 1) for r in ours]})")
    if theirs:
        theirs_rate = statistics.median(theirs)
        rows.append({"case": "MWMS train step loop (steps/s)", "seconds": 1.0 / theirs_rate, "busbw_GBps": None})
        log(
            f"MultiWorkerMirroredStrategy train-step loop: {theirs_rate:.1f} steps/s"
            f" (repeats {[round(r, 1) for r in theirs]})"
        )


def print_rows(rows, csv_path):
    print(f"{'case':<48} {'time (us)':>12} {'busbw (GB/s)':>13}")
    for row in rows:
        bw = f"{row['busbw_GBps']:.3f}" if row.get("busbw_GBps") else ""
        if row["case"].endswith("(steps/s)"):
            print(f"{row['case']:<48} {1.0 / row['seconds']:>12.1f} {'':>13}")
        elif row["case"].endswith("(ratio)"):
            print(f"{row['case']:<48} {row['ratio']:>12.2f} {'':>13}")
        else:
            print(f"{row['case']:<48} {row['seconds'] * 1e6:>12.1f} {bw:>13}")
    if csv_path:
        with open(csv_path, "w") as f:
            f.write("case,seconds,busbw_GBps,ratio\n")
            for row in rows:
                seconds = "" if row["seconds"] is None else row["seconds"]
                f.write(f"{row['case']},{seconds},{row.get('busbw_GBps') or ''},{row.get('ratio', '')}\n")


def main(argv=None) -> int:
    job = Job(parse_args(argv))
    time_allreduces(job)
    if "tape" not in job.skip:
        time_tape(job)
    if "fit" not in job.skip:
        time_fit(job)
    if job.rank == 0:
        print_rows(job.rows, job.args.csv)
    job.hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
