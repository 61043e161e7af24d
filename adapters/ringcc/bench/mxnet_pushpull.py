"""The MXNet kvstore "ring" (pushpull) against the core's allreduce on NumPy.

Run in the MXNet virtual environment (see docs/mxnet.md), from the repository root:

    $V/bin/python -m ringcc.launcher -np 2 $V/bin/python -m ringcc.bench mxnet_pushpull \
        [--size 64M] [--iters 10] [--repeats 5] [--json PATH]

Times, per iteration, a sum over the ranks of --size bytes of float32 per rank:

  core            ringcc.allreduce_(x)                    (NumPy, in place: the reference)
  core-named      ringcc.allreduce_async_(x, name=...).wait()   (the core's background
                  engine, which the MXNet adapter uses)
  pushpull        kv.pushpull(0, a); a.wait_to_read()     (kv = mx.kv.create("ring"), in place
                  on the NDArray's memory, inside MXNet's engine)
  pushpull-sync   the same with RINGCC_MXNET_ASYNC=0 (the caller waits, no engine operation)
  pushpull-16keys kv.pushpull(list of 16 keys, 16 NDArrays of size/16); wait_to_read
                  (one operation, the 16 tensors fused by the core)
  core-16keys     ringcc.grouped_allreduce_(16 NumPy arrays of size/16)   (the core's
                  fusion alone, for comparison with pushpull-16keys)
  rmx-allreduce_  ringcc.mxnet.allreduce_(a, op="sum"); a.wait_to_read()

Buffers hold zeros (a fixed point of sum). After warm-up, each repeat times
--iters iterations of each variant (the variants interleaved, R = --repeats
times). Two figures per variant, each with its ratio to `core`: "mean", the
loop's time per iteration, maximum over ranks, median over the repeats; and
"median it", the median of the single iterations' times, maximum over ranks
(robust to the spikes of a busy machine). The JSON has every repeat.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

from .measure import format_size, parse_size

VARIANTS = ("core", "core-named", "pushpull", "pushpull-sync", "pushpull-16keys", "core-16keys", "rmx-allreduce_")


def _loops(count):
    import mxnet as mx

    import ringcc
    import ringcc.mxnet as rmx

    kv = mx.kv.create("ring")
    x = np.zeros(count, np.float32)
    a = mx.nd.zeros((count,), dtype="float32")
    parts = [mx.nd.zeros((count // 16,), dtype="float32") for _ in range(16)]
    np_parts = [np.zeros(count // 16, np.float32) for _ in range(16)]
    a.wait_to_read()
    mx.nd.waitall()

    def core():
        ringcc.allreduce_(x)

    def core_named():
        ringcc.allreduce_async_(x, name="bench.core").wait()

    def pushpull():
        kv.pushpull(0, a)
        a.wait_to_read()

    def pushpull_sync():
        os.environ["RINGCC_MXNET_ASYNC"] = "0"
        try:
            kv.pushpull(0, a)
        finally:
            del os.environ["RINGCC_MXNET_ASYNC"]

    keys = list(range(100, 116))

    def pushpull_16keys():
        kv.pushpull(keys, parts)
        for p in parts:
            p.wait_to_read()

    def core_16keys():
        ringcc.grouped_allreduce_(np_parts)

    def rmx_allreduce():
        rmx.allreduce_(a, op="sum", name="bench.rmx")
        a.wait_to_read()

    return {
        "core": core,
        "core-named": core_named,
        "pushpull": pushpull,
        "pushpull-sync": pushpull_sync,
        "pushpull-16keys": pushpull_16keys,
        "core-16keys": core_16keys,
        "rmx-allreduce_": rmx_allreduce,
    }


def _max_over_ranks(ringcc, value):
    a = np.array([value], np.float64)
    ringcc.allreduce_(a, ringcc.Max)
    return float(a[0])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="64M", help="bytes per rank (binary units: 64M = 64 MiB)")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    import mxnet as mx

    import ringcc

    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    nbytes = parse_size(args.size)
    count = nbytes // 4
    if count % 16:
        parser.error("--size must be a multiple of 64 bytes")
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            parser.error(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    loops = _loops(count)
    times = {v: [] for v in variants}  # per repeat: mean time per iteration (max over ranks)
    samples = {v: [] for v in variants}  # every iteration on this rank
    for _ in range(args.repeats):
        for v in variants:
            one = loops[v]
            for _ in range(args.warmup):
                one()
            ringcc.barrier()
            start = time.perf_counter()
            for _ in range(args.iters):
                t0 = time.perf_counter()
                one()
                samples[v].append(time.perf_counter() - t0)
            per_iter = (time.perf_counter() - start) / args.iters
            times[v].append(_max_over_ranks(ringcc, per_iter))
    # The median iteration, the maximum over ranks: robust to a busy machine's spikes.
    medians = {v: _max_over_ranks(ringcc, statistics.median(samples[v])) for v in variants}
    if rank == 0:
        busbw_factor = 2.0 * (size - 1) / size
        ref = statistics.median(times["core"]) if "core" in times else None
        ref_it = medians.get("core")
        print(
            f"# MXNet kvstore pushpull vs core allreduce: {format_size(nbytes)} float32 per rank, "
            f"{size} ranks, transport {ringcc.transport_name()}, MXNet {mx.__version__}, "
            f"{args.iters} iters x {args.repeats} repeats"
        )
        print(
            "# mean: time per iteration of a repeat's loop, median over repeats; median it: the median single iteration"
        )
        print(
            f"{'variant':<16} {'mean (ms)':>10} {'busbw (GB/s)':>13} {'vs core':>8} "
            f"{'median it (ms)':>15} {'vs core':>8}"
        )
        for v in variants:
            t = statistics.median(times[v])
            busbw = nbytes / t / 1e9 * busbw_factor
            ratio = f"{t / ref:8.3f}" if ref else "       -"
            ratio_it = f"{medians[v] / ref_it:8.3f}" if ref_it else "       -"
            print(f"{v:<16} {t * 1e3:10.2f} {busbw:13.2f} {ratio} {medians[v] * 1e3:15.2f} {ratio_it}")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(
                    {
                        "size_bytes": nbytes,
                        "ranks": size,
                        "transport": ringcc.transport_name(),
                        "mxnet": mx.__version__,
                        "iters": args.iters,
                        "repeats": args.repeats,
                        "host": platform.node(),
                        "seconds_per_iter": times,
                        "median_iteration_seconds": medians,
                    },
                    f,
                    indent=1,
                )
    mx.nd.waitall()
    ringcc.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
