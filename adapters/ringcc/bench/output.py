"""What the benches show besides their tables: a progress line while they run,
and a CSV file of the results (the plot is figure.py's).

Progress goes to stderr (the tables go to stdout, so `> results.txt` keeps
them clean): on a terminal one line rewritten in place, elsewhere (a pipe,
ringrun's output) one line every PROGRESS_INTERVAL_S at most.

The plot needs matplotlib (`pip install matplotlib`); `plot_available()` says
whether it is there, and the benches refuse --plot without it before they
start measuring.
"""

from __future__ import annotations

import csv
import datetime
import importlib.util
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

PROGRESS_INTERVAL_S = 2.0
MATPLOTLIB_MISSING = (
    f"--plot needs matplotlib, which is not installed for this Python ({sys.executable}): pip install matplotlib"
)


def format_elapsed(seconds: float) -> str:
    """12.3 -> '12 s', 125 -> '2:05', 3725 -> '1:02:05'."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, sec = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{sec:02d}" if hours else f"{minutes}:{sec:02d}"


class Progress:
    """The progress line of a run (write it on rank 0 only)."""

    def __init__(
        self,
        stream=None,
        enabled: bool = True,
        interval_s: float = PROGRESS_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        tty: bool | None = None,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.interval_s = interval_s
        self.clock = clock
        self.start = clock()
        self.last: float | None = None
        self.tty = self._isatty() if tty is None else tty
        self.open_line = False

    def _isatty(self) -> bool:
        try:
            return self.stream.isatty()
        except (AttributeError, ValueError):
            return False

    def elapsed(self) -> float:
        return self.clock() - self.start

    def update(self, text: str, force: bool = False) -> None:
        """Shows "# progress: <elapsed> elapsed, <text>" (throttled unless force)."""
        if not self.enabled:
            return
        now = self.clock()
        if not self.tty and not force and self.last is not None and now - self.last < self.interval_s:
            return
        self.last = now
        line = f"# progress: {format_elapsed(now - self.start)} elapsed, {text}"
        if self.tty:
            self.stream.write("\r" + line + "\033[K")
            self.open_line = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        """Ends the rewritten line (terminal), so that what follows starts on a line of its own."""
        if self.enabled and self.open_line:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.open_line = False


def point_text(
    impl: str, op: str, nbytes: int, index: int, total: int, repeat: int | None = None, repeats: int | None = None
) -> str:
    from .measure import format_size

    where = f"repeat {repeat + 1}/{repeats}, " if repeat is not None and repeats else ""
    return f"{where}{impl}: {op} {format_size(nbytes)} (point {index}/{total})"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description() -> dict[str, object]:
    """Where the run took place (for titles and files); load is the 1-minute
    load average when the description was taken (None where unknown)."""
    try:
        load = round(os.getloadavg()[0], 1)
    except (AttributeError, OSError):
        load = None
    return {
        "host": platform.node(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "load": load,
    }


def write_csv(path: str, rows: Iterable[Mapping[str, object]], columns: Sequence[str]) -> int:
    """Writes rows (dicts) with these columns; returns how many."""
    count = 0
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_value(row.get(k)) for k in columns})
            count += 1
    return count


def _csv_value(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def plot_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def rows_of(entries: Mapping[str, Mapping[str, Mapping[int, Mapping[str, object]]]]) -> list[dict[str, object]]:
    """Flattens op -> impl -> nbytes -> entry into rows sorted by op, impl, size."""
    rows = []
    for op, impls in entries.items():
        for impl, points in impls.items():
            for nbytes in sorted(points):
                rows.append(dict(points[nbytes], op=op, impl=impl, nbytes=nbytes))
    return rows
