"""A cost model of ringcc's collectives across hosts, fitted to the bench.

    python -m ringcc.bench cost_model RESULTS.json [...] [--ranks 8,16,...,1024]
        [--per-host 8] [--sizes 8,64K,1M,64M] [--network 25G:25:15 ...]
        [--alpha-from-fit] [--json OUT]

RESULTS are ringcc.bench.allreduce --json files (ringcc.bench.netns_bench writes one per
layout). The model (ringcc.bench.collective_costs) writes each algorithm as the
steps and bytes of ringcc's code; ringcc.bench.cost_fit fits its parameters, a
latency alpha and a bandwidth 1/beta per link kind (TCP between hosts, TCP
within a host, shared memory), a reduction cost and a per-call overhead, to
ringcc's measured points. It prints:

  1. the fitted parameters;
  2. every measured point beside the model's prediction, and the error;
  3. projections to --ranks ranks, --per-host ranks per host, on each
     --network NAME:GBIT_PER_S:ALPHA_US (default 25 Gb/s with 15 us and
     400 Gb/s with 8 us, typical one-way TCP latencies of such networks;
     --alpha-from-fit takes the fitted TCP latency instead): every algorithm
     ringcc can pick for each op (and some it does not have, marked), the one
     it picks (*), and the ring bound: bus factor * bytes / link bandwidth
     (2(n-1)/n * bytes / bandwidth for allreduce). Between hosts the
     network's bandwidth is the link's; within a host, TCP, shared memory,
     the reduction and the call keep their fitted values (this machine's)
     unless --shm-gbps, --reduce-gbps, --loop-alpha-us, --loop-gbps or
     --call-us give the projected hosts' own.
"""

from __future__ import annotations

import argparse
import json
import sys

from .collective_costs import ALGORITHMS, ONE_WAY_BYTES, Layout, cost_of, ring_bound, ringcc_pick, time_of
from .cost_fit import NAMESPACE_TIE, Point, fit, points_from_json, stretched
from .measure import format_size, parse_size

DEFAULT_RANKS = "8,16,32,64,128,256,512,1024"
DEFAULT_SIZES = "8,64K,1M,64M"
DEFAULT_NETWORKS = ("25G:25:15", "400G:400:8")


def parse_network(text: str) -> tuple[str, float, float]:
    """NAME:GBIT_PER_S:ALPHA_US -> (name, bytes per second, alpha seconds)."""
    try:
        name, gbit, alpha_us = text.split(":")
        return name, float(gbit) * 1e9 / 8, float(alpha_us) * 1e-6
    except ValueError:
        raise argparse.ArgumentTypeError(f"network {text!r}: NAME:GBIT_PER_S:ALPHA_US, e.g. 25G:25:15") from None


def predictions(points: list[Point], params: dict[str, float]) -> list[dict]:
    out = []
    for p in points:
        predicted = time_of(cost_of(p.op, stretched(p.layout, params), p.nbytes), params)
        out.append(
            {
                "layout": f"{p.layout.hosts}x{p.layout.per_host}",
                "one_machine": p.layout.one_machine,
                "transport": p.layout.transport,
                "op": p.op,
                "nbytes": p.nbytes,
                "algorithm": ringcc_pick(p.op, p.layout, p.nbytes),
                "measured_us": p.seconds * 1e6,
                "predicted_us": predicted * 1e6,
                "error": predicted / p.seconds - 1,
            }
        )
    return out


def network_params(params: dict[str, float], bytes_per_s: float, alpha: float | None) -> dict[str, float]:
    """The fitted parameters with the network's bandwidth (and latency) between hosts."""
    out = dict(params)
    # Both streams of a link cross the same network.
    out["beta_net"] = out["beta_way"] = out["beta_frame"] = 1.0 / bytes_per_s
    if alpha is not None:
        out["alpha_net"] = alpha
    return out


def host_overrides(params: dict[str, float], a) -> dict[str, float]:
    """The fitted parameters with the projected hosts' own figures where given
    (--shm-gbps, --host-gbps, --reduce-gbps, --loop-alpha-us, --loop-gbps,
    --call-us)."""
    out = dict(params)
    if a.shm_gbps:
        out["beta_shm"] = out["beta_read"] = 1 / (a.shm_gbps * 1e9)
        # A server's memory outruns the copies of its ranks at that speed
        # unless --host-gbps says otherwise: the small machine's fitted
        # figure does not carry over.
        out["beta_host"] = 0.0
    if a.host_gbps:
        out["beta_host"] = 1 / (a.host_gbps * 1e9)
    if a.reduce_gbps:
        out["gamma"] = 1 / (a.reduce_gbps * 1e9)
    if a.loop_alpha_us is not None:
        out["alpha_loop"] = a.loop_alpha_us * 1e-6
    if a.loop_gbps:
        out["beta_loop"] = 1 / (a.loop_gbps * 1e9)
    if a.call_us is not None:
        out["o"] = a.call_us * 1e-6
    return out


def projections(params, networks, ranks_list, per_host, sizes, alpha_from_fit, cpus_per_rank=0.0) -> list[dict]:
    out = []
    for name, bytes_per_s, alpha in networks:
        p = network_params(params, bytes_per_s, None if alpha_from_fit else alpha)
        for op, algorithms in ALGORITHMS.items():
            for nbytes in sizes:
                for ranks in ranks_list:
                    layout = Layout(max(1, ranks // per_host), min(per_host, ranks), cpus_per_rank=cpus_per_rank)
                    # Within one host no byte crosses the network: no network bound.
                    bound = ring_bound(op, ranks, nbytes, bytes_per_s) if layout.hosts > 1 else None
                    pick = ringcc_pick(op, layout, nbytes)
                    times = {a: time_of(fn(layout, nbytes), p) for a, fn, _ in algorithms}
                    out.append(
                        {
                            "network": name,
                            "alpha_net_us": p["alpha_net"] * 1e6,
                            "op": op,
                            "nbytes": nbytes,
                            "ranks": ranks,
                            "hosts": layout.hosts,
                            "times_us": {a: t * 1e6 for a, t in times.items()},
                            "pick": pick,
                            "bound_us": bound * 1e6 if bound is not None else None,
                            "pick_of_bound": bound / times[pick] if bound is not None and times[pick] > 0 else None,
                        }
                    )
    return out


def bandwidth_text(beta: float) -> str:
    return f"{1 / beta / 1e9:8.2f} GB/s" if beta > 0 else "     inf GB/s"


def params_text(params: dict[str, float]) -> str:
    lines = ["# fitted parameters"]
    lines.append(f"  per call       o     = {params['o'] * 1e6:8.2f} us")
    for kind, what in (("net", "TCP between hosts"), ("loop", "TCP within a host"), ("shm", "shared memory")):
        bw = bandwidth_text(params[f"beta_{kind}"])
        lines.append(f"  {what:<18} alpha = {params[f'alpha_{kind}'] * 1e6:8.2f} us, 1/beta = {bw}")
        if kind == "loop":
            way = bandwidth_text(params.get("beta_way", 0.0))
            under = f"rings under {ONE_WAY_BYTES >> 20} MiB"
            lines.append(f"  {'TCP one-way streams':<18}                    1/beta = {way}  ({under})")
            frames = bandwidth_text(params.get("beta_frame", 0.0))
            lines.append(f"  {'agreement frames':<18}                    1/beta = {frames}  (TCP)")
        if kind == "shm":
            read = bandwidth_text(params.get("beta_read", 0.0))
            lines.append(f"  {'reads of a peer':<18}                    1/beta = {read}  (blocks over the area)")
            host = bandwidth_text(params.get("beta_host", 0.0))
            lines.append(f"  {'host memory':<18}                    1/beta = {host}  (all its ranks' copies at once)")
    gamma = params["gamma"]
    lines.append(f"  reduction      1/gamma = {1 / gamma / 1e9:.2f} GB/s" if gamma > 0 else "  reduction: free")
    stretch = params.get("crowd_stretch", 1.0)
    lines.append(
        f"  crowded ranks  s     = {stretch:8.2f}    (r ranks per CPU: latencies and CPU work x (1 + s (r - 1)))"
    )
    return "\n".join(lines)


def errors_text(rows: list[dict]) -> str:
    lines = ["# measured (ringcc, median of repeats) against the model", ""]
    lines.append(
        f"{'layout':>7} {'op':>9} {'size':>7} {'algorithm':>28} {'measured us':>12} {'model us':>10} {'error':>7}"
    )
    for r in rows:
        lines.append(
            f"{r['layout']:>7} {r['op']:>9} {format_size(r['nbytes']):>7} {r['algorithm']:>28} "
            f"{r['measured_us']:12.1f} {r['predicted_us']:10.1f} {r['error'] * 100:+6.1f}%"
        )
    if rows:
        worst = max(rows, key=lambda r: abs(r["error"]))
        within = sum(abs(r["error"]) <= 0.25 for r in rows)
        lines.append("")
        lines.append(
            f"# {within}/{len(rows)} points within 25%; worst {worst['error'] * 100:+.1f}% "
            f"({worst['layout']} {worst['op']} {format_size(worst['nbytes'])})"
        )
    return "\n".join(lines)


def projection_text(rows: list[dict], alpha_from_fit: bool) -> str:
    lines = []
    key = None
    for r in rows:
        here = (r["network"], r["op"], r["nbytes"])
        if here != key:
            key = here
            names = list(r["times_us"])
            source = "fitted" if alpha_from_fit else "typical"
            lines += [
                "",
                f"# {r['network']} ({source} alpha {r['alpha_net_us']:.1f} us): {r['op']} of "
                f"{format_size(r['nbytes'])}, us (* ringcc's pick; + not in ringcc)",
                f"{'ranks':>6} {'hosts':>5} "
                + " ".join(f"{n + ('' if _in_ringcc(r['op'], n) else '+'):>29}" for n in names)
                + f" {'bound':>10} {'pick/bound':>10}",
            ]
        cells = " ".join(f"{r['times_us'][n]:>28.1f}{'*' if n == r['pick'] else ' '}" for n in r["times_us"])
        ratio = f"{r['pick_of_bound'] * 100:9.1f}%" if r["pick_of_bound"] is not None else "         -"
        bound = f"{r['bound_us']:>10.1f}" if r["bound_us"] is not None else f"{'-':>10}"
        lines.append(f"{r['ranks']:>6} {r['hosts']:>5} {cells} {bound} {ratio}")
    return "\n".join(lines)


def _in_ringcc(op: str, name: str) -> bool:
    return any(a == name and ours for a, _, ours in ALGORITHMS[op])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m ringcc.bench cost_model", description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="ringcc.bench.allreduce --json files")
    p.add_argument("--ranks", default=DEFAULT_RANKS, help=f"projected job sizes (default {DEFAULT_RANKS})")
    p.add_argument("--per-host", type=int, default=8, help="ranks per host in the projections (default 8)")
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"projected sizes (default {DEFAULT_SIZES})")
    p.add_argument("--network", action="append", type=parse_network, help="NAME:GBIT_PER_S:ALPHA_US (repeatable)")
    p.add_argument("--alpha-from-fit", action="store_true", help="the networks' latency is the fitted TCP one")
    p.add_argument(
        "--fit-loop-apart",
        action="store_true",
        help="fit TCP within a host apart from TCP between hosts (by default one: namespaces share a kernel)",
    )
    p.add_argument(
        "--shm-gbps",
        type=float,
        help="projections: shared-memory bandwidth per rank, staged or read from a peer (default: fitted)",
    )
    p.add_argument(
        "--host-gbps",
        type=float,
        help="projections: a host's memory bandwidth, shared by its ranks' copies (default: fitted; none with "
        "--shm-gbps)",
    )
    p.add_argument("--reduce-gbps", type=float, help="projections: reduction speed (default: fitted)")
    p.add_argument("--loop-alpha-us", type=float, help="projections: TCP latency within a host (default: fitted)")
    p.add_argument("--loop-gbps", type=float, help="projections: TCP bandwidth within a host (default: fitted)")
    p.add_argument("--call-us", type=float, help="projections: cost of a call (default: fitted)")
    p.add_argument(
        "--cpus-per-rank",
        type=float,
        default=0.0,
        help="projections: CPUs per rank on every host (ringcc pipelines the hierarchical allreduce from 2; default 0)",
    )
    p.add_argument(
        "--one-machine",
        action="store_true",
        help="the results' hosts were network namespaces of one machine: the flows of a step share its CPUs",
    )
    p.add_argument("--json", metavar="PATH", help="write the parameters, errors and projections here")
    a = p.parse_args(argv)
    points = [pt for path in a.results for pt in points_from_json(path, one_machine=a.one_machine)]
    if not points:
        p.error("no ringcc points in the results")
    params = fit(points, tie={} if a.fit_loop_apart else NAMESPACE_TIE)
    errors = predictions(points, params)
    networks = a.network or [parse_network(t) for t in DEFAULT_NETWORKS]
    ranks = [int(x) for x in a.ranks.split(",")]
    sizes = [parse_size(x) for x in a.sizes.split(",")]
    projected = projections(
        host_overrides(params, a), networks, ranks, a.per_host, sizes, a.alpha_from_fit, a.cpus_per_rank
    )
    print(params_text(params))
    print()
    print(errors_text(errors))
    print(projection_text(projected, a.alpha_from_fit))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"params": params, "errors": errors, "projections": projected}, f, indent=1)
        print(f"\n# written to {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
