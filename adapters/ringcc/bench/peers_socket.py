"""The socket peer: the bytes a ring allreduce moves, over plain TCP sockets.

A ring allreduce of S bytes over n ranks sends 2(n-1)/n * S bytes to the
next rank while it receives as many from the previous one, so both
directions of every link are busy at once. This peer moves exactly those
bytes through one TCP connection per direction between neighbours on this
host (127.0.0.1, TCP_NODELAY, the same socket buffer size ringcc's TCP
transport asks for), a thread sending while the main thread receives, with
no reduction and no protocol: what plain sockets carry for the same
traffic, the reference beside which to read ringcc's figures under
RINGCC_TRANSPORT=tcp (a ratio near 1 says the reduction and ringcc's
protocol cost next to nothing beyond the transfer). It times allreduce
only. Python releases the GIL in send and recv and each call moves
megabytes, so the interpreter adds little from 1 MiB up; small sizes pay
for the thread hand-off, so only there, up to INLINE_BYTES, a rank sends
before it receives on one thread.
"""

import os
import socket
import threading

import numpy as np

from .measure import Backend

HELLO = b"ringcc-bench-socket-peer"
# ringcc's RINGCC_TCP_BUFFER_BYTES default (the kernel caps it at net.core.[rw]mem_max).
DEFAULT_BUFFER_BYTES = 4 << 20
CHUNK_BYTES = 4 << 20
# Up to this many bytes each way, a rank sends before it receives, on one
# thread (the kernel's socket buffers hold it all); beyond, a thread sends.
INLINE_BYTES = 256 << 10


def open_socket_peer(ours, rc, timeout_s):
    """(SocketBackend, None) or (None, reason). Collective over ringcc's ranks:
    every rank must call it, and every rank gets the same outcome."""
    rank, size = ours.rank, ours.size
    reason = ""
    if size < 2:
        reason = "needs at least 2 ranks"
    elif rc.local_size() != size:
        reason = "the socket peer runs on one host, and this job spans several"
    listener = None
    port = 0
    if not reason:
        try:
            listener = socket.create_server(("127.0.0.1", 0), backlog=4)
            listener.settimeout(timeout_s)
            port = listener.getsockname()[1]
        except OSError as e:
            reason = f"cannot listen on 127.0.0.1: {e}"
    if ours.max_over_ranks(1.0 if reason else 0.0) > 0:
        if listener is not None:
            listener.close()
        return None, reason or "the socket peer could not start on another rank"
    ports = np.zeros(size, np.int64)
    ports[rank] = port
    rc.allreduce_(ports, rc.Sum)
    backend, reason = None, ""
    try:
        backend = SocketBackend(ours, listener, int(ports[(rank + 1) % size]), timeout_s)
    except OSError as e:
        reason = f"connecting the ring failed: {e}"
    finally:
        listener.close()
    if ours.max_over_ranks(1.0 if reason else 0.0) > 0:
        if backend is not None:
            backend.close()
        return None, reason or "the socket peer could not connect on another rank"
    return backend, None


def _tune(sock, buffer_bytes):
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer_bytes)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer_bytes)


class SocketBackend(Backend):
    name = "socket"

    def __init__(self, ours, listener, next_port, timeout_s):
        self.ours = ours
        self.rank, self.size = ours.rank, ours.size
        self.version = "TCP over 127.0.0.1, one connection per direction"
        buffer_bytes = int(os.environ.get("RINGCC_TCP_BUFFER_BYTES", DEFAULT_BUFFER_BYTES))
        self.out_sock = socket.create_connection(("127.0.0.1", next_port), timeout=timeout_s)
        _tune(self.out_sock, buffer_bytes)
        self.out_sock.sendall(HELLO)
        # The previous rank's connection: the one that says hello (a stranger is dropped).
        while True:
            conn, _ = listener.accept()
            conn.settimeout(timeout_s)
            try:
                got = conn.recv(len(HELLO), socket.MSG_WAITALL)
            except OSError:
                got = b""
            if got == HELLO:
                break
            conn.close()
        _tune(conn, buffer_bytes)
        self.in_sock = conn
        self.out_sock.settimeout(timeout_s)
        # The sending side runs in a thread of its own, as both directions must flow at once.
        self._job = None
        self._error = None
        self._start = threading.Semaphore(0)
        self._finished = threading.Semaphore(0)
        self._stop = False
        self._sender = threading.Thread(target=self._send_loop, name="bench-socket-sender", daemon=True)
        self._sender.start()

    def _send_loop(self):
        while True:
            self._start.acquire()
            if self._stop:
                return
            view, total = self._job
            try:
                sent = 0
                while sent < total:
                    k = min(total - sent, len(view), CHUNK_BYTES)
                    self.out_sock.sendall(view[:k])
                    sent += k
            except OSError as e:
                self._error = e
            self._finished.release()

    def close(self):
        self._stop = True
        self._start.release()
        self._sender.join(timeout=5)
        for s in (self.out_sock, self.in_sock):
            s.close()

    def max_over_ranks(self, value):
        return self.ours.max_over_ranks(value)

    def barrier(self):
        self.ours.barrier()

    def unsupported(self, op, dtype):
        if op != "allreduce":
            return "the socket peer times the allreduce's transfer only"
        return None

    def loop(self, op, x, out):
        n = self.size
        total = 2 * (n - 1) * x.nbytes // n  # bytes each way per rank, as the ring moves them
        send_view = memoryview(x.reshape(-1).view(np.uint8))
        scratch = bytearray(max(1, min(total, CHUNK_BYTES)))
        recv_view = memoryview(scratch)
        recv_into = self.in_sock.recv_into

        if total <= INLINE_BYTES:
            send = self.out_sock.sendall
            small = send_view[:total]

            def run(iters):
                # Fits in the socket buffers: send, then receive, on this thread.
                for _ in range(iters):
                    send(small)
                    got = 0
                    while got < total:
                        k = recv_into(recv_view[got:total])
                        if k == 0:
                            raise ConnectionError("the previous rank closed its socket")
                        got += k

            return run

        def run(iters):
            for _ in range(iters):
                self._job = (send_view, total)
                self._start.release()
                got = 0
                while got < total:
                    k = recv_into(recv_view[: min(total - got, len(recv_view))])
                    if k == 0:
                        raise ConnectionError("the previous rank closed its socket")
                    got += k
                self._finished.acquire()
                if self._error is not None:
                    raise ConnectionError(f"sending to the next rank failed: {self._error}")

        return run
