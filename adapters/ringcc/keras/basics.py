"""Lifetime and topology of `ringcc.keras`: init and shutdown (through the
API of the backend Keras runs on), rank and size; the reduction ops."""

from __future__ import annotations

import keras

import ringcc
from ringcc.horovod_basics import Average, Max, Min, Product, Sum  # noqa: F401  (re-exported)


def backend() -> str:
    """The backend Keras runs on ("tensorflow", "jax", "torch", ...)."""
    return keras.backend.backend()


def init(comm=None, process_sets=None):
    """Joins the job; with the torch backend through ringcc.torch's init."""
    if backend() == "tensorflow":
        from ringcc.tensorflow import basics as tf_basics

        tf_basics.init(comm, process_sets)
    elif backend() == "torch":
        import ringcc.torch as _torch

        _torch.init(comm, process_sets)
    else:
        ringcc.init()


def shutdown():
    if backend() == "tensorflow":
        from ringcc.tensorflow import basics as tf_basics

        tf_basics.shutdown()
    elif backend() == "torch":
        import ringcc.torch as _torch

        _torch.shutdown()
    else:
        ringcc.shutdown()


def is_initialized() -> bool:
    return ringcc.is_initialized()


def rank() -> int:
    return ringcc.rank()


def size() -> int:
    return ringcc.size()


def local_rank() -> int:
    return ringcc.local_rank()


def local_size() -> int:
    return ringcc.local_size()


def cross_rank() -> int:
    return ringcc.cross_rank()


def cross_size() -> int:
    return ringcc.cross_size()
