"""Horovod's Keras recipe on ringcc, on any Keras 3 backend:

    ringrun -np 2 python examples/keras_fit.py                       # TensorFlow
    KERAS_BACKEND=jax ringrun -np 2 python examples/keras_fit.py     # JAX
    KERAS_BACKEND=torch ringrun -np 2 python examples/keras_fit.py   # PyTorch

A Sequential model trained with model.fit on synthetic data (each rank its
own shard), Adam with its learning rate scaled by the number of ranks,
wrapped in hvd.DistributedOptimizer, and the weights broadcast from rank 0
when training begins. With a Horovod script, only the import changes
(`import horovod.tensorflow.keras as hvd` becomes `import ringcc.keras as
hvd`, or `ringcc.tensorflow.keras`).
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import ringcc.keras as hvd  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--save", default=None, help="rank 0 writes the final weights to this .npz file")
args = parser.parse_args()

hvd.init()

# Synthetic data: 10 classes from 20 features, a different shard per rank.
rng = np.random.default_rng(1000 + hvd.rank())
teacher = np.random.default_rng(0).normal(size=(20, 10))
x = rng.normal(size=(1024, 20)).astype(np.float32)
y = np.argmax(x @ teacher, axis=1)

keras.utils.set_random_seed(hvd.rank())  # different initial weights: the broadcast makes them one
model = keras.Sequential(
    [
        keras.Input((20,)),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ]
)
optimizer = keras.optimizers.Adam(0.001 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer)
model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"])

history = model.fit(
    x,
    y,
    batch_size=32,
    epochs=args.epochs,
    verbose=2 if hvd.rank() == 0 else 0,
    callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), hvd.callbacks.MetricAverageCallback()],
)

flat = np.concatenate([np.asarray(w).ravel() for w in model.get_weights()])
gathered = hvd.allgather(flat[None, :])
same = bool(all(np.array_equal(gathered[0], row) for row in gathered))
loss = history.history["loss"]
if hvd.rank() == 0:
    print(
        f"backend {keras.backend.backend()}: loss {loss[0]:.4f} -> {loss[-1]:.4f} over {args.epochs} epochs "
        f"on {hvd.size()} ranks; weights identical on all ranks: {same}"
    )
    if args.save:
        np.savez(args.save, *model.get_weights())
if not same or not loss[-1] < loss[0]:
    raise SystemExit("the ranks did not train in step")
hvd.shutdown()
