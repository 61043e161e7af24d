"""A rank of the soak run (tests/ranks/test_soak.py):

    ringrun -np 2 python tests/ranks/rank_soak.py --ops 100000 --out DIR [--seed S]

Runs --ops random collectives, each checked against NumPy: allreduce (Sum,
Average, Min, Max, Product), allgather with a length per rank, broadcast
from a random root, reduce_scatter, alltoall with random splits, grouped
allreduces, batches of named asynchronous allreduces (negotiated and fused
by the engine) and barriers, over float16, bfloat16, float32, float64,
int8, uint8, int32 and int64 tensors of 1 to 70,000 elements (mostly
small). Every rank draws the same operations from the seed and can make any
rank's input, so each checks the result itself. Resident memory is sampled
as it goes; DIR/soak<R>.json gets the counts, the first mismatches and the
memory samples.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import ringcc

try:
    from ml_dtypes import bfloat16
except ImportError:  # without ml_dtypes, no bfloat16 cases
    bfloat16 = None

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.int64] + (
    [bfloat16] if bfloat16 is not None else []
)
POOL = 1 << 17
OPS = ("sum", "average", "min", "max", "product")


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pool_of(seed: int, rank: int, dtype):
    rng = np.random.default_rng([seed, rank, DTYPES.index(dtype)])
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(-3 if np.dtype(dtype).kind == "i" else 0, 4, POOL).astype(dtype)
    return rng.uniform(0.5, 1.5, POOL).astype(np.float32).astype(dtype)


def is_float(dtype) -> bool:
    return np.dtype(dtype).kind == "f" or (bfloat16 is not None and np.dtype(dtype) == np.dtype(bfloat16))


def reduce64(arrays, op):
    """The reduction in float64 (floats) or int64, and the result's dtype."""
    wide = [a.astype(np.float64) if is_float(a.dtype) else a.astype(np.int64) for a in arrays]
    stacked = np.stack(wide)
    if op == "sum":
        return stacked.sum(axis=0)
    if op == "average":
        total = stacked.sum(axis=0)
        return total / len(arrays) if is_float(arrays[0].dtype) else np.trunc(total / len(arrays))
    if op == "min":
        return stacked.min(axis=0)
    if op == "max":
        return stacked.max(axis=0)
    return stacked.prod(axis=0)


def tolerance(dtype, size):
    if not is_float(dtype):
        return 0.0
    eps = {np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-14}.get(
        np.dtype(dtype), 8e-3
    )
    return eps * 4 * size


class Soak:
    def __init__(self, seed: int, rank: int, size: int) -> None:
        self.seed, self.rank, self.size = seed, rank, size
        self.pools = {dtype: [pool_of(seed, r, dtype) for r in range(size)] for dtype in DTYPES}
        self.mismatches = []
        self.counts = {}

    def inputs(self, rng, dtype, n):
        start = int(rng.integers(0, POOL - n))
        return [pool[start : start + n] for pool in self.pools[dtype]]

    def check(self, what, got, want, tol=0.0):
        got64 = np.asarray(got).astype(np.float64)
        want64 = np.asarray(want).astype(np.float64)
        ok = got64.shape == want64.shape and (
            np.array_equal(got64, want64) if tol == 0 else bool(np.all(np.abs(got64 - want64) <= tol))
        )
        if not ok and len(self.mismatches) < 10:
            bad = "shape" if got64.shape != want64.shape else int(np.argmax(np.abs(got64 - want64)))
            self.mismatches.append(f"{what}: got {got64.shape} want {want64.shape}, first bad {bad}")
        self.counts[what.split(" ")[0]] = self.counts.get(what.split(" ")[0], 0) + 1

    def one(self, rng, index):
        kind = rng.choice(
            [
                "allreduce",
                "allreduce",
                "allreduce",
                "allgather",
                "broadcast",
                "reduce_scatter",
                "alltoall",
                "grouped",
                "named",
                "named",
                "barrier",
            ]
        )
        dtype = DTYPES[int(rng.integers(len(DTYPES)))]
        n = int(min(POOL - 1, max(1, rng.lognormal(3.0, 2.0))))
        if kind == "allreduce":
            op = OPS[int(rng.integers(len(OPS)))]
            if op == "product":
                n = min(n, 64)
            xs = self.inputs(rng, dtype, n)
            if op == "product" and not is_float(dtype):
                xs = [np.sign(x).astype(dtype) if np.dtype(dtype).kind == "i" else (x > 0).astype(dtype) for x in xs]
            got = ringcc.allreduce(xs[self.rank], op=op)
            want = reduce64(xs, op)
            if not is_float(dtype):
                want = want.astype(dtype)  # wraps as the core does
            self.check(f"allreduce {op} {np.dtype(dtype)} {n}", got, want, tolerance(dtype, self.size))
            return 1
        if kind == "allgather":
            lengths = [int(rng.integers(0, 50)) for _ in range(self.size)]
            xs = [self.inputs(rng, dtype, max(1, l) * 3)[r][: l * 3].reshape(l, 3) for r, l in enumerate(lengths)]
            self.check(f"allgather {np.dtype(dtype)}", ringcc.allgather(xs[self.rank]), np.concatenate(xs))
            return 1
        if kind == "broadcast":
            root = int(rng.integers(self.size))
            xs = self.inputs(rng, dtype, n)
            self.check(f"broadcast {np.dtype(dtype)} {n}", ringcc.broadcast(xs[self.rank], root), xs[root])
            return 1
        if kind == "reduce_scatter":
            rows = int(rng.integers(self.size, 4 * self.size + 3))
            xs = [x.reshape(rows, 5) for x in self.inputs(rng, dtype, rows * 5)]
            got = ringcc.reduce_scatter(xs[self.rank], op="sum")
            total = reduce64(xs, "sum")
            if not is_float(dtype):
                total = total.astype(dtype)
            per, extra = divmod(rows, self.size)
            start = self.rank * per + min(self.rank, extra)
            want = total[start : start + per + (self.rank < extra)]
            self.check(f"reduce_scatter {np.dtype(dtype)}", got, want, tolerance(dtype, self.size))
            return 1
        if kind == "alltoall":
            splits = rng.integers(0, 6, (self.size, self.size))  # splits[i][j]: rows i sends j
            xs = [
                self.inputs(rng, dtype, int(splits[i].sum()) * 2 + 2)[i][: int(splits[i].sum()) * 2].reshape(-1, 2)
                for i in range(self.size)
            ]
            got, received = ringcc.alltoall(xs[self.rank], splits=[int(s) for s in splits[self.rank]])
            parts = []
            for i in range(self.size):
                offset = int(splits[i][: self.rank].sum())
                parts.append(xs[i][offset : offset + int(splits[i][self.rank])])
            self.check(f"alltoall {np.dtype(dtype)}", got, np.concatenate(parts))
            self.check("alltoall-splits", np.asarray(received), splits[:, self.rank])
            return 1
        if kind == "grouped":
            count = int(rng.integers(1, 6))
            groups = [self.inputs(rng, dtype, int(rng.integers(1, 3000))) for _ in range(count)]
            got = ringcc.grouped_allreduce([g[self.rank] for g in groups])
            for g, out in zip(groups, got):
                want = reduce64(g, "sum")
                self.check(
                    f"grouped {np.dtype(dtype)}",
                    out,
                    want if is_float(dtype) else want.astype(dtype),
                    tolerance(dtype, self.size),
                )
            return count
        if kind == "named":
            count = int(rng.integers(1, 9))
            batch = [self.inputs(rng, dtype, int(rng.integers(1, 5000))) for _ in range(count)]
            order = list(range(count))
            np.random.default_rng([self.seed, index, self.rank]).shuffle(order)  # any order per rank
            handles = {}
            for i in order:
                handles[i] = ringcc.allreduce_async(batch[i][self.rank], name=f"soak.{i}.{np.dtype(dtype)}")
            for i in range(count):
                want = reduce64(batch[i], "sum")
                self.check(
                    f"named {np.dtype(dtype)}",
                    handles[i].wait(120),
                    want if is_float(dtype) else want.astype(dtype),
                    tolerance(dtype, self.size),
                )
            return count
        ringcc.barrier()
        self.counts["barrier"] = self.counts.get("barrier", 0) + 1
        return 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=100000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    soak = Soak(args.seed, rank, size)
    rng = np.random.default_rng(args.seed)
    done, index, samples = 0, 0, []
    began = time.time()
    next_sample = 0
    while done < args.ops:
        done += soak.one(rng, index)
        index += 1
        if done >= next_sample:
            samples.append((done, rss_kib()))
            next_sample = done + max(1, args.ops // 20)
    samples.append((done, rss_kib()))
    ringcc.barrier()
    result = {
        "rank": rank,
        "size": size,
        "collectives": done,
        "calls": index,
        "seconds": time.time() - began,
        "mismatches": soak.mismatches,
        "counts": soak.counts,
        "rss_kib": samples,
        "engine": {k: v for k, v in ringcc.engine_stats().items() if isinstance(v, (int, float))},
    }
    with open(os.path.join(args.out, f"soak{rank}.json"), "w", encoding="utf-8") as file:
        json.dump(result, file)
    ringcc.shutdown()
    return 0 if not soak.mismatches else 1


if __name__ == "__main__":
    sys.exit(main())
