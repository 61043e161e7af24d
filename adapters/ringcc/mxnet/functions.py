"""Python objects through ringcc.mxnet's collectives: broadcast_object and
allgather_object, as horovod.mxnet's.

Objects are pickled with cloudpickle when it is installed, else pickle, and
travel as NumPy bytes through ringcc's collectives (no NDArray needed), each
pickle sealed with a MAC of the job's that every receiver checks before it
unpickles anything (ringcc/_objects.py): a payload that fails the check
raises PeerFailureError and is never unpickled.
"""

from __future__ import annotations

import io
import pickle

import numpy as np

import ringcc
from ringcc import _objects
from ringcc.mxnet.errors import mxnet_errors
from ringcc.mxnet.ops import collective_name, fail, is_global, set_communicator, set_rank
from ringcc.process_sets import global_process_set

try:  # what Horovod uses: it also pickles lambdas and local classes
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover - depends on the environment
    _pickler = pickle

__all__ = ["broadcast_object", "allgather_object"]

# Each payload's size travels with the MAC of its pickle, as int64s:
# [size, *mac]. An object a rank cannot pickle must not leave the other
# ranks waiting for its bytes: the rank sends a negative size,
# -1 - len(reason), and the reason (utf-8) as its bytes (never unpickled),
# and every rank raises, naming it.
_HEADER = 1 + _objects.MAC_WORDS


def _pickled(obj):
    """(payload as uint8 array, header to send, this rank's error or None)."""
    try:
        buffer = io.BytesIO()
        _pickler.dump(obj, buffer)
        data = buffer.getvalue()
        header = np.array([len(data), *_objects.mac_words(data)], dtype=np.int64)
        return np.frombuffer(data, dtype=np.uint8).copy(), header, None
    except Exception as error:  # noqa: BLE001 - every rank raises it below
        reason = f"{type(error).__name__}: {error}".encode()
        header = np.array([-1 - len(reason)] + [0] * _objects.MAC_WORDS, dtype=np.int64)
        return np.frombuffer(reason, dtype=np.uint8).copy(), header, error


def _payload_bytes(size: int) -> int:
    return size if size >= 0 else -1 - size


def _failed_pickle(what: str, ranks_reasons) -> Exception:
    return ringcc.MismatchError("; ".join(f"rank {r} could not start {what}: {reason}" for r, reason in ranks_reasons))


def _names(kind: str, name, process_set) -> list[str]:
    base = collective_name(name, kind) if is_global(process_set) else f"mx.{kind}.{name or 'set'}"
    return [f"{base}.sz", f"{base}.t"]


def _broadcast_(array: np.ndarray, root: int, name: str, comm) -> None:
    if comm is None:
        ringcc.broadcast_async_(array, root, name=name).wait()
    else:
        comm.broadcast(array, None, root, True, True).wait()


def _allgather(array: np.ndarray, name: str, comm) -> np.ndarray:
    if comm is None:
        return ringcc.allgather_async(array, name=name).wait()
    return comm.allgather(array, None, True).wait()


@mxnet_errors
def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns `obj` of root_rank (a global rank) on every rank of
    `process_set` (the root gets its own object back). When the root cannot
    pickle `obj`, it raises that error and every other rank a MismatchError
    naming it."""
    names = _names("broadcast_object", name, process_set)
    try:
        comm = None if is_global(process_set) else set_communicator(process_set)
        root = set_rank(process_set, root_rank, "broadcast_object")
    except Exception as error:
        fail("broadcast", error, names, process_set, calls=2)
        raise
    if ringcc.rank() == root_rank:
        data, header, error = _pickled(obj)
        _broadcast_(header, root, names[0], comm)
        _broadcast_(data, root, names[1], comm)
        if error is not None:
            raise error
        return obj
    header = np.zeros(_HEADER, dtype=np.int64)
    _broadcast_(header, root, names[0], comm)
    size = int(header[0])
    data = np.empty(_payload_bytes(size), dtype=np.uint8)
    _broadcast_(data, root, names[1], comm)
    if size < 0:
        raise _failed_pickle("broadcast_object", [(root_rank, data.tobytes().decode(errors="replace"))])
    return _objects.loads(data.tobytes(), header[1:].tolist(), f"rank {root_rank}")


@mxnet_errors
def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj` (of the ranks of
    `process_set`, in their order). When some rank cannot pickle its `obj`,
    every rank raises: that rank its error, the others a MismatchError
    naming it."""
    names = _names("allgather_object", name, process_set)
    try:
        comm = None if is_global(process_set) else set_communicator(process_set)
    except Exception as error:
        fail("allgather", error, names, process_set, calls=2)
        raise
    ranks = list(range(ringcc.size())) if comm is None else list(process_set.ranks)
    data, header, error = _pickled(obj)
    headers = _allgather(header.reshape(1, _HEADER), names[0], comm).tolist()
    gathered = _allgather(data, names[1], comm)
    if error is not None:
        raise error
    chunks, offset = [], 0
    everything = gathered.tobytes()
    for size, *_ in headers:
        n = _payload_bytes(size)
        chunks.append(everything[offset : offset + n])
        offset += n
    failed = [(r, chunk.decode(errors="replace")) for r, (h, chunk) in zip(ranks, zip(headers, chunks)) if h[0] < 0]
    if failed:
        raise _failed_pickle("allgather_object", failed)
    return [_objects.loads(chunk, h[1:], f"rank {r}") for r, h, chunk in zip(ranks, headers, chunks)]
