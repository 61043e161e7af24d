"""ringcc.jax.allreduce inside jax.jit against ringcc.allreduce on NumPy.

    ringrun -np 2 python -m bench.jax_allreduce [--size 64M] [--iters 20] [--repeats 5]
        [--variants numpy-inplace,jit-donated,...] [--compare-mpi4jax] [--json PATH]

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
table shows medians (the JSON has every repeat).

--compare-mpi4jax: after ringcc's ranks have left the job, rank 0 runs
`mpirun -np N python -m bench.jax_allreduce --mpi4jax` (Open MPI next to the
interpreter or on PATH, as bench.peers_mpi), which times, on the same sizes:
  mpi4jax-jit     y = jax.jit(lambda v: mpi4jax.allreduce(v, op=MPI.SUM))(x)
  mpi4py-inplace  comm.Allreduce(MPI.IN_PLACE, x)            (NumPy, in place)
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

RINGCC_VARIANTS = ("numpy-inplace", "numpy", "jit-loop", "jit-donated", "jit-donated-sync", "jit",
                   "jit-noalias", "eager")
MPI_VARIANTS = ("mpi4jax-jit", "mpi4py-inplace")


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
            jit_loops[n] = jax.jit(
                lambda v: jax.lax.fori_loop(0, n, lambda i, u: rj.allreduce(u), v), donate_argnums=0)
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


def measure(loops, variants, max_over_ranks, barrier, iters, warmup, repeats):
    """{variant: [seconds per iteration, one per repeat]}"""
    state = {}
    times = {v: [] for v in variants}
    for _ in range(repeats):
        for v in variants:
            loops[v](warmup, state)
            barrier()
            t0 = time.perf_counter()
            loops[v](iters, state)
            dt = (time.perf_counter() - t0) / iters
            times[v].append(max_over_ranks(dt))
    return times


def table(times, nbytes, size, baseline="numpy-inplace"):
    lines = [f"{'variant':18s} {'time (ms)':>10s} {'busbw (GB/s)':>13s} {'vs ' + baseline:>18s}"]
    base = np.median(times[baseline]) if baseline in times else None
    factor = 2.0 * (size - 1) / size if size > 1 else 1.0
    for v, ts in times.items():
        t = float(np.median(ts))
        ratio = f"{t / base:.3f}x" if base else "-"
        lines.append(f"{v:18s} {t * 1e3:10.2f} {nbytes / t / 1e9 * factor:13.2f} {ratio:>18s}")
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
        cmd += [sys.executable, "-m", "bench.jax_allreduce", "--mpi4jax", "--json", path,
                "--size", str(args.size), "--iters", str(args.iters), "--warmup", str(args.warmup),
                "--repeats", str(args.repeats)]
        env = mpi_env()
        env.setdefault("JAX_PLATFORMS", "cpu")
        done = subprocess.run(cmd, check=False, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout_s)
        if done.returncode != 0 or not os.path.exists(path):
            tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-6:])
            return {"skipped": f"mpirun exited with {done.returncode}: {tail}"}
        with open(path) as f:
            return json.load(f)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("64M"), help="bytes per rank")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--variants", default=",".join(RINGCC_VARIANTS),
                        help="comma-separated subset of: " + ", ".join(RINGCC_VARIANTS))
    parser.add_argument("--compare-mpi4jax", action="store_true")
    parser.add_argument("--mpi4jax", action="store_true", help=argparse.SUPPRESS)  # the mpirun side
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    count = args.size // 4

    if args.mpi4jax:
        from mpi4py import MPI
        loops, max_over_ranks, barrier = _mpi_loops(count)
        times = measure(loops, MPI_VARIANTS, max_over_ranks, barrier, args.iters, args.warmup, args.repeats)
        if MPI.COMM_WORLD.Get_rank() == 0 and args.json:
            import mpi4jax
            with open(args.json, "w") as f:
                json.dump({"times": times, "mpi4jax": mpi4jax.__version__,
                           "mpi": MPI.Get_library_version().splitlines()[0].strip()}, f)
        return 0

    import jax
    import ringcc
    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(RINGCC_VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(RINGCC_VARIANTS)}")
    loops, max_over_ranks, barrier = _ringcc_loops(count)
    times = measure(loops, variants, max_over_ranks, barrier, args.iters, args.warmup, args.repeats)
    transport = ringcc.transport_name()
    jax.effects_barrier()
    ringcc.shutdown()
    if rank != 0:
        return 0

    result = {"size_bytes": args.size, "ranks": size, "transport": transport, "iters": args.iters,
              "repeats": args.repeats, "jax": jax.__version__, "host": platform.node(),
              "cpus": os.cpu_count(), "times": times}
    print(f"allreduce sum float32, {format_size(args.size)} per rank, {size} ranks ({transport}), "
          f"jax {jax.__version__}, median of {args.repeats} x {args.iters} iterations")
    shown = dict(times)
    if args.compare_mpi4jax:
        mpi = run_mpi4jax_job(size, args)
        result["mpi4jax"] = mpi
        if "times" in mpi:
            shown.update(mpi["times"])
            print(f"mpi4jax {mpi['mpi4jax']} over {mpi['mpi']}")
        else:
            print(f"mpi4jax: skipped ({mpi['skipped']})")
    print(table(shown, args.size, size))
    if "numpy-inplace" in times and "jit-donated" in times:
        t_np = float(np.median(times["numpy-inplace"]))
        t_jd = float(np.median(times["jit-donated"]))
        print(f"key figure: ringcc.jax.allreduce in jit (donated) / ringcc.allreduce_ (NumPy) = "
              f"{t_jd / t_np:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
