"""Horovod's Keras callbacks, for Keras 3 on every backend (they work on
NumPy copies of variables and logs)."""

from __future__ import annotations

import keras
import numpy as np

import ringcc
from ringcc.keras.collectives import broadcast_variables, numpy_allreduce


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Broadcasts the model's variables and its optimizer's from root_rank
    when training begins (once), so that every rank starts from the same
    state; when the optimizer has no variables yet (built on the first
    step), again after the first batch for them."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.broadcast_done = False
        self._optimizer_done = False

    def _broadcast(self, optimizer_only=False):
        variables = [] if optimizer_only else list(self.model.variables)
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None and getattr(optimizer, "built", False):
            variables += list(optimizer.variables)
            self._optimizer_done = True
        broadcast_variables(variables, self.root_rank, name="BroadcastGlobalVariablesCallback")

    def on_train_begin(self, logs=None):
        if self.broadcast_done:
            return
        self._broadcast()
        self.broadcast_done = True

    def on_train_batch_end(self, batch, logs=None):
        if not self._optimizer_done and self.broadcast_done:
            self._broadcast(optimizer_only=True)
            self._optimizer_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """Averages the epoch's metrics (logs) over the ranks at the end of each
    epoch, so that every rank (and whatever reads the logs after it, such as
    ModelCheckpoint or a learning-rate scheduler) sees the same values."""

    def __init__(self, device=""):
        super().__init__()

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        keys = sorted(k for k, v in logs.items() if np.ndim(v) == 0 and np.isscalar(np.asarray(v).item()))
        values = np.array([float(logs[k]) for k in keys], dtype=np.float64)
        averaged = numpy_allreduce(values, ringcc.Average, name="MetricAverageCallback")
        for k, v in zip(keys, averaged):
            logs[k] = float(v)


def _set_lr(model, value):
    optimizer = model.optimizer
    lr = optimizer.learning_rate
    if hasattr(optimizer, "_learning_rate") and isinstance(optimizer._learning_rate, keras.Variable):
        optimizer._learning_rate.assign(value)
    elif hasattr(lr, "assign"):
        lr.assign(value)
    else:
        optimizer.learning_rate = value


def _get_lr(model) -> float:
    return float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to initial_lr * multiplier(epoch) from
    start_epoch to end_epoch (staircase: at epoch starts; else every batch,
    with the fraction of the epoch done, which needs steps_per_epoch or
    model.fit's). `multiplier` may be a number. initial_lr defaults to the
    optimizer's learning rate when training begins."""

    def __init__(
        self,
        initial_lr=None,
        multiplier=1.0,
        start_epoch=0,
        end_epoch=None,
        staircase=True,
        momentum_correction=True,
        steps_per_epoch=None,
    ):
        super().__init__()
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier)

    def _active(self, epoch) -> bool:
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _adjust(self, epoch):
        _set_lr(self.model, self.initial_lr * self.multiplier(epoch))

    def on_train_begin(self, logs=None):
        if self.initial_lr is None:
            self.initial_lr = _get_lr(self.model)
        if self.steps_per_epoch is None:
            self.steps_per_epoch = self.params.get("steps") if self.params else None

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch
        if self.staircase and self._active(epoch):
            self._adjust(epoch)

    def on_train_batch_begin(self, batch, logs=None):
        if self.staircase or self.current_epoch is None or not self._active(self.current_epoch):
            return
        if not self.steps_per_epoch:
            raise ValueError("LearningRateScheduleCallback(staircase=False) needs steps_per_epoch")
        self._adjust(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _get_lr(self.model)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Goes from initial_lr / size to initial_lr over warmup_epochs (Goyal
    et al.), batch by batch, as Horovod's: lr = initial_lr / size *
    (epoch * (size - 1) / warmup_epochs + 1)."""

    def __init__(self, initial_lr=None, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None, verbose=0):
        self.warmup_epochs = warmup_epochs
        self.verbose = verbose

        def multiplier(epoch):
            n = ringcc.size()
            return 1.0 / n * (epoch * (n - 1) / warmup_epochs + 1)

        super().__init__(
            initial_lr,
            multiplier,
            start_epoch=0,
            end_epoch=warmup_epochs,
            staircase=False,
            momentum_correction=momentum_correction,
            steps_per_epoch=steps_per_epoch,
        )

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1:
            _set_lr(self.model, self.initial_lr)
            if self.verbose > 0 and ringcc.rank() == 0:
                print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to {self.initial_lr:g}.")


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """ModelCheckpoint(save_best_only=True) written by rank 0 only."""

    def __init__(self, filepath=None, monitor="val_loss", verbose=0, mode="auto", save_freq="epoch", **kwargs):
        super().__init__(
            filepath=filepath or "model.keras",
            monitor=monitor,
            verbose=verbose,
            save_best_only=True,
            mode=mode,
            save_freq=save_freq,
            **kwargs,
        )

    def _save_model(self, *args, **kwargs):
        if ringcc.rank() == 0:
            return super()._save_model(*args, **kwargs)
        return None
