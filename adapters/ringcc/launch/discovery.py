"""Elastic mode's host discovery: the script ringrun runs every second
(--host-discovery-script; its lines "host:slots", or "host" with
--slots-per-host slots), or the fixed hosts of -H and --hostfile."""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence

from ringcc.launch.errors import LaunchError
from ringcc.launch.hosts import Host, parse_host_entry
from ringcc.launch.processes import signal_process_group

DISCOVERY_INTERVAL_S = 1.0
DISCOVERY_SCRIPT_TIMEOUT_S = 60.0
DISCOVERY_KILL_GRACE_S = 1.0  # from SIGTERM to SIGKILL for the script's process group


class ElasticError(Exception):
    """Ends the job with a message (and exit status 1)."""


def parse_discovery_output(text: str, default_slots: int) -> dict[str, int]:
    """{host: slots} from the discovery script's lines, in their order."""
    hosts: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        host = parse_host_entry(line, f"discovery output line {number}")
        counted = "]:" in line if line.startswith("[") else line.count(":") == 1
        hosts[host.name] = host.slots if counted else default_slots
    return hosts


class ScriptDiscovery:
    """Runs the host discovery script with the shell, in a session (and so
    a process group) of its own. A run that goes past its timeout, or that
    is still going when ringrun stops, ends with its whole group (SIGTERM,
    then SIGKILL): a child the script left behind goes too, and its output
    is read with the same deadline, so a grandchild that holds the pipes
    open cannot keep the driver waiting."""

    def __init__(self, script: str, default_slots: int, timeout: float = DISCOVERY_SCRIPT_TIMEOUT_S) -> None:
        self._script = script
        self._default_slots = default_slots
        self.timeout = timeout
        self._lock = threading.Lock()
        self._stopped = False
        self._process: subprocess.Popen | None = None  # a run in progress, its leader not reaped yet
        self._stop_reader, self._stop_writer = socket.socketpair()

    def find(self) -> dict[str, int]:
        returncode, stdout, stderr = self._run()
        if returncode != 0:
            raise ElasticError(
                f"the host discovery script {self._script!r} exited with {returncode}: "
                f"{stderr.decode(errors='replace').strip()[-500:]}"
            )
        try:
            return parse_discovery_output(stdout.decode(errors="replace"), self._default_slots)
        except LaunchError as error:
            raise ElasticError(f"the host discovery script {self._script!r}: {error}") from None

    def stop(self) -> None:
        """Ends a run in progress (its thread ends the group) and refuses later ones."""
        with self._lock:
            self._stopped = True
        try:
            self._stop_writer.send(b"\0")
        except OSError:
            pass

    def kill(self) -> None:
        """SIGKILL for the group of a run still in progress: the last resort
        when the thread that runs it did not end it in time."""
        with self._lock:
            if self._process is not None:
                signal_process_group(self._process, signal.SIGKILL)

    def _run(self) -> tuple[int, bytes, bytes]:
        with self._lock:
            if self._stopped:
                raise ElasticError("ringrun is stopping")
            try:
                process = subprocess.Popen(
                    self._script,
                    shell=True,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
            except OSError as error:
                raise ElasticError(f"cannot run the host discovery script {self._script!r}: {error}") from None
            self._process = process
        try:
            done = self._read(process, time.monotonic() + self.timeout)
            if done is not None:
                return done
            with self._lock:
                stopped = self._stopped
            # The leader is reaped only after the group is killed, so that
            # its id cannot name another group meanwhile.
            signal_process_group(process, signal.SIGTERM)
            self._read(process, time.monotonic() + DISCOVERY_KILL_GRACE_S, reap=False)
            signal_process_group(process, signal.SIGKILL)
            if stopped:
                raise ElasticError("ringrun is stopping")
            raise ElasticError(
                f"the host discovery script {self._script!r} ran for more than {self.timeout:g} s; "
                "its process group was killed"
            )
        finally:
            for pipe in (process.stdout, process.stderr):
                pipe.close()
            try:
                process.wait(timeout=DISCOVERY_KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                signal_process_group(process, signal.SIGKILL)
                process.wait()
            with self._lock:
                self._process = None

    def _read(self, process: subprocess.Popen, deadline: float, reap: bool = True) -> tuple[int, bytes, bytes] | None:
        """The script's exit status and output once it has closed both pipes
        and (`reap`) exited; None at the deadline or on stop."""
        output: dict = {process.stdout: [], process.stderr: []}
        with selectors.DefaultSelector() as selector:
            for pipe in output:
                if not pipe.closed:
                    selector.register(pipe, selectors.EVENT_READ)
            selector.register(self._stop_reader, selectors.EVENT_READ)
            open_pipes = len(selector.get_map()) - 1
            while open_pipes:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                for key, _ in selector.select(remaining):
                    if key.fileobj is self._stop_reader:
                        return None  # left unread: every later read sees it too
                    data = os.read(key.fd, 65536)
                    if data:
                        output[key.fileobj].append(data)
                    else:
                        selector.unregister(key.fileobj)
                        open_pipes -= 1
        if not reap:
            return None
        try:
            returncode = process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None  # it closed its output but goes on
        return returncode, b"".join(output[process.stdout]), b"".join(output[process.stderr])


class FixedDiscovery:
    def __init__(self, hosts: Sequence[Host]) -> None:
        self.hosts = {h.name: h.slots for h in hosts}

    def find(self) -> dict[str, int]:
        return dict(self.hosts)

    def stop(self) -> None:
        pass

    def kill(self) -> None:
        pass
