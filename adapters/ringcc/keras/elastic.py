"""Horovod's elastic Keras API (`hvd.elastic` of ringcc.keras and
ringcc.tensorflow.keras): run, KerasState and the callbacks that commit and
track the state during model.fit. On the elastic machinery of
ringcc.elastic (docs/elastic.md)."""

from __future__ import annotations

import keras
import numpy as np

import ringcc
from ringcc.elastic import (  # noqa: F401  (re-exported)
    HorovodInternalError,
    HostsUpdatedInterrupt,
    ObjectState,
    State,
    broadcast_object,
    run_fn,
)
from ringcc.keras import basics
from ringcc.keras.collectives import broadcast_variables


def _convert_failure(error):
    try:
        import tensorflow as tf

        from ringcc.tensorflow._ops import convert_error

        if isinstance(error, tf.errors.OpError):
            return convert_error(error)
    except ImportError:
        pass
    return error


def run(func):
    """Decorator for the elastic training function `func(state, ...)` (see
    ringcc.elastic.run_fn). TensorFlow errors of ringcc's ops that mean a
    job failure (a dead peer) count as HorovodInternalError."""

    def converted(state, *args, **kwargs):
        try:
            return func(state, *args, **kwargs)
        except Exception as error:  # noqa: BLE001 - re-raised, converted
            new = _convert_failure(error)
            if new is error:
                raise
            raise new from error

    converted.__name__ = getattr(func, "__name__", "train")
    return run_fn(converted, _reset)


def _reset():
    basics.shutdown()
    basics.init()


class KerasState(ObjectState):
    """State of a Keras model and its optimizer (and plain objects as
    keyword arguments, e.g. epoch=0, batch=0): committed as NumPy copies of
    their variables, restored by assigning them, synchronised from rank 0."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        self._saved_model = None
        self._saved_optimizer = None
        super().__init__(bcast_object=broadcast_object, get_rank=ringcc.rank, **kwargs)
        self._save_variables()

    def _optimizer_variables(self):
        if self.optimizer is None or not getattr(self.optimizer, "built", False):
            return []
        return list(self.optimizer.variables)

    def _save_variables(self):
        self._saved_model = [np.array(keras.ops.convert_to_numpy(v)) for v in self.model.variables]
        self._saved_optimizer = [np.array(keras.ops.convert_to_numpy(v)) for v in self._optimizer_variables()]

    def save(self):
        self._save_variables()
        super().save()

    def restore(self):
        for v, value in zip(self.model.variables, self._saved_model or []):
            v.assign(value)
        saved = self._saved_optimizer or []
        current = self._optimizer_variables()
        if len(saved) == len(current):
            for v, value in zip(current, saved):
                v.assign(value)
        super().restore()

    def sync(self):
        broadcast_variables(list(self.model.variables) + self._optimizer_variables(), 0, name="KerasState.sync")
        self._save_variables()
        super().sync()


# Horovod's TensorFlow name for the same state.
TensorFlowKerasState = KerasState


class CommitStateCallback(keras.callbacks.Callback):
    """Commits the state every `batches_per_commit` batches (and at each
    epoch's end)."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()
        self.batches_remaining = self.batches_per_commit


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps state.batch up to date (0 at each epoch's start) and makes
    model.fit resume at state.batch within its epoch after a reset."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.steps_per_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        if self.params.get("steps"):
            if self.steps_per_epoch is None:
                self.steps_per_epoch = self.params.get("steps")
            self.params["steps"] = self.steps_per_epoch - getattr(self.state, "batch", 0)

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = batch + 1

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps state.epoch at the epoch to run next."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.initial_epoch = getattr(state, "epoch", 0)

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = epoch + 1


__all__ = [
    "run",
    "KerasState",
    "TensorFlowKerasState",
    "CommitStateCallback",
    "UpdateBatchStateCallback",
    "UpdateEpochStateCallback",
    "State",
    "ObjectState",
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
]
