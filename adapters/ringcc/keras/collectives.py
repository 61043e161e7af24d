"""The collectives of `ringcc.keras` on NumPy copies (callbacks, metric
averages, variables, objects), the same on every backend: named, so that
ranks match them by name through the engine; the caller keeps the same
order on every rank."""

from __future__ import annotations

import keras
import numpy as np

import ringcc
from ringcc.keras.basics import Average, Sum

_sequence = [0]


def _name(kind: str, name) -> str:
    if name:
        return f"keras.{kind}.{name}"
    _sequence[0] += 1
    return f"keras.{kind}.noname.{_sequence[0]}"


def numpy_allreduce(value, op=Average, name=None) -> np.ndarray:
    array = np.asarray(value)
    # (np.ascontiguousarray would make a 0-d array 1-d.)
    wire = np.array(array, dtype=np.float64 if array.dtype.kind == "f" else array.dtype, order="C", ndmin=1)
    if wire.dtype == np.bool_:
        wire = wire.astype(np.int32)
    out = ringcc.allreduce_async(wire, op, name=_name("allreduce", name)).wait()
    return out.astype(array.dtype, copy=False).reshape(array.shape)


def numpy_broadcast(value, root_rank, name=None) -> np.ndarray:
    array = np.asarray(value)
    wire = np.array(array, order="C", ndmin=1)
    return ringcc.broadcast_async(wire, root_rank, name=_name("broadcast", name)).wait().reshape(array.shape)


def allreduce(value, name=None, average=None, op=None):
    """The reduction of a NumPy value (or anything Keras' convert_to_numpy
    takes) over the ranks, as a NumPy array (op Average by default)."""
    if average is not None:
        op = Average if average else Sum
    return numpy_allreduce(keras.ops.convert_to_numpy(value), Average if op is None else op, name)


def allgather(value, name=None):
    array = np.ascontiguousarray(keras.ops.convert_to_numpy(value))
    if array.ndim == 0:
        array = array.reshape(1)
    return ringcc.allgather_async(array, name=_name("allgather", name)).wait()


def broadcast(value, root_rank, name=None):
    return numpy_broadcast(keras.ops.convert_to_numpy(value), root_rank, name)


def broadcast_variables(variables, root_rank, name=None):
    """Assigns root_rank's values to Keras variables (every rank passes its
    variables in the same order)."""
    base = _name("broadcast_variables", name)
    for i, v in enumerate(variables):
        value = numpy_broadcast(keras.ops.convert_to_numpy(v), root_rank, f"{base}.{i}")
        v.assign(value)


def broadcast_global_variables(root_rank, model=None):
    """Broadcasts the variables of `model` (with its optimizer's, once it is
    built) from root_rank. Keras 3 keeps no global variables: without a
    model this raises ValueError."""
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
