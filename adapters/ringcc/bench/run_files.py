"""The files a run of the allreduce bench writes on rank 0: --json (every
result and how it was measured), --csv (one row per library, op and size,
every column's unit in its name) and --plot (figure.py's picture)."""

from __future__ import annotations

import json
import os
import platform
import sys

from .figure import plot_results, plot_title
from .output import machine_description, rows_of, write_csv
from .table import RATIO_DEFINITION, SPREAD_DEFINITION

# Units in the names: us = microseconds, GBps = 10^9 bytes per second, pct =
# percent (as the tables print the spread), x = times (a ratio).
CSV_COLUMNS = (
    "impl",
    "op",
    "dtype",
    "ranks",
    "size_bytes",
    "count_elements",
    "time_us",
    "time_min_us",
    "time_max_us",
    "time_p25_us",
    "time_p75_us",
    "algbw_GBps",
    "busbw_GBps",
    "busbw_min_GBps",
    "busbw_max_GBps",
    "spread_pct",
    "speedup_x",
    "speedup_min_x",
    "speedup_max_x",
    "repeats",
    "wrong_values",
)


def csv_rows(agg, ranks):
    """The CSV's rows of op -> impl -> nbytes -> entry; speedup_x = peer
    time / ringcc time, on the peers' rows."""
    for row in rows_of(agg):
        yield dict(
            row,
            ranks=ranks,
            size_bytes=row["nbytes"],
            count_elements=row["count"],
            algbw_GBps=row["algbw"],
            busbw_GBps=row["busbw"],
            busbw_min_GBps=row["busbw_min"],
            busbw_max_GBps=row["busbw_max"],
            spread_pct=row["spread"] * 100,
            speedup_x=row.get("ratio"),
            speedup_min_x=row.get("ratio_min"),
            speedup_max_x=row.get("ratio_max"),
            repeats=len(row["times_us"]),
            wrong_values=row.get("wrong"),
        )


def write_csv_file(bench, agg):
    n = write_csv(bench.args.csv, csv_rows(agg, bench.world), CSV_COLUMNS)
    print(f"# {n} rows written to {bench.args.csv}")


def write_plot_file(bench, agg, shown):
    a = bench.args
    entries = {
        op: {impl: agg[op][impl] for impl in ["ringcc"] + list(shown) if impl in agg.get(op, {})}
        for op in a.ops
        if op in agg
    }
    transport = getattr(bench.rc, "transport_name", lambda: "?")()
    title = plot_title(
        f"{bench.world} ranks ({transport}), {a.dtype}, median of {a.repeats} repeat(s), bars: quartiles",
        bench.versions(),
        machine_description(),
    )
    try:
        layout = plot_results(a.plot, entries, title, dpi=a.plot_dpi)
    except ValueError as e:
        print(f"# plot not written: {e}")
        return
    print(f"# plot written to {a.plot} ({len(layout.rows)} x {len(layout.ops)} panels: {', '.join(layout.rows)})")


def write_json_file(bench, agg, figures):
    a = bench.args
    rc = bench.rc
    doc = {
        "meta": {
            "ranks": bench.world,
            "dtype": a.dtype,
            "ops": a.ops,
            "sizes": a.sizes,
            "device": a.device,
            "gpu_backend": getattr(rc, "gpu_backend", lambda: "")() or None,
            "repeats": a.repeats,
            "iters": a.iters if a.iters is not None else "adaptive",
            "warmup": a.warmup if a.warmup is not None else "adaptive",
            "target_s": a.target_s,
            "check": a.check,
            "busy_threads": a.busy_threads,
            "transport": getattr(rc, "transport_name", lambda: "?")(),
            "ranks_per_host": getattr(rc, "local_size", lambda: bench.world)(),
            "hosts": getattr(rc, "cross_size", lambda: 1)(),
            "mpi_hosts": vars(bench.mpi_hosts) if bench.mpi_hosts else None,
            "busy_products_rank0": bench.busy.products,
            "wait_policy": (dict(rc.wait_policy()) if hasattr(rc, "wait_policy") else None),
            "timing": "seconds per iteration of a barrier-free loop, max over ranks; "
            "time_us/algbw/busbw are medians over repeats",
            "bandwidth": "nccl-tests PERFORMANCE.md: algbw = S / t; busbw = algbw * "
            "2(n-1)/n (allreduce), (n-1)/n (allgather), 1 (broadcast)",
            "ratio": RATIO_DEFINITION,
            "spread": SPREAD_DEFINITION.replace(", in %", " (a fraction)"),
            "machine": machine_description(),
            "versions": bench.versions(),
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "command": sys.argv,
        },
        "peers": bench.peer_info,
        "results": [
            e
            for op in a.ops
            for impl in agg.get(op, {}).values()
            for e in sorted(impl.values(), key=lambda e: e["nbytes"])
        ],
        "summary": figures,
    }
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"# results written to {a.json}")
