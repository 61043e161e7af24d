"""Draws a saved run of the allreduce bench again, from its --json file.

    python -m ringcc.bench plot results.json results.png [--dpi 300]

The same figure as `ringcc.bench allreduce --plot` (ringcc.bench.figure):
busbw, small-message latency and the speed-up over each peer against
message size, one column per collective, quartile bars, the versions and
the machine (as the run recorded them) in the title. The picture's type
follows its extension: .png, .svg or .pdf. Needs matplotlib.
"""

import argparse
import json
import sys

from .figure import PLOT_DPI, picture_error, plot_results, plot_title
from .output import MATPLOTLIB_MISSING, plot_available


def entries_of(doc):
    """op -> impl -> {nbytes: entry} from an allreduce bench JSON document."""
    entries = {}
    for r in doc["results"]:
        entries.setdefault(r["op"], {}).setdefault(r["impl"], {})[r["nbytes"]] = r
    return entries


def title_of(doc):
    meta = doc["meta"]
    return plot_title(
        f"{meta['ranks']} ranks ({meta.get('transport', '?')}), {meta['dtype']}, "
        f"median of {meta['repeats']} repeat(s), bars: quartiles",
        meta.get("versions", {}),
        meta.get("machine", {"host": meta.get("host"), "cpus": meta.get("cpus")}),
    )


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m ringcc.bench plot", description=__doc__.splitlines()[0])
    p.add_argument("json", help="a file written by ringcc.bench allreduce --json")
    p.add_argument("picture", help="the picture to write: .png, .svg or .pdf")
    p.add_argument("--dpi", type=int, default=PLOT_DPI, help=f"a PNG's dots per inch (default {PLOT_DPI})")
    a = p.parse_args(argv)
    if not plot_available():
        p.error(MATPLOTLIB_MISSING)
    if picture_error(a.picture):
        p.error(picture_error(a.picture))
    with open(a.json) as f:
        doc = json.load(f)
    layout = plot_results(a.picture, entries_of(doc), title_of(doc), dpi=a.dpi)
    print(f"plot written to {a.picture} ({len(layout.rows)} x {len(layout.ops)} panels: {', '.join(layout.rows)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
