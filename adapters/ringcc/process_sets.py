"""Process sets for ringcc's Horovod-style APIs (`ringcc.torch`, `ringcc.mxnet`).

    ps = hvd.add_process_set([0, 2])          # every rank calls it, same ranks
    hvd.allreduce(t, process_set=ps)          # ranks 0 and 2 only
    hvd.remove_process_set(ps)                # every rank calls it

How they run: the global process set is the job itself and its collectives
go through ringcc's background engine (named, matched by name in any order).
Every other process set is a communicator of the core of its own, joined by
its members through a rendezvous store that rank 0 serves for the job's
process sets (started at the first `add_process_set`; its address and secret
reach the ranks in a broadcast over the job). Collectives on such a set run
on its communicator directly, in the order each member issues them: names
are accepted but not used for matching, so members must issue them in the
same order. `add_process_set` and `remove_process_set` are collective over
all ranks (as in Horovod); they check that every rank passed the same ranks.

The registry is one per process, whichever framework API adds a set: a
process that uses ringcc.torch and ringcc.mxnet sees the same sets.

Differences from Horovod: sets may be added and removed without
`HOROVOD_DYNAMIC_PROCESS_SETS` (`init(process_sets="dynamic")` is accepted
and changes nothing); a set cannot be made from an MPI communicator (ringcc
has no MPI); `rank()` of a set this process is not in raises ValueError.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import secrets
import threading
import time
from collections.abc import Sequence

import numpy as np

import ringcc
from ringcc import _core, slurm

__all__ = ["ProcessSet", "global_process_set", "add_process_set", "remove_process_set", "process_sets"]


class ProcessSet:
    """A set of ranks that run collectives together. Make one from a list of
    (global) ranks, then pass it to `hvd.init(process_sets=[...])` or
    `hvd.add_process_set()`, and as `process_set=` to collectives.

    Roots (`broadcast(..., root_rank)`) are global ranks, as in Horovod;
    results of allgather and reducescatter are in the order of `ranks`."""

    process_set_id: int | None = None
    ranks: list[int] | None = None
    mpi_comm = None

    def __init__(self, ranks_or_comm: Sequence[int] | object):
        if hasattr(ranks_or_comm, "Get_size") and hasattr(ranks_or_comm, "Get_rank"):
            raise ValueError("ringcc has no MPI: make a ProcessSet from a list of ranks, not an MPI communicator")
        try:
            items = list(ranks_or_comm)
        except TypeError:
            raise ValueError("ProcessSet takes a list of process ranks") from None
        ranks = []
        for r in items:
            if isinstance(r, bool) or not hasattr(r, "__index__"):
                raise ValueError(f"ProcessSet takes a list of integer ranks, got {r!r}")
            ranks.append(int(r.__index__()))
        ranks.sort()
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"ProcessSet ranks must be distinct, got {ranks}")
        self.ranks = ranks
        self._comm = None

    def _invalidate(self) -> None:
        self.process_set_id = None
        comm, self._comm = self._comm, None
        if comm is not None:
            try:
                comm.shutdown()
            except Exception:  # noqa: BLE001 - leaving anyway
                pass

    def _is_global(self) -> bool:
        return self.process_set_id == 0

    def size(self) -> int | None:
        """Number of ranks in the set; None while it is not registered."""
        if self.process_set_id is None:
            return None
        if self._is_global():
            return ringcc.size()
        return len(self.ranks)

    def rank(self) -> int | None:
        """This process's position in the set (its index in `ranks`); None
        while the set is not registered. Raises ValueError on a process that
        is not in the set."""
        if self.process_set_id is None:
            return None
        if self._is_global():
            return ringcc.rank()
        me = ringcc.rank()
        if me not in self.ranks:
            raise ValueError(f"rank {me} is not in {self}")
        return self.ranks.index(me)

    def included(self) -> bool | None:
        """Whether this process is in the set; None while ranks are unknown."""
        if self.ranks is None:
            return None
        if self._is_global():
            return True
        return ringcc.rank() in self.ranks

    def _communicator(self):
        """The core communicator of a non-global set (this rank must be in it)."""
        if self.process_set_id is None:
            raise ValueError(
                f"{self} is not registered: pass it to hvd.init(process_sets=[...]) "
                "or hvd.add_process_set() first (or it was removed)"
            )
        if self._comm is None:
            raise ValueError(f"rank {ringcc.rank()} is not in {self}: only its ranks may run collectives on it")
        return self._comm

    def __str__(self) -> str:
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

_lock = threading.RLock()
_registry: dict[int, ProcessSet] = {}
_next_id = 1
_sequence = 0  # collective add/remove calls so far (their engine names)
_server = None  # rank 0: the store the sets meet in
_address: tuple | None = None  # (host, port, secret) of that store


class _StoreView:
    """One process set's keys in the job's process-set store, as the core's
    Communicator wants a store (set/get/add/check). A lock keeps one request
    at a time on the connection."""

    def __init__(self, client, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._lock = threading.Lock()

    def set(self, key, value):
        with self._lock:
            self._client.set(self._prefix + key, value)

    def get(self, key):
        with self._lock:
            return self._client.get(self._prefix + key)

    def add(self, key, delta):
        with self._lock:
            return self._client.add(self._prefix + key, int(delta))

    def check(self, keys):
        with self._lock:
            return all(self._client.try_get(self._prefix + k) is not None for k in keys)

    def wait(self, keys, timeout=None):
        seconds = float(timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout or 0)
        if seconds <= 0:  # every wait is bounded: by the core's timeout
            try:
                seconds = float(
                    os.environ.get("RINGCC_TIMEOUT_S") or os.environ.get("HOROVOD_GLOO_TIMEOUT_SECONDS") or 60
                )
            except ValueError:
                seconds = 60.0
        deadline = time.monotonic() + seconds
        delay = 0.0005
        while not self.check(keys):
            if time.monotonic() > deadline:
                raise ringcc.TimeoutError(f"keys {list(keys)} were not set within {seconds:g} s")
            time.sleep(delay)
            delay = min(delay * 2, 0.02)


def _engine_sync(tag: str) -> None:
    """Returns once every rank got here (a named engine allreduce)."""
    ringcc.allreduce_async_(np.zeros(1, dtype=np.int32), ringcc.Sum, name=f"ringcc.process_set.{tag}").wait()


def _master_host() -> str:
    given = os.environ.get("RINGCC_MASTER_ADDR") or os.environ.get("MASTER_ADDR")
    if not given and os.environ.get("SLURM_PROCID"):
        # Under srun rank 0 runs on the step's first node (as the core finds it).
        return slurm.step_nodes(os.environ)[0]
    return given or "127.0.0.1"


def _ensure_store(tag: str) -> tuple:
    """(host, port, secret) of rank 0's process-set store, starting it on the
    first call (collective: every rank calls it at the same point)."""
    global _server, _address
    if _address is not None:
        return _address
    payload = np.zeros(72, dtype=np.uint8)
    # Every rank on this host: the store listens on 127.0.0.1 only.
    single_host = ringcc.local_size() == ringcc.size()
    if ringcc.rank() == 0:
        secret = secrets.token_hex(16)
        listen = "127.0.0.1" if single_host else os.environ.get("RINGCC_LISTEN_ADDR", "")
        _server = _core.TcpStoreServer(listen, 0, secret)
        payload[:8] = np.frombuffer(np.int64(_server.port).tobytes(), dtype=np.uint8)
        payload[8:40] = np.frombuffer(secret.encode(), dtype=np.uint8)
    ringcc.broadcast_async_(payload, 0, name=f"ringcc.process_set.{tag}.store").wait()
    port = int(np.frombuffer(payload[:8].tobytes(), dtype=np.int64)[0])
    secret = payload[8:40].tobytes().decode()
    _address = ("127.0.0.1" if single_host else _master_host(), port, secret)
    return _address


def _digest(ranks: Sequence[int]) -> np.ndarray:
    h = hashlib.sha256(",".join(map(str, ranks)).encode()).digest()[:8]
    return np.frombuffer(h, dtype=np.int64).copy()


def _check_initialized() -> None:
    if not ringcc.is_initialized():
        raise ValueError("ringcc has not been initialized; use hvd.init() (ringcc.init()) first.")


def add_process_set(process_set: ProcessSet | Sequence[int]) -> ProcessSet:
    """Registers a process set and returns it (a list of ranks makes a new
    ProcessSet). Collective: every rank of the job calls it with the same
    ranks, in the same order as its other add/remove calls. Raises
    ValueError for a set whose ranks an existing set already has."""
    global _next_id, _sequence
    _check_initialized()
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    ranks = process_set.ranks
    with _lock:
        _sequence += 1
        tag = f"add.{_sequence}"
        digests = ringcc.allgather_async(_digest(ranks), name=f"ringcc.process_set.{tag}").wait()
        if len(set(int(d) for d in digests)) != 1:
            raise ValueError(f"add_process_set: the ranks passed different process sets (this rank: {ranks})")
        size = ringcc.size()
        if not ranks or ranks[0] < 0 or ranks[-1] >= size:
            raise ValueError(f"add_process_set: ranks {ranks} are not a non-empty subset of the job's {size} ranks")
        if process_set.process_set_id is not None:
            raise ValueError(f"add_process_set: {process_set} is registered already")
        if ranks == list(range(size)) or any(ps.ranks == ranks for ps in _registry.values()):
            raise ValueError(f"Attempted to add a duplicate process set: {process_set}")
        host, port, secret = _ensure_store(tag)
        set_id = _next_id
        _next_id += 1
        error = None
        me = ringcc.rank()
        if me in ranks:
            try:
                client = _core.TcpStore(host, port, secret)
                view = _StoreView(client, f"ringcc/process_set/{set_id}/")
                process_set._comm = _core.Communicator(ranks.index(me), len(ranks), view)
            except Exception as e:  # noqa: BLE001 - raised after the others are released
                error = e
        _engine_sync(f"{tag}.ready")
        if error is not None:
            raise error
        process_set.process_set_id = set_id
        _registry[set_id] = process_set
    return process_set


def remove_process_set(process_set: ProcessSet) -> bool:
    """Unregisters a process set (collective over every rank, like
    add_process_set); returns False for the global set or an unregistered one."""
    global _sequence
    set_id = process_set.process_set_id
    if set_id is None or set_id == 0:
        return False
    _check_initialized()
    with _lock:
        _sequence += 1
        _engine_sync(f"remove.{_sequence}")
        registered = _registry.pop(set_id, None)
        process_set._invalidate()
        if registered is not None and registered is not process_set:
            registered._invalidate()
    return registered is not None


def process_sets() -> list[ProcessSet]:
    """The registered process sets, the global one first."""
    with _lock:
        return [global_process_set] + [_registry[k] for k in sorted(_registry)]


def _on_init(size: int) -> None:
    global_process_set.ranks = list(range(size))
    global_process_set.process_set_id = 0


def _at_exit() -> None:
    # Before ringcc's own exit handler (registered earlier, so run later):
    # the sets' communicators close while the interpreter is whole.
    try:
        _on_shutdown()
    except Exception:  # noqa: BLE001 - the process is ending
        pass


def _on_shutdown() -> None:
    """Leaves every process set and stops the store (before ringcc.shutdown)."""
    global _server, _address, _next_id, _sequence
    with _lock:
        for ps in list(_registry.values()):
            ps._invalidate()
        _registry.clear()
        _next_id = 1
        _sequence = 0
        _address = None
        _server = None


atexit.register(_at_exit)
