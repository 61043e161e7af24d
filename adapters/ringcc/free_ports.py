"""Free TCP ports of this host, for the stores ringcc's ranks serve: the one
helper that ringrun (ringcc.launch.hosts), ringcc.torchrun and the elastic
worker (ringcc.elastic.worker) share."""

from __future__ import annotations

import socket
from collections.abc import Sequence


def dual_stack_socket() -> socket.socket:
    """A TCP socket bound to a free port of every address: IPv6 and IPv4 on one
    socket where there is IPv6 (the core listens on both), else IPv4."""
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        sock = None
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind(("::", 0))
            return sock
        except OSError:
            sock.close()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("", 0))
    except OSError as error:
        sock.close()
        raise OSError(f"no free TCP port on this host: {error}") from error
    return sock


def free_ports(count: int, avoid: Sequence[int] = ()) -> list[int]:
    """Returns `count` distinct TCP ports that are free on this machine now."""
    sockets = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            sock = dual_stack_socket()
            sockets.append(sock)
            port = sock.getsockname()[1]
            if port not in avoid:
                ports.append(port)
    finally:
        for sock in sockets:
            sock.close()
    return ports


def free_port() -> int:
    """A TCP port free on this host now."""
    (port,) = free_ports(1)
    return port
