"""Benchmark of the background engine: many small named allreduces.

    ringrun -np 2 python -m ringcc.bench engine [--tensors 1000] [--elements 1024] [--iters 20]
        [--warmup 3] [--repeats 5] [--compare mpi] [--torch] [--json PATH]

For N float32 tensors of E elements each (default 1,000 x 1,024, 4 MB in all):
  (a) engine       allreduce_async_(x, name=f"t{i}") of every tensor, then
                   synchronize() of every handle (also split into the time
                   of the enqueue loop and of the synchronize loop). The
                   tensors are slices of one buffer, one after another, as
                   in a flat gradient bucket: the engine runs them as one
                   buffer
  (s) separate     (a) over N arrays allocated one by one, which the fused
                   allreduce gathers and scatters as N pieces
  (b) single       one ringcc.allreduce_ of one buffer of the same total size
  (c) one-by-one   the N tensors reduced one after another with the blocking
                   ringcc.allreduce_
  (d) grouped      ringcc.grouped_allreduce_ of the list
  (t) torch        with --torch: (a) through Horovod's API, ringcc.torch's
                   hvd.allreduce_async_(t, name=f"t{i}", op=hvd.Sum) and
                   hvd.synchronize() on torch tensors sharing the buffers
                   (what DistributedOptimizer's gradient hooks do)
  (e) negotiation  the engine's time per cycle on the response-cache path,
                   from engine_stats() over (a)'s timed rounds (the same N
                   names every round): cached_decide_us (this rank's own
                   work: building, parsing, deciding), cached_exchange_us
                   (the message exchange, which also absorbs waits for slower
                   ranks) and their sum, the cached_negotiation_us mean; of the
                   exchange, cached_peer_wait_us, the time spent waiting for
                   the other ranks' engines to reach the cycle (measured over
                   shared memory), and cached_overhead_us, the negotiation
                   without that wait: what agreeing costs when every rank is
                   there (the goal's figure); maximum over ranks.
With --compare mpi, Open MPI through mpi4py in the same run: the N tensors
reduced one by one with comm.Allreduce(MPI.IN_PLACE, x), and one Allreduce of
the whole buffer. Rank 0 starts that job with mpirun after each repeat of
ringcc's figures (ringcc.bench.peers_mpi's command and environment), while the other
ranks sleep on a file, so that no waiting rank takes a CPU the MPI ranks need.

Timing: --warmup rounds, a barrier, then --iters rounds timed on every rank;
a figure's time is (t_end - t_start) / iters, the maximum over ranks. Each
repeat times the figures in turn, starting one figure later than the last
repeat did. Tables show the median over --repeats repeats [min..max]; the
JSON has every repeat.
Goals: (a) / MPI one-by-one <= 1.5, (a) / (b) <= 2, negotiation overhead
(cached_overhead_us) < 50 us.
"""

import os

# Set before NumPy starts its BLAS threads, which would spin on the CPUs the ranks need.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shlex  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

PEERS = ("mpi",)

# The figures, in table order: key, label.
RINGCC_FIGURES = (
    ("engine", "(a) engine: allreduce_async_ by name + synchronize"),
    ("engine_separate", "(s) the same over separately allocated arrays"),
    ("single", "(b) one allreduce_ of the whole buffer"),
    ("one_by_one", "(c) blocking allreduce_, one tensor at a time"),
    ("grouped", "(d) grouped_allreduce_ of the list"),
    ("torch_engine", "(t) torch: hvd.allreduce_async_ by name + synchronize"),
)
MPI_FIGURES = (
    ("mpi_one_by_one", "MPI Allreduce, one tensor at a time"),
    ("mpi_single", "MPI Allreduce of the whole buffer"),
)
NEGOTIATION_KEYS = ("decide_us", "exchange_us", "negotiation_us", "peer_wait_us", "overhead_us")
SPLIT_KEYS = ("enqueue_ms", "synchronize_ms")

# (name, numerator, denominator, goal): ratios of median times.
RATIOS = (
    ("(a) / MPI one-by-one", "engine", "mpi_one_by_one", 1.5),
    ("(a) / (b)", "engine", "single", 2.0),
    ("(s) / (b)", "engine_separate", "single", None),
    ("(a) / (c)", "engine", "one_by_one", None),
    ("(a) / (d)", "engine", "grouped", None),
    ("(t) / (a)", "torch_engine", "engine", None),
)
NEGOTIATION_GOAL_US = 50.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m ringcc.bench engine",
        description="ringcc background-engine benchmark (launch with ringrun -np N).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Peers: " + ", ".join(PEERS) + ".",
    )
    p.add_argument("--tensors", type=int, default=1000, help="number of tensors (default 1000)")
    p.add_argument("--elements", type=int, default=1024, help="float32 elements per tensor (default 1024)")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed rounds per figure and repeat (default 20)")
    p.add_argument("-w", "--warmup", type=int, default=3, help="warm-up rounds per figure and repeat (default 3)")
    p.add_argument("--repeats", type=int, default=5, help="repeats of every figure (default 5)")
    p.add_argument("--compare", default="", help="comma list of peers to time too (mpi)")
    p.add_argument(
        "--torch", action="store_true", help="also time (a) through ringcc.torch's Horovod API on torch tensors"
    )
    p.add_argument("--json", metavar="PATH", help="write every result to this JSON file")
    p.add_argument("--peer-timeout", type=float, default=600.0, help="seconds one MPI job may take (default 600)")
    p.add_argument("--mpirun-args", default="", help="extra mpirun options for the mpi peer")
    p.add_argument("--mpi-peer", metavar="JSON", help=argparse.SUPPRESS)  # the MPI side, under mpirun
    a = p.parse_args(argv)
    for name in ("tensors", "elements", "iters", "repeats"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    if a.warmup < 0:
        p.error("--warmup must be >= 0")
    a.compare = [c.strip() for c in a.compare.split(",") if c.strip()]
    return a


# ---------------------------------------------------------------------------
# Measuring


def timed(backend, run, iters, warmup, between=None):
    """Seconds per round of run(n) (max over ranks). between(), if given, is called right
    before and right after the timed rounds, outside the timing; returns its two values."""
    if warmup:
        run(warmup)
    backend.barrier()
    before = between() if between else None
    t0 = time.perf_counter()
    run(iters)
    seconds = (time.perf_counter() - t0) / iters
    after = between() if between else None
    return backend.max_over_ranks(seconds), before, after


def cache_path_means(before, after):
    """Means over the cache-hit cycles between two engine_stats() snapshots
    (the stats hold running means since the start), or None without any."""
    k0, k1 = before["cached_cycles"], after["cached_cycles"]
    k = k1 - k0
    if k <= 0:
        return None

    def mean(key):
        return max(0.0, (after[key] * k1 - before[key] * k0) / k)

    return {
        "decide_us": mean("cached_decide_us"),
        "exchange_us": mean("cached_exchange_us"),
        "negotiation_us": mean("cached_negotiation_us"),
        "peer_wait_us": mean("cached_peer_wait_us"),
        "overhead_us": mean("cached_overhead_us"),
        "cached_cycles": k,
        "cycles": after["cycles"] - before["cycles"],
        "fused_collectives": after["fused_collectives"] - before["fused_collectives"],
        "tensors": after["tensors"] - before["tensors"],
    }


def pattern(i, rank):
    """The value of tensor i on `rank` in the one correctness check."""
    return float(rank + 1 + i % 7)


def expected(i, size):
    return float(size * (size + 1) // 2 + size * (i % 7))


def fill_check(xs, rank):
    for i, x in enumerate(xs):
        x.fill(pattern(i, rank))


def count_wrong(xs, size):
    return sum(int(np.count_nonzero(x != expected(i, size))) for i, x in enumerate(xs))


class RingccSide:
    """The four ringcc figures and the engine's cache-path figures."""

    def __init__(self, rc, backend, args):
        self.rc, self.backend, self.args = rc, backend, args
        n, e = args.tensors, args.elements
        # One buffer holds all tensors, so the single allreduce (b) moves the same bytes.
        self.flat = np.zeros(n * e, np.float32)
        self.xs = [self.flat[i * e : (i + 1) * e] for i in range(n)]
        # Interleaved with small allocations, so that no two lie side by side.
        spacers, self.separate = [], []
        for _ in range(n):
            self.separate.append(np.zeros(e, np.float32))
            spacers.append(np.zeros(64, np.uint8))
        del spacers
        self.names = [f"t{i}" for i in range(n)]
        # Seconds spent in (a)'s enqueue loops and synchronize loops, summed over rounds.
        self.split = [0.0, 0.0]
        self.hvd = self.txs = None
        if args.torch:
            import torch

            import ringcc.torch as hvd

            hvd.init()  # finds ringcc started
            self.hvd, self.txs = hvd, [torch.from_numpy(x) for x in self.xs]

    def runs(self):
        rc, xs, names, flat = self.rc, self.xs, self.names, self.flat
        allreduce_, async_, sync, grouped = rc.allreduce_, rc.allreduce_async_, rc.synchronize, rc.grouped_allreduce_

        clock, split = time.perf_counter, self.split

        def engine_over(arrays, split):
            """(a)'s rounds over `arrays`; the enqueue and synchronize loops' seconds are
            added to split[0] and split[1]."""

            def run(k):
                for _ in range(k):
                    t0 = clock()
                    handles = [async_(x, name=name) for x, name in zip(arrays, names)]
                    t1 = clock()
                    for h in handles:
                        sync(h)
                    split[0] += t1 - t0
                    split[1] += clock() - t1

            return run

        engine = engine_over(xs, split)
        engine_separate = engine_over(self.separate, [0.0, 0.0])  # its split is not reported

        def single(k):
            for _ in range(k):
                allreduce_(flat)

        def one_by_one(k):
            for _ in range(k):
                for x in xs:
                    allreduce_(x)

        def grouped_(k):
            for _ in range(k):
                grouped(xs)

        figures = {
            "engine": engine,
            "engine_separate": engine_separate,
            "single": single,
            "one_by_one": one_by_one,
            "grouped": grouped_,
        }
        if self.hvd is not None:
            hvd, txs = self.hvd, self.txs
            hvd_async, hvd_sync, hvd_sum = hvd.allreduce_async_, hvd.synchronize, hvd.Sum

            def torch_engine(k):
                for _ in range(k):
                    handles = [hvd_async(t, name=name, op=hvd_sum) for t, name in zip(txs, names)]
                    for h in handles:
                        hvd_sync(h)

            figures["torch_engine"] = torch_engine
        return figures

    def check(self):
        """Wrong elements of each figure's collective on known data (max over ranks)."""
        rank, size = self.backend.rank, self.backend.size
        wrong = {}
        for key, run in self.runs().items():
            arrays = self.separate if key == "engine_separate" else self.xs
            fill_check(arrays, rank)
            run(1)
            wrong[key] = int(self.backend.max_over_ranks(float(count_wrong(arrays, size))))
        # zeros: a fixed point of Sum for the timed rounds
        self.flat.fill(0)
        for x in self.separate:
            x.fill(0)
        return wrong

    def snapshot(self):
        return self.rc.engine_stats(), list(self.split)

    def measure(self, repeat=0):
        """{figure: seconds}; the cache-path means of (a)'s timed rounds; (a)'s rounds split into
        the enqueue loop and the synchronize loop (ms per round). All max over ranks."""
        times = {}
        negotiation = split = None
        # Each repeat starts with another figure: the first one after the MPI job (or after
        # start-up) runs on a machine that idled, and no figure should always be that one.
        figures = list(self.runs().items())
        shift = repeat % len(figures)
        for key, run in figures[shift:] + figures[:shift]:
            between = self.snapshot if key == "engine" else None
            seconds, before, after = timed(self.backend, run, self.args.iters, self.args.warmup, between)
            times[key] = seconds
            if key == "engine":
                (before, split_before), (after, split_after) = before, after
                split = {}
                for i, name in enumerate(SPLIT_KEYS):
                    ms = (split_after[i] - split_before[i]) / self.args.iters * 1e3
                    split[name] = self.backend.max_over_ranks(ms)
                means = cache_path_means(before, after)
                # Every rank takes part in the max, with -1 where it saw no cache hit.
                negotiation = {}
                for name in NEGOTIATION_KEYS + ("cached_cycles", "cycles", "fused_collectives", "tensors"):
                    value = self.backend.max_over_ranks(float(means[name]) if means else -1.0)
                    negotiation[name] = value if value >= 0 else None
                if negotiation["negotiation_us"] is None:
                    negotiation = None
        return times, negotiation, split


# ---------------------------------------------------------------------------
# The MPI side (run under mpirun by rank 0)


def mpi_peer_main(args):
    from mpi4py import MPI

    from .peers_mpi import MpiBackend

    backend = MpiBackend(MPI)
    comm = backend.comm
    n, e = args.tensors, args.elements
    flat = np.zeros(n * e, np.float32)
    xs = [flat[i * e : (i + 1) * e] for i in range(n)]
    allreduce, in_place = comm.Allreduce, MPI.IN_PLACE

    def one_by_one(k):
        for _ in range(k):
            for x in xs:
                allreduce(in_place, x)

    def single(k):
        for _ in range(k):
            allreduce(in_place, flat)

    out = {"version": backend.version, "times": {}, "wrong": {}}
    for key, run in (("mpi_one_by_one", one_by_one), ("mpi_single", single)):
        fill_check(xs, backend.rank)
        run(1)
        out["wrong"][key] = int(backend.max_over_ranks(float(count_wrong(xs, backend.size))))
        flat.fill(0)
        out["times"][key] = timed(backend, run, args.iters, args.warmup)[0]
    if backend.rank == 0:
        tmp = args.mpi_peer + ".part"
        with open(tmp, "w") as f:
            json.dump(out, f)
        os.replace(tmp, args.mpi_peer)
    return 0


def mpi_job_command(np_, args, json_path):
    """mpirun ... python -m ringcc.bench engine --mpi-peer JSON ..., as ringcc.bench.peers_mpi builds its own."""
    from .peers_mpi import mpirun_command

    peer_args = [
        "--mpi-peer",
        json_path,
        "--tensors",
        str(args.tensors),
        "--elements",
        str(args.elements),
        "--iters",
        str(args.iters),
        "--warmup",
        str(args.warmup),
    ]
    cmd = mpirun_command(np_, peer_args, shlex.split(args.mpirun_args))
    module = cmd.index("ringcc.bench.peers_mpi")
    cmd[module] = "ringcc.bench.engine"
    return cmd


def run_mpi_job(np_, args, json_path):
    """Runs one MPI job; returns its JSON. Raises PeerError with the reason when it fails."""
    from .peers_mpi import PeerError, _kill_group, mpi_env

    if os.path.exists(json_path):
        os.unlink(json_path)
    env = mpi_env()
    env["OPENBLAS_NUM_THREADS"] = "1"
    proc = subprocess.Popen(
        mpi_job_command(np_, args, json_path),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=args.peer_timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise PeerError(f"mpirun did not finish within {args.peer_timeout:g} s") from None
    if proc.returncode != 0 or not os.path.exists(json_path):
        tail = " | ".join(line.strip() for line in output.strip().splitlines()[-6:])
        raise PeerError(f"mpirun exited with {proc.returncode}: {tail}")
    with open(json_path) as f:
        return json.load(f)


# ---------------------------------------------------------------------------
# The bench


def stats_of(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


class EngineBench:
    def __init__(self, args, ringcc):
        from .allreduce import RingccBackend

        self.args, self.rc = args, ringcc
        self.backend = RingccBackend(ringcc)
        self.rank0 = self.backend.rank == 0
        self.side = RingccSide(ringcc, self.backend, args)
        self.peer_info = {}
        self.sync_dir = None
        self.times = {}  # figure -> [seconds per repeat]
        self.negotiation = []  # per repeat: dict or None
        self.split = []  # per repeat: (a)'s enqueue and synchronize ms per round
        self.wrong = {}

    def log(self, msg):
        if self.rank0:
            print(msg, file=sys.stderr, flush=True)

    def open_peers(self):
        from . import peers_mpi

        for name in dict.fromkeys(self.args.compare):
            if name not in PEERS:
                self.peer_info[name] = {"status": "skipped", "reason": f"unknown peer (known: {', '.join(PEERS)})"}
                continue
            reason = ""
            if self.rank0:
                reason = peers_mpi.probe() or ""
                if not reason and self.rc.local_size() != self.backend.size:
                    reason = "the MPI peer runs on one host, and this job spans several"
                if not reason:
                    self.sync_dir = tempfile.mkdtemp(prefix="ringcc-bench-engine-")
            # Rank 0 decides; the others learn the sync directory ("" = no MPI).
            sync = self.backend.broadcast_text(self.sync_dir or "")
            if not sync:
                self.peer_info["mpi"] = {"status": "skipped", "reason": reason or "rank 0 could not start MPI"}
                continue
            self.sync_dir = sync
            self.peer_info["mpi"] = {"status": "ok"}
        for name, info in self.peer_info.items():
            if info["status"] != "ok":
                self.log(f"# peer {name} skipped: {info['reason']}")

    def close(self):
        if self.sync_dir and self.rank0:
            shutil.rmtree(self.sync_dir, ignore_errors=True)

    def run_mpi(self, repeat):
        """Rank 0 runs the MPI job; the other ranks sleep until it has finished."""
        from .peers_mpi import PeerError

        self.backend.barrier()
        done = os.path.join(self.sync_dir, f"repeat-{repeat}.done")
        if self.rank0:
            if self.peer_info["mpi"]["status"] == "ok":
                try:
                    out = run_mpi_job(self.backend.size, self.args, os.path.join(self.sync_dir, f"mpi-{repeat}.json"))
                    self.peer_info["mpi"]["version"] = out.get("version")
                    for key, seconds in out["times"].items():
                        self.times.setdefault(key, []).append(seconds)
                    for key, wrong in out["wrong"].items():
                        self.wrong[key] = max(self.wrong.get(key, 0), wrong)
                except PeerError as e:
                    self.peer_info["mpi"] = {"status": "skipped", "reason": str(e)}
                    self.log(f"# peer mpi skipped: {e}")
            with open(done, "w"):
                pass
        else:
            deadline = time.monotonic() + self.args.peer_timeout + 60
            while not os.path.exists(done):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"rank 0's MPI job did not finish (waited for {done})")
                time.sleep(0.05)
        self.backend.barrier()

    def run(self):
        self.open_peers()
        self.wrong.update(self.side.check())
        for repeat in range(self.args.repeats):
            t0 = time.perf_counter()
            times, negotiation, split = self.side.measure(repeat)
            for key, seconds in times.items():
                self.times.setdefault(key, []).append(seconds)
            self.negotiation.append(negotiation)
            self.split.append(split)
            self.log(f"# repeat {repeat + 1}/{self.args.repeats}: ringcc {time.perf_counter() - t0:.1f} s")
            if self.sync_dir:
                t0 = time.perf_counter()
                self.run_mpi(repeat)
                if self.peer_info.get("mpi", {}).get("status") == "ok":
                    self.log(f"# repeat {repeat + 1}/{self.args.repeats}: mpi {time.perf_counter() - t0:.1f} s")
        return self.report()

    # -- output ----------------------------------------------------------------

    def summary(self):
        figures = {}
        for key, label in RINGCC_FIGURES + MPI_FIGURES:
            if key in self.times:
                s = stats_of(self.times[key])
                figures[key] = {
                    "label": label,
                    "times_s": self.times[key],
                    "median_s": s["median"],
                    "min_s": s["min"],
                    "max_s": s["max"],
                }
        ratios = {}
        for name, num, den, goal in RATIOS:
            if num not in figures or den not in figures:
                ratios[name] = {"value": None, "goal": goal, "met": None, "missing": den if den not in figures else num}
                continue
            value = figures[num]["median_s"] / figures[den]["median_s"]
            paired = [a / b for a, b in zip(figures[num]["times_s"], figures[den]["times_s"]) if b > 0]
            ratios[name] = {
                "value": value,
                "goal": goal,
                "met": None if goal is None else value <= goal,
                "min": min(paired),
                "max": max(paired),
            }
        negotiation = {"per_repeat": self.negotiation}
        for key in NEGOTIATION_KEYS + ("cached_cycles", "cycles", "fused_collectives", "tensors"):
            negotiation[key] = stats_of([r[key] if r else None for r in self.negotiation])
        value = negotiation["overhead_us"]["median"] if negotiation["overhead_us"] else None
        negotiation["goal_us"] = NEGOTIATION_GOAL_US
        negotiation["met"] = None if value is None else value < NEGOTIATION_GOAL_US
        if "engine" in figures:
            figures["engine"]["split_per_repeat"] = self.split
            for key in SPLIT_KEYS:
                figures["engine"][key] = stats_of([r[key] for r in self.split])
        return figures, ratios, negotiation

    def report(self):
        wrong = {k: v for k, v in self.wrong.items() if v}
        if not self.rank0:
            return 1 if any(k in wrong for k, _ in RINGCC_FIGURES) else 0
        a = self.args
        figures, ratios, negotiation = self.summary()
        mb = a.tensors * a.elements * 4 / 1e6
        mpi = self.peer_info.get("mpi", {})
        print(
            f"# ringcc {getattr(self.rc, '__version__', '?')} engine benchmark: {self.backend.size} ranks, "
            f"{a.tensors} float32 tensors x {a.elements} elements ({mb:.2f} MB), "
            f"{a.iters} timed rounds after {a.warmup} warm-up per figure, {a.repeats} repeat(s)"
        )
        print("# peers: " + (f"mpi ({mpi.get('version', '?')})" if mpi.get("status") == "ok" else "none"))
        print("# time per round: max over ranks; median [min..max] over repeats")
        print()
        print(f"# {'figure':<52} {'time (ms)':>28}  {'per tensor (us)':>15}")
        for key, label in RINGCC_FIGURES + MPI_FIGURES:
            f = figures.get(key)
            if f is None:
                continue
            value = f"{f['median_s'] * 1e3:.3f} [{f['min_s'] * 1e3:.3f}..{f['max_s'] * 1e3:.3f}]"
            per = f"{f['median_s'] * 1e6 / a.tensors:.2f}" if key not in ("single", "mpi_single") else ""
            print(f"  {label:<52} {value:>28}  {per:>15}")
            if key == "engine":
                for part in SPLIT_KEYS:
                    s = f[part]
                    label = f"    of which the {part[:-3]} loop"
                    value = f"{s['median']:.3f} [{s['min']:.3f}..{s['max']:.3f}]"
                    print(f"  {label:<52} {value:>28}  {s['median'] * 1e3 / a.tensors:>15.2f}")
        print()
        print(f"# {'ratio of median times':<30} {'value':>7} {'[min..max] paired':>20} {'goal':>7}  met")
        for name, r in ratios.items():
            goal = f"<= {r['goal']:g}" if r["goal"] is not None else ""
            if r["value"] is None:
                print(f"  {name:<30} {'n/a':>7} {'':>20} {goal:>7}  ({r['missing']} not measured)")
                continue
            met = "" if r["met"] is None else ("yes" if r["met"] else "NO")
            paired = f"[{r['min']:.2f}..{r['max']:.2f}]"
            print(f"  {name:<30} {r['value']:>7.2f} {paired:>20} {goal:>7}  {met}")
        print()
        print(
            "# (e) engine negotiation per cache-hit cycle, (a)'s timed rounds "
            "(same names every round); max over ranks; median [min..max] over repeats"
        )
        if negotiation["negotiation_us"] is None:
            print("  n/a: no cache-hit cycle (more names than RINGCC_CACHE_CAPACITY?)")
        else:
            for key, label in (
                ("decide_us", "cached_decide_us (own work)"),
                ("exchange_us", "cached_exchange_us (message exchange)"),
                ("negotiation_us", "cached_negotiation_us (mean per cycle)"),
                ("peer_wait_us", "  of which waiting for the other ranks"),
                ("overhead_us", "cached_overhead_us (without that wait)"),
            ):
                s = negotiation[key]
                print(f"  {label:<40} {s['median']:>9.1f} us [{s['min']:.1f}..{s['max']:.1f}]")
            met = "yes" if negotiation["met"] else "NO"
            print(f"  goal: cached_overhead_us < {NEGOTIATION_GOAL_US:g} us: {met}")
            rounds = a.iters
            per_round = {k: negotiation[k]["median"] / rounds for k in ("cycles", "cached_cycles", "fused_collectives")}
            print(
                f"  per round: {per_round['cycles']:.1f} cycles, {per_round['cached_cycles']:.1f} cache-hit cycles, "
                f"{per_round['fused_collectives']:.1f} fused collectives"
            )
        for name, info in self.peer_info.items():
            if info["status"] != "ok":
                print(f"# peer {name} skipped: {info['reason']}")
        print(
            "# check: "
            + (
                "wrong results in " + ", ".join(f"{k} ({v} elements)" for k, v in sorted(wrong.items()))
                if wrong
                else "all results correct"
            )
        )
        sys.stdout.flush()
        if a.json:
            self.write_json(figures, ratios, negotiation)
        return 1 if any(k in wrong for k, _ in RINGCC_FIGURES) else 0

    def write_json(self, figures, ratios, negotiation):
        a = self.args
        doc = {
            "meta": {
                "ranks": self.backend.size,
                "tensors": a.tensors,
                "elements": a.elements,
                "dtype": "float32",
                "bytes_total": a.tensors * a.elements * 4,
                "iters": a.iters,
                "warmup": a.warmup,
                "repeats": a.repeats,
                "compare": a.compare,
                "timing": "seconds per round: (t_end - t_start) / iters after a barrier, max over ranks; "
                "medians over repeats",
                "negotiation": "means over the cache-hit cycles of (a)'s timed rounds from engine_stats(), "
                "max over ranks; the goal applies to overhead_us (negotiation_us less the "
                "time spent waiting for the other ranks' engines)",
                "versions": {
                    "ringcc": getattr(self.rc, "__version__", "unknown"),
                    **(
                        {"mpi": self.peer_info["mpi"].get("version")}
                        if self.peer_info.get("mpi", {}).get("version")
                        else {}
                    ),
                },
                "engine_env": {
                    k: v
                    for k, v in os.environ.items()
                    if k.startswith(("RINGCC_CYCLE", "RINGCC_FUSION", "RINGCC_CACHE", "HOROVOD_"))
                },
                "host": platform.node(),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "command": sys.argv,
            },
            "peers": self.peer_info,
            "figures": figures,
            "ratios": ratios,
            "negotiation": negotiation,
            "wrong": self.wrong,
        }
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"# results written to {a.json}")


def main(argv=None):
    args = parse_args(argv)
    if args.mpi_peer:
        return mpi_peer_main(args)
    try:
        import ringcc
    except ImportError as e:
        sys.exit(f"ringcc.bench.engine: cannot import ringcc ({e})")
    from .launch_hint import warn_if_alone

    warn_if_alone("engine", argv)
    ringcc.init()
    bench = EngineBench(args, ringcc)
    try:
        code = bench.run()
    finally:
        bench.close()
        ringcc.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
