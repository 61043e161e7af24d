"""Fitting the cost model's parameters to the bench's own results.

A point is (layout, op, bytes, measured seconds) for ringcc; its predicted
time is linear in the parameters (ringcc.bench.collective_costs), so the fit is a
least-squares problem. It minimises the relative error (each row divided by
the measured time, so 8 B and 64 MiB weigh alike) with every parameter >= 0,
solved exactly: the unconstrained solution on every subset of the
parameters, the best one whose values are all >= 0 (12 parameters: 4,096
small solves).

Where ranks outnumber a machine's CPUs (namespace hosts of one machine),
the points' layouts carry that ratio r (Layout.crowding), and a crowded
rank's latencies, shared-memory copies and reductions take 1 + s (r - 1)
times as long (collective_costs.crowded). s = 1 would be a fair share of
the CPUs; a waiting rank also waits for the scheduler to run its peer and
to run it again after every wake-up, so s is fitted too: the least-squares
fit for each s of STRETCHES, the best one kept ("crowd_stretch" in the
parameters).

`tie` merges link kinds that are one thing where the results were taken:
between network namespaces of one machine, "net" and "loop" are both the
kernel's TCP, so they are fitted as one ({"loop": "net"}).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from .collective_costs import PARAMS, Layout, cost_of, linear_terms, time_of

# Values the fit starts from to decide which concurrent link is the slowest:
# TCP 20 us and 2 GB/s, shared memory 2 us and 10 GB/s, 4 GB/s of reduction.
REFERENCE = {
    "o": 5e-6,
    "alpha_net": 20e-6,
    "beta_net": 1 / 2e9,
    "alpha_loop": 20e-6,
    "beta_loop": 1 / 2e9,
    "beta_way": 1 / 2e9,
    "alpha_shm": 2e-6,
    "beta_shm": 1 / 10e9,
    # Reads of a peer's memory pin its pages: slower than staged copies
    # (6 against 60 GB/s fitted here), so two ranks reading at once wait on
    # their reads before they fill the host's memory.
    "beta_read": 1 / 3e9,
    # As slow as one rank's copies: ranks copying at once start on the
    # host's memory, and leave it where the fitted values say so.
    "beta_host": 1 / 10e9,
    "beta_frame": 1 / 2e9,
    "gamma": 1 / 4e9,
}
NAMESPACE_TIE = {"loop": "net"}
# The crowding stretches the fit tries (see above).
STRETCHES = tuple(1.0 + 0.25 * i for i in range(13))


@dataclass(frozen=True)
class Point:
    layout: Layout
    op: str
    nbytes: int
    seconds: float
    source: str = ""


def points_from_json(path: str, impl: str = "ringcc", one_machine: bool = False) -> list[Point]:
    """ringcc's points of a ringcc.bench.allreduce --json file. The layout comes from
    its meta (hosts, ranks_per_host, transport); files without them are taken
    as one host. one_machine: the hosts were namespaces of one machine."""
    with open(path) as f:
        doc = json.load(f)
    meta = doc["meta"]
    ranks = int(meta["ranks"])
    per_host = int(meta.get("ranks_per_host") or ranks)
    hosts = int(meta.get("hosts") or max(1, ranks // per_host))
    cpus = int(meta.get("cpus") or (meta.get("machine") or {}).get("cpus") or 0)
    crowding = ranks / cpus if one_machine and cpus and ranks > cpus else 1.0
    layout = Layout(hosts, per_host, meta.get("transport") or "shm+tcp", one_machine and hosts > 1, crowding=crowding)
    return [
        Point(layout, r["op"], int(r["nbytes"]), float(r["time_us"]) * 1e-6, path)
        for r in doc["results"]
        if r.get("impl") == impl and r.get("time_us")
    ]


def tied(terms: Mapping[str, float], tie: Mapping[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, c in terms.items():
        kind = name.partition("_")[2]
        if kind in tie:
            name = name.partition("_")[0] + "_" + tie[kind]
        out[name] = out.get(name, 0.0) + c
    return out


def untied(params: Mapping[str, float], tie: Mapping[str, str]) -> dict[str, float]:
    """Fitted values for every parameter: a tied kind takes its partner's."""
    out = {name: float(params.get(name, 0.0)) for name in PARAMS}
    for kind, into in tie.items():
        for what in ("alpha", "beta"):
            out[f"{what}_{kind}"] = out[f"{what}_{into}"]
    return out


def stretched(layout: Layout, params: Mapping[str, float]) -> Layout:
    """The layout whose crowding is its ranks per CPU r, as the fitted
    parameters stretch it: 1 + s (r - 1)."""
    if layout.crowding <= 1.0:
        return layout
    s = float(params.get("crowd_stretch", 1.0))
    return replace(layout, crowding=1.0 + s * (layout.crowding - 1.0))


def design(points: Iterable[Point], tie: Mapping[str, str], reference: Mapping[str, float]):
    """(matrix, names): one row per point, one column per parameter the points use."""
    rows = [tied(linear_terms(cost_of(p.op, stretched(p.layout, reference), p.nbytes), reference), tie) for p in points]
    names = [n for n in PARAMS if any(abs(r.get(n, 0.0)) > 0 for r in rows)]
    return np.array([[r.get(n, 0.0) for n in names] for r in rows], dtype=np.float64), names


def nonnegative_least_squares(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin |a x - b| with x >= 0, by trying every support (few columns)."""
    cols = a.shape[1]
    if cols > 12:
        raise ValueError("nonnegative_least_squares: at most 12 parameters")
    best, best_x = np.inf, np.zeros(cols)
    for k in range(1, cols + 1):
        for support in itertools.combinations(range(cols), k):
            sub = a[:, support]
            x_sub, *_ = np.linalg.lstsq(sub, b, rcond=None)
            if np.any(x_sub < 0):
                continue
            residual = float(np.sum((sub @ x_sub - b) ** 2))
            if residual < best - 1e-15:
                best = residual
                best_x = np.zeros(cols)
                best_x[list(support)] = x_sub
    return best_x


def relative_errors(points: list[Point], params: Mapping[str, float]) -> np.ndarray:
    """predicted / measured - 1 for each point."""
    return np.array(
        [time_of(cost_of(p.op, stretched(p.layout, params), p.nbytes), params) / p.seconds - 1 for p in points]
    )


def fit_linear(points: list[Point], tie: Mapping[str, str], stretch: float, rounds: int = 3) -> dict[str, float]:
    """The linear parameters that minimise the points' relative errors for
    one crowding stretch. Which of the alternatives of a phase (concurrent
    links, a rank's copies or its host's memory) is slowest is decided with
    the reference values first, then with the fitted ones (a few rounds);
    the round whose parameters predict the points best is kept. A parameter
    that no chosen alternative uses is 0 in what a round returns, so that
    its predictions are the ones it fitted."""
    measured = np.array([p.seconds for p in points])
    current: dict[str, float] = dict(REFERENCE, crowd_stretch=stretch)
    best, best_error = None, np.inf
    for _ in range(rounds):
        a, names = design(points, tie, current)
        x = nonnegative_least_squares(a / measured[:, None], np.ones(len(points)))
        fitted = {**untied(dict(zip(names, x)), tie), "crowd_stretch": stretch}
        error = float(np.sum(relative_errors(points, fitted) ** 2))
        if error < best_error - 1e-12:
            best, best_error = fitted, error
        # Parameters no point uses keep their reference values for choosing links.
        following = {n: fitted[n] if n in names or n.partition("_")[2] in tie else REFERENCE[n] for n in PARAMS}
        following["crowd_stretch"] = stretch
        if following == current:
            break
        current = following
    return best


def fit(points: list[Point], tie: Mapping[str, str] = NAMESPACE_TIE, rounds: int = 3) -> dict[str, float]:
    """Parameters that minimise the points' relative errors: the linear
    ones for each crowding stretch, the stretch whose fit is best (1 when
    no point is crowded)."""
    if not points:
        raise ValueError("fit: no points")
    crowded_points = any(p.layout.crowding > 1.0 for p in points)
    best, best_error = None, np.inf
    for stretch in STRETCHES if crowded_points else (1.0,):
        params = fit_linear(points, tie, stretch, rounds)
        error = float(np.sum(relative_errors(points, params) ** 2))
        if error < best_error - 1e-12:
            best, best_error = params, error
    return best
