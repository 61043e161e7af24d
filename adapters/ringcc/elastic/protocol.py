"""The messages between ringrun's elastic driver and its workers.

One request and one reply per TCP connection, both JSON, both authenticated
with the job secret (RINGCC_SECRET) so that neither side acts on anything a
stranger sent, and nothing is ever unpickled:

1. the server sends a fresh 32-byte nonce;
2. the client sends its request, a fresh nonce of its own inside it;
3. the server checks the request's MACs (closing the connection on a wrong
   one), handles the request (a join waits for the next membership), and
   sends its reply.

A frame is a fixed header, a 4-byte big-endian length and a MAC over that
length, then the JSON text and a MAC over the whole:

    length | HMAC(secret, header label | context | length)
    text   | HMAC(secret, label | context | length | text)

with the server's nonce as the context of a request, and both nonces (the
client's, then the server's) as that of a reply. The header's MAC proves
the job secret before anything else is read: the server reads the fixed
36 bytes of a stranger's request and no more, and a length beyond
MAX_REQUEST (MAX_REPLY for a reply) is refused before its text is read. A
recorded request or reply is of no use on another connection (the nonces
differ), and a reply cannot be passed off as a request, nor a header as a
whole frame (the labels differ). The server's side is a `RequestReader`
fed the bytes as they come, so that one thread serves every connection
(ringcc/launch/rpc_server.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import socket
import struct

MAX_REQUEST = 1 << 16  # a request is a small JSON object
MAX_REPLY = 1 << 20
NONCE_BYTES = 32
MAC_BYTES = 32
HEADER_BYTES = 4 + MAC_BYTES
# NUL-terminated, so that no label is the start of another.
REQUEST_HEADER_LABEL = b"ringcc-elastic-request-header\0"
REQUEST_LABEL = b"ringcc-elastic-request\0"
REPLY_HEADER_LABEL = b"ringcc-elastic-reply-header\0"
REPLY_LABEL = b"ringcc-elastic-reply\0"


class ProtocolError(Exception):
    """A peer that does not speak the protocol, or cannot prove the secret."""


class NotDelivered(ProtocolError, OSError):
    """The request never reached the server whole (it cannot have been
    handled): the connection failed before the request was sent."""


def _mac(secret: bytes, *parts: bytes) -> bytes:
    return hmac.new(secret, b"".join(parts), hashlib.sha256).digest()


def encode_frame(secret: bytes, header_label: bytes, label: bytes, context: bytes, text: bytes) -> bytes:
    length = struct.pack(">I", len(text))
    return length + _mac(secret, header_label, context, length) + text + _mac(secret, label, context, length, text)


def request_frame(secret: bytes, server_nonce: bytes, text: bytes) -> bytes:
    return encode_frame(secret, REQUEST_HEADER_LABEL, REQUEST_LABEL, server_nonce, text)


def reply_frame(secret: bytes, client_nonce: bytes, server_nonce: bytes, text: bytes) -> bytes:
    return encode_frame(secret, REPLY_HEADER_LABEL, REPLY_LABEL, client_nonce + server_nonce, text)


def check_header(secret: bytes, header_label: bytes, context: bytes, header: bytes, limit: int) -> int:
    """The text's length from a frame's fixed header, once its MAC proves the secret."""
    length = header[:4]
    if not hmac.compare_digest(header[4:HEADER_BYTES], _mac(secret, header_label, context, length)):
        raise ProtocolError("a frame without the job secret's MAC")
    (count,) = struct.unpack(">I", length)
    if count > limit:
        raise ProtocolError(f"a frame of {count} bytes (at most {limit})")
    return count


def check_body(secret: bytes, label: bytes, context: bytes, header: bytes, body: bytes) -> bytes:
    """The text of a frame's body (text and MAC), once its MAC proves the secret."""
    text, mac = body[:-MAC_BYTES], body[-MAC_BYTES:]
    if not hmac.compare_digest(mac, _mac(secret, label, context, header[:4], text)):
        raise ProtocolError("a frame without the job secret's MAC")
    return text


class RequestReader:
    """The server's side of one request, fed the bytes as they arrive.

    `wanted()` says how many bytes to read next, never more than what
    completes the current part: the fixed header until its MAC is checked,
    then the text and its MAC. `feed()` returns the request (a dict) once
    it is whole and authenticated, and raises ProtocolError on a wrong MAC,
    a frame too long, or a malformed request."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self.server_nonce = secrets.token_bytes(NONCE_BYTES)
        self.client_nonce = b""
        self._header = b""
        self._buffer = bytearray()
        self._length: int | None = None  # the text's, once the header is authenticated
        self.received = 0

    def wanted(self) -> int:
        if self._length is None:
            return HEADER_BYTES - len(self._buffer)
        return self._length + MAC_BYTES - len(self._buffer)

    def feed(self, data: bytes) -> dict | None:
        if len(data) > self.wanted():
            raise ProtocolError("more bytes than the request holds")
        self.received += len(data)
        self._buffer += data
        if self.wanted() > 0:
            return None
        if self._length is None:
            self._header = bytes(self._buffer)
            self._buffer.clear()
            self._length = check_header(
                self._secret, REQUEST_HEADER_LABEL, self.server_nonce, self._header, MAX_REQUEST
            )
            return None
        text = check_body(self._secret, REQUEST_LABEL, self.server_nonce, self._header, bytes(self._buffer))
        try:
            request = json.loads(text)
            client_nonce = bytes.fromhex(request["nonce"])
        except (ValueError, KeyError, TypeError) as error:
            raise ProtocolError(f"a malformed request: {error}") from None
        if not isinstance(request, dict) or len(client_nonce) != NONCE_BYTES:
            raise ProtocolError("a malformed request")
        self.client_nonce = client_nonce
        return request

    def reply(self, answer: dict) -> bytes:
        """The frame that answers the request `feed()` returned."""
        return reply_frame(self._secret, self.client_nonce, self.server_nonce, json.dumps(answer).encode())


def _recv_exact(sock: socket.socket, count: int) -> bytes:
    chunks, got = [], 0
    while got < count:
        chunk = sock.recv(count - got)
        if not chunk:
            raise ProtocolError(f"connection closed after {got} of {count} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def request(address: str, port: int, secret: bytes, body: dict, timeout: float | None) -> dict:
    """The client's side: sends `body` to the server, returns its reply.
    Raises NotDelivered when the request did not leave whole."""
    try:
        sock = socket.create_connection((address, port), timeout=timeout)
    except OSError as error:
        raise NotDelivered(f"cannot reach the driver at {address}:{port}: {error}") from None
    with sock:
        sock.settimeout(timeout)
        client_nonce = secrets.token_bytes(NONCE_BYTES)
        text = json.dumps({**body, "nonce": client_nonce.hex()}).encode()
        try:
            server_nonce = _recv_exact(sock, NONCE_BYTES)
            sock.sendall(request_frame(secret, server_nonce, text))
        except (OSError, ProtocolError) as error:
            raise NotDelivered(f"the driver at {address}:{port} did not take the request: {error}") from None
        context = client_nonce + server_nonce
        header = _recv_exact(sock, HEADER_BYTES)
        try:
            length = check_header(secret, REPLY_HEADER_LABEL, context, header, MAX_REPLY)
            reply = check_body(secret, REPLY_LABEL, context, header, _recv_exact(sock, length + MAC_BYTES))
        except ProtocolError:
            raise ProtocolError(f"the driver at {address}:{port} could not prove the job secret") from None
    try:
        answer = json.loads(reply)
    except ValueError as error:
        raise ProtocolError(f"a malformed reply: {error}") from None
    if not isinstance(answer, dict):
        raise ProtocolError("a malformed reply")
    return answer
