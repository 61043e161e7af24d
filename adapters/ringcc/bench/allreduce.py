"""Benchmark of ringcc's allreduce, allgather and broadcast, nccl-tests style.

    ringrun --no-prefix -np 2 python -m ringcc.bench allreduce [--minbytes 8] [--maxbytes 256M]
        [--stepfactor 4] [--ops allreduce,allgather,broadcast] [--dtype float32] [--iters N]
        [--warmup N] [--repeats 3] [--device cpu|cuda] [--compare gloo,nccl,mpi,socket]
        [--check] [--json PATH] [--csv PATH] [--plot PATH.png|.svg|.pdf] [--no-progress]
        [--busy-threads N]

Rank 0 prints one table per collective (size, count, type, time, algbw, busbw,
as nccl-tests' PERFORMANCE.md defines them, and the spread of the point's
samples), the peers' time, busbw and the speed-up of ringcc over each peer
when --compare names peers, and a summary of key figures. Every speed-up is
peer time / ringcc time: higher is better for ringcc, latency included.
While it runs, rank 0 shows progress on stderr (which repeat, library, op
and size, and the time so far); the tables go to stdout. --json writes every
result, --csv one row per (library, op, size) with every column's unit in its
name (time_us, busbw_GBps, spread_pct, speedup_x), --plot a picture of busbw,
small-message latency and the speed-up over each peer against message size,
quartile bars, the machine and versions in the title (ringcc.bench.figure;
.png at --plot-dpi, 200 by default, or .svg/.pdf; needs matplotlib).
ringrun's --no-prefix keeps rank 0's lines free of the "[0]<stdout>: "
prefix. Started without a launcher it says so, and times one rank.

Timing (ringcc.bench.measure): each point is a barrier-free Python loop of the
in-place call a user would write (ringcc.allreduce_(x),
ringcc.allgather(x, out=out), ringcc.broadcast_(x, 0)); time per iteration
is (t_end - t_start) / iters on every rank, and the reported value is the
maximum over ranks, reduced with the implementation being timed (for ringcc:
ringcc.allreduce_ of one float64 with ringcc.Max). --repeats R runs the whole
sweep R times, interleaving the implementations (ringcc, gloo, mpi, ringcc,
...), so that slow drifts of the machine hit every side alike; tables show
medians over the repeats, and the JSON has every repeat.

--device cuda: the buffers are torch tensors on the rank's GPU (local rank
modulo the GPUs torch sees), and every iteration is the collective followed
by torch.cuda.synchronize(): the time of a blocking call (ringcc.bench.cuda_buffers).
ringcc then runs on its GPU backends (docs/gpu.md), on torch's current
stream.

--busy-threads N keeps N compute threads per rank doing matrix products
(ringcc/bench/busy.py) while every implementation runs, the mpi peer's ranks
included: the collectives timed beside the kind of load a framework's own
threads make.

Peers (--compare):
  gloo  torch.distributed's gloo in these same processes, through torch's
        env:// rendezvous (ringrun sets RANK, WORLD_SIZE, MASTER_ADDR,
        MASTER_PORT), on tensors sharing the NumPy buffers (--device cuda:
        on the same CUDA tensors ringcc gets). Unless GLOO_SOCKET_IFNAME is
        set, gloo gets the interface ringcc's links use (RINGCC_SOCKET_IFNAME,
        ringrun --network-interface), else the one toward MASTER_ADDR when
        that is not loopback: left to itself gloo takes the host name's
        address, often a loopback one. A rank still in torch's set-up
        --peer-timeout + 10 s later ends the job with a message, since a
        rank whose gloo could not connect leaves the others waiting.
  nccl  (--device cuda) torch.distributed's nccl backend, the same way:
        every rank on a GPU of its own (NCCL refuses ranks that share one),
        or a single rank.
  mpi   under mpirun/mpiexec (the bench started as an MPI job, e.g.
        mpirun -np 2 python -m ringcc.bench allreduce): mpi4py's MPI_Allreduce,
        MPI_Allgather and MPI_Bcast in these same processes, interleaved with
        ringcc's sweeps (the default peer there). Otherwise
        mpi4py over Open MPI in a job of its own: rank 0 runs mpirun -np N
        between the sweeps (ringcc.bench.peers_mpi) while the other ranks sleep on a
        file in a directory rank 0 broadcast to them, so that no waiting rank
        spins on a CPU the MPI ranks need. Across hosts (a job of ringrun -H)
        mpirun starts beside rank 0 with the same hosts and slots, reaching
        them through --mpi-agent (--mpi-own-hostnames for namespace hosts,
        --mpi-interface; ringcc.bench.mpi_hosts); the other hosts must see rank 0's
        temporary directory. Host memory only.
  socket  (allreduce only) the bytes a ring allreduce sends and receives,
        2(n-1)/n of the buffer each way per rank, moved over plain TCP
        sockets between neighbours on 127.0.0.1 with no reduction
        (ringcc.bench.peers_socket): what plain sockets carry for the same traffic,
        beside which to read ringcc's RINGCC_TRANSPORT=tcp figures. Single
        host only. Host memory only.
A peer that is unknown or cannot run is reported as skipped, with the reason.
"""

import argparse
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from . import run_files
from .busy import MATRIX
from .figure import PLOT_DPI, picture_error
from .measure import DEFAULT_OPS, OPS, Backend, format_size, parse_size, resolve_dtype, size_sweep, sweep
from .output import MATPLOTLIB_MISSING, Progress, plot_available, point_text
from .table import aggregate, op_table, paired_ratios, summary, summary_text

DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64")
PEERS = ("gloo", "nccl", "mpi", "socket")
DEVICES = ("cpu", "cuda")


class RingccBackend(Backend):
    name = "ringcc"

    def __init__(self, ringcc, device=None):
        self.rc = ringcc
        self.rank, self.size = ringcc.rank(), ringcc.size()
        self.device = device  # None: NumPy buffers; else the rank's torch CUDA device

    def max_over_ranks(self, value):
        a = np.array([value], np.float64)
        self.rc.allreduce_(a, self.rc.Max)
        return float(a[0])

    def barrier(self):
        self.rc.barrier()

    def broadcast_text(self, text):
        """Rank 0's text on every rank."""
        buf = np.zeros(4096, np.uint8)
        if self.rank == 0:
            raw = text.encode()
            buf[: len(raw)] = np.frombuffer(raw, np.uint8)
        self.rc.broadcast_(buf, 0)
        return bytes(buf).rstrip(b"\0").decode()

    def loop(self, op, x, out):
        if self.device is not None:
            from .cuda_buffers import cuda_loop

            rc = self.rc
            calls = {
                "allreduce": lambda t, o: rc.allreduce_(t),
                "allgather": lambda t, o: rc.allgather(t, out=o),
                "broadcast": lambda t, o: rc.broadcast_(t, 0),
                "reduce_scatter": lambda t, o: rc.reduce_scatter(t, out=o),
            }
            return cuda_loop(self.device, x, out, calls[op])
        if op == "allreduce":
            f = self.rc.allreduce_

            def run(n):
                for _ in range(n):
                    f(x)
        elif op == "allgather":
            f = self.rc.allgather

            def run(n):
                for _ in range(n):
                    f(x, out=out)
        elif op == "reduce_scatter":
            f = self.rc.reduce_scatter

            def run(n):
                for _ in range(n):
                    f(x, out=out)
        else:
            f = self.rc.broadcast_

            def run(n):
                for _ in range(n):
                    f(x, 0)

        return run


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m ringcc.bench allreduce",
        description="ringcc collective benchmark (launch with ringrun -np N).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Sizes take K/M/G suffixes (binary). Peers: " + ", ".join(PEERS) + ".",
    )
    p.add_argument("-b", "--minbytes", type=parse_size, default=8, help="smallest size (default 8)")
    p.add_argument("-e", "--maxbytes", type=parse_size, default=256 << 20, help="largest size (default 256M)")
    p.add_argument(
        "-f",
        "--stepfactor",
        type=int,
        default=4,
        help="size multiplier between points (default 4); 8, 1M and 64M are "
        "always measured when in range, for the summary",
    )
    p.add_argument(
        "--ops", default=",".join(DEFAULT_OPS), help=f"comma list of {', '.join(OPS)} (default {','.join(DEFAULT_OPS)})"
    )
    p.add_argument("--dtype", default="float32", choices=DTYPES)
    p.add_argument(
        "-n",
        "--iters",
        type=int,
        default=None,
        help="timed iterations per point (default: adaptive, about --target-s each)",
    )
    p.add_argument("-w", "--warmup", type=int, default=None, help="warm-up iterations per point (default: adaptive)")
    p.add_argument(
        "--target-s",
        type=float,
        default=0.25,
        help="adaptive iterations aim at this many seconds per point (default 0.25)",
    )
    p.add_argument("--repeats", type=int, default=3, help="whole-sweep repeats (default 3)")
    p.add_argument(
        "--device",
        default="cpu",
        choices=DEVICES,
        help="where the buffers live: host memory (default) or the rank's GPU "
        "(torch CUDA tensors; each call is followed by torch.cuda.synchronize())",
    )
    p.add_argument("--compare", default="", help="comma list of peers to time too (gloo,nccl,mpi,socket)")
    p.add_argument("-c", "--check", action="store_true", help="verify every point once against the expected values")
    p.add_argument("--json", metavar="PATH", help="write every result to this JSON file")
    p.add_argument("--csv", metavar="PATH", help="write one row per (library, op, size) to this CSV file (rank 0)")
    p.add_argument(
        "--plot",
        metavar="PATH",
        help="picture of busbw, small-message latency and speed-up over each peer against message size; "
        ".png, .svg or .pdf by the extension (needs matplotlib)",
    )
    p.add_argument("--plot-dpi", type=int, default=PLOT_DPI, help=f"a PNG's dots per inch (default {PLOT_DPI})")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr while the sweeps run")
    p.add_argument(
        "--peer-timeout", type=float, default=900.0, help="seconds a peer's setup or MPI sweep may take (default 900)"
    )
    p.add_argument(
        "--busy-threads",
        type=int,
        default=0,
        help="compute threads per rank doing matrix products while every "
        "implementation runs (ringcc/bench/busy.py; default 0)",
    )
    p.add_argument("--mpirun-args", default="", help="extra mpirun options for the mpi peer, e.g. '--mca btl self,sm'")
    p.add_argument("--mpi-agent", default="", help="across hosts: how mpirun reaches them, as ringrun's --agent")
    p.add_argument(
        "--mpi-own-hostnames", action="store_true", help="across namespace hosts: a UTS namespace per MPI host"
    )
    p.add_argument("--mpi-interface", default="", help="across hosts: Open MPI's *_if_include (ringcc.bench.mpi_hosts)")
    a = p.parse_args(argv)
    a.ops = [o.strip() for o in a.ops.split(",") if o.strip()]
    bad = [o for o in a.ops if o not in OPS]
    if bad or not a.ops:
        p.error(f"unknown op(s) {', '.join(bad) or '(none)'}; choose from {', '.join(OPS)}")
    if a.iters is not None and a.iters < 1:
        p.error("--iters must be >= 1")
    if a.warmup is not None and a.warmup < 0:
        p.error("--warmup must be >= 0")
    if a.repeats < 1:
        p.error("--repeats must be >= 1")
    if a.busy_threads < 0:
        p.error("--busy-threads must be >= 0")
    try:
        a.sizes = size_sweep(a.minbytes, a.maxbytes, a.stepfactor)
        a.np_dtype = resolve_dtype(a.dtype)
    except ValueError as e:
        p.error(str(e))
    a.compare = [c.strip() for c in a.compare.split(",") if c.strip()]
    if a.plot and not plot_available():
        p.error(MATPLOTLIB_MISSING)
    if a.plot and picture_error(a.plot):
        p.error(picture_error(a.plot))
    return a


class Bench:
    def __init__(self, args, ringcc):
        self.args, self.rc = args, ringcc
        self.device = None
        if getattr(args, "device", "cpu") == "cuda":
            from .cuda_buffers import device_for

            local = getattr(ringcc, "local_rank", None)
            self.device = device_for(local() if local is not None else ringcc.rank())
        self.ours = RingccBackend(ringcc, self.device)
        self.rank0 = self.ours.rank == 0
        self.world = self.ours.size
        self.peers = []  # peers that run, in --compare order
        self.peer_info = {}  # name -> {"status", "reason", "version", "skipped_ops"}
        self.gloo = None
        self.nccl = None
        self.socket = None
        self.mpi_local = None  # the in-process MPI peer (the bench runs under mpirun)
        self.sync_dir = None
        self.mpi_hosts = None  # ringcc.bench.mpi_hosts.MpiHosts when the MPI job spans hosts
        # impl -> op -> nbytes -> {"count", "times", "samples", "iters", "wrong"}
        self.raw = {}
        self.progress = Progress(enabled=self.rank0 and not args.no_progress)
        from .busy import BusyThreads

        self.busy = BusyThreads(args.busy_threads)  # paused until run()

    def log(self, msg):
        if self.rank0:
            print(msg, file=sys.stderr, flush=True)

    # -- peers ---------------------------------------------------------------

    def open_peers(self):
        for name in dict.fromkeys(self.args.compare):
            if name not in PEERS:
                self.skip_peer(name, f"unknown peer (known: {', '.join(PEERS)})")
            elif name == "gloo":
                self.open_gloo()
            elif name == "nccl":
                self.open_nccl()
            elif self.device is not None:
                self.skip_peer(name, "it moves host memory only, and --device cuda is on")
            elif name == "socket":
                self.open_socket()
            else:
                self.open_mpi()

    def skip_peer(self, name, reason):
        self.peer_info[name] = {"status": "skipped", "reason": reason}
        if name in self.peers:
            self.peers.remove(name)
        self.log(f"# peer {name} skipped: {reason}")

    def open_gloo(self):
        from .peers_gloo import open_gloo

        backend, reason = open_gloo(self.world, self.args.peer_timeout, self.device)
        # Every rank must agree, or the gloo sweeps would hang.
        if self.ours.max_over_ranks(0.0 if backend else 1.0) > 0:
            if backend:
                backend.close()
            self.skip_peer("gloo", reason or "gloo could not start on another rank")
            return
        self.gloo = backend
        self.peers.append("gloo")
        self.peer_info["gloo"] = {"status": "ok", "version": backend.version, "skipped_ops": {}}

    def open_nccl(self):
        from .peers_gloo import open_torch_peer

        shares = 0.0
        if self.device is not None:
            import torch

            local = getattr(self.rc, "local_size", None)
            shares = 1.0 if local is not None and local() > torch.cuda.device_count() else 0.0
        shares = self.ours.max_over_ranks(shares) > 0
        backend, reason = open_torch_peer("nccl", self.world, self.args.peer_timeout, self.device, shares)
        if self.ours.max_over_ranks(0.0 if backend else 1.0) > 0:
            if backend:
                backend.close()
            self.skip_peer("nccl", reason or "torch's nccl backend could not start on another rank")
            return
        self.nccl = backend
        self.peers.append("nccl")
        self.peer_info["nccl"] = {"status": "ok", "version": backend.version, "skipped_ops": {}}

    def open_socket(self):
        from .peers_socket import open_socket_peer

        backend, reason = open_socket_peer(self.ours, self.rc, self.args.peer_timeout)
        if backend is None:
            self.skip_peer("socket", reason)
            return
        self.socket = backend
        self.peers.append("socket")
        self.peer_info["socket"] = {"status": "ok", "version": backend.version, "skipped_ops": {}}

    def open_mpi(self):
        from . import peers_mpi

        if peers_mpi.under_mpi_launcher():
            backend, reason = peers_mpi.open_in_process()
            if self.ours.max_over_ranks(0.0 if backend else 1.0) > 0:
                self.skip_peer("mpi", reason or "mpi4py could not start on another rank")
                return
            self.mpi_local = backend
            self.peers.append("mpi")
            self.peer_info["mpi"] = {
                "status": "ok",
                "version": backend.version,
                "skipped_ops": {},
                "mode": "in-process (mpi4py in the bench's own MPI job)",
            }
            return
        reason = ""
        local = getattr(self.rc, "local_size", None)
        places = self.gather_places() if local is not None and local() != self.world else None
        if self.rank0:
            reason = peers_mpi.probe() or ""
            if not reason and places is not None:
                reason = self.mpi_across_hosts(places)
            if not reason:
                self.sync_dir = tempfile.mkdtemp(prefix="ringcc-bench-")
        # Rank 0 decides; the others learn the sync directory ("" = no MPI).
        sync = self.ours.broadcast_text(self.sync_dir or "")
        if not sync:
            self.skip_peer("mpi", reason)
            return
        self.sync_dir = sync
        self.peers.append("mpi")
        self.peer_info["mpi"] = {"status": "ok", "skipped_ops": {}}

    def gather_places(self):
        """Every rank's "host address" (ringcc.bench.mpi_hosts.rank_place), in rank order."""
        from .mpi_hosts import rank_place

        width = 256
        mine = np.zeros(width, np.uint8)
        raw = rank_place().encode()[:width]
        mine[: len(raw)] = np.frombuffer(raw, np.uint8)
        every = self.rc.allgather(mine)
        return [bytes(every[r * width : (r + 1) * width]).rstrip(b"\0").decode() for r in range(self.world)]

    def mpi_across_hosts(self, places):
        """Sets self.mpi_hosts for a job across hosts; returns why it cannot run, or ""."""
        from .mpi_hosts import hosts_from_places, interface_from_env

        a = self.args
        if not a.mpi_agent:
            return "this job spans several hosts: --mpi-agent says how mpirun reaches them"
        self.mpi_hosts = hosts_from_places(
            places, a.mpi_agent, a.mpi_own_hostnames, a.mpi_interface or interface_from_env()
        )
        return ""

    def close(self):
        self.busy.stop()
        # torch's default group (the torch peer opened first) goes last.
        torch_peers = [p for p in (self.nccl, self.gloo) if p is not None]
        for peer in sorted(torch_peers, key=lambda p: p.group is None) + [self.socket]:
            if peer is not None:
                peer.close()
        if self.sync_dir and self.rank0:
            shutil.rmtree(self.sync_dir, ignore_errors=True)

    # -- sweeps --------------------------------------------------------------

    def record(self, impl, out):
        for op, why in out.get("skipped", {}).items():
            self.peer_info.setdefault(impl, {}).setdefault("skipped_ops", {})[op] = why
        for r in out["results"]:
            slot = (
                self.raw.setdefault(impl, {})
                .setdefault(r["op"], {})
                .setdefault(
                    r["nbytes"],
                    {"count": r["count"], "times": [], "samples": [], "iters": [], "cpus": [], "wrong": None},
                )
            )
            slot["times"].append(r["time"])
            if r.get("cpus_busy") is not None:
                slot["cpus"].append(r["cpus_busy"])
            slot["samples"].extend(r.get("samples", ()))
            slot["iters"].append(r["iters"])
            if "wrong" in r:
                slot["wrong"] = r["wrong"]

    def sweep_kwargs(self, repeat):
        a = self.args
        return dict(iters=a.iters, warmup=a.warmup, target_s=a.target_s, check=a.check and repeat == 0)

    def run_local(self, backend, repeat, check=True):
        kwargs = self.sweep_kwargs(repeat)
        kwargs["check"] = kwargs["check"] and check
        return sweep(
            backend,
            self.args.ops,
            self.args.sizes,
            self.args.np_dtype,
            on_point=self.point_progress(backend.name, repeat),
            **kwargs,
        )

    def point_progress(self, impl, repeat):
        """Shows each op's first point, and others as often as Progress allows."""
        last_op = []

        def on_point(op, case, index, total):
            first = last_op != [op]
            last_op[:] = [op]
            self.progress.update(
                point_text(impl, op, case.nbytes, index, total, repeat, self.args.repeats), force=first
            )

        return on_point

    def run_mpi(self, repeat):
        """Rank 0 runs the MPI job; the other ranks sleep until it has finished."""
        from .peers_mpi import PeerError, run_sweep

        self.ours.barrier()
        # The MPI job brings its own compute threads: ours rest meanwhile.
        self.busy.pause()
        done = os.path.join(self.sync_dir, f"repeat-{repeat}.done")
        out = None
        if self.rank0:
            if "mpi" in self.peers:
                try:
                    out = run_sweep(
                        self.world,
                        os.path.join(self.sync_dir, f"mpi-{repeat}.json"),
                        self.args.ops,
                        self.args.sizes,
                        self.args.dtype,
                        timeout_s=self.args.peer_timeout,
                        extra_mpirun_args=shlex.split(self.args.mpirun_args),
                        busy_threads=self.args.busy_threads,
                        progress=self.mpi_progress(repeat),
                        hosts=self.mpi_hosts,
                        **self.sweep_kwargs(repeat),
                    )
                    self.peer_info["mpi"]["version"] = out.get("version")
                except PeerError as e:
                    self.skip_peer("mpi", str(e))
            with open(done, "w"):
                pass
        else:
            deadline = time.monotonic() + self.args.peer_timeout + 60
            while not os.path.exists(done):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"rank 0's MPI sweep did not finish (waited for {done})")
                time.sleep(0.05)
        self.busy.resume()
        self.ours.barrier()
        return out

    def mpi_progress(self, repeat):
        """Progress of the MPI job: it reports "op nbytes index total" per point."""
        last_op = []

        def on_line(op, nbytes, index, total):
            first = last_op != [op]
            last_op[:] = [op]
            self.progress.update(point_text("mpi", op, nbytes, index, total, repeat, self.args.repeats), force=first)

        return on_line

    def run(self):
        a = self.args
        self.open_peers()
        order = ["ringcc"] + list(self.peers)
        self.busy.resume()
        for repeat in range(a.repeats):
            for impl in order:
                t0 = time.perf_counter()
                if impl == "ringcc":
                    out = self.run_local(self.ours, repeat)
                elif impl in ("gloo", "nccl"):
                    if impl not in self.peers:
                        continue
                    try:
                        out = self.run_local(self.gloo if impl == "gloo" else self.nccl, repeat)
                    except Exception as e:  # noqa: BLE001 - a failing peer is reported, not fatal
                        self.skip_peer(impl, f"failed during the sweep: {e}")
                        continue
                elif impl == "socket":
                    if "socket" not in self.peers:
                        continue
                    # No reduction happens, so there is nothing to check.
                    out = self.run_local(self.socket, repeat, check=False)
                elif self.mpi_local is not None:
                    out = self.run_local(self.mpi_local, repeat)
                else:
                    out = self.run_mpi(repeat)
                if out is not None:
                    self.record(impl, out)
                    self.progress.update(
                        f"repeat {repeat + 1}/{a.repeats}, {impl}: sweep done in {time.perf_counter() - t0:.1f} s",
                        force=True,
                    )
        self.progress.done()
        self.busy.stop()
        return self.report()

    # -- output --------------------------------------------------------------

    def entries(self):
        """op -> impl -> nbytes -> aggregated entry."""
        agg = {}
        for impl, ops in self.raw.items():
            for op, points in ops.items():
                for nbytes, s in points.items():
                    e = aggregate(op, nbytes, s["count"], s["times"], self.world, s["samples"])
                    e.update(impl=impl, dtype=self.args.dtype, iters=s["iters"], wrong=s["wrong"])
                    # Rank 0's reading: the machine's CPUs busy over the point's loops.
                    e["cpus_busy"] = statistics.median(s["cpus"]) if s.get("cpus") else None
                    agg.setdefault(op, {}).setdefault(impl, {})[nbytes] = e
        for impls in agg.values():
            for impl, points in impls.items():
                for nbytes, e in points.items():
                    ours = impls.get("ringcc", {}).get(nbytes)
                    if impl == "ringcc" or ours is None or e["busbw"] <= 0:
                        continue
                    e["ratio"] = ours["busbw"] / e["busbw"]
                    pr = paired_ratios(ours, e)
                    e["ratio_min"], e["ratio_max"] = min(pr), max(pr)
        return agg

    def report(self):
        a = self.args
        wrong = {
            (op, n): s["wrong"] for op, pts in self.raw.get("ringcc", {}).items() for n, s in pts.items() if s["wrong"]
        }
        if not self.rank0:
            return 1 if wrong else 0
        # Peers whose points are complete get columns; a peer that failed late keeps its data.
        shown = [p for p in dict.fromkeys(self.args.compare) if p in self.raw]
        agg = self.entries()
        iters = a.iters if a.iters is not None else f"adaptive (~{a.target_s:g} s a point)"
        warmup = a.warmup if a.warmup is not None else "adaptive"
        print(
            f"# ringcc {getattr(self.rc, '__version__', '?')} benchmark: {self.world} ranks "
            f"over {getattr(self.rc, 'transport_name', lambda: '?')()}{self.device_text()}, "
            f"{a.dtype}, {format_size(a.sizes[0])} .. {format_size(a.sizes[-1])} "
            f"({len(a.sizes)} sizes), iters {iters}, warmup {warmup}, {a.repeats} repeat(s)"
        )
        if a.busy_threads:
            print(
                f"# load: {a.busy_threads} busy thread(s) per rank doing {MATRIX}x{MATRIX} float32 "
                f"matrix products beside every implementation ({self.busy.products} products on "
                f"rank 0 during ringcc's and in-process peers' sweeps)"
            )
        print("# peers: " + (", ".join(f"{p} ({self.peer_info[p].get('version', '?')})" for p in shown) or "none"))
        print()
        for op in a.ops:
            print(op_table(op, agg.get(op, {}), shown, a.dtype, self.world, a.repeats, a.check))
            print()
        for name, info in self.peer_info.items():
            if info["status"] != "ok":
                print(f"# peer {name} skipped: {info['reason']}")
            for op, why in info.get("skipped_ops", {}).items():
                print(f"# peer {name} skipped {op}: {why}")
        peer_wrong = [
            (impl, op, n)
            for impl, ops in self.raw.items()
            if impl != "ringcc"
            for op, pts in ops.items()
            for n, s in pts.items()
            if s["wrong"]
        ]
        for impl, op, n in peer_wrong:
            print(f"# warning: peer {impl} gave wrong results for {op} of {n} B")
        figures = summary(agg, shown, a.np_dtype, self.world)
        print(summary_text(figures, shown, a.dtype, self.world, a.repeats))
        if a.check:
            print(
                "# check: "
                + (
                    "FAILED for " + ", ".join(f"{op} {n} B" for op, n in sorted(wrong))
                    if wrong
                    else "all ringcc results correct"
                )
            )
        sys.stdout.flush()
        if a.json:
            run_files.write_json_file(self, agg, figures)
        if a.csv:
            run_files.write_csv_file(self, agg)
        if a.plot:
            run_files.write_plot_file(self, agg, shown)
        return 1 if wrong else 0

    def device_text(self):
        """ ", CUDA tensors on NVIDIA H200 (ringcc's ipc backend), blocking calls" or ""."""
        if self.device is None:
            return ""
        import torch

        backend = getattr(self.rc, "gpu_backend", lambda: "")() or "?"
        return (
            f", CUDA tensors on {torch.cuda.get_device_name(self.device)} (ringcc's {backend} backend), blocking calls"
        )

    def versions(self):
        versions = {"ringcc": getattr(self.rc, "__version__", "unknown")}
        versions.update({p: i.get("version") for p, i in self.peer_info.items() if i.get("version")})
        return versions


def cuda_missing() -> str:
    """Why --device cuda cannot run here ("" when it can)."""
    try:
        import torch
    except ImportError:
        return "it needs torch, which is not installed"
    return "" if torch.cuda.is_available() else "torch sees no CUDA device"


def main(argv=None):
    args = parse_args(argv)
    if args.device == "cuda":
        no_gpu = cuda_missing()
        if no_gpu:
            sys.exit(f"ringcc.bench.allreduce: --device cuda: {no_gpu}; run without --device on this machine")
    try:
        import ringcc
    except ImportError as e:
        sys.exit(f"ringcc.bench.allreduce: cannot import ringcc ({e})")
    from .launch_hint import warn_if_alone

    warn_if_alone("allreduce", argv)
    ringcc.init()
    from .peers_mpi import under_mpi_launcher

    if not args.compare and under_mpi_launcher():
        args.compare = ["mpi"]  # under mpirun: beside MPI's own collectives by default
    bench = Bench(args, ringcc)
    try:
        code = bench.run()
    finally:
        bench.close()
        ringcc.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
