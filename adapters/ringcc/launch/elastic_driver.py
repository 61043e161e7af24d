"""ringrun's elastic mode (Horovod's `horovodrun --host-discovery-script`):

    ringrun -np 2 --min-np 1 --max-np 4 --host-discovery-script ./discover.sh python train.py

The driver runs the discovery script every second (lines "host:slots", or
"host" with --slots-per-host slots), starts a worker on each free slot of a
host that is not blacklisted (up to --max-np workers), and forms the
memberships the workers join: ringcc.init() in a worker asks the driver
for its rank (ringcc/elastic/worker.py). A membership is formed when every
live worker of the previous one has asked for the next (after a failure
their collectives fail; after a host change their state.commit() raises
HostsUpdatedInterrupt on every rank), together with the new workers that
are ready; the workers of the previous membership keep their order, so
rank 0 holds the latest state.

A worker that fails blacklists its host: no new worker starts there, for
the cooldown of --blacklist-cooldown-range (Horovod's exponential backoff)
or, without it, for the rest of the job. Workers still running on a
blacklisted host keep their place. --reset-limit bounds the number of
memberships after the first. The job succeeds when a worker exits with 0
(the others then get RINGCC_TIMEOUT_S to finish); it fails when no worker
of the last membership is left to hold the state, when fewer than
--min-np workers can run for --elastic-timeout seconds, or past
--reset-limit. See docs/elastic.md.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from ringcc.elastic.worker import DRIVER_VARIABLE, WORKER_VARIABLE
from ringcc.launch.agents import DEFAULT_AGENT, agent_command, with_ssh_options
from ringcc.launch.blacklist import COOLDOWN_LOWER_LIMIT_S, COOLDOWN_UPPER_LIMIT_S, HostState
from ringcc.launch.discovery import (
    DISCOVERY_INTERVAL_S,
    DISCOVERY_KILL_GRACE_S,
    DISCOVERY_SCRIPT_TIMEOUT_S,
    ElasticError,
    FixedDiscovery,
    ScriptDiscovery,
)
from ringcc.launch.errors import EXIT_CANNOT_START, EXIT_TIMEOUT, EXIT_USAGE, LaunchError
from ringcc.launch.hosts import Host, dual_stack_socket, is_local_host, parse_hostfile, parse_hosts, unbracket
from ringcc.launch.memberships import Formation, Worker, form_membership
from ringcc.launch.processes import (
    Console,
    describe_exit,
    exit_status,
    forward_output,
    recording_signals,
    signal_process_group,
    stop_processes,
    timestamped,
)
from ringcc.launch.rpc_server import RequestServer, Wait
from ringcc.launch.variables import (
    NETWORK_INTERFACE_VARIABLE,
    OUTER_JOB_VARIABLES,
    agent_forwarded_variables,
    exported_variables,
)

DEFAULT_ELASTIC_TIMEOUT_S = 600.0
DEFAULT_TIMEOUT_S = 60.0  # RINGCC_TIMEOUT_S's default
WATCH_HOLD_S = 30.0
RENOTIFY_S = 2.0  # a worker that waits to be let in is announced again this often
LOOP_S = 0.05

ADDED, REMOVED = 2, 1  # ringcc.elastic.HostUpdateResult


# --------------------------------------------------------------------------
# The driver


class ElasticDriver:
    def __init__(self, args, command: Sequence[str], environ: dict[str, str]) -> None:
        self.args = args
        self.command = list(command)
        self.environ = environ
        self.console = Console()
        num_proc = args.num_proc
        self.min_np = args.min_np if args.min_np is not None else num_proc
        self.max_np = args.max_np if args.max_np is not None else num_proc
        if self.min_np is None and self.max_np is None:
            raise LaunchError("elastic mode needs -np, --min-np or --max-np")
        self.min_np = self.min_np if self.min_np is not None else 1
        self.start_np = num_proc if num_proc is not None else self.min_np
        if self.max_np is None:
            self.max_np = max(self.start_np, self.min_np)
        if not 1 <= self.min_np <= self.start_np <= self.max_np:
            raise LaunchError(
                f"elastic mode needs 1 <= --min-np ({self.min_np}) <= -np ({self.start_np}) <= --max-np ({self.max_np})"
            )
        if args.reset_limit is not None and args.reset_limit < 0:
            raise LaunchError("--reset-limit must not be negative")
        cooldown = tuple(args.blacklist_cooldown_range) if args.blacklist_cooldown_range else None
        if cooldown is not None:
            lower, upper = cooldown
            if lower < COOLDOWN_LOWER_LIMIT_S or upper > COOLDOWN_UPPER_LIMIT_S or lower > upper:
                raise LaunchError(
                    f"--blacklist-cooldown-range: MIN >= {COOLDOWN_LOWER_LIMIT_S}, MAX <= "
                    f"{COOLDOWN_UPPER_LIMIT_S} and MIN <= MAX, got {lower} {upper}"
                )
        self.cooldown = cooldown
        if args.host_discovery_script is not None:
            if args.hosts is not None or args.hostfile is not None:
                raise LaunchError("give either --host-discovery-script or -H/--hostfile, not both")
            self.discovery = ScriptDiscovery(
                args.host_discovery_script,
                args.slots_per_host,
                _env_float(environ, ("RINGCC_ELASTIC_DISCOVERY_TIMEOUT_S",), DISCOVERY_SCRIPT_TIMEOUT_S),
            )
        elif args.hosts is not None or args.hostfile is not None:
            hosts = parse_hosts(args.hosts) if args.hosts is not None else parse_hostfile(args.hostfile)
            self.discovery = FixedDiscovery(hosts)
        else:
            self.discovery = FixedDiscovery([Host("localhost", self.max_np)])
        if args.output_filename is not None:
            raise LaunchError("--output-filename is not available in elastic mode")
        if args.slots_per_host < 1:
            raise LaunchError("--slots-per-host must be at least 1")
        if args.elastic_timeout is not None and not args.elastic_timeout >= 0:
            raise LaunchError(f"--elastic-timeout must be a number of seconds >= 0, not {args.elastic_timeout}")
        self.elastic_timeout = (
            args.elastic_timeout
            if args.elastic_timeout is not None
            else _env_float(environ, ("RINGCC_ELASTIC_TIMEOUT_S", "HOROVOD_ELASTIC_TIMEOUT"), DEFAULT_ELASTIC_TIMEOUT_S)
        )
        self.join_timeout = _env_float(environ, ("RINGCC_TIMEOUT_S",), DEFAULT_TIMEOUT_S)
        self.discovery_interval = _env_float(environ, ("RINGCC_ELASTIC_DISCOVERY_INTERVAL_S",), DISCOVERY_INTERVAL_S)
        if self.discovery_interval <= 0:
            raise LaunchError("RINGCC_ELASTIC_DISCOVERY_INTERVAL_S must be more than 0 seconds")
        self.secret = environ.get("RINGCC_SECRET") or secrets.token_hex(32)
        self.agent = with_ssh_options(
            args.agent if args.agent is not None else DEFAULT_AGENT,
            args.ssh_connect_timeout,
            getattr(args, "ssh_port", None),
            getattr(args, "ssh_identity_file", None),
        )
        self.exported = exported_variables(args.export, environ)

        self.lock = threading.Lock()
        self.hosts: dict[str, int] = {}  # the last discovery
        self.host_order: list[str] = []  # hosts in the order first seen
        self.host_states: dict[str, HostState] = {}
        self.workers: dict[str, Worker] = {}
        self.slot_starts: dict[tuple[str, int], int] = {}  # workers started on each slot so far
        self.generation = 0  # the last membership that met
        self.formed = 0  # memberships formed so far (one that fell apart before it met included)
        self.resets = 0
        self.formation: Formation | None = None
        self.updates: list[tuple[float, int]] = []  # (timestamp, HostUpdateResult flags)
        self.succeeded_at: float | None = None
        self.failure: tuple[str, int] | None = None  # (message, exit status) ending the job
        self.first_failure_code: int | None = None
        self.short_since: float | None = None  # when fewer than --min-np workers could run
        self.discovery_error: str | None = None
        self.discovered = False  # the first discovery succeeded
        self.discovery_thread: threading.Thread | None = None
        self.readers: list[threading.Thread] = []
        self.stopping = threading.Event()
        self.requests: RequestServer | None = None
        self.port = 0

    # -- the main loop --------------------------------------------------------

    def run(self) -> int:
        received: list[int] = []
        try:
            self._listen()
        except (OSError, RuntimeError) as error:
            self.console.message(f"elastic mode: cannot listen for workers: {error}")
            return EXIT_CANNOT_START
        try:
            # The first discovery runs there too, so that ringrun's timeout
            # and signals stop a script that hangs (a first failure is
            # fatal, as in Horovod).
            self.discovery_thread = threading.Thread(target=self._discover, name="ringrun-discovery", daemon=True)
            self.discovery_thread.start()
        except RuntimeError as error:
            self.console.message(f"elastic mode: cannot start the host discovery: {error}")
            self.requests.close()
            return EXIT_CANNOT_START
        try:
            return self._supervise(received)
        finally:
            self._shut_down()

    def _supervise(self, received: list[int]) -> int:
        deadline = None if self.args.timeout is None else time.monotonic() + self.args.timeout
        status: int | None = None
        started = time.monotonic()
        with recording_signals(received):
            while status is None:
                if received:
                    self.console.message(f"received {signal.Signals(received[0]).name}; stopping all workers")
                    self._stop_all(interrupted=True, received=received)
                    status = 128 + received[0]
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    self.console.message(f"timed out after {self.args.timeout:g} s; stopping all workers")
                    self._stop_all(interrupted=False, received=received)
                    status = EXIT_TIMEOUT
                    break
                with self.lock:
                    status = self._step(time.monotonic(), started)
                self.requests.wake()
                if status is None:
                    time.sleep(LOOP_S)
            if status is not None and any(w.alive for w in self.workers.values()):
                self._stop_all(interrupted=False, received=received)
        return status

    def _shut_down(self) -> None:
        """Ends the discovery (a script in progress with its process group),
        answers the workers still waiting, and stops serving."""
        self.stopping.set()
        self.discovery.stop()
        if self.discovery_thread is not None:
            self.discovery_thread.join(DISCOVERY_KILL_GRACE_S + 1.0)
            if self.discovery_thread.is_alive():
                self.discovery.kill()
        if self.requests is not None:
            self.requests.close()
        deadline_drain = time.monotonic() + 2.0
        for reader in self.readers:
            reader.join(timeout=max(0.0, deadline_drain - time.monotonic()))

    def _step(self, now: float, started: float) -> int | None:
        """One round of decisions (under the lock); the exit status once the job is over."""
        self._reap(now)
        if self.failure is not None:
            message, code = self.failure
            self.console.message(message)
            return code
        if not self.discovered:
            return None
        if self.succeeded_at is not None:
            self._release_waiting("the job is done")
            live = [w for w in self.workers.values() if w.alive]
            if not live:
                failed = [
                    w
                    for w in self.workers.values()
                    if w.exit_code and not w.leaving and w.generation == self.generation
                ]
                return exit_status(failed[0].exit_code) if failed else 0
            if now - self.succeeded_at > self.join_timeout:
                self.console.message(f"a worker finished {self.join_timeout:g} s ago; stopping the others")
                for w in live:
                    w.leaving = True
                return 0
            return None
        self._check_formation()
        self._maybe_form(now)
        self._scale(now, started)
        self._announce(now)
        return None

    # -- workers' exits -------------------------------------------------------

    def _reap(self, now: float) -> None:
        for w in list(self.workers.values()):
            if not w.alive:
                continue
            code = w.process.poll()
            if code is None:
                continue
            w.exit_code = code
            w.waiting = False
            if w.leaving:
                continue
            if code == 0:
                if self.succeeded_at is None:
                    self.succeeded_at = now
                continue
            described = describe_exit(0, code).replace("rank 0", f"worker {w.id}", 1)
            state = self.host_states.setdefault(w.host, HostState(self.cooldown))
            seconds = state.blacklist(time.time())
            how = "for the rest of the job" if seconds == float("inf") else f"for {seconds:.1f} s"
            self.console.message(
                f"{described} (rank {w.rank} of membership {w.generation}); host {w.host} blacklisted {how}"
            )
            if self.first_failure_code is None:
                self.first_failure_code = exit_status(code)
            if self.formation is not None and w in self.formation.members:
                self._void_formation(f"worker {w.id} failed before the membership met")
        if (
            self.generation == 0
            and self.workers
            and self.succeeded_at is None
            and not any(w.alive for w in self.workers.values())
        ):
            self.failure = (
                "every worker failed before the first membership met; stopping",
                self.first_failure_code or 1,
            )
        if (
            self.generation > 0
            and self.succeeded_at is None
            and not any(w.alive and not w.leaving and w.holds_state for w in self.workers.values())
        ):
            self.failure = (
                "no worker that holds the training state is left (every worker that had "
                "synchronised it failed or left); stopping",
                self.first_failure_code or 1,
            )

    # -- memberships ----------------------------------------------------------

    def _void_formation(self, why: str) -> None:
        formation, self.formation = self.formation, None
        for w in formation.members:
            if w.alive and w.waiting:
                w.reply = {"action": "retry", "reason": why}

    def _check_formation(self) -> None:
        formation = self.formation
        if formation is None:
            return
        rank0 = formation.members[0]
        if not rank0.alive:
            self._void_formation(f"rank 0 ({rank0.id}) exited before it chose its store's port")

    def _maybe_form(self, now: float) -> None:
        if self.formation is not None:
            return
        live = [w for w in self.workers.values() if w.alive and not w.leaving]
        waiting = [w for w in live if w.waiting and w.reply is None]
        if not waiting:
            return
        if self.generation == 0:
            # The first membership: every worker started so far (one that
            # has not asked within the elastic timeout is given up on).
            if len(waiting) < len(live):
                for w in live:
                    if not w.waiting and now - w.started > self.elastic_timeout:
                        self.console.message(
                            f"worker {w.id} did not start within {self.elastic_timeout:g} s; stopping it"
                        )
                        w.leaving = True
                        signal_process_group(w.process, signal.SIGKILL)
                return
            members, newcomers = [], waiting
        else:
            members = [w for w in live if w.generation == self.generation]
            late = [w for w in members if not (w.waiting and w.reply is None)]
            if late:
                first = min((w.waiting_since for w in members if w.waiting), default=None)
                if first is not None and now - first > self.join_timeout:
                    for w in late:
                        self.console.message(
                            f"worker {w.id} (rank {w.rank}) did not leave membership {self.generation} within "
                            f"{self.join_timeout:g} s of the others; killing it"
                        )
                        signal_process_group(w.process, signal.SIGKILL)
                return
            newcomers = [w for w in waiting if w.generation == 0]
        leaving = [w for w in members + newcomers if w.removal]
        for w in leaving:
            w.leaving = True
            w.reply = {"action": "leave", "reason": f"host {w.host} (slot {w.slot}) was removed"}
        members = [w for w in members if not w.removal]
        newcomers = [w for w in newcomers if not w.removal]
        # Those that hold the training state first, the oldest first, so
        # that rank 0 (which the others synchronise from) holds it.
        candidates = sorted(
            members + newcomers,
            key=lambda w: (
                not w.holds_state,
                w.first_generation or float("inf"),
                w.rank if w.generation else 0,
                self._host_index(w.host),
                w.slot,
            ),
        )
        if self.generation > 0 and not (candidates and candidates[0].holds_state):
            self.failure = (
                "no worker that holds the training state is left (every worker that had "
                "synchronised it failed or left); stopping",
                self.first_failure_code or 1,
            )
            return
        chosen = candidates[: self.max_np]
        for w in candidates[self.max_np :]:
            w.leaving = True
            w.reply = {"action": "leave", "reason": f"more than --max-np {self.max_np} workers"}
        if len(chosen) < self.min_np:
            return  # waits for more workers (_scale starts them, or gives up)
        if self.generation > 0:
            if self.args.reset_limit is not None and self.resets >= self.args.reset_limit:
                self.failure = (
                    f"the membership changed {self.resets} times, the --reset-limit; stopping",
                    self.first_failure_code or 1,
                )
                return
            self.resets += 1
        self._form(chosen)

    def _host_index(self, host: str) -> int:
        return self.host_order.index(host) if host in self.host_order else len(self.host_order)

    def _form(self, chosen: list[Worker]) -> None:
        self.formed += 1
        generation = self.formed
        all_local = all(self._is_local(w.host) for w in chosen)
        rank0_host = chosen[0].host
        if all_local:
            master_addr = "127.0.0.1"
        elif self._is_local(rank0_host):
            master_addr = socket.gethostname()
        else:
            master_addr = unbracket(rank0_host)
        formation = form_membership(generation, chosen, master_addr)
        size = len(chosen)
        self.formation = formation
        chosen[0].reply = {**formation.assignments[chosen[0].id], "choose_port": True}
        self.console.message(
            f"membership {generation}: {size} worker(s): "
            + ", ".join(f"{w.id} as rank {r}" for r, w in enumerate(chosen))
        )

    def _port_chosen(self, worker_id: str, generation: int, port: int) -> dict:
        formation = self.formation
        if (
            formation is None
            or formation.generation != generation
            or formation.members[0].id != worker_id
            or not isinstance(port, int)
            or not 0 < port < 65536
        ):
            return {"action": "retry"}
        self.formation = None
        self.generation = generation
        for rank, w in enumerate(formation.members):
            w.generation, w.rank = generation, rank
            w.first_generation = w.first_generation or generation
            if generation == 1:
                w.holds_state = True  # every worker starts the job with the same state
            if rank > 0:
                w.reply = {**formation.assignments[w.id], "master_port": port}
        return {"action": "ok"}

    def _release_waiting(self, why: str) -> None:
        for w in self.workers.values():
            if w.alive and w.waiting and w.reply is None:
                w.leaving = True
                w.reply = {"action": "leave", "reason": why}

    # -- hosts and starting workers -------------------------------------------

    def _discover(self) -> None:
        first = True
        while True:
            try:
                hosts = self.discovery.find()
            except ElasticError as error:
                if self.stopping.is_set():
                    return
                with self.lock:
                    if first:
                        self.failure = (str(error), 1)
                        return
                    if self.discovery_error != str(error):
                        self.console.message(f"{error} (trying again)")
                    self.discovery_error = str(error)
            else:
                with self.lock:
                    self.discovery_error = None
                    self._apply_discovery(hosts)
                    self.discovered = True
            first = False
            if self.stopping.wait(self.discovery_interval):
                return

    def _apply_discovery(self, hosts: dict[str, int]) -> None:
        if hosts == self.hosts:
            return
        for host in hosts:
            if host not in self.host_order:
                self.host_order.append(host)
        self.hosts = hosts
        removed = False
        for w in self.workers.values():
            if w.alive and not w.leaving and not w.removal and w.slot >= hosts.get(w.host, 0):
                w.removal = True
                removed = True
                if w.generation == 0 and not w.waiting:
                    w.leaving = True
                    signal_process_group(w.process, signal.SIGTERM)
        if removed:
            self._notify(REMOVED)

    def _is_local(self, host: str) -> bool:
        return self.args.agent is None and is_local_host(host)

    def _free_slots(self, now: float) -> list[tuple[str, int]]:
        free = []
        for host in self.host_order:
            slots = self.hosts.get(host, 0)
            state = self.host_states.get(host)
            if slots == 0 or (state is not None and not state.available(time.time())):
                continue
            used = {w.slot for w in self.workers.values() if w.alive and w.host == host}
            free += [(host, slot) for slot in range(slots) if slot not in used]
        return free

    def _scale(self, now: float, started: float) -> None:
        if self.stopping.is_set() or self.discovery_error is not None and not self.hosts:
            return
        running = [w for w in self.workers.values() if w.alive and not w.leaving and not w.removal]
        free = self._free_slots(now)
        if self.generation == 0 and not self.workers:
            # The first workers start once -np slots are there (Horovod).
            if len(free) < self.start_np:
                self._check_short(now, len(free), f"{self.start_np} slots to start with")
                return
        room = self.max_np - len(running)
        for host, slot in free[: max(0, room)]:
            self._start(host, slot, now)
        running = [w for w in self.workers.values() if w.alive and not w.leaving and not w.removal]
        if len(running) < self.min_np:
            self._check_short(now, len(running), f"--min-np {self.min_np} workers")
        else:
            self.short_since = None

    def _check_short(self, now: float, have: int, need: str) -> None:
        if self.short_since is None:
            self.short_since = now
            self.console.message(f"waiting for {need} (have {have}; up to {self.elastic_timeout:g} s)")
        elif now - self.short_since > self.elastic_timeout:
            self.failure = (
                f"timed out after {self.elastic_timeout:g} s waiting for {need} (have {have}); stopping",
                self.first_failure_code or 1,
            )

    def _start(self, host: str, slot: int, now: float) -> None:
        started_here = self.slot_starts.get((host, slot), 0) + 1
        self.slot_starts[(host, slot)] = started_here
        worker_id = f"{host}[{slot}]" + (f".{started_here}" if started_here > 1 else "")
        variables = {
            DRIVER_VARIABLE: f"{self._driver_address(host)}:{self.port}",
            WORKER_VARIABLE: worker_id,
            "RINGCC_SECRET": self.secret,
            "RINGCC_HOSTNAME": host,
            "RINGCC_ELASTIC_TIMEOUT_S": f"{self.elastic_timeout:g}",
        }
        if self.args.network_interface:
            variables[NETWORK_INTERFACE_VARIABLE] = self.args.network_interface
        base = {k: v for k, v in {**self.environ, **self.exported}.items() if k not in OUTER_JOB_VARIABLES}
        stdin = None
        if self._is_local(host):
            env = {**base, **variables}
            env.setdefault("PYTHONUNBUFFERED", "1")
            argv = list(self.command)
        else:
            forwarded = agent_forwarded_variables(
                self.environ, self.exported, self.args.env_all, left_out=OUTER_JOB_VARIABLES
            )
            rank_env = {**forwarded, **variables}
            rank_env.setdefault("PYTHONUNBUFFERED", self.environ.get("PYTHONUNBUFFERED", "1"))
            stdin = (rank_env.pop("RINGCC_SECRET") + "\n").encode()
            argv = agent_command(self.agent, host, rank_env, self.command, os.getcwd())
            env = dict(self.environ)
        try:
            process = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            if stdin is not None:
                try:
                    with process.stdin:
                        process.stdin.write(stdin)
                except BrokenPipeError:
                    pass
        except OSError as error:
            self.console.message(f"cannot start a worker on {host}: {error}")
            state = self.host_states.setdefault(host, HostState(self.cooldown))
            state.blacklist(time.time())
            return
        worker = Worker(worker_id, host, slot, process, now)
        self.workers[worker_id] = worker
        try:
            for pipe, stream in ((process.stdout, "stdout"), (process.stderr, "stderr")):
                prefix = f"[{worker_id}]<{stream}>: ".encode() if not self.args.no_prefix else b""
                if getattr(self.args, "prefix_output_with_timestamp", False):
                    prefix = timestamped(prefix)
                reader = threading.Thread(
                    target=forward_output,
                    args=(pipe, prefix, stream, self.console),
                    name=f"ringrun-{worker_id}-{stream}",
                    daemon=True,
                )
                reader.start()
                self.readers.append(reader)
        except RuntimeError as error:
            # No thread to read its output (a limit on tasks): a worker whose
            # pipes nobody drains would block, so it goes, and its host
            # counts as failed; the job carries on.
            worker.leaving = True
            signal_process_group(process, signal.SIGKILL)
            state = self.host_states.setdefault(host, HostState(self.cooldown))
            state.blacklist(time.time())
            self.console.message(f"cannot start a worker on {host}: {error}")

    def _driver_address(self, host: str) -> str:
        if self._is_local(host):
            return "127.0.0.1"
        address = self.args.master_addr or socket.gethostname()
        return f"[{unbracket(address)}]" if ":" in unbracket(address) else address

    # -- host updates ---------------------------------------------------------

    def _notify(self, flags: int) -> None:
        last = self.updates[-1][0] if self.updates else 0.0
        self.updates.append((max(time.time(), last + 0.001), flags))

    def _announce(self, now: float) -> None:
        """Tells the running membership about workers that wait to be let
        in and about removed slots, again every RENOTIFY_S."""
        if self.generation == 0 or self.formation is not None:
            return
        flags = 0
        for w in self.workers.values():
            if not w.alive or w.leaving:
                continue
            if (w.generation == 0 and w.waiting) or (w.removal and w.generation == self.generation):
                if now - w.announced >= RENOTIFY_S:
                    w.announced = now
                    flags |= REMOVED if w.removal else ADDED
        if flags:
            self._notify(flags)

    # -- requests -------------------------------------------------------------

    def _listen(self) -> None:
        any_remote = self.args.agent is not None or not all(
            is_local_host(h) for h in getattr(self.discovery, "hosts", {"remote": 1})
        )
        if any_remote:
            sock = dual_stack_socket()
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        self.requests = RequestServer(sock, self.secret.encode(), self.lock, self._handle, self.console.message)
        self.requests.start()

    def _handle(self, request: dict) -> dict | Wait:
        """One authenticated request (the server holds the lock)."""
        op = request.get("op")
        worker_id = request.get("worker")
        worker = self.workers.get(worker_id) if isinstance(worker_id, str) else None
        if worker is None:
            return {"action": "stop", "reason": f"unknown worker {worker_id!r}"}
        if op == "join":
            return self._join(worker)
        if op == "port":
            return self._port_chosen(worker_id, request.get("generation"), request.get("port"))
        if op == "watch":
            return self._watch(request.get("since"))
        if op == "synced":
            worker.holds_state = True
            return {"action": "ok"}
        return {"action": "stop", "reason": f"unknown request {op!r}"}

    def _join(self, worker: Worker) -> dict | Wait:
        if self.stopping.is_set() or self.succeeded_at is not None or self.failure is not None:
            worker.leaving = True
            return {"action": "leave", "reason": "the job is over"}
        worker.joins += 1
        join = worker.joins
        worker.waiting = True
        worker.waiting_since = time.monotonic()
        worker.reply = None

        def answer(now: float) -> dict | None:
            if worker.joins != join:
                return {"action": "retry", "reason": "asked again"}  # the worker's connection broke: it goes nowhere
            if worker.reply is None and worker.alive and not self.stopping.is_set():
                return None
            reply = worker.reply or {"action": "leave", "reason": "the job is over"}
            worker.reply = None
            worker.waiting = False
            return reply

        return Wait(answer)

    def _watch(self, since) -> dict | Wait:
        latest = self.updates[-1][0] if self.updates else 0.0
        if not isinstance(since, (int, float)) or isinstance(since, bool):
            return {"timestamp": latest, "update": 0}
        deadline = time.monotonic() + WATCH_HOLD_S

        def answer(now: float) -> dict | None:
            news = self.updates and self.updates[-1][0] > since
            if not news and not self.stopping.is_set() and now < deadline:
                return None
            flags = 0
            for timestamp, update in self.updates:
                if timestamp > since:
                    flags |= update
            return {"timestamp": self.updates[-1][0] if self.updates else 0.0, "update": flags}

        return Wait(answer, deadline)

    # -- stopping -------------------------------------------------------------

    def _stop_all(self, interrupted: bool, received: list[int]) -> None:
        with self.lock:
            live = [w for w in self.workers.values() if w.alive]
            for w in live:
                w.leaving = True
        stop_processes([w.process for w in live], interrupted, received, self.args.grace_period, self.console)


def _env_float(environ, names, default: float) -> float:
    """The first of `names` set (non-empty) in environ, as seconds >= 0;
    a value that is not one stops the launch rather than being ignored."""
    for name in names:
        value = environ.get(name)
        if value:
            try:
                seconds = float(value)
            except ValueError:
                seconds = -1.0
            if not seconds >= 0:
                raise LaunchError(f"{name}={value!r} is not a number of seconds >= 0")
            return seconds
    return default


def run_elastic(args, command: Sequence[str]) -> int:
    try:
        driver = ElasticDriver(args, command, dict(os.environ))
    except LaunchError as error:
        print(f"ringrun: {error}", file=sys.stderr)
        return EXIT_USAGE
    return driver.run()
