"""How ringrun's elastic driver serves its workers' requests: one thread and
a selector for every connection, so that no number of connections, however
slow, costs the driver a thread, and running out of threads elsewhere does
not stop it serving.

A connection is sent the server's nonce and must deliver its whole request
within REQUEST_DEADLINE_S of its arrival (a deadline for the request, not
for each read). Nothing past the fixed header is read until the header's
MAC proves the job secret (ringcc/elastic/protocol.py). At most
MAX_UNAUTHENTICATED connections wait for their request at a time; one more
pushes the oldest out (a worker's request arrives within milliseconds of
its connection, so it is a connection that trickles or stalls that goes).
An authenticated request is answered at once, or, when the driver's answer
has to wait (a join waits for the next membership, a watch for a change of
hosts), held as a `Wait` that the server asks again whenever the driver
wakes it, without a thread. Refused and failed connections are logged at
most once per LOG_INTERVAL_S for each address, with the number held back.
"""

from __future__ import annotations

import errno
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ringcc.elastic import protocol

REQUEST_DEADLINE_S = 10.0
REPLY_DEADLINE_S = 10.0
MAX_UNAUTHENTICATED = 256
LOG_INTERVAL_S = 5.0
MAX_LOGGED_ADDRESSES = 1024  # beyond: counted together, so that the log's memory is bounded too
ACCEPT_PAUSE_S = 0.1  # after accept() found no file descriptor left
ACCEPTS_PER_ROUND = 64  # then the connections already in have their turn
CLOSE_WAIT_S = 2.0
ERROR_PAUSE_S = 0.1  # after a round that failed, so that a failure that repeats does not spin

_READING, _WAITING, _REPLYING = "reading", "waiting", "replying"
# accept() errors that say the process or the system is short of something
# for a while, not that the listening socket is broken.
_SHORTAGES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


@dataclass
class Wait:
    """A reply the driver does not have yet. `poll(now)` returns it once it
    has (or None); the server calls it, with the driver's lock held, each
    time the driver wakes it, after each request, and at `deadline`
    (time.monotonic(); None: none), by which it must answer."""

    poll: Callable[[float], dict | None]
    deadline: float | None = None


Handler = Callable[[dict], "dict | Wait"]


class ThrottledLog:
    """At most one line per address every `interval` seconds: the lines held
    back are counted and told with the next line from that address, or on
    their own once the interval is over."""

    def __init__(self, emit: Callable[[str], None], interval: float = LOG_INTERVAL_S) -> None:
        self._emit = emit
        self._interval = interval
        self._sources: dict[str, list] = {}  # address -> [last line's time, lines held back, what they are]

    def note(self, source: str, text: str, now: float, counted: str | None = None) -> None:
        """`text` now, or counted (as `counted`: "connection(s) from
        SOURCE refused or failed" by default) until the interval is over."""
        if source not in self._sources and len(self._sources) >= MAX_LOGGED_ADDRESSES:
            source = "other addresses"
        entry = self._sources.get(source)
        if entry is None:
            self._sources[source] = [now, 0, counted or f"connection(s) from {source} refused or failed"]
            self._emit(text)
        elif now - entry[0] >= self._interval:
            self._emit(text + (f" ({entry[1]} more held back)" if entry[1] else ""))
            entry[0], entry[1] = now, 0
        else:
            entry[1] += 1

    def flush(self, now: float) -> float | None:
        """Tells the counts whose interval is over; returns when the next one is due."""
        due = None
        for source, entry in list(self._sources.items()):
            if now - entry[0] < self._interval:
                if entry[1]:
                    due = min(due or float("inf"), entry[0] + self._interval)
                continue
            if entry[1]:
                self._emit(f"elastic mode: {entry[1]} more {entry[2]} in the last {now - entry[0]:.0f} s")
            del self._sources[source]
        return due


class _Connection:
    __slots__ = ("sock", "source", "reader", "outgoing", "deadline", "phase", "wait", "events", "gone")

    def __init__(self, sock: socket.socket, source: str, secret: bytes, deadline: float) -> None:
        self.sock = sock
        self.source = source
        self.reader = protocol.RequestReader(secret)
        self.outgoing = bytearray(self.reader.server_nonce)
        self.deadline = deadline
        self.phase = _READING
        self.wait: Wait | None = None
        self.events = 0  # those the selector watches for
        self.gone = False  # the peer left while its reply was awaited: nobody to send it to


class RequestServer:
    """Serves requests on `listener` with `handle(request) -> reply | Wait`,
    called with `lock` held; `log` writes one line."""

    def __init__(
        self,
        listener: socket.socket,
        secret: bytes,
        lock,
        handle: Handler,
        log: Callable[[str], None],
        request_deadline_s: float = REQUEST_DEADLINE_S,
        max_unauthenticated: int = MAX_UNAUTHENTICATED,
        log_interval_s: float = LOG_INTERVAL_S,
    ) -> None:
        self._listener = listener
        self._secret = secret
        self._lock = lock
        self._handle = handle
        self._request_deadline_s = request_deadline_s
        self._max_unauthenticated = max_unauthenticated
        self.refusals = ThrottledLog(log, log_interval_s)
        self._selector = selectors.DefaultSelector()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        # Insertion order is arrival order: the first is the oldest.
        self._unauthenticated: dict[_Connection, None] = {}
        self._waiting: dict[_Connection, None] = {}
        self._replying: dict[_Connection, None] = {}
        self._accept_paused_until: float | None = None
        self._log_due: float | None = None  # when the log has counts to tell

    # -- the driver's side ----------------------------------------------------

    def start(self) -> None:
        """Starts the server's thread (RuntimeError when none can be started)."""
        self._listener.setblocking(False)
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_reader, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name="ringrun-elastic-server", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Has the server ask its Waits again (the driver's state changed)."""
        if not self._waiting:
            return
        try:
            self._wake_writer.send(b"\0")
        except OSError:
            pass  # the pipe is full, so a wake is pending already (or the server is closed)

    def close(self) -> None:
        """Answers the Waits that have an answer now, closes every
        connection and the listener, and ends the thread."""
        self._closing.set()
        try:
            self._wake_writer.send(b"\0")
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(CLOSE_WAIT_S)
        if self._thread is None or not self._thread.is_alive():
            self._listener.close()
            self._wake_reader.close()
            self._wake_writer.close()

    # -- the server's thread --------------------------------------------------

    def _run(self) -> None:
        while not self._closing.is_set():
            try:
                self._round()
            except Exception as error:  # noqa: BLE001 - serving goes on whatever one round met
                self.refusals.note(
                    "server", f"elastic mode: serving requests: {error!r}", time.monotonic(), "failures to serve"
                )
                self._closing.wait(ERROR_PAUSE_S)
        self._finish()

    def _round(self) -> None:
        now = time.monotonic()
        for key, mask in self._selector.select(self._timeout(now)):
            if key.fileobj is self._listener:
                self._accept()
            elif key.fileobj is self._wake_reader:
                self._drain_wakes()
            else:
                self._service(key.data, mask)
        now = time.monotonic()
        self._poll_waits(now)
        self._expire(now)
        self._log_due = self.refusals.flush(now)
        if self._accept_paused_until is not None and now >= self._accept_paused_until:
            self._accept_paused_until = None
            self._selector.register(self._listener, selectors.EVENT_READ)

    def _timeout(self, now: float) -> float | None:
        due = [self._accept_paused_until, self._log_due]
        oldest = next(iter(self._unauthenticated), None)  # the first to reach its deadline
        if oldest is not None:
            due.append(oldest.deadline)
        due += [c.deadline for c in self._replying]
        due += [c.wait.deadline for c in self._waiting if c.wait.deadline is not None]
        due = [d for d in due if d is not None]
        return max(0.0, min(due) - now) if due else None

    def _drain_wakes(self) -> None:
        try:
            while self._wake_reader.recv(4096):
                pass
        except OSError:
            pass  # drained (BlockingIOError)

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_ROUND):
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as error:
                now = time.monotonic()
                self.refusals.note(
                    "accept", f"elastic mode: cannot accept a connection: {error}", now, "failures to accept"
                )
                if self._closing.is_set():
                    return
                # Out of descriptors (or the like): stop accepting for a
                # moment rather than spin on a listener that stays readable.
                self._selector.unregister(self._listener)
                self._accept_paused_until = now + ACCEPT_PAUSE_S
                if error.errno not in _SHORTAGES:
                    self._accept_paused_until = now + 1.0
                return
            now = time.monotonic()
            if len(self._unauthenticated) >= self._max_unauthenticated:
                oldest = next(iter(self._unauthenticated))
                self._drop(
                    oldest, f"pushed out by a newer one ({self._max_unauthenticated} were waiting for requests)", now
                )
            sock.setblocking(False)
            conn = _Connection(sock, str(address[0]), self._secret, now + self._request_deadline_s)
            self._unauthenticated[conn] = None
            try:
                self._flush(conn)
            except OSError as error:
                self._drop(conn, str(error), now)

    def _service(self, conn: _Connection, mask: int) -> None:
        if conn.sock.fileno() < 0:
            return  # closed by an earlier event of the same round
        now = time.monotonic()
        try:
            if mask & selectors.EVENT_WRITE:
                self._flush(conn)
            if mask & selectors.EVENT_READ and conn.events & selectors.EVENT_READ:
                self._read(conn, now)
        except (OSError, protocol.ProtocolError) as error:
            self._drop(conn, str(error) or type(error).__name__, now)
        except Exception as error:  # noqa: BLE001 - one request's failure must not end the serving
            self._drop(conn, f"the driver failed on its request: {error!r}", now)

    def _read(self, conn: _Connection, now: float) -> None:
        if conn.phase != _READING:
            # A worker sends one request and then only waits: anything more,
            # or the end of the connection, means it is no longer listening.
            if conn.sock.recv(1):
                raise protocol.ProtocolError("bytes after its request")
            self._unwatch(conn)
            conn.gone = True
            if conn.phase == _REPLYING:
                self._close(conn)
            return
        data = conn.sock.recv(conn.reader.wanted())
        if not data:
            raise protocol.ProtocolError(f"the connection closed after {conn.reader.received} bytes of its request")
        request = conn.reader.feed(data)
        if request is None:
            return
        del self._unauthenticated[conn]
        with self._lock:
            answer = self._handle(request)
        if isinstance(answer, Wait):
            conn.phase, conn.wait = _WAITING, answer
            self._waiting[conn] = None
            self._watch(conn)
        else:
            self._reply(conn, answer, now)

    def _poll_waits(self, now: float) -> None:
        if not self._waiting:
            return
        answered = []
        with self._lock:
            for conn in list(self._waiting):
                try:
                    answer = conn.wait.poll(now)
                except Exception as error:  # noqa: BLE001 - as in _service
                    answer = error
                if answer is not None:
                    answered.append((conn, answer))
        for conn, answer in answered:
            del self._waiting[conn]
            if isinstance(answer, Exception):
                why = f"the driver failed on its request: {answer!r}"
                self.refusals.note(conn.source, f"elastic mode: a connection from {conn.source} failed: {why}", now)
                self._close(conn)
            elif conn.gone:
                self._close(conn)
            else:
                self._reply(conn, answer, now)

    def _reply(self, conn: _Connection, answer: dict, now: float) -> None:
        conn.phase = _REPLYING
        conn.deadline = now + REPLY_DEADLINE_S
        conn.outgoing += conn.reader.reply(answer)
        self._replying[conn] = None
        try:
            self._flush(conn)
        except OSError as error:
            self._drop(conn, str(error), now)

    def _flush(self, conn: _Connection) -> None:
        while conn.outgoing:
            try:
                sent = conn.sock.send(conn.outgoing)
            except (BlockingIOError, InterruptedError):
                break
            del conn.outgoing[:sent]
        if not conn.outgoing and conn.phase == _REPLYING:
            self._close(conn)  # answered
        else:
            self._watch(conn)

    def _expire(self, now: float) -> None:
        while self._unauthenticated:
            oldest = next(iter(self._unauthenticated))
            if oldest.deadline > now:
                break
            self._drop(
                oldest,
                f"no whole request within {self._request_deadline_s:g} s ({oldest.reader.received} bytes of it)",
                now,
            )
        for conn in [c for c in self._replying if c.deadline <= now]:
            self._drop(conn, f"its reply not taken within {REPLY_DEADLINE_S:g} s", now)

    # -- connections ----------------------------------------------------------

    def _watch(self, conn: _Connection) -> None:
        events = selectors.EVENT_READ if not conn.gone else 0
        if conn.outgoing:
            events |= selectors.EVENT_WRITE
        if events == conn.events:
            return
        if conn.events == 0:
            self._selector.register(conn.sock, events, conn)
        elif events == 0:
            self._selector.unregister(conn.sock)
        else:
            self._selector.modify(conn.sock, events, conn)
        conn.events = events

    def _unwatch(self, conn: _Connection) -> None:
        if conn.events:
            self._selector.unregister(conn.sock)
            conn.events = 0

    def _drop(self, conn: _Connection, why: str, now: float) -> None:
        if conn.phase == _WAITING and not conn.gone:
            # Its Wait stays: the driver's answer is taken when it comes
            # (and goes nowhere), as the worker will ask again.
            self._unwatch(conn)
            conn.gone = True
            conn.sock.close()
            return
        if conn.phase == _READING:
            self.refusals.note(conn.source, f"elastic mode: refused a connection from {conn.source}: {why}", now)
        else:
            self.refusals.note(conn.source, f"elastic mode: a connection from {conn.source} failed: {why}", now)
        self._close(conn)

    def _close(self, conn: _Connection) -> None:
        self._unwatch(conn)
        self._unauthenticated.pop(conn, None)
        self._replying.pop(conn, None)
        self._waiting.pop(conn, None)
        conn.sock.close()

    def _finish(self) -> None:
        """Closing: the Waits that have an answer (the job is over) get it if
        it goes out at once; then every connection is closed."""
        now = time.monotonic()
        self._poll_waits(now)
        for conn in list(self._unauthenticated) + list(self._waiting) + list(self._replying):
            self._close(conn)
        self._selector.close()
