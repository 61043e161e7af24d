"""Elastic training, as Horovod's elastic API, without a framework.

    import ringcc, ringcc.elastic as elastic

    ringcc.init()
    state = elastic.ObjectState(elastic.broadcast_object, ringcc.rank, epoch=0, weights=w)

    @elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...                                   # collectives
            state.commit()

    train(state)

Run it with `ringrun -np 2 --min-np 1 --max-np 4 --host-discovery-script
./discover.sh python train.py`. When a worker fails, the others raise a
job failure from their collective (PeerFailureError, a TimeoutError, or
HorovodInternalError from a framework's API); `run` then restores the last
commit, leaves the job, joins the next membership that ringrun's driver
forms, synchronises the state from the new rank 0 and calls the function
again. When hosts are added or removed, `commit()` or
`check_host_updates()` raises HostsUpdatedInterrupt on every rank at the
same commit, and `run` resets the same way without restoring. PyTorch's
version (TorchState, ElasticSampler) is `ringcc.torch.elastic`
(`hvd.elastic`). See docs/elastic.md.
"""

from __future__ import annotations

import functools
import pickle
import queue
import threading
from enum import IntFlag


class HorovodInternalError(RuntimeError):
    """A collective failed: a peer died or aborted, the ranks disagreed on a
    tensor (shape, dtype, op, root), or the core failed. Errors raised from
    `hvd.synchronize()` are this class and the ringcc error at once, e.g.
    `except ringcc.PeerFailureError` and `except hvd.HorovodInternalError`
    both catch a dead peer."""


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by State.commit() and State.check_host_updates() on every rank
    at the same commit when ringrun's elastic driver found hosts added or
    removed. `skip_sync`: only hosts were removed, so the remaining workers
    hold the same state and need no synchronisation."""

    def __init__(self, skip_sync=False):
        super().__init__()
        self.skip_sync = skip_sync


class HostUpdateResult(IntFlag):
    no_update = 0
    removed = 1
    added = 2
    mixed = removed | added


class WorkerNotificationManager:
    """Hands the driver's host updates to the registered states."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners = set()

    def init(self) -> None:
        from ringcc.elastic import worker

        worker.start_watching(self.handle_hosts_updated)

    def register_listener(self, listener) -> None:
        with self._lock:
            self._listeners.add(listener)

    def remove_listener(self, listener) -> None:
        with self._lock:
            self._listeners.discard(listener)

    def handle_hosts_updated(self, timestamp, update_res) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener.on_hosts_updated(timestamp, HostUpdateResult(update_res))


notification_manager = WorkerNotificationManager()


class State:
    """State tracked in memory across workers.

    Args:
        bcast_object: broadcasts a picklable object from rank 0 to the others.
        get_rank: returns this worker's rank.
    """

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._host_messages = queue.Queue()
        self._last_updated_timestamp = 0
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Registers functions called after every reset (a worker added or
        removed), after ringcc joined the new membership and before the state
        is synchronised; e.g. to scale the learning rate with the new size."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self._host_messages = queue.Queue()
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        self._host_messages.put((timestamp, update_res))

    def commit(self):
        """Saves the state in host memory (what restore() returns to), then
        checks for host updates (HostsUpdatedInterrupt)."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt, on every rank alike, when the driver
        announced hosts added or removed since the last check (rank 0's view
        decides, broadcast to the others)."""
        last_updated_timestamp = prev_timestamp = self._last_updated_timestamp
        all_update = HostUpdateResult.no_update
        while not self._host_messages.empty():
            timestamp, update = self._host_messages.get()
            if timestamp > last_updated_timestamp:
                last_updated_timestamp = timestamp
                all_update |= update
        prev_timestamp, self._last_updated_timestamp, all_update = self._bcast_object(
            (prev_timestamp, last_updated_timestamp, int(all_update))
        )
        if self._last_updated_timestamp > prev_timestamp:
            raise HostsUpdatedInterrupt(all_update == HostUpdateResult.removed)

    def save(self):
        """Saves state to host memory."""
        raise NotImplementedError()

    def restore(self):
        """Restores the last committed state, undoing uncommitted changes."""
        raise NotImplementedError()

    def sync(self):
        """Synchronises the state across workers (from rank 0)."""
        raise NotImplementedError()

    def reset(self):
        """Resets objects after a reset event (before synchronisation)."""


class ObjectState(State):
    """State of plain Python objects, each given as a keyword argument and
    kept as an attribute of the same name."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._bcast_object = bcast_object
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        new_state = {}
        for attr in self._saved_state.keys():
            new_state[attr] = getattr(self, attr)
        self._saved_state = new_state

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)


def _is_job_failure(error: BaseException) -> bool:
    """Whether `error` means the job lost a member (reset and go on) rather
    than a mistake of the program (raise)."""
    from ringcc import _core

    if isinstance(error, _core.MismatchError):
        return False  # the ranks disagree on a collective: the job is intact, the program is wrong
    if isinstance(error, (HorovodInternalError, _core.PeerFailureError, _core.TimeoutError, _core.InternalError)):
        return True
    # The engine stopped after a failure while ringcc is still initialised.
    return isinstance(error, _core.NotInitializedError) and _core.is_initialized()


def _report_synced():
    """Tells ringrun's elastic driver (once) that this worker holds the
    training state, so that it may become rank 0 of a later membership."""
    from ringcc.elastic import worker

    worker.report_synced()


def run_fn(func, reset):
    """Horovod's elastic loop around `func(state, ...)`: synchronise, call;
    on a job failure restore the last commit, on HostsUpdatedInterrupt keep
    the state; then `reset()` (leave and join the next membership), the
    state's reset callbacks, and again."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        notification_manager.init()
        notification_manager.register_listener(state)
        skip_sync = False
        try:
            while True:
                try:
                    if not skip_sync:
                        state.sync()
                    _report_synced()
                    return func(state, *args, **kwargs)
                except HostsUpdatedInterrupt as error:
                    skip_sync = error.skip_sync
                except Exception as error:  # noqa: BLE001 - a job failure, or re-raised
                    if not _is_job_failure(error):
                        raise
                    state.restore()
                    skip_sync = False
                reset()
                state.on_reset()
        finally:
            notification_manager.remove_listener(state)

    return wrapper


def broadcast_object(obj, root_rank=0):
    """`obj` of rank `root_rank`, pickled and broadcast, on every rank
    (the framework-free bcast_object for State and ObjectState)."""
    import numpy as np

    import ringcc
    from ringcc import _objects

    if ringcc.rank() == root_rank:
        pickled = pickle.dumps(obj)
        data = np.frombuffer(bytearray(pickled), dtype=np.uint8)
        header = np.array([data.size, *_objects.mac_words(pickled)], dtype=np.int64)
    else:
        data, header = None, np.zeros(1 + _objects.MAC_WORDS, dtype=np.int64)
    ringcc.broadcast_(header, root_rank)
    if data is None:
        data = np.empty(int(header[0]), dtype=np.uint8)
    ringcc.broadcast_(data, root_rank)
    return obj if ringcc.rank() == root_rank else _objects.loads(data, header[1:], f"rank {root_rank}")


def _reset():
    import ringcc

    ringcc.shutdown()
    ringcc.init()


def run(func):
    """Decorator: runs `func(state, ...)` elastically (see run_fn) with
    ringcc's own shutdown() and init() as the reset."""
    return run_fn(func, _reset)


__all__ = [
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
    "HostUpdateResult",
    "State",
    "ObjectState",
    "run",
    "run_fn",
    "broadcast_object",
    "notification_manager",
]
