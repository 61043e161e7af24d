"""Named per-tensor rounds, out of place against in place.

    ringrun --no-prefix -np 2 python -m ringcc.bench out_of_place [--tensors 1000] [--elements 1024]
        [--rounds 15] [--torch] [--work-ms 0]

One round: --tensors float32 arrays of --elements elements, each enqueued by
name, then every handle synchronized; the time of a round is the maximum
over ranks, and the figures are medians over --rounds (the cases alternate
round by round). Cases:
  named out of place   ringcc.allreduce_async(x, name=...)   (new output arrays)
  named in place       ringcc.allreduce_async_(x, name=...)
  one concatenated     ringcc.allreduce(big), big holding every tensor's elements
With --torch, the same rounds through the Horovod API on torch tensors:
hvd.allreduce_async against hvd.allreduce_async_ (op=Sum). With --work-ms,
each rank computes for that long before every round, outside its time (a
matrix product over a buffer larger than the caches, as a training step's
forward and backward separate its gradient rounds): the rounds then start
cold, as in training, instead of back to back. Rank 0 prints the
medians and the ratios the docs quote (docs/benchmarks.md, "Out of place,
by name"), and how long the out-of-place calls alone took (the slowest
rank's median), the rest of its round being the waits.
"""

import argparse
import statistics
import time

import numpy as np


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m ringcc.bench out_of_place", description=__doc__.split("\n\n")[0])
    p.add_argument("--tensors", type=int, default=1000)
    p.add_argument("--elements", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--torch", action="store_true", help="also the Horovod API on torch tensors")
    p.add_argument("--work-ms", type=float, default=0.0, help="compute this long before every round (untimed)")
    a = p.parse_args(argv)
    if a.tensors < 1 or a.elements < 1 or a.rounds < 1:
        p.error("--tensors, --elements and --rounds must be >= 1")
    if a.work_ms < 0:
        p.error("--work-ms must be >= 0")
    return a


class OtherWork:
    """Compute for a while between rounds: matrix products, and a pass over
    64 MiB so that the caches hold the work's data, not the round's."""

    def __init__(self, ms: float):
        self.seconds = ms / 1e3
        if self.seconds > 0:
            self.a = np.random.default_rng(0).random((192, 192), dtype=np.float32)
            self.sweep = np.ones(16 << 20, np.float32)

    def __call__(self) -> None:
        if self.seconds <= 0:
            return
        end = time.perf_counter() + self.seconds
        self.sweep += 1.0
        while time.perf_counter() < end:
            self.a = (self.a @ self.a) * np.float32(1e-3)


def timed_rounds(cases, rounds, barrier, max_over_ranks, before_round=lambda: None):
    """{case: [seconds per round, max over ranks]}, the cases alternating."""
    times = {k: [] for k in cases}
    for _ in range(rounds):
        for name, run in cases.items():
            before_round()
            barrier()
            t = time.perf_counter()
            run()
            times[name].append(max_over_ranks(time.perf_counter() - t))
    return times


def main(argv=None):
    a = parse_args(argv)
    import ringcc

    from .launch_hint import warn_if_alone

    warn_if_alone("out_of_place", argv)
    ringcc.init()

    def max_over_ranks(value):
        x = np.array([value])
        ringcc.allreduce_(x, ringcc.Max)
        return float(x[0])

    xs = [np.full(a.elements, 1.0, np.float32) for _ in range(a.tensors)]
    ys = [np.full(a.elements, 1.0, np.float32) for _ in range(a.tensors)]
    big = np.ones(a.tensors * a.elements, np.float32)
    # The Horovod API calls a tensor named n "allreduce.n": the core's rounds
    # use those same names, so that every case fits the response cache
    # (RINGCC_CACHE_CAPACITY, 1024 names by default).
    names = [f"oop.{i}" for i in range(a.tensors)]
    core_names = [f"allreduce.{n}" for n in names]

    enqueueing = []  # this rank's seconds issuing each out-of-place round's calls

    def out_of_place():
        t = time.perf_counter()
        hs = [ringcc.allreduce_async(x, name=n) for x, n in zip(xs, core_names)]
        enqueueing.append(time.perf_counter() - t)
        return [ringcc.synchronize(h) for h in hs]

    def in_place():
        hs = [ringcc.allreduce_async_(y, name=n) for y, n in zip(ys, core_names)]
        for h in hs:
            ringcc.synchronize(h)

    work = OtherWork(a.work_ms)
    results = out_of_place()  # the names enter the response cache; the results are checked
    if not all(np.all(r == ringcc.size()) for r in results):
        raise SystemExit("ringcc.bench.out_of_place: wrong allreduce results")
    times = timed_rounds(
        {
            "named out of place": out_of_place,
            "named in place": in_place,
            "one concatenated": lambda: ringcc.allreduce(big),
        },
        a.rounds,
        ringcc.barrier,
        max_over_ranks,
        work,
    )
    if a.torch:
        import torch

        import ringcc.torch as hvd

        ts = [torch.ones(a.elements) for _ in range(a.tensors)]
        us = [torch.ones(a.elements) for _ in range(a.tensors)]

        def hvd_out():
            hs = [hvd.allreduce_async(t, name=n, op=hvd.Sum) for t, n in zip(ts, names)]
            return [hvd.synchronize(h) for h in hs]

        def hvd_in():
            hs = [hvd.allreduce_async_(u, name=n, op=hvd.Sum) for u, n in zip(us, names)]
            for h in hs:
                hvd.synchronize(h)

        times.update(
            timed_rounds(
                {"hvd.allreduce_async": hvd_out, "hvd.allreduce_async_": hvd_in},
                a.rounds,
                ringcc.barrier,
                max_over_ranks,
                work,
            )
        )
    # The calls alone (the engine already at work on the first ones), the
    # slowest rank's median: where a round's time goes before the waits.
    issuing = max_over_ranks(statistics.median(enqueueing[1:]))
    if ringcc.rank() == 0:
        med = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"# {ringcc.size()} ranks, {a.tensors} float32 tensors of {a.elements} elements, "
            f"median of {a.rounds} rounds (max over ranks)"
            + (f", {a.work_ms:g} ms of other work before each" if a.work_ms > 0 else "")
        )
        for k, v in med.items():
            print(f"{k:24s} {v * 1e3:9.3f} ms")
            if k == "named out of place":
                print(f"{'  of which the calls':24s} {issuing * 1e3:9.3f} ms")
        print(f"out of place / one concatenated: {med['named out of place'] / med['one concatenated']:.2f}")
        print(f"out of place / in place:         {med['named out of place'] / med['named in place']:.2f}")
        if a.torch:
            print(f"hvd out of place / in place:     {med['hvd.allreduce_async'] / med['hvd.allreduce_async_']:.2f}")
    ringcc.shutdown()


if __name__ == "__main__":
    main()
