"""How ringcc.run's function reaches ranks on other hosts, and their results
come back, without a directory they share with the driver: the driver
serves the pickled call and takes the ranks' pickled outcomes over TCP,
in the authenticated requests of ringrun's elastic driver
(ringcc/elastic/protocol.py: every request and reply carries a MAC with
the job secret, which ringrun hands each rank, so that no stranger can
read the function, nor pass a rank or the driver anything to unpickle).

The protocol's frames are small (a request at most protocol.MAX_REQUEST,
a reply protocol.MAX_REPLY), so the function travels in parts of
FUNCTION_PART bytes and a result in parts of RESULT_PART, base64 in JSON;
each part is a request of its own.
"""

from __future__ import annotations

import base64
import binascii
import socket
import threading
import time

from ringcc.elastic import protocol

# Set by ringcc.run for its ranks when some run on other hosts: where the
# driver listens ("HOST:PORT").
DRIVER_VARIABLE = "RINGCC_RUN_DRIVER"
FUNCTION_PART = 512 * 1024  # its base64 fits protocol.MAX_REPLY
RESULT_PART = 32 * 1024  # its base64 fits protocol.MAX_REQUEST
REQUEST_TIMEOUT_S = 60.0
CONNECT_TRIES = 5  # a request that never left is sent again, after RETRY_PAUSE_S
RETRY_PAUSE_S = 0.5


class FunctionServer:
    """The driver's side: serves `payload` to ranks 0..num_ranks-1 and keeps
    what each sends back (`outcome(rank)`: its bytes, or None)."""

    def __init__(self, payload: bytes, num_ranks: int) -> None:
        from ringcc.free_ports import dual_stack_socket

        self._payload = payload
        self._num_ranks = num_ranks
        self._partial: dict[int, bytearray] = {}
        self._outcomes: dict[int, bytes] = {}
        self._lock = threading.Lock()
        self._listener = dual_stack_socket()
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self._server = None

    def start(self, secret: str, log) -> None:
        """Serves the ranks of the job whose secret is `secret` (known once
        the job is planned, after the port)."""
        from ringcc.launch.rpc_server import RequestServer

        self._server = RequestServer(self._listener, secret.encode(), self._lock, self._handle, log)
        self._server.start()

    def outcome(self, rank: int) -> bytes | None:
        with self._lock:
            return self._outcomes.get(rank)

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        else:
            self._listener.close()

    def _handle(self, request: dict) -> dict:
        """One authenticated request (the server holds the lock)."""
        op = request.get("op")
        offset = request.get("offset")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            return {"error": f"a request without a valid offset ({offset!r})"}
        if op == "function":
            if offset > len(self._payload):
                return {"error": f"offset {offset} is past the function's {len(self._payload)} bytes"}
            part = self._payload[offset : offset + FUNCTION_PART]
            return {"size": len(self._payload), "data": base64.b64encode(part).decode()}
        if op == "result":
            return self._result_part(request.get("rank"), offset, request.get("data"), request.get("last"))
        return {"error": f"unknown request {op!r}"}

    def _result_part(self, rank, offset: int, data, last) -> dict:
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < self._num_ranks:
            return {"error": f"no rank {rank!r} in a job of {self._num_ranks}"}
        if rank in self._outcomes:
            return {"error": f"rank {rank} sent its result already"}
        if not isinstance(data, str) or not isinstance(last, bool):
            return {"error": "a result part needs its data (base64) and whether it is the last"}
        received = self._partial.setdefault(rank, bytearray())
        if offset != len(received):
            return {"error": f"rank {rank}'s result part at {offset}, expected at {len(received)}"}
        try:
            received += base64.b64decode(data, validate=True)
        except binascii.Error as error:
            return {"error": f"rank {rank}'s result part is not base64 ({error})"}
        if last:
            self._outcomes[rank] = bytes(self._partial.pop(rank))
        return {"ok": True}


def driver_address(master_addr: str | None) -> str:
    """This machine as ranks on other hosts reach it (the job's master
    address when given, as for ringrun's elastic driver)."""
    address = (master_addr or socket.gethostname()).strip("[]")
    return f"[{address}]" if ":" in address else address


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{DRIVER_VARIABLE}={address!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def _ask(address: str, secret: str, body: dict) -> dict:
    host, port = _split(address)
    for attempt in range(CONNECT_TRIES):
        try:
            reply = protocol.request(host, port, secret.encode(), body, REQUEST_TIMEOUT_S)
            break
        except protocol.NotDelivered:
            if attempt + 1 == CONNECT_TRIES:
                raise
            time.sleep(RETRY_PAUSE_S)
    if "error" in reply:
        raise RuntimeError(f"ringcc.run's driver at {address} refused a request: {reply['error']}")
    return reply


def fetch_function(address: str, secret: str) -> bytes:
    """The rank's side: the pickled call, in parts."""
    payload = bytearray()
    while True:
        reply = _ask(address, secret, {"op": "function", "offset": len(payload)})
        payload += base64.b64decode(reply["data"], validate=True)
        if len(payload) >= reply["size"] or not reply["data"]:
            return bytes(payload)


def send_outcome(address: str, secret: str, rank: int, data: bytes) -> None:
    """The rank's side: its pickled outcome, in parts."""
    offset = 0
    while True:
        part = data[offset : offset + RESULT_PART]
        last = offset + len(part) >= len(data)
        body = {"op": "result", "rank": rank, "offset": offset, "data": base64.b64encode(part).decode(), "last": last}
        _ask(address, secret, body)
        offset += len(part)
        if last:
            return
