"""ringcc.bench.allreduce across network-namespace hosts on this machine.

    python -m ringcc.bench netns_bench [--layouts 2x2,2x1,4x1,1x2] [--out DIR]
        [--compare gloo,mpi] [--bandwidth-seconds 2] [-- BENCH OPTIONS...]

For each layout HOSTSxRANKS (hosts x ranks per host) it makes HOSTS
namespaces (ringcc.bench.netns_hosts), measures the TCP bandwidth from the
first to the second, one way and both ways at once
(ringcc.bench.tcp_bandwidth), and the time of one round of a frame
exchange between them (ringcc.bench.tcp_exchange), and runs

    ringrun --no-prefix -H h0:R,h1:R,... --agent 'ip netns exec {host}'
        --master-addr ADDR0 --network-interface SUBNET
        python -m ringcc.bench allreduce --compare gloo,mpi
        --mpi-agent 'ip netns exec {host}' --mpi-own-hostnames
        --json DIR/LAYOUT.json --csv DIR/LAYOUT.csv BENCH OPTIONS...

so ringcc, gloo and Open MPI (mpirun beside rank 0, its daemons reaching the
other namespaces through the same agent) are timed in one command. A
layout of one host (1x2) runs the bench on this machine without
namespaces: shared memory only, which the cost model's fit needs. The
namespaces are removed whatever happens. DIR/summary.json holds, per layout,
the TCP bandwidths and exchange round, each op's largest-size busbw as a
fraction of the bandwidths, and the smallest speed-up over each peer across
sizes. Needs root.

The namespaces share this machine's CPUs, and every byte between them costs
CPU time (ringcc.bench.machine_cpu). So the summary also gives what the
TCP stream kept busy and what a byte of it cost in CPU time, and per op,
at its largest size, the CPUs busy and the CPU time spent per byte that
any algorithm of that op must move between the hosts
(tcp_bytes_per_busbw_byte): the collective's own cost of a byte between
hosts, beside the stream's.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys

from . import tcp_bandwidth, tcp_exchange
from .netns_hosts import NamespaceHosts
from .peers_mpi import PACKAGE_PARENT

DEFAULT_LAYOUTS = "2x2,2x1,4x1,1x2"


def parse_layout(text: str) -> tuple[int, int]:
    hosts, _, ranks = text.lower().partition("x")
    try:
        h, r = int(hosts), int(ranks)
    except ValueError:
        raise argparse.ArgumentTypeError(f"layout {text!r}: HOSTSxRANKS, e.g. 2x2") from None
    if h < 1 or r < 1 or h * r < 2:
        raise argparse.ArgumentTypeError(f"layout {text!r}: at least 1 host, 1 rank per host and 2 ranks")
    return h, r


def find_ringrun() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "ringrun")
    found = here if os.access(here, os.X_OK) else shutil.which("ringrun")
    if not found:
        raise SystemExit("ringcc.bench.netns_bench: ringrun not found (next to the interpreter or on PATH)")
    return found


def ringrun_command(hosts: NamespaceHosts, ranks_per_host: int, compare: str, out_stem: str, bench_args):
    return [
        find_ringrun(),
        "--no-prefix",
        "-np",
        str(len(hosts.names) * ranks_per_host),
        "-H",
        hosts.host_list(ranks_per_host),
        "--agent",
        hosts.AGENT,
        "--master-addr",
        hosts.addresses[0],
        "--network-interface",
        hosts.subnet,
        # Ranks started through an agent get only the job's variables and these.
        *("-x", "PYTHONPATH", "-x", "PATH"),
        sys.executable,
        "-m",
        "ringcc.bench.allreduce",
        "--compare",
        compare,
        "--mpi-agent",
        hosts.AGENT,
        "--mpi-own-hostnames",
        "--mpi-interface",
        hosts.subnet,
        "--json",
        out_stem + ".json",
        "--csv",
        out_stem + ".csv",
        *bench_args,
    ]


def one_host_command(ranks: int, compare: str, out_stem: str, bench_args):
    """The same bench on this machine alone: every rank on one host (shared memory)."""
    return [
        find_ringrun(),
        "--no-prefix",
        "-np",
        str(ranks),
        sys.executable,
        "-m",
        "ringcc.bench.allreduce",
        "--compare",
        compare,
        "--json",
        out_stem + ".json",
        "--csv",
        out_stem + ".csv",
        *bench_args,
    ]


def run_job(cmd, timeout_s: float) -> int:
    """Runs the job in a session of its own; on timeout the whole session goes."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
    env["PATH"] = os.pathsep.join(p for p in (os.path.dirname(sys.executable), env.get("PATH")) if p)
    print("# " + shlex.join(cmd), flush=True)
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"# the job did not finish within {timeout_s:g} s: stopped", flush=True)
        return -1
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if proc.poll() is not None:
                break
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass


def tcp_bytes_per_busbw_byte(op: str, hosts: int, ranks_per_host: int) -> float | None:
    """The fewest bytes that must cross between hosts, summed over hosts,
    per byte of the op's busbw (nccl-tests' definitions), whatever the
    algorithm; None for an op without such a bound here, or one host.

    With S the bytes of one rank's buffer (allgather: of the output) and
    n = hosts * ranks_per_host, the hosts taken as the parties of the
    collective's bandwidth lower bound: in an allreduce each host sends at
    least 2 (hosts - 1) / hosts S, in an allgather or a reduce-scatter each
    receives at least (hosts - 1) / hosts S, and a broadcast reaches
    hosts - 1 hosts with S each. Divided by the busbw's bytes per call:
    2 (n - 1) / n S for an allreduce, (n - 1) / n S for an allgather or a
    reduce-scatter, S for a broadcast."""
    if hosts < 2:
        return None
    n = hosts * ranks_per_host
    if op in ("allreduce", "allgather", "reduce_scatter"):
        return (hosts - 1) * n / (n - 1)
    if op == "broadcast":
        return float(hosts - 1)
    return None


def layout_summary(bench_json: str, tcp_gbps: float, layout=None, both_ways_gbps: float | None = None) -> dict:
    """Per op: the largest size's ringcc busbw / TCP bandwidth (and / what
    one way carries while the other runs too, given both_ways_gbps), and per peer
    the smallest and median speed-up of ringcc across sizes. With the
    bench's CPU readings, also the CPUs busy at the largest size and, given
    the layout (hosts, ranks per host), the CPU time (ns) spent per byte
    that must cross between hosts (tcp_bytes_per_busbw_byte)."""
    with open(bench_json) as f:
        doc = json.load(f)
    out = {}
    for op in doc["meta"]["ops"]:
        rows = [r for r in doc["results"] if r["op"] == op]
        ours = {r["nbytes"]: r for r in rows if r["impl"] == "ringcc"}
        if not ours:
            continue
        largest = max(ours)
        entry = {"largest_bytes": largest, "busbw_of_tcp": ours[largest]["busbw"] / tcp_gbps, "peers": {}}
        if both_ways_gbps:
            entry["busbw_of_tcp_both_ways"] = ours[largest]["busbw"] / both_ways_gbps
        cpus = ours[largest].get("cpus_busy")
        if cpus is not None:
            entry["cpus_busy"] = cpus
            per_busbw = tcp_bytes_per_busbw_byte(op, *layout) if layout is not None else None
            if per_busbw and ours[largest]["busbw"] > 0:
                entry["cpu_ns_per_host_byte"] = cpus / (ours[largest]["busbw"] * per_busbw)
        for impl in sorted({r["impl"] for r in rows} - {"ringcc"}):
            ratios = {r["nbytes"]: r["ratio"] for r in rows if r["impl"] == impl and r.get("ratio")}
            if ratios:
                worst = min(ratios, key=ratios.get)
                entry["peers"][impl] = {
                    "min_speedup": ratios[worst],
                    "min_at_bytes": worst,
                    "speedups": {str(n): ratios[n] for n in sorted(ratios)},
                }
        out[op] = entry
    return out


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    bench_args = []
    if "--" in argv:
        cut = argv.index("--")
        argv, bench_args = argv[:cut], argv[cut + 1 :]
    p = argparse.ArgumentParser(prog="python -m ringcc.bench netns_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--layouts", default=DEFAULT_LAYOUTS, help=f"HOSTSxRANKS, comma list (default {DEFAULT_LAYOUTS})")
    p.add_argument("--out", default="netns-results", help="directory for the results (default netns-results)")
    p.add_argument("--compare", default="gloo,mpi", help="ringcc.bench.allreduce's --compare (default gloo,mpi)")
    p.add_argument("--bandwidth-seconds", type=float, default=2.0, help="each TCP bandwidth transfer (default 2)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds each layout's job may take (default 3600)")
    a = p.parse_args(argv)
    layouts = [parse_layout(t) for t in a.layouts.split(",") if t.strip()]
    os.makedirs(a.out, exist_ok=True)
    summary_path = os.path.join(a.out, "summary.json")
    summary = {}
    if os.path.exists(summary_path):
        with open(summary_path) as f:
            summary = json.load(f)
    failed = 0
    for index, (nhosts, per_host) in enumerate(layouts):
        name = f"{nhosts}x{per_host}"
        stem = os.path.join(os.path.abspath(a.out), name)
        tcp = exchange = None
        if nhosts == 1:  # one host: this machine's own namespace, shared memory (for the model's fit)
            code = run_job(one_host_command(per_host, a.compare, stem, bench_args), a.timeout)
        else:
            with NamespaceHosts(nhosts, subnet_index=200 + index) as hosts:
                hosts.wait_reachable()
                print(f"# {name}: {hosts.describe()}", flush=True)
                tcp = tcp_bandwidth.measure(hosts, 0, 1, seconds=a.bandwidth_seconds)
                cost = tcp.get("cpu_ns_per_byte")
                print(
                    f"# {name}: one-way TCP {hosts.names[0]} -> {hosts.names[1]}: {tcp['gbps']:.2f} GB/s"
                    + (f", {cost:.3f} ns of CPU a byte" if cost else ""),
                    flush=True,
                )
                tcp["both_ways"] = tcp_bandwidth.measure(hosts, 0, 1, seconds=a.bandwidth_seconds, both_ways=True)
                print(f"# {name}: the same, both ways at once: {tcp['both_ways']['gbps']:.2f} GB/s each", flush=True)
                exchange = tcp_exchange.measure(hosts, 0, 1)
                print(
                    f"# {name}: a {exchange['bytes']} B frame exchange between them: "
                    f"{exchange['us_per_round']:.1f} us a round",
                    flush=True,
                )
                code = run_job(ringrun_command(hosts, per_host, a.compare, stem, bench_args), a.timeout)
        entry = {"tcp": tcp, "exchange": exchange, "exit": code, "json": stem + ".json"}
        if code == 0 and os.path.exists(stem + ".json"):
            if tcp is not None:
                entry["ops"] = layout_summary(stem + ".json", tcp["gbps"], (nhosts, per_host), tcp["both_ways"]["gbps"])
        else:
            failed += 1
        summary[name] = entry
        with open(summary_path, "w") as f:
            json.dump(summary, f, indent=1)
    print(f"# summary written to {summary_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
