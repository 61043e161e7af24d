"""Point-to-point of backend "ring"'s process group: send, recv and
recv_anysource. Messages from one rank to another with one tag go in order
over a channel of their own (a 2-rank communicator and a thread); a
receive from any source finds its sender through counts in the store. A
mixin of ProcessGroupRing (backend.py) over base.GroupBase's state."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from ringcc import _core
from ringcc.failed_calls import error_text
from ringcc.torch.process_group.base import BACKEND_NAME
from ringcc.torch.process_group.tensors import (
    input_units,
    one_tensor,
    output_units,
    store_units,
    unit_count,
    unit_dtype,
)
from ringcc.torch.work import FutureWaitable, RingWork, profile_range

log = logging.getLogger("ringcc.torch")

# How long leaving the group waits for its channels to close.
_CHANNEL_CLOSE_WAIT_S = 5.0


class _Channel:
    """Messages from rank `src` to rank `dst` of a group with one tag, in
    order: a 2-rank communicator of their own (the sender is its rank 0),
    created on first use, and a thread that runs the transfers (a transfer
    is a 2-rank broadcast from the sender). A channel per direction lets
    both ranks send before they receive, as batch_isend_irecv does."""

    def __init__(self, group: PointToPoint, src: int, dst: int, tag: int) -> None:
        self.key = (src, dst, tag)
        self._me = 0 if group._rank == src else 1
        self._store = dist.PrefixStore(f"ringcc-p2p/{src}-{dst}/{tag}/", group._store)
        self._comm = None
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"ringcc-p2p-{src}-{dst}-{tag}")

    def submit(self, fn: Callable) -> concurrent.futures.Future:
        """Runs fn(channel) on the channel's thread, after earlier transfers."""
        return self._executor.submit(fn, self)

    def comm(self):
        """The channel's communicator (joined on first use: blocks until the
        peer joins too)."""
        if self._comm is None:
            comm = _core.Communicator(self._me, 2, self._store)
            comm.compare_shapes = False  # torch's rule: sizes only (see ProcessGroupRing)
            self._comm = comm
        return self._comm

    def close(self) -> None:
        self._executor.shutdown(wait=False)
        comm, self._comm = self._comm, None
        if comm is not None:
            comm.shutdown()


class PointToPoint:
    """send, recv and recv_anysource of ProcessGroupRing."""

    def _start_point_to_point(self) -> None:
        self._channels: dict[tuple[int, int, int], _Channel] = {}
        self._p2p_lock = threading.Lock()
        self._taken: dict[tuple[int, int], int] = {}  # (src, tag) -> messages received
        self._anysource: concurrent.futures.ThreadPoolExecutor | None = None

    def _stop_point_to_point(self) -> None:
        """Closes the channels (shutdown())."""
        with self._p2p_lock:
            channels = [self._channels[k] for k in sorted(self._channels)]
            self._channels.clear()
            anysource, self._anysource = self._anysource, None
        if anysource is not None:
            anysource.shutdown(wait=False)
        if channels:
            # In a thread of their own, in the same order on every rank; a
            # transfer the peer never matched would hold it up until the
            # core's timeout, so this waits only a little.
            closer = threading.Thread(target=_close_channels, args=(channels,), name="ringcc-p2p-close", daemon=True)
            closer.start()
            closer.join(_CHANNEL_CLOSE_WAIT_S)

    def _channel(self, src: int, dst: int, tag: int) -> _Channel:
        key = (src, dst, tag)
        channel = self._channels.get(key)
        if channel is None:
            with self._p2p_lock:
                channel = self._channels.get(key)
                if channel is None:
                    channel = self._channels[key] = _Channel(self, src, dst, tag)
        return channel

    def _count_key(self, dst: int, src: int, tag: int) -> str:
        return f"ringcc-p2p-sent/{dst}/{src}/{tag}"

    def _fail_transfer(self, channel: _Channel, error: BaseException, sent_key: str | None) -> None:
        """A send or receive this rank cannot make: its peer's matching one
        fails too (see "Operations that fail on this rank"), in the
        channel's order."""
        text = error_text(error)
        store = self._store

        def transfer(ch):
            if sent_key is not None:
                store.add(sent_key, 1)  # a receive from any source takes it, and fails
            ch.comm().report_error(text, "broadcast")

        channel.submit(transfer)

    def send(self, tensors, dstRank, tag=0):
        if dstRank == self._rank or not 0 <= dstRank < self._size:
            raise ValueError(f"send: invalid destination rank {dstRank} (this is rank {self._rank} of {self._size})")
        store, key = self._store, self._count_key(dstRank, self._rank, tag)
        try:
            tensor = one_tensor(tensors, "send")
            device = self._device([tensor], "send")
            units = input_units(tensor)
            if device.type == "cuda":
                # Point-to-point goes through host memory: a pair of ranks
                # has no device communicator of its own.
                units = units.cpu()
        except Exception as error:
            self._fail_transfer(self._channel(self._rank, dstRank, tag), error, key)
            raise

        def transfer(channel):
            store.add(key, 1)  # lets recv_anysource find us (before we wait for the peer)
            channel.comm().broadcast(units, root=0, inplace=True)

        profile = profile_range(f"{BACKEND_NAME}:send")
        future = self._channel(self._rank, dstRank, tag).submit(transfer)
        return RingWork([tensor], [FutureWaitable(future)], timeout_s=self._timeout_s, profile=profile)

    def recv(self, tensors, srcRank, tag=0):
        if srcRank == self._rank or not 0 <= srcRank < self._size:
            raise ValueError(f"recv: invalid source rank {srcRank} (this is rank {self._rank} of {self._size})")
        try:
            tensor = one_tensor(tensors, "recv")
            self._device([tensor], "recv")
        except Exception as error:
            with self._p2p_lock:
                self._taken[(srcRank, tag)] = self._taken.get((srcRank, tag), 0) + 1
                self._fail_transfer(self._channel_locked(srcRank, self._rank, tag), error, None)
            raise
        profile = profile_range(f"{BACKEND_NAME}:recv")
        with self._p2p_lock:
            self._taken[(srcRank, tag)] = self._taken.get((srcRank, tag), 0) + 1
            future = self._submit_recv(tensor, srcRank, tag)
        return RingWork(
            [tensor], [FutureWaitable(future)], timeout_s=self._timeout_s, profile=profile, source_rank=srcRank
        )

    def _submit_recv(self, tensor, src, tag):
        cuda = tensor.is_cuda
        direct = None if cuda else output_units(tensor)
        target = direct if direct is not None else torch.empty(unit_count(tensor), dtype=unit_dtype(tensor.dtype))

        def transfer(channel):
            channel.comm().broadcast(target, root=0, inplace=True)
            if direct is None:
                with torch.no_grad():
                    if cuda:
                        # Received in host memory (see send): copied in, and
                        # done before the work completes.
                        with torch.cuda.device(tensor.device):
                            store_units(target.to(tensor.device), tensor)
                            torch.cuda.current_stream(tensor.device).synchronize()
                    else:
                        store_units(target, tensor)
            return src

        return self._channel_locked(src, self._rank, tag).submit(transfer)

    def _channel_locked(self, src: int, dst: int, tag: int) -> _Channel:
        """_channel() for a caller that holds _p2p_lock."""
        key = (src, dst, tag)
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = _Channel(self, src, dst, tag)
        return channel

    def recv_anysource(self, tensors, tag=0):
        """Receives from whichever rank has sent this rank a message with
        `tag` that no receive took yet (senders count their messages in the
        store); work.source_rank() tells which."""
        tensor = one_tensor(tensors, "recv_anysource")
        self._device([tensor], "recv_anysource")
        profile = profile_range(f"{BACKEND_NAME}:recvAnySource")
        if self._anysource is None:
            with self._p2p_lock:
                if self._anysource is None:
                    self._anysource = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ringcc-anysource")
        deadline = time.monotonic() + self._timeout_s

        def resolve():
            delay = 0.0005
            while True:
                for src in range(self._size):
                    if src == self._rank:
                        continue
                    sent = self._store.add(self._count_key(self._rank, src, tag), 0)
                    with self._p2p_lock:
                        if sent > self._taken.get((src, tag), 0):
                            self._taken[(src, tag)] = self._taken.get((src, tag), 0) + 1
                            future = self._submit_recv(tensor, src, tag)
                            break
                else:
                    if time.monotonic() > deadline:
                        raise _core.TimeoutError(
                            f"recv_anysource: no message with tag {tag} arrived within {self._timeout_s:g} s"
                        )
                    time.sleep(delay)
                    delay = min(delay * 2, 0.01)
                    continue
                return future.result()

        outer = self._anysource.submit(resolve)
        work = RingWork([tensor], [FutureWaitable(outer)], timeout_s=self._timeout_s, profile=profile)

        def finish():
            work._src_rank = outer.result()

        work._finish = finish
        return work


def _close_channels(channels: list[_Channel]) -> None:
    for channel in channels:
        try:
            channel.close()
        except Exception as error:  # noqa: BLE001 - leaving anyway
            log.debug("closing a point-to-point channel: %s", error)
