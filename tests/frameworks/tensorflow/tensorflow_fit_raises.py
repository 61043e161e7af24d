"""A job whose rank 1 raises inside model.fit (tests/frameworks/tensorflow/test_tensorflow.py):
its third batch's callback raises, the exception ends the process (which
aborts ringcc), and every other rank's fit must fail at once with the
TensorFlow error that carries ringcc.PeerFailureError naming rank 1. Each
of them records what it got in $RINGCC_TF_OUT/rank<r>.json."""

import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import ringcc.keras as hvd  # noqa: E402

hvd.init()


class RaiseOnRankOne(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if hvd.rank() == 1 and batch == 2:
            raise RuntimeError("deliberate failure in rank 1")


model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4), keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss="mse")
x = np.random.default_rng(hvd.rank()).normal(size=(4096, 4)).astype(np.float32)
y = x.sum(1, keepdims=True)
start = None


class Clock(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        global start
        start = time.monotonic()


try:
    model.fit(
        x,
        y,
        batch_size=8,
        epochs=1,
        verbose=0,
        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), Clock(), RaiseOnRankOne()],
    )
except Exception as error:  # noqa: BLE001 - recorded, then raised
    if hvd.rank() != 1:
        record = {
            "error_class": type(error).__name__,
            "message": str(error),  # whole: TensorFlow 2.16 puts a long traceback first
            "seconds": time.monotonic() - (start or time.monotonic()),
        }
        # An eager collective after the failure fails at once too, as the
        # combined class (TensorFlow's, ringcc's, HorovodInternalError).
        import tensorflow as tf

        import ringcc.tensorflow as tf_hvd

        try:
            tf_hvd.allreduce(tf.ones([2]), name="after.the.failure")
            record["eager_classes"] = []
        except Exception as eager_error:  # noqa: BLE001 - recorded
            record["eager_classes"] = [c.__name__ for c in type(eager_error).__mro__]
            record["eager_message"] = str(eager_error)
        with open(os.path.join(os.environ["RINGCC_TF_OUT"], f"rank{hvd.rank()}.json"), "w") as f:
            json.dump(record, f)
    raise
