"""The ranks' processes: the runner that starts them and stops them all when
one fails, the console and the forwarding of their output (--output-filename
included), ringrun's signals, and the exit status that names the rank that
failed first.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ringcc.launch.errors import EXIT_CANNOT_START, EXIT_TIMEOUT, LaunchError
from ringcc.launch.hosts import RankPlacement

# Signals to ringrun that stop the job; the exit status is then 128 + signal.
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_POLL_INTERVAL_S = 0.05
_REAP_TIMEOUT_S = 5.0
_OUTPUT_DRAIN_TIMEOUT_S = 2.0


def start_failure(argv: Sequence[str], error: OSError) -> str:
    """Why a rank's command did not start, with the likely fix: a script
    given without its interpreter (`ringrun -np 2 train.py`) exists but is
    not executable, which the system reports as "Permission denied"."""
    program = argv[0] if argv else ""
    if isinstance(error, PermissionError) and os.path.isfile(program) and not os.access(program, os.X_OK):
        interpreter = "python " if program.endswith(".py") else "an interpreter before it, such as python "
        return f"{program} is not executable; did you mean ringrun ... {interpreter}{program}?"
    if isinstance(error, FileNotFoundError) and program and os.sep not in program:
        return f"{program}: no such command on PATH ({error.strerror})"
    return str(error)


@dataclass
class RankLaunch:
    """One rank as the runner starts it (ringcc.launch.plan decides it)."""

    placement: RankPlacement
    argv: list[str]
    env: dict[str, str]  # the environment of the process started here (the agent's, for agent ranks)
    through_agent: bool
    stdin: bytes | None = None  # written to the process's standard input (the secret, for agent ranks)
    cpus: frozenset | None = None  # --bind-to core: the CPUs the rank may run on


class Console:
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


# The prefix torch.distributed's excepthook puts on each line of a
# traceback ("[rank1]: Traceback ..."): ringrun's own prefix says the same.
_TORCH_RANK_PREFIX = re.compile(rb"\[rank(\d+)\]: ")

# The first line of a Python traceback (of an exception group's, too).
_TRACEBACK_STARTS = (b"Traceback (most recent call last):", b"  + Exception Group Traceback (most recent call last):")


def without_torch_prefix(line: bytes, rank: int) -> bytes:
    """`line` without torch's "[rankR]: " when R is `rank` (ringrun's prefix names it already)."""
    match = _TORCH_RANK_PREFIX.match(line)
    if match is not None and int(match.group(1)) == rank:
        return line[match.end() :]
    return line


def exception_line(lines: Sequence[bytes]) -> str | None:
    """The exception a traceback ends with: the first line after its last
    "Traceback" line that is not indented ("ValueError: boom")."""
    start = None
    for index, line in enumerate(lines):
        if line.startswith(_TRACEBACK_STARTS):
            start = index
    if start is None:
        return None
    group = lines[start].startswith(_TRACEBACK_STARTS[1])  # its lines start with "  | "
    for line in lines[start + 1 :]:
        text = line.rstrip(b"\r\n")
        if group and text.startswith(b"  | "):
            text = text[4:]
        if text and not text[:1].isspace():
            return text.decode(errors="replace")
    return None


class TracebackHolder:
    """Holds a rank's stderr from the start of a traceback on, and writes it
    to the console as one block when the rank's stream ends (or after
    HOLD_IDLE_S without a line, HOLD_MAX_S, HOLD_MAX_LINES), so that no
    other rank's line lands inside it."""

    HOLD_IDLE_S = 1.0
    HOLD_MAX_S = 5.0
    HOLD_MAX_LINES = 5000

    def __init__(self, console: Console, stream_name: str) -> None:
        self._console = console
        self._stream_name = stream_name
        self._lock = threading.Lock()
        self._held: list[bytes] = []  # as the console shows them
        self._text: list[bytes] = []  # the rank's lines
        self._started = self._last = 0.0
        self.exception: str | None = None  # the last traceback's exception line

    def offer(self, text: bytes, shown: bytes) -> bool:
        """Holds the line (True) when a traceback is under way or starts with it."""
        with self._lock:
            if not self._held and not text.startswith(_TRACEBACK_STARTS):
                return False
            now = time.monotonic()
            if not self._held:
                self._started = now
            self._held.append(shown)
            self._text.append(text)
            self._last = now
            if len(self._held) >= self.HOLD_MAX_LINES:
                self._release()
            return True

    def release(self, idle_only: bool = False) -> None:
        with self._lock:
            if not self._held:
                return
            now = time.monotonic()
            if idle_only and now - self._last < self.HOLD_IDLE_S and now - self._started < self.HOLD_MAX_S:
                return
            self._release()

    def _release(self) -> None:
        self.exception = exception_line(self._text) or self.exception
        self._console.write_line(self._stream_name, b"".join(self._held))
        self._held.clear()
        self._text.clear()


def timestamped(prefix: bytes) -> Callable[[], bytes]:
    """The prefix after the local time, as horovodrun's --prefix-output-with-timestamp
    writes it ("Sun Nov 29 04:50:01 2026[0]<stdout>: ")."""
    return lambda: time.strftime("%a %b %d %H:%M:%S %Y").encode() + prefix


def forward_output(
    pipe,
    prefix: bytes | Callable[[], bytes],
    stream_name: str,
    console: Console,
    on_line: Callable[[bytes], None] | None = None,
    copy=None,
    rank: int | None = None,
    holder: TracebackHolder | None = None,
    show: Callable[[bytes], bool] | None = None,
) -> None:
    """Copies a rank's lines to the console (with the prefix) and, unchanged, to `copy` (a file) if
    given; `on_line` sees each line first. `prefix` may be a function (a time in each line's
    prefix: timestamped). With the prefix, torch's own prefix naming `rank` is
    dropped from the console's lines; `holder` keeps a traceback's lines together; a line
    `show` says False of goes to `copy` only."""
    with pipe, copy if copy is not None else contextlib.nullcontext():
        try:
            for line in iter(pipe.readline, b""):
                if on_line is not None:
                    on_line(line)
                if copy is not None:
                    try:
                        copy.write(line)
                        copy.flush()  # a rank that dies leaves its last lines in the file
                    except OSError:
                        pass  # a full disk must not stop the console copy
                if show is not None and not show(line):
                    continue
                if prefix and not line.endswith(b"\n"):
                    line += b"\n"
                text = line if rank is None else without_torch_prefix(line, rank)
                shown = (prefix() if callable(prefix) else prefix) + text if prefix else line  # --no-prefix: as is
                if holder is not None and holder.offer(text, shown):
                    continue
                console.write_line(stream_name, shown)
        finally:
            if holder is not None:
                holder.release()


# The lines ringcc logs (on stderr) when a rank aborts the job on an
# uncaught exception: one of its own, or one that another rank's failure
# caused (whose message names that rank first).
_ABORT_LINE = re.compile(rb"\[ringcc [^\]]*\brank (\d+)\b[^\]]*\] ERROR: rank (\d+) aborts the job: ([^\r\n]*)")
_CONSEQUENCE_LINE = re.compile(
    rb"\[ringcc [^\]]*\brank (\d+)\b[^\]]*\] (?:WARNING|ERROR): rank (\d+) aborts after a failure elsewhere in "
    rb"the job: ([^\r\n]*)"
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


def signal_process_group(process: subprocess.Popen, signum: int) -> None:
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
def recording_signals(received: list[int]) -> Iterator[None]:
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


def wait_until(condition: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(_POLL_INTERVAL_S)


def stop_processes(
    processes: Sequence[subprocess.Popen], interrupted: bool, received: list[int], grace_period: float, console: Console
) -> None:
    """Signals the process group of each process still running, escalating to SIGKILL.

    An interrupted job gets SIGINT, then SIGTERM, then SIGKILL; otherwise
    SIGTERM, then SIGKILL. Each step waits the grace period for the processes
    to exit; another signal to ringrun (appended to `received`) skips straight
    to SIGKILL.
    """
    escalation = [signal.SIGTERM, signal.SIGKILL]
    if interrupted:
        escalation.insert(0, signal.SIGINT)
    signals_seen = len(received)
    for signum in escalation:
        if len(received) > signals_seen:
            signum = signal.SIGKILL
        live = [process for process in processes if process.poll() is None]
        if not live:
            break
        for process in live:
            signal_process_group(process, signum)
        if signum == signal.SIGKILL:
            break
        wait_until(
            lambda: all(process.poll() is not None for process in live) or len(received) > signals_seen, grace_period
        )
    for process in processes:
        try:
            process.wait(timeout=_REAP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            console.message(f"process {process.pid} did not exit after SIGKILL")


class JobRunner:
    """Starts the ranks, forwards their output, and stops them all when one fails."""

    def __init__(
        self, prefix_output: bool, grace_period: float, output_dir: str | None = None, timestamps: bool = False
    ) -> None:
        self._prefix_output = prefix_output
        self._timestamps = timestamps  # --prefix-output-with-timestamp: the local time before each prefix
        self._grace_period = grace_period
        self._output_dir = output_dir  # --output-filename: one file per rank and stream there too
        self._console = Console()
        self._ranks: list[tuple[int, subprocess.Popen]] = []
        self._hosts: dict[int, str] = {}
        self._holders: dict[int, TracebackHolder] = {}  # each rank's stderr tracebacks
        self._readers: list[threading.Thread] = []
        self._received_signals: list[int] = []
        self._interrupt_reported = False  # ringrun said it stops the job: the ranks' aborts go unshown
        # What tells which rank failed first: the ranks' own word (ringcc's
        # abort line) and, failing that, when each process ended.
        self._events_lock = threading.Lock()
        self._aborts: list[tuple[float, int, str]] = []
        self._blamed: list[tuple[float, int, int, str]] = []  # (time, blamed rank, reporter, message)
        self._exit_times: dict[int, float] = {}

    def run(self, launches: Sequence[RankLaunch], timeout: float | None) -> int:
        with recording_signals(self._received_signals):
            status = self._start(launches)
            if status is None:
                status = self._supervise(timeout)
        self._drain_output()
        # Every rank has ended: what ranks on this host killed mid-set-up
        # left in /dev/shm goes now, not when the next job starts.
        remove_stale_segments()
        return status

    def ended_ranks(self) -> dict[int, tuple[int | None, float | None]]:
        """Each started rank's return code (None while it runs) and when it ended (time.monotonic())."""
        with self._events_lock:
            exit_times = dict(self._exit_times)
        return {rank: (process.poll(), exit_times.get(rank)) for rank, process in self._ranks}

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
                self._console.message(f"cannot start rank {rank}: {start_failure(launch.argv, error)}")
                self._stop_all(interrupted=False)
                return EXIT_CANNOT_START
            self._ranks.append((rank, process))
            self._hosts[rank] = launch.placement.host
            copies: tuple = (None, None)
            if self._output_dir is not None:
                paths = rank_output_paths(self._output_dir, rank, launch.placement.size)
                try:
                    copies = tuple(open(path, "wb") for path in paths)
                except OSError as error:
                    self._console.message(f"--output-filename: {error}; rank {rank}'s output goes to the console only")
            for (pipe, stream_name), copy in zip(((process.stdout, "stdout"), (process.stderr, "stderr")), copies):
                prefix = f"[{rank}]<{stream_name}>: ".encode() if self._prefix_output else b""
                if self._timestamps:
                    prefix = timestamped(prefix)
                on_line = (lambda line, r=rank: self._note_line(r, line)) if stream_name == "stderr" else None
                holder = None
                if stream_name == "stderr":
                    holder = self._holders[rank] = TracebackHolder(self._console, stream_name)
                reader = threading.Thread(
                    target=forward_output,
                    args=(pipe, prefix, stream_name, self._console, on_line, copy, rank, holder, self._shown),
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
        if b" aborts " not in line:
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

    def _shown(self, line: bytes) -> bool:
        """False for ringcc's abort lines once ringrun has said that it
        interrupted the job: they only repeat it."""
        if not self._interrupt_reported or b" aborts " not in line:
            return True
        return _ABORT_LINE.search(line) is None and _CONSEQUENCE_LINE.search(line) is None

    def _note_exit(self, rank: int, process: subprocess.Popen) -> None:
        process.wait()
        with self._events_lock:
            self._exit_times[rank] = time.monotonic()

    def _first_failure(self, rank: int, returncode: int) -> tuple[int, int, str | None, float]:
        """Finds the rank that failed first: the first to say it aborted the
        job, else the one another rank's abort names, else the first to end
        with an error (`rank` is the one seen to end). Returns that rank, the
        exit status (the first failed rank's when it has ended with an
        error, else `rank`'s), the reason it gave when it aborted, and when
        it failed (time.monotonic())."""
        time.sleep(_POLL_INTERVAL_S)  # lines and exits already on their way
        with self._events_lock:
            aborts = sorted(self._aborts)
            blamed = sorted(self._blamed)
            exit_times = dict(self._exit_times)
        codes = {r: process.poll() for r, process in self._ranks}
        if aborts:
            when, first, reason = aborts[0]
            return first, codes.get(first) or returncode, reason, when
        if blamed and blamed[0][1] in codes:
            when, first, _, _ = blamed[0]
            return first, codes.get(first) or returncode, None, when
        failed = sorted((exit_times.get(r, float("inf")), r) for r, code in codes.items() if code)
        if failed and failed[0][1] != rank:
            first = failed[0][1]
            return first, codes[first], None, exit_times.get(first, time.monotonic())
        return rank, returncode, None, exit_times.get(rank, time.monotonic())

    def _summary(self, first: int, reason: str | None, when: float, stopped: int) -> str:
        """The closing line of a failed job: the rank that failed first, its
        exception (its traceback's last, else what its abort said), its exit
        status, host and time, and how many other ranks ringrun stopped."""
        process = dict(self._ranks)[first]
        returncode = process.poll()
        holder = self._holders.get(first)
        error = holder.exception if holder is not None else None
        if error is None and reason is not None:
            error = reason.removeprefix("exiting on an uncaught ")
        if returncode is None:
            status = "still running"
        elif returncode < 0:
            status = describe_exit(first, returncode).removeprefix(f"rank {first} was ")
        else:
            status = f"exit code {returncode}"
        wall = time.localtime(time.time() - (time.monotonic() - when))
        details = f"{status}, host {self._hosts.get(first, '?')}, {time.strftime('%Y-%m-%d %H:%M:%S', wall)}"
        failed = f"rank {first} failed first" if len(self._ranks) > 1 else f"rank {first} failed"
        line = f"{failed}: {error} ({details})" if error else f"{failed} ({details})"
        if stopped:
            line += f"; stopped {stopped} other rank{'s' if stopped != 1 else ''}"
        return line

    def _supervise(self, timeout: float | None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._received_signals:
                return self._interrupted()
            for holder in self._holders.values():
                holder.release(idle_only=True)
            for rank, process in self._ranks:
                returncode = process.poll()
                if returncode:
                    first, status, reason, when = self._first_failure(rank, returncode)
                    stopped = sum(1 for r, p in self._ranks if p.poll() is None and r != first)
                    self._stop_all(interrupted=False)
                    # The ranks' last lines (the tracebacks whole) come before the summary, which closes the output.
                    self._drain_output()
                    self._console.message(self._summary(first, reason, when, stopped))
                    return exit_status(status)
            if all(process.returncode is not None for _, process in self._ranks):
                return 0
            if deadline is not None and time.monotonic() >= deadline:
                self._console.message(f"timed out after {timeout:g} s; stopping all ranks")
                self._stop_all(interrupted=False)
                return EXIT_TIMEOUT
            time.sleep(_POLL_INTERVAL_S)

    def _interrupted(self) -> int:
        """Stops every rank, saying so in one line: ringcc in the ranks, told
        that ringrun reports it (RINGCC_RINGRUN_REPORTS), prints no traceback
        for the KeyboardInterrupt this sends them, and their abort lines are
        not shown (the --output-filename files keep them)."""
        signum = self._received_signals[0]
        self._interrupt_reported = True
        running = sum(1 for _, process in self._ranks if process.poll() is None)
        what = "interrupted" if signum == signal.SIGINT else f"received {signal.Signals(signum).name}"
        self._console.message(f"{what}; stopping {running} rank{'s' if running != 1 else ''}")
        self._stop_all(interrupted=True)
        return 128 + signum

    def _stop_all(self, interrupted: bool) -> None:
        """Stops every running rank (stop_processes)."""
        processes = [process for _, process in self._ranks]
        stop_processes(processes, interrupted, self._received_signals, self._grace_period, self._console)

    def _drain_output(self) -> None:
        """Waits (briefly) for the ranks' last lines; a pipe held open by a leftover process is abandoned."""
        deadline = time.monotonic() + _OUTPUT_DRAIN_TIMEOUT_S
        for reader in self._readers:
            reader.join(timeout=max(0.0, deadline - time.monotonic()))
        for holder in self._holders.values():
            holder.release()  # a traceback whose stream a leftover process holds open
