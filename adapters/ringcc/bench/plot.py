"""Plots a saved run of ringcc.bench.allreduce again, from its --json file.

    python -m ringcc.bench plot results.json results.png

The same figure as `ringcc.bench.allreduce --plot`: busbw against message size, one
panel per op, one line per library, log axes, the versions and the machine
(as the run recorded them) in the title. Needs matplotlib.
"""

import argparse
import json
import sys

from .output import MATPLOTLIB_MISSING, plot_available, plot_busbw, plot_title


def series_of(doc):
    """op -> impl -> {nbytes: busbw} from a ringcc.bench.allreduce JSON document."""
    series = {}
    for r in doc["results"]:
        series.setdefault(r["op"], {}).setdefault(r["impl"], {})[r["nbytes"]] = r["busbw"]
    return series


def title_of(doc):
    meta = doc["meta"]
    return plot_title(
        f"busbw, {meta['ranks']} ranks, {meta['dtype']}, median of {meta['repeats']} repeat(s)",
        meta.get("versions", {}),
        meta.get("machine", {"host": meta.get("host"), "cpus": meta.get("cpus")}),
    )


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m ringcc.bench plot", description=__doc__.splitlines()[0])
    p.add_argument("json", help="a file written by ringcc.bench.allreduce --json")
    p.add_argument("png", help="the picture to write")
    a = p.parse_args(argv)
    if not plot_available():
        p.error(MATPLOTLIB_MISSING)
    with open(a.json) as f:
        doc = json.load(f)
    plot_busbw(a.png, series_of(doc), title_of(doc))
    print(f"plot written to {a.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
