"""broadcast_object and allgather_object of `ringcc.tensorflow`: pickles
that travel through ringcc's named collectives on NumPy arrays (eager code),
each with the job's MAC (ringcc._objects), so that a rank unpickles only
what a rank of its job sent."""

from __future__ import annotations

import pickle

import numpy as np

import ringcc
from ringcc import _core, _objects
from ringcc.tensorflow import _ops
from ringcc.tensorflow.process_sets import is_global, root_in_set

try:
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover - optional
    _pickler = pickle


def _names(kind: str, name):
    base = f"{kind}.{name}" if name else _ops.generated_name(kind)
    return f"{base}.sz", f"{base}.t"


def _pickled(obj):
    try:
        data = _pickler.dumps(obj)
    except Exception as error:  # noqa: BLE001 - told to the peers, then raised
        text = f"{type(error).__name__}: {error}".encode()
        return np.frombuffer(text, dtype=np.uint8), -1 - len(text), error
    return np.frombuffer(bytearray(data), dtype=np.uint8), len(data), None


def _failed(what, failures):
    detail = "; ".join(f"rank {r} could not pickle its object ({text})" for r, text in failures)
    return _core.MismatchError(f"{what}: {detail}")


def broadcast_object(obj, root_rank, name, process_set):
    sz, t = _names("broadcast_object", name)
    if not is_global(process_set):
        comm = process_set._communicator()
        root = root_in_set(process_set, root_rank)

        def bcast(a, _name):
            return comm.broadcast(a, root=root, inplace=True)
    else:

        def bcast(a, name_):
            return ringcc.broadcast_async_(a, root_rank, name=name_).wait()

    if ringcc.rank() == root_rank:
        data, n, error = _pickled(obj)
        words = _objects.mac_words(data.tobytes()) if error is None else [0] * _objects.MAC_WORDS
        bcast(np.array([n, *words], dtype=np.int64), sz)
        bcast(data.copy() if data.size else np.zeros(0, np.uint8), t)
        if error is not None:
            raise error
        return obj
    header = np.zeros(1 + _objects.MAC_WORDS, dtype=np.int64)
    bcast(header, sz)
    n = int(header[0])
    payload = np.empty(n if n >= 0 else -1 - n, dtype=np.uint8)
    bcast(payload, t)
    if n < 0:
        raise _failed("broadcast_object", [(root_rank, payload.tobytes().decode(errors="replace"))])
    return _objects.loads(payload.tobytes(), header[1:], f"rank {root_rank}")


def allgather_object(obj, name, process_set):
    sz, t = _names("allgather_object", name)
    data, n, error = _pickled(obj)
    words = _objects.mac_words(data.tobytes()) if error is None else [0] * _objects.MAC_WORDS
    header = np.array([[n, *words]], dtype=np.int64)
    if is_global(process_set):
        headers = ringcc.allgather_async(header, name=sz).wait()
        gathered = ringcc.allgather_async(data.copy(), name=t).wait()
        ranks = list(range(ringcc.size()))
    else:
        comm = process_set._communicator()
        headers = comm.allgather(header)
        gathered = comm.allgather(data.copy())
        ranks = list(process_set.ranks)
    if error is not None:
        raise error
    chunks, offset = [], 0
    for row in headers:
        k = int(row[0]) if row[0] >= 0 else -1 - int(row[0])
        chunks.append(gathered[offset : offset + k].tobytes())
        offset += k
    failed = [(r, c.decode(errors="replace")) for r, row, c in zip(ranks, headers, chunks) if row[0] < 0]
    if failed:
        raise _failed("allgather_object", failed)
    return [_objects.loads(c, row[1:], f"rank {r}") for r, row, c in zip(ranks, headers, chunks)]
