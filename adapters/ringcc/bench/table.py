"""Aggregation over repeats, nccl-tests style tables, and the summary."""

import statistics

from .measure import BUS_FACTOR, Case, format_size

# (label, op, nominal size, metric); metric "time" is in us, "busbw" in GB/s.
KEY_FIGURES = (
    ("allreduce 8 B latency (us)", "allreduce", 8, "time"),
    ("allreduce 1 MiB busbw (GB/s)", "allreduce", 1 << 20, "busbw"),
    ("allreduce 64 MiB busbw (GB/s)", "allreduce", 64 << 20, "busbw"),
    ("allgather 64 MiB busbw (GB/s)", "allgather", 64 << 20, "busbw"),
    ("broadcast 64 MiB busbw (GB/s)", "broadcast", 64 << 20, "busbw"),
)


SPREAD_DEFINITION = (
    "spread = (p75 - p25) / median of the point's samples (time per iteration of "
    "each timed batch, up to 5 a repeat, max over ranks), in %"
)
RATIO_DEFINITION = (
    "speed-up = peer time / ringcc time (= ringcc busbw / peer busbw); "
    "higher is better for ringcc, > 1: ringcc is faster"
)


def quartiles(values):
    """(p25, median, p75), linearly interpolated between the sorted values."""
    v = sorted(values)
    if len(v) == 1:
        return v[0], v[0], v[0]

    def at(q):
        pos = q * (len(v) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(v) - 1)
        return v[lo] + (v[hi] - v[lo]) * (pos - lo)

    return at(0.25), at(0.5), at(0.75)


def spread(samples):
    """(p75 - p25) / median: the width of the middle half of the samples,
    relative to their median (0 for a single sample). One slow batch in ten
    does not move it, unlike (max - min) / median."""
    p25, med, p75 = quartiles(samples)
    return (p75 - p25) / med if med > 0 else 0.0


def aggregate(op, nbytes, count, times, world, samples=None):
    """One entry of the results: statistics over repeats of seconds-per-iteration.
    `samples`: the per-batch times of every repeat (ringcc.bench.measure), for the
    spread; the repeats' times when there are none."""
    med, lo, hi = statistics.median(times), min(times), max(times)
    samples = list(samples) if samples else list(times)
    p25, _, p75 = quartiles(samples)
    factor = BUS_FACTOR[op](world)
    gb = nbytes / 1e9
    return {
        "op": op,
        "nbytes": nbytes,
        "count": count,
        "times_us": [t * 1e6 for t in times],
        "samples_us": [t * 1e6 for t in samples],
        "time_us": med * 1e6,
        "time_min_us": lo * 1e6,
        "time_max_us": hi * 1e6,
        "time_p25_us": p25 * 1e6,
        "time_p75_us": p75 * 1e6,
        "spread": spread(samples),
        "algbw": gb / med,
        "busbw": gb / med * factor,
        "busbw_min": gb / hi * factor,
        "busbw_max": gb / lo * factor,
    }


def paired_ratios(ours, theirs):
    """Speed-up of ringcc over the peer per repeat (peer time / ringcc time =
    ringcc busbw / peer busbw), repeats paired in order."""
    return [b / a for a, b in zip(ours["times_us"], theirs["times_us"]) if a > 0]


def _f(value, width, digits=2):
    if value is None:
        return "n/a".rjust(width)
    return f"{value:{width}.{digits}f}"


def op_table(op, entries, peers, dtype, world, repeats, check):
    """nccl-tests style table of one op. entries: {impl: {nbytes: entry}}."""
    ours = entries.get("ringcc", {})
    bus = {"allreduce": "2(n-1)/n", "allgather": "(n-1)/n", "broadcast": "1", "reduce_scatter": "(n-1)/n"}[op]
    size_note = {
        "allgather": "total output, count = elements per rank",
        "reduce_scatter": "per-rank input, count = its elements",
    }.get(op, "per-rank buffer")
    lines = [
        f"# {op}: {world} ranks, {dtype}, median of {repeats} repeat(s); size = {size_note}; busbw = algbw * {bus}",
    ]
    lines.append("# " + SPREAD_DEFINITION)
    if peers:
        lines.append("# " + RATIO_DEFINITION)
    head1 = f"#{'':>11} {'':>12} {'':>9} {'ringcc':>10}"
    head2 = f"#{'size':>11} {'count':>12} {'type':>9} {'time':>10} {'algbw':>8} {'busbw':>8} {'spread':>7}"
    head3 = f"#{'(B)':>11} {'(elements)':>12} {'':>9} {'(us)':>10} {'(GB/s)':>8} {'(GB/s)':>8} {'(%)':>7}"
    if check:
        head2 += f" {'#wrong':>7}"
        head3 += f" {'':>7}"
    head1 = head1.ljust(len(head2))
    for p in peers:
        head1 += f"  {p:>10} {'':>8} {'':>7}"
        head2 += f"  {'time':>10} {'busbw':>8} {'speedup':>7}"
        head3 += f"  {'(us)':>10} {'(GB/s)':>8} {'(x)':>7}"
    lines += [head1.rstrip(), head2, head3]
    for nbytes in sorted(ours):
        e = ours[nbytes]
        row = (
            f" {nbytes:>11} {e['count']:>12} {dtype:>9} {_f(e['time_us'], 10)} "
            f"{_f(e['algbw'], 8)} {_f(e['busbw'], 8)} {_f(e['spread'] * 100, 7, 1)}"
        )
        if check:
            row += f" {e['wrong'] if e.get('wrong') is not None else 'n/a':>7}"
        for p in peers:
            pe = entries.get(p, {}).get(nbytes)
            if pe is None:
                row += f"  {'n/a':>10} {'n/a':>8} {'n/a':>7}"
            else:
                ratio = e["busbw"] / pe["busbw"] if pe["busbw"] > 0 else None
                row += f"  {_f(pe['time_us'], 10)} {_f(pe['busbw'], 8)} {_f(ratio, 7)}"
        lines.append(row)
    return "\n".join(lines)


def _stat(entry, metric):
    if metric == "time":
        return entry["time_us"], entry["time_min_us"], entry["time_max_us"]
    return entry["busbw"], entry["busbw_min"], entry["busbw_max"]


def summary(entries, peers, dtype, world):
    """Key figures: {figure, op, nbytes, metric, impls: {impl: {median, min, max[, ratio...]}}}."""
    figures = []
    for label, op, nominal, metric in KEY_FIGURES:
        nbytes = Case(op, nominal, dtype, world).nbytes
        fig = {"figure": label, "op": op, "nbytes": nbytes, "metric": metric, "impls": {}}
        ours = entries.get(op, {}).get("ringcc", {}).get(nbytes)
        if ours is None:
            fig["missing"] = f"not measured ({op} of {format_size(nbytes)} is outside the sweep)"
            figures.append(fig)
            continue
        med, lo, hi = _stat(ours, metric)
        fig["impls"]["ringcc"] = {"median": med, "min": lo, "max": hi}
        for p in peers:
            theirs = entries.get(op, {}).get(p, {}).get(nbytes)
            if theirs is None:
                continue
            pmed, plo, phi = _stat(theirs, metric)
            # Speed-up of ringcc over the peer, whatever the metric: higher is better.
            if metric == "time":
                ratio = pmed / med if med > 0 else None
            else:
                ratio = med / pmed if pmed > 0 else None
            rec = {"median": pmed, "min": plo, "max": phi, "ratio": ratio}
            pr = paired_ratios(ours, theirs)
            if pr:
                rec["ratio_min"], rec["ratio_max"] = min(pr), max(pr)
            fig["impls"][p] = rec
        figures.append(fig)
    return figures


def summary_text(figures, peers, dtype, world, repeats):
    lines = [
        f"# Summary: {world} ranks, {dtype}; median [min..max] over {repeats} repeat(s); "
        "speed-up = how many times faster ringcc is than the peer (peer time / ringcc time, "
        "= ringcc busbw / peer busbw): higher is better for ringcc, for latency and bandwidth alike",
        f"# {'figure':<31} {'impl':<7} {'value':>30}  {'speed-up of ringcc':>24}",
    ]
    for fig in figures:
        if "missing" in fig:
            lines.append(f"# {fig['figure']:<31} {fig['missing']}")
            continue
        first = True
        for impl in ["ringcc"] + list(peers):
            rec = fig["impls"].get(impl)
            label = fig["figure"] if first else ""
            first = False
            if rec is None:
                lines.append(f"# {label:<31} {impl:<7} {'n/a':>30}")
                continue
            value = f"{rec['median']:.2f} [{rec['min']:.2f}..{rec['max']:.2f}]"
            ratio = ""
            if impl != "ringcc" and rec.get("ratio") is not None:
                ratio = f"{rec['ratio']:.2f}"
                if "ratio_min" in rec:
                    ratio += f" [{rec['ratio_min']:.2f}..{rec['ratio_max']:.2f}]"
            lines.append(f"# {label:<31} {impl:<7} {value:>30}  {ratio:>24}".rstrip())
    return "\n".join(lines)
