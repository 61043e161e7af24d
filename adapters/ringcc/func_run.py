"""ringcc.run (also ringcc.torch.run, and horovod.run under the alias of
ringcc.compat): Horovod's `horovod.run`. It runs `func(*args, **kwargs)` on
N ranks started as ringrun starts them (ringcc.launch's plan and runner,
or mpirun with use_mpi=True) and returns their results in rank order.

The function goes to the ranks, and their results come back, through files
in a directory only this user can read (mkdtemp in the system's temporary
directory), removed afterwards, when every rank runs on this machine.
When some run on other hosts, the driver serves the function and takes
the results over TCP, authenticated with the job secret
(ringcc/func_channel.py), so that the hosts share no directory; under
mpirun (use_mpi=True) with other hosts, the directory is made in the
current one, which those hosts must share. Each rank runs ringcc.func_rank. A rank that
fails, dies or never starts fails the call with a RunError naming it;
the wait for the ranks is bounded as ringrun's is: a rank that ends with an
error stops the others, and `timeout` bounds the whole job.
"""

from __future__ import annotations

import math
import os
import pickle
import shlex
import shutil
import signal
import sys
import tempfile
import warnings

# Horovod's arguments that ringcc.run takes but has no use for, and why.
_IGNORED = {
    "min_num_proc": "elastic jobs are started by ringrun --min-np/--max-np, not ringcc.run",
    "max_num_proc": "elastic jobs are started by ringrun --min-np/--max-np, not ringcc.run",
    "slots": "elastic jobs are started by ringrun --slots-per-host, not ringcc.run",
    "reset_limit": "elastic jobs are started by ringrun --reset-limit, not ringcc.run",
    "cooldown_range": "elastic jobs are started by ringrun --blacklist-cooldown-range, not ringcc.run",
    "disable_cache": "ringcc.run keeps no cache of start-up checks",
}


class RunError(RuntimeError):
    """A rank of ringcc.run failed. `rank`: the rank that failed first;
    `exc_type` and `remote_message`: its exception's type (qualified name)
    and message, None when it died without one; `remote_traceback`: its
    traceback as text; `exit_code`: its exit status (None if unknown). The
    exception itself, when it could be pickled, is the `__cause__`."""

    def __init__(self, message, rank=None, exc_type=None, remote_message=None, remote_traceback=None, exit_code=None):
        super().__init__(message)
        self.rank = rank
        self.exc_type = exc_type
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        self.exit_code = exit_code


def _pickle_call(func, args, kwargs) -> bytes:
    """(func, args, kwargs) pickled: cloudpickle when installed, else pickle."""
    try:
        import cloudpickle
    except ImportError:
        cloudpickle = None
    try:
        if cloudpickle is not None:
            return cloudpickle.dumps((func, tuple(args), dict(kwargs)))
        return pickle.dumps((func, tuple(args), dict(kwargs)))
    except Exception as error:
        if cloudpickle is not None:
            hint = "cloudpickle cannot pickle it"
        else:
            hint = (
                "pickle sends functions by name only, so a lambda, a closure, a nested function or one defined "
                "in __main__ cannot be sent without cloudpickle: pip install cloudpickle, or pass a function "
                "defined at the top of an importable module"
            )
        raise TypeError(f"ringcc.run cannot pickle {func!r} and its arguments ({error}); {hint}") from error


def _num_ranks(num_proc, np):
    if np is not None and num_proc not in (1, None) and np != num_proc:
        raise ValueError(f"ringcc.run: np={np} and num_proc={num_proc} disagree; give one of them")
    return np if np is not None else (1 if num_proc is None else num_proc)


def _job_args(num_ranks, hosts, hostfile, start_timeout, ssh_port, ssh_identity_file, options):
    """ringrun's options (its parser's defaults) for this job."""
    from ringcc.launch.cli import build_parser

    args = build_parser().parse_args([])
    args.num_proc = num_ranks
    if isinstance(hosts, (list, tuple)):
        hosts = ",".join(hosts)
    args.hosts, args.hostfile = hosts, hostfile
    if ssh_port is not None or ssh_identity_file is not None:
        agent = ["ssh", "-o", "BatchMode=yes"]
        agent += ["-p", str(ssh_port)] if ssh_port is not None else []
        agent += ["-i", os.fspath(ssh_identity_file)] if ssh_identity_file is not None else []
        args.agent = shlex.join(agent) + " {host}"
    if start_timeout is not None:  # how long a host may take to answer ssh
        args.ssh_connect_timeout = max(1, math.ceil(float(start_timeout)))
    for name, value in options.items():
        setattr(args, name, value)
    return args


def _launch(args, job_dir, executable, use_mpi, timeout, server=None):
    """Starts the ranks and waits for them; returns (exit status, {rank:
    (returncode, ended)}). `server`: the FunctionServer the ranks reach,
    started here with the job's secret."""
    from ringcc.launch.mpirun import run_mpi
    from ringcc.launch.plan import plan_job
    from ringcc.launch.processes import JobRunner, prepare_output_files

    command = [executable, "-m", "ringcc.func_rank", job_dir]
    args.timeout = timeout
    if use_mpi:
        return run_mpi(args, command), {}
    launches = plan_job(args, command, os.environ)
    if server is not None:
        server.start(_job_secret(launches[0]), lambda line: print(f"ringcc.run: {line}", file=sys.stderr))
    if args.output_filename is not None:
        prepare_output_files(args.output_filename, len(launches))
    runner = JobRunner(prefix_output=True, grace_period=args.grace_period, output_dir=args.output_filename)
    status = runner.run(launches, timeout)
    return status, runner.ended_ranks()


def _job_secret(launch) -> str:
    """The secret ringrun gives the job's ranks (an agent's rank reads it from its standard input)."""
    from ringcc.launch.variables import SECRET_VARIABLE

    if launch.through_agent:
        return launch.stdin.decode().strip()
    return launch.env[SECRET_VARIABLE]


def _all_local(args) -> bool:
    """Whether every rank of the job runs on this machine (the plan starts none through an agent)."""
    from ringcc.launch.plan import plan_job

    if args.hosts is None and args.hostfile is None and not os.environ.get("SLURM_JOB_NODELIST"):
        return True
    return not any(launch.through_agent for launch in plan_job(args, ["true"], os.environ))


def _read_outcome(job_dir, rank, server=None):
    from ringcc.func_rank import result_path

    try:
        if server is not None:
            data = server.outcome(rank)
            return None if data is None else pickle.loads(data)
        with open(result_path(job_dir, rank), "rb") as file:
            return pickle.load(file)
    except FileNotFoundError:
        return None
    except Exception as error:  # noqa: BLE001 - a result that does not load is that rank's failure
        return ("error", {"type": type(error).__name__, "message": f"its result could not be loaded: {error}",
                          "traceback": "", "stage": "loading the result", "time": 0.0, "consequence": False,
                          "exception": None})  # fmt: skip


def _describe_exit(rank, code):
    if code is None:
        return f"rank {rank} ended, or never started,"
    if code < 0:
        try:
            return f"rank {rank} was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"rank {rank} was killed by signal {-code}"
    return f"rank {rank} exited with code {code}"


def _failure(outcomes, ended, status, timeout):
    """The RunError for the rank that failed first, or None when every rank returned."""
    records = {r: o[1] for r, o in outcomes.items() if o is not None and o[0] == "error"}
    missing = [r for r, o in outcomes.items() if o is None]
    first_cause = sorted((rec["time"], r) for r, rec in records.items() if not rec["consequence"])
    if first_cause:
        return _remote_error(first_cause[0][1], records[first_cause[0][1]], ended)
    if status == 124:
        return RunError(f"ringcc.run timed out after {timeout:g} s; the ranks were stopped")
    if status == 128 + signal.SIGINT:
        return KeyboardInterrupt()
    exits = {r: ended.get(r, (None, None)) for r in missing}
    died = sorted((at if at is not None else math.inf, r) for r, (code, at) in exits.items() if code != 0)
    if died:
        rank = died[0][1]
        code = exits[rank][0]
        return RunError(
            f"ringcc.run: {_describe_exit(rank, code)} without returning a result (see its output above)",
            rank=rank,
            exit_code=code,
        )
    if records:
        rank = min(records, key=lambda r: (records[r]["time"], r))
        return _remote_error(rank, records[rank], ended)
    if missing:
        return RunError(
            f"ringcc.run: rank {missing[0]} ended (exit status 0) without returning a result; "
            "the function must return (not end the process)",
            rank=missing[0],
            exit_code=0,
        )
    failed = [r for r, (code, _) in sorted(ended.items()) if code]
    if failed or status:
        rank = failed[0] if failed else None
        where = _describe_exit(rank, ended[rank][0]) if failed else f"the job ended with status {status}"
        return RunError(f"ringcc.run: {where} after returning its result", rank=rank, exit_code=status)
    return None


def _remote_error(rank, record, ended):
    message = f"ringcc.run: rank {rank} failed {record['stage']}: {record['type']}: {record['message']}"
    error = RunError(
        message,
        rank=rank,
        exc_type=record["type"],
        remote_message=record["message"],
        remote_traceback=record["traceback"],
        exit_code=ended.get(rank, (None, None))[0],
    )
    if record["traceback"]:
        error.add_note(f"rank {rank}'s traceback:\n{record['traceback'].rstrip()}")
    if record["exception"] is not None:
        try:
            error.__cause__ = pickle.loads(record["exception"])
        except Exception:  # noqa: BLE001 - the record's text says enough
            pass
    return error


def run(
    func,
    args=(),
    kwargs=None,
    num_proc=1,
    min_num_proc=None,
    max_num_proc=None,
    slots=None,
    reset_limit=None,
    cooldown_range=None,
    hosts=None,
    hostfile=None,
    start_timeout=None,
    ssh_port=None,
    ssh_identity_file=None,
    disable_cache=None,
    output_filename=None,
    verbose=None,
    use_gloo=None,
    use_mpi=None,
    mpi_args=None,
    network_interface=None,
    executable=None,
    np=None,
    min_np=None,
    max_np=None,
    *,
    timeout=None,
):
    """Runs `func(*args, **kwargs)` on `np` (or `num_proc`) ranks, started as
    ringrun starts them (`hosts` "host1:2,host2:2" or `hostfile`; through
    mpirun with use_mpi=True), and returns the list of their return values
    in rank order. The function calls hvd.init() / ringcc.init() itself.
    Raises RunError naming the rank that failed first (its exception's type
    and message) when a rank raises, dies or cannot start; `timeout`
    (seconds, ringcc's own) stops the job and raises after that long.
    Horovod's other arguments: `network_interface`, `output_filename`,
    `executable` (the ranks' Python), `ssh_port`, `ssh_identity_file`,
    `start_timeout` (ssh's connect timeout), `mpi_args` (with use_mpi) and
    `verbose` apply; elastic ones (min_num_proc, ...) and `disable_cache`
    are accepted with a warning and ignored."""
    if kwargs is None:
        kwargs = {}
    min_num_proc = min_np if min_num_proc is None else min_num_proc  # Horovod's deprecated names
    max_num_proc = max_np if max_num_proc is None else max_num_proc
    given = {"min_num_proc": min_num_proc, "max_num_proc": max_num_proc, "slots": slots,
             "reset_limit": reset_limit, "cooldown_range": cooldown_range, "disable_cache": disable_cache}  # fmt: skip
    for name, value in given.items():
        if value is not None:
            warnings.warn(f"ringcc.run ignores {name}: {_IGNORED[name]}", stacklevel=2)
    if hosts is not None and hostfile is not None:
        raise ValueError("Argument hosts and hostfile only allow one provided.")
    if use_gloo and use_mpi:
        raise ValueError("Argument use_gloo and use_mpi only allow one set True.")
    if mpi_args is not None and not use_mpi:
        warnings.warn("ringcc.run ignores mpi_args without use_mpi=True", stacklevel=2)
    num_ranks = _num_ranks(num_proc, np)
    if not isinstance(num_ranks, int) or num_ranks < 1:
        raise ValueError(f"ringcc.run needs at least one rank, got np={num_ranks!r}")
    payload = _pickle_call(func, args, kwargs)
    from ringcc.launch.errors import LaunchError

    options = {"output_filename": None if output_filename is None else os.fspath(output_filename),
               "network_interface": network_interface, "mpi_args": mpi_args}  # fmt: skip
    try:
        job = _job_args(num_ranks, hosts, hostfile, start_timeout, ssh_port, ssh_identity_file, options)
        local = use_mpi and hosts is None and hostfile is None or not use_mpi and _all_local(job)
    except LaunchError as error:
        raise ValueError(f"ringcc.run: {error}") from None
    shared_dir = use_mpi and not local
    job_dir = tempfile.mkdtemp(
        prefix=".ringcc-run-" if shared_dir else "ringcc-run-", dir=os.getcwd() if shared_dir else None
    )
    server = None
    try:
        descriptor = os.open(os.path.join(job_dir, "function.pkl"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(payload)
        if not local and not use_mpi:
            from ringcc.func_channel import DRIVER_VARIABLE, FunctionServer, driver_address

            server = FunctionServer(payload, num_ranks)
            job.export = [*job.export, f"{DRIVER_VARIABLE}={driver_address(job.master_addr)}:{server.port}"]
        if verbose:
            where = f"served on port {server.port}" if server else f"files in {job_dir}"
            print(f"ringcc.run: starting {num_ranks} rank(s) of {func!r} ({where})", file=sys.stderr)
        try:
            status, ended = _launch(job, job_dir, executable or sys.executable, bool(use_mpi), timeout, server)
        except LaunchError as error:
            raise ValueError(f"ringcc.run: {error}") from None
        outcomes = {rank: _read_outcome(job_dir, rank, server) for rank in range(num_ranks)}
    finally:
        if server is not None:
            server.close()
        shutil.rmtree(job_dir, ignore_errors=True)
    error = _failure(outcomes, ended, status, timeout)
    if error is not None:
        raise error
    return [outcomes[rank][1] for rank in range(num_ranks)]
