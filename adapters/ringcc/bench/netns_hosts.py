"""Network-namespace "hosts" on this machine, for benchmarks across hosts.

    with NamespaceHosts(4) as hosts:
        hosts.names        # ["rcb1234-h0", ...]: the namespaces, also the host names
        hosts.addresses    # ["10.233.x.1", ...]: each host's address on the shared subnet
        hosts.subnet       # "10.233.x.0/24"
        hosts.exec(i, cmd) # the command run inside host i (ip netns exec)

Two hosts are joined by one veth pair; more by a bridge that lives in a
namespace of its own (the "switch"), so that the machine's own network is
never touched. Every host's interface has the same name (INTERFACE), as a
cluster's hosts often do, and its loopback is up. Everything is removed when
the block ends, whatever happened (deleting a namespace deletes the veth
ends inside it). Needs root and iproute2.

The hosts share this machine's kernel, CPUs and file system: what crosses
between them is the kernel's TCP over veth, with no wire, so the figures are
those of a very fast, zero-distance network whose every byte costs CPU.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence

IP_TIMEOUT_S = 20
INTERFACE = "rccnet"  # the name of each host's interface (names are per namespace)


class HostsUnavailable(RuntimeError):
    """Namespaces cannot be made here (not root, no iproute2, no veth support)."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result


def can_make_hosts() -> str | None:
    """None when namespaces can be made here, else why not."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    return None


class NamespaceHosts:
    """`count` namespaces on one subnet; a context manager that removes them."""

    def __init__(self, count: int, tag: str | None = None, subnet_index: int | None = None):
        if count < 2:
            raise ValueError("namespace hosts: at least 2")
        if count > 200:
            raise ValueError("namespace hosts: at most 200")
        pid = os.getpid()
        self.tag = tag or f"rcb{pid % 100000}"
        octet = subnet_index if subnet_index is not None else pid % 250 + 1
        self.names = [f"{self.tag}-h{i}" for i in range(count)]
        self.addresses = [f"10.233.{octet}.{i + 1}" for i in range(count)]
        self.subnet = f"10.233.{octet}.0/24"
        self.switch = f"{self.tag}-sw" if count > 2 else None
        self.interface = INTERFACE
        self._created: list[str] = []

    # -- set-up and tear-down --------------------------------------------------

    def __enter__(self) -> NamespaceHosts:
        reason = can_make_hosts()
        if reason:
            raise HostsUnavailable(reason)
        try:
            self._make()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def _add_namespace(self, name: str) -> None:
        ip("netns", "del", name, check=False)  # a leftover of a run that was killed
        try:
            ip("netns", "add", name)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            raise HostsUnavailable(f"cannot create a network namespace here: {error}") from error
        self._created.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def _make(self) -> None:
        for name in self.names:
            self._add_namespace(name)
        if self.switch is None:
            a, b = self.names
            self._veth(a, INTERFACE, b, INTERFACE)
        else:
            self._add_namespace(self.switch)
            ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            ip("-n", self.switch, "link", "set", "br0", "up")
            for i, name in enumerate(self.names):
                port = f"port{i}"
                self._veth(name, INTERFACE, self.switch, port)
                ip("-n", self.switch, "link", "set", port, "master", "br0")
                ip("-n", self.switch, "link", "set", port, "up")
        for name, address in zip(self.names, self.addresses):
            ip("-n", name, "addr", "add", f"{address}/24", "dev", INTERFACE)
            ip("-n", name, "link", "set", INTERFACE, "up")

    def _veth(self, ns_a: str, name_a: str, ns_b: str, name_b: str) -> None:
        try:
            ip("link", "add", name_a, "netns", ns_a, "type", "veth", "peer", "name", name_b, "netns", ns_b)
        except RuntimeError as error:
            raise HostsUnavailable(f"cannot create a veth pair between namespaces here: {error}") from error

    def remove(self) -> None:
        for name in reversed(self._created):
            ip("netns", "del", name, check=False)
        self._created.clear()

    # -- use ----------------------------------------------------------------------

    def exec(self, index: int, command: Sequence[str]) -> list[str]:
        """`command` run inside host `index`."""
        return ["ip", "netns", "exec", self.names[index], *command]

    AGENT = "ip netns exec {host}"  # ringrun's --agent for these hosts

    def host_list(self, ranks_per_host: int) -> str:
        """ringrun's -H for these hosts."""
        return ",".join(f"{name}:{ranks_per_host}" for name in self.names)

    def wait_reachable(self, timeout_s: float = 10.0) -> None:
        """Raises HostsUnavailable unless host 0 reaches every other host: a
        TCP connection to a closed port is refused (an answer) when the host is
        there, and times out when it is not."""
        probe = (
            "import socket, sys\n"
            "try:\n"
            "    socket.create_connection((sys.argv[1], 9), timeout=float(sys.argv[2])).close()\n"
            "except ConnectionRefusedError:\n"
            "    pass\n"
        )
        for address in self.addresses[1:]:
            result = subprocess.run(
                self.exec(0, [sys.executable, "-c", probe, address, str(timeout_s)]),
                capture_output=True,
                text=True,
                timeout=timeout_s + IP_TIMEOUT_S,
            )
            if result.returncode != 0:
                raise HostsUnavailable(f"{self.names[0]} cannot reach {address}: {result.stderr.strip()[-300:]}")

    def describe(self) -> str:
        link = "a veth pair" if self.switch is None else f"veth pairs to a bridge in {self.switch}"
        return (
            f"{len(self.names)} network namespaces ({', '.join(self.names)}) joined by {link}, "
            f"{self.subnet} on {INTERFACE}: {shlex.join(self.addresses)}"
        )
