"""The benches' figure: bus bandwidth, latency and speed-up against message
size, sized and labelled to go into a paper or a slide as it is.

One column per collective, one row per view:

  busbw       bus bandwidth (GB/s) of every library, at every size;
  latency     time per call (us) of the small messages (up to
              LATENCY_MAX_BYTES), where bandwidth says little;
  speed-up    one row per peer: peer time / ringcc time at every size
              (above the line at 1, ringcc is faster).

A point is the median over repeats; its bar spans the quartiles (p25 to
p75) of the point's samples, the same spread the tables print. Each row
shares its y axis across the collectives and each column its x axis (the
latency row its own), so panels compare at a glance. One legend, under the
panels, names the libraries by colour and marker.

The file's type follows its extension: .png (PLOT_DPI dots per inch unless
told), .svg or .pdf (vector; text stays text, fonts embedded as TrueType,
as publishers ask). The title wraps to the figure's width and the layout
makes room for it, so it is never cut.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Mapping, Sequence

PLOT_DPI = 200
PICTURE_TYPES = (".png", ".svg", ".pdf")
LATENCY_MAX_BYTES = 64 << 10
PANEL_W_IN, PANEL_H_IN = 3.1, 2.3
MIN_WIDTH_IN = 6.5
TITLE_POINTS = 8.0
MARKERS = "osD^vP*X"


def picture_error(path: str) -> str:
    """Why `path` cannot be a picture ("" when it can)."""
    ext = os.path.splitext(path)[1].lower()
    if ext in PICTURE_TYPES:
        return ""
    return (
        f"--plot {path}: the picture's type comes from its extension: {', '.join(PICTURE_TYPES)} (got {ext or 'none'})"
    )


def quartile_times(entry: Mapping[str, object]) -> tuple[float, float, float]:
    """(p25, median, p75) of a point's time per call in us: the median over
    repeats, the quartiles of the samples (of the repeats when there are none)."""
    from .table import quartiles

    samples = entry.get("samples_us") or entry.get("times_us") or [entry["time_us"]]
    p25, _, p75 = quartiles(samples)
    med = float(entry["time_us"])
    return min(p25, med), med, max(p75, med)


def _speedups(ours: Mapping[str, object], theirs: Mapping[str, object]) -> tuple[float, float, float]:
    """(p25, median, p75) of peer time / our time: the quartiles of the
    repeats' paired ratios with two repeats or more, else the widest ratio
    the two points' quartiles allow."""
    from .table import quartiles

    med = float(theirs["time_us"]) / float(ours["time_us"])
    pairs = [b / a for a, b in zip(ours.get("times_us") or [], theirs.get("times_us") or []) if a > 0]
    if len(pairs) >= 2:
        lo, _, hi = quartiles(pairs)
    else:
        o25, _, o75 = quartile_times(ours)
        t25, _, t75 = quartile_times(theirs)
        lo, hi = t25 / o75, t75 / o25
    return min(lo, med), med, max(hi, med)


def _size_label(value, _pos=None) -> str:
    if value < 1:
        return ""
    exp = int(round(math.log2(value)))
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if exp >= shift:
            return f"{1 << (exp - shift)}{unit}"
    return str(1 << exp)


def wrap_title(title: str, width_in: float, points: float = TITLE_POINTS) -> str:
    """The title's lines wrapped to fit `width_in` inches at `points`."""
    chars = max(30, int(width_in * 72 / (points * 0.55)))
    return "\n".join(textwrap.fill(line, chars) if line else line for line in title.split("\n"))


class Layout:
    """Which panels a figure has: ops (columns), rows ("busbw", "latency",
    then one "speed-up over PEER" per peer), and the libraries drawn."""

    def __init__(self, entries: Mapping[str, Mapping[str, Mapping[int, Mapping]]], ours: str):
        self.entries = entries
        self.ours = ours
        self.ops = [op for op, impls in entries.items() if any(_points(p) for p in impls.values())]
        if not self.ops:
            raise ValueError("nothing to plot: no measured points")
        impls = list(dict.fromkeys(impl for op in self.ops for impl in entries[op]))
        self.impls = ([ours] if ours in impls else []) + [i for i in impls if i != ours]
        self.peers = [p for p in self.impls if p != ours and ours in impls and self._pairs(p)]
        small = any(n <= LATENCY_MAX_BYTES for op in self.ops for p in entries[op].values() for n in _points(p))
        self.rows = ["busbw"] + (["latency"] if small else []) + [f"speed-up over {p}" for p in self.peers]

    def _pairs(self, peer):
        return any(
            set(_points(self.entries[op].get(peer, {}))) & set(_points(self.entries[op].get(self.ours, {})))
            for op in self.ops
        )

    def size_in(self) -> tuple[float, float]:
        width = max(MIN_WIDTH_IN, PANEL_W_IN * len(self.ops) + 0.7)
        return width, PANEL_H_IN * len(self.rows) + 1.3


def _points(points: Mapping[int, Mapping], busbw: bool = False) -> list[int]:
    """The measured sizes (with a bus bandwidth above 0 when `busbw`: one
    rank's allreduce moves no bytes)."""
    return sorted(
        n
        for n, e in points.items()
        if e and e.get("time_us") and e["time_us"] > 0 and (not busbw or (e.get("busbw") or 0) > 0)
    )


def build_figure(entries, title: str, ours: str = "ringcc"):
    """The matplotlib Figure of `entries` (op -> impl -> nbytes -> entry with
    time_us, busbw and, where measured, samples_us and times_us)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    layout = Layout(entries, ours)
    width, height = layout.size_in()
    fig = Figure(figsize=(width, height), layout="constrained")
    colours = {impl: plt.get_cmap("tab10")(k % 10) for k, impl in enumerate(layout.impls)}
    markers = {impl: MARKERS[k % len(MARKERS)] for k, impl in enumerate(layout.impls)}
    grid = fig.add_gridspec(len(layout.rows), len(layout.ops))
    first_of_row, first_of_col = {}, {}
    for r, row in enumerate(layout.rows):
        for c, op in enumerate(layout.ops):
            sharex = first_of_row.get("latency") if row == "latency" else first_of_col.get(c)
            sharey = first_of_row.get(row)
            ax = fig.add_subplot(grid[r, c], sharex=sharex, sharey=sharey)
            first_of_row.setdefault(row, ax)
            if row != "latency":
                first_of_col.setdefault(c, ax)
            _draw(ax, row, entries[op], layout, colours, markers)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(_size_label))
            if row.startswith("speed-up"):  # 0.5, 1, 2 rather than 5 x 10^-1
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
                ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos, ax=ax: _ratio_minor_label(ax, v)))
            ax.grid(True, which="major", linewidth=0.5, alpha=0.5)
            ax.grid(True, which="minor", linewidth=0.3, alpha=0.2)
            ax.tick_params(which="both", labelsize=7)
            ax.set_title(f"{op}: {row}", fontsize=8.5)
            if c == 0:
                ax.set_ylabel(_ylabel(row), fontsize=8)
            if r == len(layout.rows) - 1 or row == "latency":
                ax.set_xlabel("message size (bytes)", fontsize=8)
    handles = [
        matplotlib.lines.Line2D([], [], color=colours[i], marker=markers[i], markersize=4, label=i)
        for i in layout.impls
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False)
    fig.suptitle(wrap_title(title, width), fontsize=TITLE_POINTS)
    return fig, layout


def _ratio_minor_label(ax, value: float) -> str:
    """Labels 2, 3 and 5 times a power of ten on a speed-up axis that spans
    less than a decade and a half (else the decades' labels suffice)."""
    low, high = ax.get_ylim()
    if value <= 0 or low <= 0 or high / low > 30:
        return ""
    mantissa = value / 10 ** math.floor(math.log10(value))
    return f"{value:g}" if any(abs(mantissa - m) < 1e-6 for m in (2, 3, 5)) else ""


def _ylabel(row: str) -> str:
    if row == "busbw":
        return "bus bandwidth (GB/s)"
    if row == "latency":
        return "time per call (us)"
    return f"{row} (x)"


def _draw(ax, row, impls, layout, colours, markers):
    """One panel: a line with quartile bars per library (per peer: its speed-up)."""
    style = dict(markersize=3.5, linewidth=1.3, capsize=2, elinewidth=0.8)
    if row.startswith("speed-up"):
        peer = row.removeprefix("speed-up over ")
        ours, theirs = impls.get(layout.ours, {}), impls.get(peer, {})
        xs = [n for n in _points(theirs) if n in _points(ours)]
        if xs:
            q = [_speedups(ours[n], theirs[n]) for n in xs]
            ax.errorbar(xs, [m for _, m, _ in q], yerr=_bars(q), color=colours[peer], marker=markers[peer], **style)
        ax.axhline(1.0, color="0.3", linewidth=0.8, linestyle="--")
        return
    for impl in layout.impls:
        points = impls.get(impl, {})
        xs = _points(points, busbw=row == "busbw")
        if row == "latency":
            xs = [n for n in xs if n <= LATENCY_MAX_BYTES]
        if not xs:
            continue
        q = [quartile_times(points[n]) for n in xs]
        if row == "busbw":  # busbw is inversely proportional to time: the fast quartile is the high bar
            q = [tuple(points[n]["busbw"] * med / t for t in (hi, med, lo)) for n, (lo, med, hi) in zip(xs, q)]
        ax.errorbar(xs, [m for _, m, _ in q], yerr=_bars(q), color=colours[impl], marker=markers[impl], **style)


def _bars(quartiles: Sequence[tuple[float, float, float]]):
    return [[max(0.0, m - lo) for lo, m, _ in quartiles], [max(0.0, hi - m) for _, m, hi in quartiles]]


def plot_results(path: str, entries, title: str, ours: str = "ringcc", dpi: int = PLOT_DPI) -> Layout:
    """Writes the figure of `entries` to `path` (type by extension); returns its layout."""
    import matplotlib

    error = picture_error(path)
    if error:
        raise ValueError(error)
    with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42, "ps.fonttype": 42}):
        fig, layout = build_figure(entries, title, ours)
        fig.savefig(path, dpi=dpi, metadata={"Title": title.split("\n")[0]})
    return layout


def plot_title(what: str, versions: Mapping[str, str | None], machine: Mapping[str, object]) -> str:
    """Two lines: what was measured with which versions, and where."""
    libs = ", ".join(f"{k} {v}" for k, v in versions.items() if v)
    load = f", load average {machine['load']}" if machine.get("load") is not None else ""
    return (
        f"{what} — {libs}\n"
        f"{machine.get('host')}: {machine.get('cpu')}, {machine.get('cpus')} CPUs, "
        f"{machine.get('os')}, Python {machine.get('python')}, {machine.get('date')}{load}"
    )
