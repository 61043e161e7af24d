"""Horovod's Keras API over ringcc, for Keras 3 on every backend.

    import keras
    import ringcc.keras as hvd              # also ringcc.tensorflow.keras

    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.001 * hvd.size())), loss=...)
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])

`DistributedOptimizer` gives the optimizer you pass a subclass of its class
whose `apply()` first averages the gradients over the ranks, with the
collectives of the backend Keras runs on: ringcc.tensorflow's ops
(TensorFlow; inside the traced train step), ringcc.jax's (JAX; inside the
jitted step) or ringcc.torch's Horovod API (PyTorch). Everything else here
(callbacks, broadcasts, metric averages) works on NumPy copies, so it is
the same on every backend. See docs/tensorflow.md, "Keras".
"""

from __future__ import annotations

import keras
import numpy as np

import ringcc
from ringcc.elastic import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401  (re-exported)

Sum = ringcc.Sum
Average = ringcc.Average
Min = ringcc.Min
Max = ringcc.Max
Product = ringcc.Product


def _backend() -> str:
    return keras.backend.backend()


def init(comm=None, process_sets=None):
    """Joins the job; with the torch backend through ringcc.torch's init."""
    if _backend() == "tensorflow":
        import ringcc.tensorflow as _tf

        _tf.init(comm, process_sets)
    elif _backend() == "torch":
        import ringcc.torch as _torch

        _torch.init(comm, process_sets)
    else:
        ringcc.init()


def shutdown():
    if _backend() == "tensorflow":
        import ringcc.tensorflow as _tf

        _tf.shutdown()
    elif _backend() == "torch":
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


# --------------------------------------------------------------------------
# NumPy collectives (callbacks, variables): named, so ranks match them by
# name through the engine; the caller keeps the same order on every rank.

_sequence = [0]


def _name(kind: str, name) -> str:
    if name:
        return f"keras.{kind}.{name}"
    _sequence[0] += 1
    return f"keras.{kind}.noname.{_sequence[0]}"


def _numpy_allreduce(value, op=Average, name=None) -> np.ndarray:
    array = np.asarray(value)
    # (np.ascontiguousarray would make a 0-d array 1-d.)
    wire = np.array(array, dtype=np.float64 if array.dtype.kind == "f" else array.dtype, order="C", ndmin=1)
    if wire.dtype == np.bool_:
        wire = wire.astype(np.int32)
    out = ringcc.allreduce_async(wire, op, name=_name("allreduce", name)).wait()
    return out.astype(array.dtype, copy=False).reshape(array.shape)


def _numpy_broadcast(value, root_rank, name=None) -> np.ndarray:
    array = np.asarray(value)
    wire = np.array(array, order="C", ndmin=1)
    return ringcc.broadcast_async(wire, root_rank, name=_name("broadcast", name)).wait().reshape(array.shape)


def allreduce(value, name=None, average=None, op=None):
    """The reduction of a NumPy value (or anything Keras' convert_to_numpy
    takes) over the ranks, as a NumPy array (op Average by default)."""
    if average is not None:
        op = Average if average else Sum
    return _numpy_allreduce(keras.ops.convert_to_numpy(value), Average if op is None else op, name)


def allgather(value, name=None):
    array = np.ascontiguousarray(keras.ops.convert_to_numpy(value))
    if array.ndim == 0:
        array = array.reshape(1)
    return ringcc.allgather_async(array, name=_name("allgather", name)).wait()


def broadcast(value, root_rank, name=None):
    return _numpy_broadcast(keras.ops.convert_to_numpy(value), root_rank, name)


def broadcast_variables(variables, root_rank, name=None):
    """Assigns root_rank's values to Keras variables (every rank passes its
    variables in the same order)."""
    base = _name("broadcast_variables", name)
    for i, v in enumerate(variables):
        value = _numpy_broadcast(keras.ops.convert_to_numpy(v), root_rank, f"{base}.{i}")
        v.assign(value)


def broadcast_global_variables(root_rank, model=None):
    """Broadcasts the variables of `model` (with its optimizer's), or of
    every model built so far when None is given, from root_rank."""
    if model is None:
        raise ValueError("ringcc.keras.broadcast_global_variables needs the model (Keras 3 has no global variables)")
    variables = list(model.variables)
    if getattr(model, "optimizer", None) is not None and model.optimizer.built:
        variables += list(model.optimizer.variables)
    broadcast_variables(variables, root_rank)


def broadcast_object(obj, root_rank=0, name=None):
    from ringcc.elastic import broadcast_object as _bcast

    return _bcast(obj, root_rank)


def allgather_object(obj, name=None):
    import pickle

    from ringcc import _objects

    data = pickle.dumps(obj)
    payload = np.frombuffer(bytearray(data), dtype=np.uint8)
    header = np.array([[payload.size, *_objects.mac_words(data)]], dtype=np.int64)
    headers = ringcc.allgather_async(header, name=_name("allgather_object.sz", name)).wait()
    gathered = ringcc.allgather_async(payload.copy(), name=_name("allgather_object.t", name)).wait()
    out, offset = [], 0
    for r, row in enumerate(headers):
        n = int(row[0])
        out.append(_objects.loads(gathered[offset : offset + n].tobytes(), row[1:], f"rank {r}"))
        offset += n
    return out


# --------------------------------------------------------------------------
# DistributedOptimizer


def _reduce_gradients(grads, options):
    backend = _backend()
    present = [i for i, g in enumerate(grads) if g is not None]
    if not present or ringcc.size() == 1 and options["op"] == Average:
        return grads
    values = [grads[i] for i in present]
    if backend == "tensorflow":
        from ringcc.tensorflow.gradients import allreduce_gradients

        reduced = allreduce_gradients(
            values,
            None,
            compression=options["compression"],
            sparse_as_dense=options["sparse_as_dense"],
            op=options["op"],
            gradient_predivide_factor=options["gradient_predivide_factor"],
            num_groups=options["num_groups"],
            groups=options["groups"],
            process_set=options["process_set"],
            name="DistributedOptimizer",
        )
    elif backend == "jax":
        import ringcc.jax as rj

        op = "average" if options["op"] == Average else "sum"
        reduced = [rj.allreduce(g, op) for g in values]
    elif backend == "torch":
        import ringcc.torch as hvd_torch

        compression = hvd_torch.Compression.fp16 if options["compression"].__name__ == "FP16Compressor" else None
        reduced = hvd_torch.grouped_allreduce(
            values,
            op=options["op"],
            name="keras.DistributedOptimizer",
            **({"compression": compression} if compression else {}),
        )
    else:
        raise NotImplementedError(f"ringcc.keras: the {backend} backend has no collectives in ringcc")
    out = list(grads)
    for i, r in zip(present, reduced):
        out[i] = r
    return out


class _DistributedOptimizerMixin:
    """Put before a Keras optimizer's class: its apply() averages the
    gradients over the ranks first."""

    def apply(self, grads, trainable_variables=None):
        grads = _reduce_gradients(list(grads), self._ringcc_options)
        return super().apply(grads, trainable_variables)


_classes: dict = {}


def _distributed_class(cls):
    if issubclass(cls, _DistributedOptimizerMixin):
        return cls
    found = _classes.get(cls)
    if found is None:
        # Named and placed as the class it wraps, so that a saved model
        # records the plain optimizer (load_model() wraps it again).
        found = type(cls.__name__, (_DistributedOptimizerMixin, cls), {"__module__": cls.__module__})
        _classes[cls] = found
    return found


def DistributedOptimizer(
    optimizer,
    name=None,
    device_dense="",
    device_sparse="",
    compression=None,
    sparse_as_dense=False,
    gradient_predivide_factor=1.0,
    op=Average,
    backward_passes_per_step=1,
    average_aggregated_gradients=False,
    num_groups=0,
    groups=None,
    process_set=None,
):
    """Returns `optimizer` itself, now of a subclass of its class whose
    apply() (what model.fit's train step calls, on every backend) reduces
    the gradients over the ranks first. backward_passes_per_step > 1 uses
    Keras' own gradient_accumulation_steps (the gradients are reduced every
    pass)."""
    if compression is None:
        compression = _compression_none()
    if backward_passes_per_step > 1:
        optimizer.gradient_accumulation_steps = int(backward_passes_per_step)
    optimizer.__class__ = _distributed_class(optimizer.__class__)
    optimizer._ringcc_options = dict(
        compression=compression,
        sparse_as_dense=sparse_as_dense,
        op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        num_groups=num_groups,
        groups=groups,
        process_set=process_set,
    )
    return optimizer


def _compression_none():
    class NoneCompressor:
        @staticmethod
        def compress(tensor):
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor

    if _backend() == "tensorflow":
        from ringcc.tensorflow.compression import Compression

        return Compression.none
    return NoneCompressor


def load_model(filepath, custom_optimizers=None, custom_objects=None, compression=None, compile=True, **kwargs):
    """keras.models.load_model, with the model's optimizer made a
    DistributedOptimizer again."""
    objects = dict(custom_objects or {})
    for cls in custom_optimizers or []:
        objects[cls.__name__] = cls
    model = keras.models.load_model(filepath, custom_objects=objects or None, compile=compile, **kwargs)
    if getattr(model, "optimizer", None) is not None:
        DistributedOptimizer(model.optimizer, compression=compression)
    return model


from ringcc.keras import callbacks, elastic  # noqa: E402,F401
