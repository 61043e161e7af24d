"""This host's address and interface toward another host: the address the
kernel would send from, found by routing a UDP socket (no packet is sent),
and the interface that holds it. The MPI peer's host list and the gloo
peer's interface choice both start from these."""

from __future__ import annotations

import fcntl
import socket
import struct

_SIOCGIFADDR = 0x8915  # an interface's (primary) IPv4 address


def address_toward(address: str) -> str | None:
    """This host's address toward `address` (IPv4 or IPv6), or None where no
    route leads there."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((address, 9))
            return s.getsockname()[0]
    except OSError:
        return None


def interface_holding(local: str) -> str | None:
    """The name of this host's interface whose primary IPv4 address is
    `local`, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address
            if socket.inet_ntoa(packed[20:24]) == local:
                return name
    return None
