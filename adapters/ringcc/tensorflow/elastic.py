"""Horovod's elastic API for TensorFlow (`hvd.elastic` after
`import ringcc.tensorflow as hvd`): run, TensorFlowKerasState (a Keras
model and optimizer), TensorFlowState (tf.Variables) and the framework-free
State, ObjectState of ringcc.elastic. See docs/elastic.md."""

from __future__ import annotations

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
from ringcc.tensorflow import basics
from ringcc.tensorflow._ops import convert_error
from ringcc.tensorflow.functions import broadcast_variables


def run(func):
    """Decorator for the elastic training function `func(state, ...)`: as
    ringcc.elastic.run, with ringcc.tensorflow's init and shutdown, and the
    TensorFlow errors of ringcc's ops that mean a job failure counted as
    HorovodInternalError."""

    def converted(state, *args, **kwargs):
        try:
            return func(state, *args, **kwargs)
        except Exception as error:  # noqa: BLE001 - re-raised, converted
            new = convert_error(error)
            if new is error:
                raise
            raise new from error

    return run_fn(converted, _reset)


def _reset():
    basics.shutdown()
    basics.init()


class TensorFlowState(ObjectState):
    """State of tf.Variables (and plain objects as keyword arguments):
    committed as NumPy copies, restored by assignment, synchronised from
    rank 0 (broadcast_variables)."""

    def __init__(self, variables=None, session=None, **kwargs):
        self.variables = list(variables or [])
        self._values = None
        super().__init__(bcast_object=broadcast_object, get_rank=ringcc.rank, **kwargs)
        self._save_values()

    def _save_values(self):
        self._values = [np.array(v.numpy()) for v in self.variables]

    def save(self):
        self._save_values()
        super().save()

    def restore(self):
        for v, value in zip(self.variables, self._values or []):
            v.assign(value)
        super().restore()

    def sync(self):
        if self.variables:
            broadcast_variables(self.variables, 0)
        self._save_values()
        super().sync()


def __getattr__(name):
    if name in (
        "TensorFlowKerasState",
        "KerasState",
        "CommitStateCallback",
        "UpdateBatchStateCallback",
        "UpdateEpochStateCallback",
    ):
        from ringcc.keras import elastic as _keras_elastic

        return getattr(_keras_elastic, name)
    raise AttributeError(name)
