"""Horovod's higher-level helpers for `ringcc.torch`: broadcasting a model's
parameters and an optimizer's state, and moving arbitrary Python objects.

Objects are serialised with cloudpickle when it is installed, else pickle
(torch tensors inside them travel too, as pickle stores them), and sealed
with a MAC of the job's that every receiver checks before unpickling
(ringcc/_objects.py).
"""

from __future__ import annotations

import io
import pickle

import numpy as np
import torch

import ringcc
from ringcc import _objects
from ringcc.torch import horovod as _hvd
from ringcc.torch.horovod.basics import internal_error
from ringcc.torch.process_sets import global_process_set

try:  # what Horovod uses: it also pickles lambdas and local classes
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover - depends on the environment
    _pickler = pickle

__all__ = ["broadcast_parameters", "broadcast_optimizer_state", "broadcast_object", "allgather_object"]


def broadcast_parameters(params, root_rank, prefix="Parameter.", process_set=global_process_set):
    """Overwrites every tensor of `params` with root_rank's, in place.

    `params`: a dict (`model.state_dict()`, `dict(model.named_parameters())`)
    or a list of tensors or of (name, tensor) pairs (`model.parameters()`,
    `model.named_parameters()`). Dict entries are taken in sorted key order;
    entries that are not tensors (e.g. a module's extra state) are skipped.
    The broadcasts are named `prefix + name` and all run at once."""
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, (list, tuple)) or hasattr(params, "__iter__"):
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError(f"invalid params of type: {type(params)}")
    handles = []
    for name, p in items:
        if not isinstance(p, torch.Tensor):
            continue
        full = None if name is None else f"{prefix or ''}{name}"
        handles.append(_hvd.broadcast_async_(p, root_rank, name=full, process_set=process_set))
    for handle in handles:
        _hvd.synchronize(handle)


def broadcast_optimizer_state(optimizer, root_rank, model=None, prefix="Parameter.", process_set=global_process_set):
    """Makes every rank's optimizer state (per-parameter state such as
    momentum buffers and step counts, and the hyper-parameters of its
    param_groups) root_rank's.

    As in Horovod, an optimizer that has no state yet first takes one step
    with zero gradients on every rank, which creates its state: every
    parameter that requires a gradient gets a zero one (sparse for
    SparseAdam, and for SGD on the sparse embeddings of `model`); parameters
    that do not require one keep none and get no state. A
    DistributedOptimizer takes that step without reducing anything.

    Then root_rank's `state_dict()` is broadcast as one object and loaded
    with `load_state_dict()` on the other ranks (Horovod broadcasts it
    tensor by tensor), so any optimizer whose state_dict round-trips works:
    torch.optim.LBFGS too (which skips the zero step: it steps with a
    closure). `prefix` is accepted for compatibility and not used."""
    if not isinstance(optimizer, torch.optim.LBFGS) and not optimizer.state_dict()["state"]:
        _create_state(optimizer, model)
    if root_rank == _hvd.rank():
        state = optimizer.state_dict()
    else:
        state = None
    state = broadcast_object(state, root_rank, name="optimizer_state", process_set=process_set)
    if root_rank != _hvd.rank():
        optimizer.load_state_dict(state)


def _create_state(optimizer, model) -> None:
    """Horovod's way to give a new optimizer its state: a step with zero
    gradients."""
    sparse = set()
    if model is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding) and module.sparse:
                sparse.update(id(p) for p in module.parameters())
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not p.requires_grad:
                continue
            p.grad = p.data.new(p.size()).zero_()
            if isinstance(optimizer, torch.optim.SparseAdam) or (
                isinstance(optimizer, torch.optim.SGD) and id(p) in sparse
            ):
                p.grad = p.grad.to_sparse()
    # A DistributedOptimizer's own step would reduce the gradients, which
    # needs every rank: the wrapped optimizer's step instead.
    getattr(optimizer, "_step_without_reduction", optimizer.step)()


def _dumps(obj) -> bytes:
    buffer = io.BytesIO()
    _pickler.dump(obj, buffer)
    return buffer.getvalue()


def _loads(data: bytes, sent_mac, sender: int):
    return _objects.loads(data, sent_mac, f"rank {sender}")  # cloudpickle's output loads with pickle


# Each payload's size travels with the MAC of its pickle (ringcc/_objects.py),
# as int64s: [size, *mac]. An object a rank cannot pickle must not leave the
# other ranks waiting for its bytes: the rank sends a negative size, -1 -
# len(reason), and the reason (utf-8) as its bytes (never unpickled), and
# every rank raises, naming it.
_HEADER = 1 + _objects.MAC_WORDS


def _pickled(obj):
    """(payload bytes, header to send, this rank's error or None)."""
    try:
        data = _dumps(obj)
        return data, torch.tensor([len(data), *_objects.mac_words(data)], dtype=torch.int64), None
    except Exception as error:  # noqa: BLE001 - every rank raises it below
        reason = f"{type(error).__name__}: {error}".encode()
        return reason, torch.tensor([-1 - len(reason)] + [0] * _objects.MAC_WORDS, dtype=torch.int64), error


def _as_tensor(data: bytes) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(bytearray(data), dtype=np.uint8))


def _failed_pickle(what: str, ranks_reasons) -> Exception:
    """What the other ranks raise, worded as for any call a rank could not start."""
    return internal_error(
        ringcc.MismatchError("; ".join(f"rank {r} could not start {what}: {reason}" for r, reason in ranks_reasons))
    )


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's `obj` on every rank (the root gets its own object
    back). Two broadcasts: the pickled size, then the bytes. When the root
    cannot pickle `obj`, it raises that error and every other rank a
    MismatchError naming it."""
    # Unnamed: generated names, the same on every rank that calls in the same
    # order (Horovod names it after type(obj), which differs between a root
    # holding an object and ranks passing None).
    sz_name = None if name is None else f"{name}.sz"
    t_name = None if name is None else f"{name}.t"
    if _hvd.rank() == root_rank:
        data, header, error = _pickled(obj)
        _hvd.broadcast_(header, root_rank, name=sz_name, process_set=process_set)
        _hvd.broadcast_(_as_tensor(data), root_rank, name=t_name, process_set=process_set)
        if error is not None:
            raise error
        return obj
    header = torch.zeros(_HEADER, dtype=torch.int64)
    _hvd.broadcast_(header, root_rank, name=sz_name, process_set=process_set)
    size = int(header[0])
    payload = torch.empty(size if size >= 0 else -1 - size, dtype=torch.uint8)
    _hvd.broadcast_(payload, root_rank, name=t_name, process_set=process_set)
    data = payload.numpy()
    if size < 0:
        raise _failed_pickle("broadcast_object", [(root_rank, data.tobytes().decode(errors="replace"))])
    return _loads(data, header[1:].tolist(), root_rank)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj`, in rank order (of the set).
    When some rank cannot pickle its `obj`, every rank raises: that rank its
    error, the others a MismatchError naming it."""
    data, header, error = _pickled(obj)
    headers = _hvd.allgather(
        header.view(1, _HEADER), name=None if name is None else f"{name}.sz", process_set=process_set
    ).tolist()
    gathered = _hvd.allgather(_as_tensor(data), name=None if name is None else f"{name}.t", process_set=process_set)
    if error is not None:
        raise error
    chunks, offset = [], 0
    everything = memoryview(gathered.numpy())
    for n, *_ in headers:
        n = n if n >= 0 else -1 - n
        chunks.append(everything[offset : offset + n])
        offset += n
    failed = [
        (r, bytes(chunk).decode(errors="replace")) for r, ((n, *_), chunk) in enumerate(zip(headers, chunks)) if n < 0
    ]
    if failed:
        raise _failed_pickle("allgather_object", failed)
    return [_loads(chunk, h[1:], r) for r, (h, chunk) in enumerate(zip(headers, chunks))]
