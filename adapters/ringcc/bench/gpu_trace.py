"""Summary of a RINGCC_GPU_TRACE run (core/device/gpu_trace.h):

    RINGCC_GPU_TRACE=/tmp/t ringrun -np 2 python my_job.py
    python -m ringcc.bench gpu_trace /tmp/t [--skip 10]

reads every rank's /tmp/t.rank<R>.jsonl, drops the first --skip calls of
each (setup, warm-up), groups the calls by (collective, bytes, backend), and
prints, per group, medians over the calls of
  - the host phases of each rank: the agreement (the host header exchange
    before every device collective) and the enqueueing that follows, and the
    backend's own host marks, in microseconds since the call reached the
    communicator;
  - the device phases of each rank: the time from each device mark to the
    next (the GPU's global timer, the same for every process on the GPU);
  - across ranks (the i-th call of every rank is the same collective): the
    device span from the first rank's "start" to the last rank's "end", and
    when each rank's marks ran relative to the first "start": where ranks
    sharing a GPU wait for each other, and for the GPU to switch between
    their contexts.
"""

import argparse
import glob
import json
import statistics
import sys
from collections import OrderedDict


def load(prefix):
    """{rank: [record, ...]} from <prefix>.rank<R>.jsonl."""
    out = {}
    for path in sorted(glob.glob(prefix + ".rank*.jsonl")):
        rank = int(path[len(prefix) + len(".rank") : -len(".jsonl")])
        with open(path) as f:
            out[rank] = [json.loads(line) for line in f if line.strip()]
    return out


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v):
    return "   n/a" if v is None else f"{v:7.1f}"


def summarize(records_by_rank, skip=0):
    """Text lines of the summary (see the module's doc)."""
    ranks = sorted(records_by_rank)
    if not ranks:
        return ["no trace records"]
    # The i-th call of every rank, past the skipped ones.
    calls = min(len(records_by_rank[r]) for r in ranks)
    groups = OrderedDict()
    for i in range(skip, calls):
        per_rank = [records_by_rank[r][i] for r in ranks]
        head = per_rank[0]
        key = (head["kind"], head["bytes"], head["backend"])
        if any((p["kind"], p["bytes"], p["backend"]) != key for p in per_rank):
            continue  # the ranks' i-th calls differ: not one collective
        groups.setdefault(key, []).append(per_rank)
    lines = []
    for (kind, nbytes, backend), items in groups.items():
        lines.append(f"{kind} of {nbytes} B on {backend}, {len(ranks)} rank(s), median of {len(items)} calls (us):")
        host_names = list(OrderedDict.fromkeys(n for per_rank in items for p in per_rank for n in p["host_us"]))
        lines.append("  host, since the call reached the communicator: " + ", ".join(host_names))
        for k, r in enumerate(ranks):
            values = [median(per_rank[k]["host_us"].get(n) for per_rank in items) for n in host_names]
            lines.append(f"    rank {r}: " + " ".join(fmt(v) for v in values))
        device_names = list(OrderedDict.fromkeys(n for per_rank in items for p in per_rank for n in p["device_ns"]))
        if len(device_names) < 2:
            continue
        steps = [f"{a}->{b}" for a, b in zip(device_names, device_names[1:])]
        lines.append("  device, each rank's own phases: " + ", ".join(steps))
        for k, r in enumerate(ranks):
            values = []
            for a, b in zip(device_names, device_names[1:]):
                values.append(
                    median(
                        (p[k]["device_ns"][b] - p[k]["device_ns"][a]) / 1e3
                        for p in items
                        if a in p[k]["device_ns"] and b in p[k]["device_ns"]
                    )
                )
            lag = median(
                (p[k]["device_ns"][device_names[0]] - p[k]["host_start_ns"]) / 1e3
                for p in items
                if device_names[0] in p[k]["device_ns"]
            )
            lines.append(
                f"    rank {r}: "
                + " ".join(fmt(v) for v in values)
                + f"   (device {device_names[0]} - host start: {fmt(lag).strip()}, if the GPU's "
                "timer follows the host clock)"
            )
        first, last = device_names[0], device_names[-1]
        spans = []
        for per_rank in items:
            if all(first in p["device_ns"] and last in p["device_ns"] for p in per_rank):
                spans.append(
                    (max(p["device_ns"][last] for p in per_rank) - min(p["device_ns"][first] for p in per_rank)) / 1e3
                )
        lines.append(f"  device span, first rank's {first} to last rank's {last}: {fmt(median(spans)).strip()}")
        lines.append("  device marks across ranks, since the first rank's " + first + ": " + ", ".join(device_names))
        for k, r in enumerate(ranks):
            values = []
            for name in device_names:
                values.append(
                    median(
                        (p[k]["device_ns"][name] - min(q["device_ns"][first] for q in p)) / 1e3
                        for p in items
                        if name in p[k]["device_ns"] and all(first in q["device_ns"] for q in p)
                    )
                )
            lines.append(f"    rank {r}: " + " ".join(fmt(v) for v in values))
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m ringcc.bench gpu_trace", description=__doc__.split("\n\n")[0])
    p.add_argument("prefix", help="the RINGCC_GPU_TRACE path prefix")
    p.add_argument("--skip", type=int, default=10, help="calls of each rank to leave out first (default 10)")
    a = p.parse_args(argv)
    records = load(a.prefix)
    if not records:
        print(f"no trace files {a.prefix}.rank*.jsonl")
        return 1
    print("\n".join(summarize(records, a.skip)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
