"""Horovod's TensorFlow 2 recipe on ringcc: a custom training loop with
tf.GradientTape inside tf.function, on synthetic data.

    ringrun -np 2 python examples/tf_gradient_tape.py

The step's gradients go through hvd.DistributedGradientTape (averaged over
the ranks, fused by ringcc's engine); the variables are broadcast from
rank 0 after the first step, as Horovod's recipe does. With a Horovod
script, only the import changes.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import ringcc.tensorflow as hvd  # noqa: E402

hvd.init()

rng = np.random.default_rng(hvd.rank())
true_w = np.linspace(-1, 1, 8).reshape(8, 1).astype(np.float32)
features = rng.normal(size=(512, 8)).astype(np.float32)
labels = features @ true_w + 0.01 * rng.normal(size=(512, 1)).astype(np.float32)
dataset = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(512, seed=hvd.rank()).batch(32).repeat()

tf.random.set_seed(hvd.rank())
model = tf.keras.Sequential(
    [tf.keras.Input((8,)), tf.keras.layers.Dense(16, activation="tanh"), tf.keras.layers.Dense(1)]
)
optimizer = tf.keras.optimizers.SGD(0.05 * hvd.size())
loss_fn = tf.keras.losses.MeanSquaredError()


@tf.function
def training_step(x, y, first_batch):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    # Broadcast the variables after the first step, when the optimizer's exist.
    if first_batch:
        hvd.broadcast_variables(model.variables, root_rank=0)
        hvd.broadcast_variables(optimizer.variables, root_rank=0)
    return loss


losses = []
for step, (x, y) in enumerate(dataset.take(60)):
    loss = training_step(x, y, step == 0)
    losses.append(float(hvd.allreduce(loss)))

flat = tf.concat([tf.reshape(v, [-1]) for v in model.variables], 0)
gathered = hvd.allgather(flat[None, :]).numpy()
same = bool(all(np.array_equal(gathered[0], row) for row in gathered))
if hvd.rank() == 0:
    print(
        f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {len(losses)} steps on {hvd.size()} ranks; "
        f"variables identical on all ranks: {same}"
    )
if not same or not losses[-1] < losses[0]:
    raise SystemExit("the ranks did not train in step")
hvd.shutdown()
