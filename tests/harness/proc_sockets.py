"""This process's TCP sockets as Linux's /proc shows them: the inodes of
its open sockets matched in the kernel's TCP tables (Linux only)."""

from __future__ import annotations

import os
import socket

_LISTEN, _ESTABLISHED = "0A", "01"


def _socket_inodes() -> set:
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed since it was listed
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _address(text: str, family: int) -> list:
    """/proc/net/tcp's "0100007F:1F90" as ["127.0.0.1", 8080]."""
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # each 32-bit word in host order
    return [socket.inet_ntop(family, raw), int(port, 16)]


def tcp_sockets() -> dict:
    """{"listen": [[address, port], ...], "peers": [[address, port], ...]}:
    where this process's TCP sockets listen, and the far ends of its
    connected ones."""
    inodes = _socket_inodes()
    found = {"listen": [], "peers": []}
    for path, family in (("/proc/self/net/tcp", socket.AF_INET), ("/proc/self/net/tcp6", socket.AF_INET6)):
        try:
            with open(path, encoding="ascii") as table:
                lines = table.read().splitlines()[1:]
        except OSError:
            continue  # no IPv6 here
        for line in lines:
            fields = line.split()
            if len(fields) <= 9 or fields[9] not in inodes:
                continue
            if fields[3] == _LISTEN:
                found["listen"].append(_address(fields[1], family))
            elif fields[3] == _ESTABLISHED:
                found["peers"].append(_address(fields[2], family))
    return found


def listening_ports() -> list:
    """The TCP ports this process listens on, sorted."""
    return sorted({port for _, port in tcp_sockets()["listen"]})
