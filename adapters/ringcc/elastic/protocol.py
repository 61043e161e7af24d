"""The messages between ringrun's elastic driver and its workers.

One request and one reply per TCP connection, both JSON, both authenticated
with the job secret (RINGCC_SECRET) so that neither side acts on anything a
stranger sent, and nothing is ever unpickled:

1. the server sends a fresh 32-byte nonce;
2. the client sends its request, a fresh nonce of its own inside it, with
   HMAC-SHA-256(secret, "ringcc-elastic-request" | server nonce | request);
3. the server checks the MAC (closing the connection on a wrong one),
   handles the request (a join waits for the next membership), and sends
   its reply with HMAC-SHA-256(secret, "ringcc-elastic-reply" | both nonces
   | reply).

A recorded request or reply is of no use on another connection (the nonces
differ), and a reply cannot be passed off as a request (the labels differ).
Frames are a 4-byte big-endian length, the JSON text and the 32-byte MAC;
a frame longer than MAX_FRAME is refused before it is read.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import socket
import struct
from typing import Optional

MAX_FRAME = 1 << 20
NONCE_BYTES = 32
MAC_BYTES = 32
REQUEST_LABEL = b"ringcc-elastic-request"
REPLY_LABEL = b"ringcc-elastic-reply"


class ProtocolError(Exception):
    """A peer that does not speak the protocol, or cannot prove the secret."""


def _mac(secret: bytes, *parts: bytes) -> bytes:
    return hmac.new(secret, b"".join(parts), hashlib.sha256).digest()


def _recv_exact(sock: socket.socket, count: int) -> bytes:
    chunks, got = [], 0
    while got < count:
        chunk = sock.recv(count - got)
        if not chunk:
            raise ProtocolError(f"connection closed after {got} of {count} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _send_frame(sock: socket.socket, text: bytes, mac: bytes) -> None:
    sock.sendall(struct.pack(">I", len(text)) + text + mac)


def _recv_frame(sock: socket.socket):
    (length,) = struct.unpack(">I", _recv_exact(sock, 4))
    if length > MAX_FRAME:
        raise ProtocolError(f"a frame of {length} bytes (at most {MAX_FRAME})")
    text = _recv_exact(sock, length)
    return text, _recv_exact(sock, MAC_BYTES)


def serve_one(sock: socket.socket, secret: bytes, handle) -> None:
    """The server's side of one connection: `handle(request) -> reply` (dicts)."""
    server_nonce = secrets.token_bytes(NONCE_BYTES)
    sock.sendall(server_nonce)
    text, mac = _recv_frame(sock)
    if not hmac.compare_digest(mac, _mac(secret, REQUEST_LABEL, server_nonce, text)):
        raise ProtocolError("a request without the job secret's MAC")
    try:
        request = json.loads(text)
        client_nonce = bytes.fromhex(request["nonce"])
    except (ValueError, KeyError, TypeError) as error:
        raise ProtocolError(f"a malformed request: {error}") from None
    if not isinstance(request, dict) or len(client_nonce) != NONCE_BYTES:
        raise ProtocolError("a malformed request")
    reply = json.dumps(handle(request)).encode()
    _send_frame(sock, reply, _mac(secret, REPLY_LABEL, client_nonce, server_nonce, reply))


def request(address: str, port: int, secret: bytes, body: dict, timeout: float | None) -> dict:
    """The client's side: sends `body` to the server, returns its reply."""
    with socket.create_connection((address, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        server_nonce = _recv_exact(sock, NONCE_BYTES)
        client_nonce = secrets.token_bytes(NONCE_BYTES)
        text = json.dumps({**body, "nonce": client_nonce.hex()}).encode()
        _send_frame(sock, text, _mac(secret, REQUEST_LABEL, server_nonce, text))
        reply, mac = _recv_frame(sock)
    if not hmac.compare_digest(mac, _mac(secret, REPLY_LABEL, client_nonce, server_nonce, reply)):
        raise ProtocolError(f"the driver at {address}:{port} could not prove the job secret")
    try:
        answer = json.loads(reply)
    except ValueError as error:
        raise ProtocolError(f"a malformed reply: {error}") from None
    if not isinstance(answer, dict):
        raise ProtocolError("a malformed reply")
    return answer
