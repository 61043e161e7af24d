"""ringcc.jax.allreduce inside jax.jit against ringcc.allreduce on NumPy.

    ringrun --no-prefix -np 2 python -m ringcc.bench jax_allreduce [--size 64M] [--iters 20] [--repeats 5]
        [--variants numpy-inplace,jit-donated,...] [--compare jax-gloo,mpi4jax] [--json PATH]
        [--csv PATH] [--no-progress]

Times, per iteration, an allreduce (sum, float32) of --size bytes per rank:

  numpy-inplace   ringcc.allreduce_(x)                       (NumPy, in place)
  numpy           ringcc.allreduce(x)                        (NumPy, a new array per call)
  jit-donated     x = jax.jit(rj.allreduce, donate_argnums=0)(x)   (in place: XLA aliases
                  the donated input to the output, the handler reduces in place); the
                  loop blocks once at its end, as a training loop would, so JAX's
                  dispatch of the next call overlaps the current allreduce
  jit-donated-sync  the same, blocking on every result (block_until_ready)
  jit-loop        all iterations inside one jitted, donated lax.fori_loop of allreduces:
                  the collective inside jit without JAX's per-call dispatch
  jit             y = jax.jit(rj.allreduce)(x)               (x not donated: XLA copies it
                  into the output buffer first, then reduces in place)
  jit-noalias     y = jax.jit(lambda v: rj.allreduce(v, alias=False))(x)   (out of place)
  eager           y = rj.allreduce(x)                        (no jit: one small computation)

Every other jax iteration ends with block_until_ready. Buffers hold zeros (a fixed
point of sum). Time per iteration is (t_end - t_start) / iters after warm-up,
the maximum over ranks; --repeats interleaves the variants R times and the
table shows medians (the JSON has every repeat) and each variant's speed-up
over numpy-inplace (its time / the variant's: higher is better).

--compare names peers, timed after ringcc's ranks have left the job, each in a
job of its own that rank 0 starts on this host, on the same size:
  mpi4jax   `mpirun -np N python -m ringcc.bench jax_allreduce --mpi4jax` (Open MPI next
            to the interpreter or on PATH, as ringcc.bench.peers_mpi):
    mpi4jax-jit     y = jax.jit(lambda v: mpi4jax.allreduce(v, op=MPI.SUM))(x)
    mpi4py-inplace  comm.Allreduce(MPI.IN_PLACE, x)            (NumPy, in place)
  jax-gloo  JAX's own CPU collectives: `ringrun -np N python -m ringcc.bench jax_allreduce
            --jax-gloo` joins the processes with jax.distributed.initialize and
            jax_cpu_collectives_implementation="gloo" (JAX must be set up so
            before its first computation, hence a job of its own); one CPU
            device per process, a mesh over all of them:
    jax-gloo-psum           y = jit(shard_map(psum))(x)      (x a global array, one shard a rank)
    jax-gloo-psum-donated   the same with x donated, x = f(x)
--compare-mpi4jax is --compare mpi4jax.

While it runs, rank 0 shows progress on stderr; --csv writes one row per
variant (median time, busbw, speed-up over numpy-inplace).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

from .measure import format_size, parse_size

RINGCC_VARIANTS = (
    "numpy-inplace",
    "numpy",
    "jit-loop",
    "jit-donated",
    "jit-donated-sync",
    "jit",
    "jit-noalias",
    "eager",
)
MPI_VARIANTS = ("mpi4jax-jit", "mpi4py-inplace")
JAX_GLOO_VARIANTS = ("jax-gloo-psum", "jax-gloo-psum-donated")
PEERS = ("mpi4jax", "jax-gloo")


def _ringcc_loops(count):
    import jax
    import jax.numpy as jnp

    import ringcc
    import ringcc.jax as rj

    def fresh():
        return jnp.zeros((count,), jnp.float32)

    jit_donated = jax.jit(rj.allreduce, donate_argnums=0)
    jit_plain = jax.jit(rj.allreduce)
    jit_noalias = jax.jit(lambda v: rj.allreduce(v, alias=False))
    jit_loops = {}

    def in_one_jit(n, state):
        if n not in jit_loops:
            jit_loops[n] = jax.jit(lambda v: jax.lax.fori_loop(0, n, lambda i, u: rj.allreduce(u), v), donate_argnums=0)
        x = state.pop("loop", None)
        x = fresh() if x is None else x
        state["loop"] = jit_loops[n](x).block_until_ready()

    def numpy_inplace(n, state):
        x = state.setdefault("np", np.zeros(count, np.float32))
        for _ in range(n):
            ringcc.allreduce_(x)

    def numpy_new(n, state):
        x = state.setdefault("np", np.zeros(count, np.float32))
        for _ in range(n):
            ringcc.allreduce(x)

    def donated(sync):
        def loop(n, state):
            x = state.pop("donated", None)
            x = fresh() if x is None else x
            for _ in range(n):
                x = jit_donated(x)
                if sync:
                    x.block_until_ready()
            state["donated"] = x.block_until_ready()

        return loop

    def plain(f):
        def loop(n, state):
            x = state.setdefault("jx", fresh())
            for _ in range(n):
                f(x).block_until_ready()

        return loop

    loops = {
        "numpy-inplace": numpy_inplace,
        "numpy": numpy_new,
        "jit-loop": in_one_jit,
        "jit-donated": donated(False),
        "jit-donated-sync": donated(True),
        "jit": plain(jit_plain),
        "jit-noalias": plain(jit_noalias),
        "eager": plain(rj.allreduce),
    }

    def max_over_ranks(value):
        a = np.array([value], np.float64)
        ringcc.allreduce_(a, ringcc.Max)
        return float(a[0])

    return loops, max_over_ranks, ringcc.barrier


def _mpi_loops(count):
    import jax
    import jax.numpy as jnp
    import mpi4jax
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    f = jax.jit(lambda v: mpi4jax.allreduce(v, op=MPI.SUM))

    def m4j(n, state):
        x = state.setdefault("jx", jnp.zeros((count,), jnp.float32))
        for _ in range(n):
            f(x).block_until_ready()

    def mpi4py_inplace(n, state):
        x = state.setdefault("np", np.zeros(count, np.float32))
        for _ in range(n):
            comm.Allreduce(MPI.IN_PLACE, x)

    def max_over_ranks(value):
        return float(comm.allreduce(value, op=MPI.MAX))

    return {"mpi4jax-jit": m4j, "mpi4py-inplace": mpi4py_inplace}, max_over_ranks, comm.Barrier


def _jax_gloo_loops(count):
    """JAX's own collectives over gloo between the processes of this job (ringrun's
    RINGCC_RANK/RINGCC_SIZE, the coordinator at MASTER_ADDR:MASTER_PORT, a port
    ringrun keeps free for the job's second store). Must run before JAX's first
    computation in this process."""
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    rank, size = int(os.environ["RINGCC_RANK"]), int(os.environ["RINGCC_SIZE"])
    jax.distributed.initialize(
        coordinator_address=f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
        num_processes=size,
        process_id=rank,
    )
    import jax.numpy as jnp
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:  # jax < 0.7
        from jax.experimental.shard_map import shard_map
    mesh = Mesh(np.array(jax.devices()), ("ranks",))
    sharding = NamedSharding(mesh, P("ranks"))
    psum = shard_map(lambda v: jax.lax.psum(v, "ranks"), mesh=mesh, in_specs=P("ranks"), out_specs=P("ranks"))
    plain = jax.jit(psum)
    donated = jax.jit(psum, donate_argnums=0)
    device = jax.local_devices()[0]

    def fresh(value=0.0):
        local = jax.device_put(jnp.full((count,), value, jnp.float32), device)
        return jax.make_array_from_single_device_arrays((count * size,), sharding, [local])

    # Once on known data: every rank must get the sum, or the figures mean nothing.
    got = np.asarray(plain(fresh(rank + 1.0)).addressable_shards[0].data)
    if not np.all(got == size * (size + 1) / 2):
        raise SystemExit(f"jax-gloo: psum gave {got[:4]} on rank {rank}, not {size * (size + 1) / 2}")

    def psum_plain(n, state):
        x = state.setdefault("gloo", fresh())
        for _ in range(n):
            plain(x).block_until_ready()

    def psum_donated(n, state):
        x = state.pop("gloo-donated", None)
        x = fresh() if x is None else x
        for _ in range(n):
            x = donated(x)
        state["gloo-donated"] = x.block_until_ready()

    def max_over_ranks(value):
        return float(np.max(multihost_utils.process_allgather(np.array([value], np.float64))))

    def barrier():
        multihost_utils.sync_global_devices("ringcc.bench.jax_allreduce")

    return {"jax-gloo-psum": psum_plain, "jax-gloo-psum-donated": psum_donated}, max_over_ranks, barrier


def measure(loops, variants, max_over_ranks, barrier, iters, warmup, repeats, progress=None):
    """{variant: [seconds per iteration, one per repeat]}"""
    state = {}
    times = {v: [] for v in variants}
    for repeat in range(repeats):
        for v in variants:
            if progress is not None:
                progress.update(f"repeat {repeat + 1}/{repeats}, {v}")
            loops[v](warmup, state)
            barrier()
            t0 = time.perf_counter()
            loops[v](iters, state)
            dt = (time.perf_counter() - t0) / iters
            times[v].append(max_over_ranks(dt))
    return times


def rows(times, nbytes, size, baseline="numpy-inplace"):
    """One row per variant: median time, busbw, speed-up over the baseline
    (baseline time / variant time: higher is better)."""
    base = float(np.median(times[baseline])) if baseline in times else None
    factor = 2.0 * (size - 1) / size if size > 1 else 1.0
    out = []
    for v, ts in times.items():
        t = float(np.median(ts))
        out.append(
            {
                "variant": v,
                "size_bytes": nbytes,
                "ranks": size,
                "time_ms": t * 1e3,
                "busbw_GBps": nbytes / t / 1e9 * factor,
                "speedup_x": base / t if base else None,
                "repeats": len(ts),
            }
        )
    return out


def table(times, nbytes, size, baseline="numpy-inplace"):
    lines = [
        f"# speed-up = {baseline} time / the variant's time (higher is better)",
        f"{'variant':22s} {'time (ms)':>10s} {'busbw (GB/s)':>13s} {'speed-up':>9s}",
    ]
    for r in rows(times, nbytes, size, baseline):
        ratio = f"{r['speedup_x']:.3f}x" if r["speedup_x"] else "-"
        lines.append(f"{r['variant']:22s} {r['time_ms']:10.2f} {r['busbw_GBps']:13.2f} {ratio:>9s}")
    return "\n".join(lines)


def run_mpi4jax_job(np_, args, timeout_s=600):
    """Runs the mpi4jax side under mpirun; returns its JSON (or {"skipped": reason})."""
    import importlib.util

    from .peers_mpi import find_mpirun, mpi_env

    for mod in ("mpi4py", "mpi4jax"):
        if importlib.util.find_spec(mod) is None:
            return {"skipped": f"{mod} is not installed"}
    mpirun = find_mpirun()
    if mpirun is None:
        return {"skipped": "mpirun not found"}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mpi4jax.json")
        cmd = [mpirun, "-np", str(np_), "--bind-to", "none"]
        if np_ > (os.cpu_count() or 1):
            cmd.append("--oversubscribe")
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        cmd += [
            sys.executable,
            "-m",
            "ringcc.bench.jax_allreduce",
            "--mpi4jax",
            "--json",
            path,
            "--size",
            str(args.size),
            "--iters",
            str(args.iters),
            "--warmup",
            str(args.warmup),
            "--repeats",
            str(args.repeats),
        ]
        env = mpi_env()
        env.setdefault("JAX_PLATFORMS", "cpu")
        done = subprocess.run(
            cmd, check=False, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s
        )
        if done.returncode != 0 or not os.path.exists(path):
            tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-6:])
            return {"skipped": f"mpirun exited with {done.returncode}: {tail}"}
        with open(path) as f:
            return json.load(f)


def run_jax_gloo_job(np_, args, timeout_s=600):
    """Runs the JAX-over-gloo side as a ringrun job of its own; returns its JSON
    (or {"skipped": reason})."""
    from .peers_mpi import mpi_env

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "jax-gloo.json")
        cmd = [
            sys.executable,
            "-m",
            "ringcc.launcher",
            "--no-prefix",
            "-np",
            str(np_),
            "--timeout",
            str(timeout_s),
            sys.executable,
            "-m",
            "ringcc.bench.jax_allreduce",
            "--jax-gloo",
            "--json",
            path,
            "--size",
            str(args.size),
            "--iters",
            str(args.iters),
            "--warmup",
            str(args.warmup),
            "--repeats",
            str(args.repeats),
        ]
        env = mpi_env()  # without this job's RINGCC_* and MASTER_* variables
        env["JAX_PLATFORMS"] = "cpu"
        try:
            done = subprocess.run(
                cmd,
                check=False,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s + 30,
            )
        except subprocess.TimeoutExpired:
            return {"skipped": f"the jax-gloo job did not finish within {timeout_s} s"}
        if done.returncode != 0 or not os.path.exists(path):
            tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-6:])
            return {"skipped": f"the jax-gloo job exited with {done.returncode}: {tail}"}
        with open(path) as f:
            return json.load(f)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m ringcc.bench jax_allreduce", description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("64M"), help="bytes per rank")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--variants", default=",".join(RINGCC_VARIANTS), help="comma-separated subset of: " + ", ".join(RINGCC_VARIANTS)
    )
    parser.add_argument("--compare", default="", help="comma list of peers: " + ", ".join(PEERS))
    parser.add_argument("--compare-mpi4jax", action="store_true", help="the same as --compare mpi4jax")
    parser.add_argument("--mpi4jax", action="store_true", help=argparse.SUPPRESS)  # the mpirun side
    parser.add_argument("--jax-gloo", action="store_true", help=argparse.SUPPRESS)  # the jax.distributed side
    parser.add_argument("--json")
    parser.add_argument("--csv", metavar="PATH", help="write one row per variant to this CSV file")
    parser.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    args = parser.parse_args(argv)
    args.compare = [c.strip() for c in args.compare.split(",") if c.strip()]
    if args.compare_mpi4jax and "mpi4jax" not in args.compare:
        args.compare.append("mpi4jax")
    unknown = sorted(set(args.compare) - set(PEERS))
    if unknown:
        parser.error(f"unknown peers {unknown}; choose from {', '.join(PEERS)}")
    args.variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(args.variants) - set(RINGCC_VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(RINGCC_VARIANTS)}")
    return args


def jax_gloo_side(args, count):
    """A rank of the jax-gloo job (run_jax_gloo_job): JAX's own collectives."""
    loops, max_over_ranks, barrier = _jax_gloo_loops(count)
    times = measure(loops, JAX_GLOO_VARIANTS, max_over_ranks, barrier, args.iters, args.warmup, args.repeats)
    import jax

    if jax.process_index() == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "times": times,
                    "jax": jax.__version__,
                    "collectives": "jax.distributed, jax_cpu_collectives_implementation=gloo",
                },
                f,
            )
    jax.distributed.shutdown()
    return 0


def mpi4jax_side(args, count):
    """A rank of the mpi4jax job (run_mpi4jax_job), under mpirun."""
    from mpi4py import MPI

    loops, max_over_ranks, barrier = _mpi_loops(count)
    times = measure(loops, MPI_VARIANTS, max_over_ranks, barrier, args.iters, args.warmup, args.repeats)
    if MPI.COMM_WORLD.Get_rank() == 0 and args.json:
        import mpi4jax

        with open(args.json, "w") as f:
            json.dump(
                {
                    "times": times,
                    "mpi4jax": mpi4jax.__version__,
                    "mpi": MPI.Get_library_version().splitlines()[0].strip(),
                },
                f,
            )
    return 0


def main(argv=None):
    args = parse_args(argv)
    count = args.size // 4
    if args.jax_gloo:
        return jax_gloo_side(args, count)
    if args.mpi4jax:
        return mpi4jax_side(args, count)
    import jax

    import ringcc

    from .launch_hint import warn_if_alone

    warn_if_alone("jax_allreduce", argv)
    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    variants = args.variants
    from .output import Progress

    progress = Progress(enabled=rank == 0 and not args.no_progress)
    loops, max_over_ranks, barrier = _ringcc_loops(count)
    times = measure(loops, variants, max_over_ranks, barrier, args.iters, args.warmup, args.repeats, progress)
    transport = ringcc.transport_name()
    jax.effects_barrier()
    ringcc.shutdown()
    if rank != 0:
        return 0

    return report(args, times, size, transport, progress)


def report(args, times, size, transport, progress):
    """Rank 0: the table (peers' jobs run now), the key figure, the files."""
    import jax

    result = {
        "size_bytes": args.size,
        "ranks": size,
        "transport": transport,
        "iters": args.iters,
        "repeats": args.repeats,
        "jax": jax.__version__,
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "times": times,
    }
    print(
        f"allreduce sum float32, {format_size(args.size)} per rank, {size} ranks ({transport}), "
        f"jax {jax.__version__}, median of {args.repeats} x {args.iters} iterations"
    )
    shown = dict(times)
    if "mpi4jax" in args.compare:
        progress.update("mpi4jax (a job of its own under mpirun)", force=True)
        mpi = run_mpi4jax_job(size, args)
        result["mpi4jax"] = mpi
        if "times" in mpi:
            shown.update(mpi["times"])
            print(f"mpi4jax {mpi['mpi4jax']} over {mpi['mpi']}")
        else:
            print(f"mpi4jax: skipped ({mpi['skipped']})")
    if "jax-gloo" in args.compare:
        progress.update("jax-gloo (a job of its own under ringrun)", force=True)
        gloo = run_jax_gloo_job(size, args)
        result["jax-gloo"] = gloo
        if "times" in gloo:
            shown.update(gloo["times"])
            print(f"jax-gloo: jax {gloo['jax']}, {gloo['collectives']}")
        else:
            print(f"jax-gloo: skipped ({gloo['skipped']})")
    progress.done()
    print(table(shown, args.size, size))
    if "numpy-inplace" in times and "jit-donated" in times:
        t_np = float(np.median(times["numpy-inplace"]))
        t_jd = float(np.median(times["jit-donated"]))
        print(
            f"key figure: time of ringcc.jax.allreduce in jit (donated) / time of ringcc.allreduce_ "
            f"(NumPy) = {t_jd / t_np:.3f} (a time ratio: lower is better, 1 is the goal)"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.csv:
        from .output import write_csv

        n = write_csv(
            args.csv,
            rows(shown, args.size, size),
            ("variant", "size_bytes", "ranks", "time_ms", "busbw_GBps", "speedup_x", "repeats"),
        )
        print(f"# {n} rows written to {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
