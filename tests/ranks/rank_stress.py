"""Many short "tests" in one job, each its own ringcc lifetime:

    ringrun -np 2 python tests/ranks/rank_stress.py --out DIR --cycles 500

Every cycle is what a Horovod-style unittest file does per test: init(),
some work, barrier(), shutdown(); the next cycle initialises again at once.
The work is drawn per cycle from one random sequence that every rank
recreates (seed + cycle), with random sleeps of each rank's own:

- dup: a name enqueued twice before it completed (allreduce, allgather,
  broadcast, alltoall or reducescatter), handles dropped, on one rank before
  a barrier and on the others after it. The second call must raise at once
  where the first cannot have completed; the late ranks' second call may
  find the first done and start a collective nobody matches.
- join: uneven numbers of named allreduces, then join(); the results count
  the joined ranks as zeros.
- skip: a named collective one rank enqueues and the others never do, its
  handle dropped or waited on briefly.
- mixed: named collectives in a different order on each rank, direct and
  queued collectives, allgathers of different lengths.
- abandon: one rank's "test" fails early and goes straight to the common
  barrier and shutdown, skipping the test's own barrier; the others' common
  barrier then has no partner and must fail at once (the peer shut down),
  not wait.

Every cycle must end within --cycle-bound-s (well under RINGCC_TIMEOUT_S):
a wait that only a timeout ends counts as a failure too.

Half of the cycles use the Horovod API (ringcc.torch: named barrier with
generated names), half the NumPy API. Nothing may hang: a watchdog
(faulthandler) prints every thread's Python stack and ends the rank when a
cycle takes longer than --cycle-limit-s, and SIGTERM (ringrun stopping the
other ranks) prints the stacks of the others. Each rank writes
DIR/rank<R>.json: cycles done, failed checks, slowest shutdown.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import random
import signal
import sys
import time

import numpy as np

import ringcc

KINDS = ("allreduce", "allgather", "broadcast", "alltoall", "reducescatter")
MAX_FAILURES = 20


class Stress:
    def __init__(self, args) -> None:
        self.args = args
        self.failures = []
        self.cycle = -1
        self.slowest_shutdown_s = 0.0
        self.rank = -1
        self.size = 0
        self.hvd = None
        self.torch = None
        if not args.no_torch:
            try:
                import torch

                import ringcc.torch as hvd

                self.torch, self.hvd = torch, hvd
            except ImportError:
                pass

    # -- checks --------------------------------------------------------

    def fail(self, text: str) -> None:
        if len(self.failures) < MAX_FAILURES:
            self.failures.append(f"cycle {self.cycle}: {text}")
            print(f"STRESS FAILED CHECK: cycle {self.cycle}: {text}", file=sys.stderr, flush=True)

    def expect(self, condition, text: str) -> None:
        if not condition:
            self.fail(text)

    def guarded(self, what: str, call):
        """call(); an exception is a failed check (the cycle goes on to its barrier)."""
        try:
            return call()
        except Exception as error:  # noqa: BLE001 - recorded
            self.fail(f"{what}: {type(error).__name__}: {error}")
            return None

    def nap(self, rng: random.Random, most_ms: float = 3.0) -> None:
        if rng.random() < 0.5:
            time.sleep(rng.random() * most_ms / 1000)

    # -- the APIs ------------------------------------------------------

    def tensor(self, values):
        if self.use_hvd:
            return self.torch.tensor(values, dtype=self.torch.float32)
        return np.asarray(values, dtype=np.float32)

    def start(self, kind: str, name: str, rows: int = 2):
        """A named collective of `kind` on `rows` rows per rank; returns its handle."""
        n = self.size
        x = self.tensor([[self.rank + 1.0] * 3] * (rows * n))
        if self.use_hvd:
            hvd = self.hvd
            if kind == "allreduce":
                return hvd.allreduce_async(x, name=name, op=hvd.Sum)
            if kind == "allgather":
                return hvd.allgather_async(x, name=name)
            if kind == "broadcast":
                return hvd.broadcast_async(x, 0, name=name)
            if kind == "alltoall":
                return hvd.alltoall_async(x, name=name)
            return hvd.reducescatter_async(x, name=name, op=hvd.Sum)
        if kind == "allreduce":
            return ringcc.allreduce_async(x, name=name)
        if kind == "allgather":
            return ringcc.allgather_async(x, name=name)
        if kind == "broadcast":
            return ringcc.broadcast_async(x, 0, name=name)
        if kind == "alltoall":
            return ringcc.alltoall_async(x, name=name)
        return ringcc.reduce_scatter_async(x, name=name)

    def wait(self, handle, timeout=None):
        if self.use_hvd:
            return self.hvd.synchronize(handle)
        return ringcc.synchronize(handle, timeout)

    def allreduce_sum(self, values, name: str):
        x = self.tensor(values)
        if self.use_hvd:
            return np.asarray(self.hvd.allreduce(x, name=name, op=self.hvd.Sum))
        return ringcc.synchronize(ringcc.allreduce_async(x, name=name), 30)

    def barrier(self) -> None:
        if self.use_hvd:
            self.hvd.barrier()
        else:
            ringcc.barrier()

    def join(self) -> int:
        return self.hvd.join() if self.use_hvd else ringcc.join()

    # -- scenarios -----------------------------------------------------

    def dup(self, rng: random.Random, mine: random.Random) -> None:
        kind = rng.choice(KINDS)
        early = rng.randrange(self.size)
        name = f"dup.{kind}"

        def twice(first_must_be_pending: bool) -> None:
            first = self.guarded(f"first {name}", lambda: self.start(kind, name))
            del first  # dropped: the collective goes on without a waiter
            self.nap(mine, 1.0)
            try:
                second = self.start(kind, name)
            except ValueError as error:  # InvalidArgumentError (and Horovod's ValueError)
                self.expect("already in flight" in str(error), f"second {name}: {error}")
                return
            except Exception as error:  # noqa: BLE001 - recorded
                self.fail(f"second {name}: {type(error).__name__}: {error}")
                return
            # The first had completed (possible only where the peers had
            # enqueued it already): the second is a new collective that
            # nobody matches, dropped too; shutdown() fails it.
            self.expect(
                not first_must_be_pending, f"second {name} was accepted while the first could not have completed"
            )
            del second

        if self.rank == early:
            twice(True)
        self.guarded("dup barrier", self.barrier)
        if self.rank != early:
            twice(False)

    def join_uneven(self, rng: random.Random, mine: random.Random) -> None:
        steps = [rng.randrange(4) for _ in range(self.size)]
        for step in range(steps[self.rank]):
            self.nap(mine)
            got = self.guarded(
                f"join step {step}", lambda: self.allreduce_sum([self.rank + 1.0] * 4, f"join.step{step}")
            )
            if got is not None:
                want = sum(r + 1.0 for r in range(self.size) if steps[r] > step)
                self.expect(
                    np.all(np.asarray(got) == want),
                    f"join step {step}: got {np.asarray(got).tolist()}, want {want} (steps {steps})",
                )
        self.nap(mine)
        last = self.guarded("join()", self.join)
        if last is not None:
            self.expect(0 <= int(last) < self.size, f"join() returned {last}")

    def skip(self, rng: random.Random, mine: random.Random) -> None:
        skipper = rng.randrange(self.size)
        wait_briefly = rng.random() < 0.5
        if self.rank != skipper:
            handle = self.guarded("skipped collective", lambda: self.start("allreduce", "skipped"))
            if handle is not None and wait_briefly and not self.use_hvd:
                try:
                    ringcc.synchronize(handle, 0.02)
                    self.fail("the skipped collective completed")
                except ringcc.TimeoutError:
                    pass
        self.nap(mine)

    def abandon(self, rng: random.Random, mine: random.Random):
        leaver = rng.randrange(self.size)
        if self.rank != leaver:
            self.nap(mine)
            self.guarded("the test's barrier", self.barrier)
            return leaver  # the common barrier has no partner left
        return None

    def mixed(self, rng: random.Random, mine: random.Random) -> None:
        names = [f"mixed.{i}" for i in range(rng.randrange(1, 6))]
        order = list(names)
        mine.shuffle(order)
        handles = {}
        for name in order:
            self.nap(mine, 1.0)
            handles[name] = self.guarded(name, lambda: self.start("allreduce", name, rows=1))
        want = sum(r + 1.0 for r in range(self.size))
        for name in names:
            if handles[name] is None:
                continue
            got = self.guarded(f"wait {name}", lambda: self.wait(handles[name]))
            if got is not None:
                self.expect(np.all(np.asarray(got) == want), f"{name}: got {np.asarray(got).ravel()[:4]}")
        if not self.use_hvd:
            x = np.full(3, self.rank + 1.0, np.float32)
            queued = self.guarded("queued allreduce", lambda: ringcc.allreduce_async(x))
            got = self.guarded("direct allreduce", lambda: ringcc.allreduce(x))
            if got is not None:
                self.expect(np.all(got == want), f"direct allreduce: {got}")
            if queued is not None:
                got = self.guarded("queued allreduce wait", lambda: queued.wait(30))
                if got is not None:
                    self.expect(np.all(got == want), f"queued allreduce: {got}")
            rows = np.full((self.rank + 1, 2), self.rank, np.int32)
            got = self.guarded("allgather", lambda: ringcc.allgather(rows))
            if got is not None:
                self.expect(got.shape == (self.size * (self.size + 1) // 2, 2), f"allgather shape {got.shape}")

    def final_barrier_fails(self, leaver: int) -> None:
        start = time.monotonic()
        try:
            self.barrier()
            self.fail(f"the common barrier returned although rank {leaver} had left")
        except Exception as error:  # noqa: BLE001 - checked
            self.expect(
                f"rank {leaver}" in str(error) or f"[{leaver}]" in str(error),
                f"the common barrier's error does not name rank {leaver}: {type(error).__name__}: {error}",
            )
        took = time.monotonic() - start
        self.expect(took < 2.0, f"the common barrier failed only after {took:.2f} s")

    # -- the cycles ----------------------------------------------------

    def init(self) -> None:
        if self.use_hvd:
            self.hvd.init()
        else:
            ringcc.init()
        self.rank, self.size = ringcc.rank(), ringcc.size()

    def shutdown(self) -> None:
        start = time.monotonic()
        if self.use_hvd:
            self.hvd.shutdown()
        else:
            ringcc.shutdown()
        took = time.monotonic() - start
        self.slowest_shutdown_s = max(self.slowest_shutdown_s, took)
        self.expect(took < self.args.shutdown_limit_s, f"shutdown() took {took:.2f} s")

    def run(self) -> int:
        scenarios = [self.dup, self.join_uneven, self.skip, self.mixed, self.abandon]
        started = time.monotonic()
        rank = int(os.environ.get("RINGCC_RANK", "0"))
        mine = random.Random(self.args.seed * 7919 + rank)
        done = 0
        for self.cycle in range(self.args.cycles):
            faulthandler.dump_traceback_later(self.args.cycle_limit_s, exit=True)
            rng = random.Random(self.args.seed * 1000003 + self.cycle)
            self.use_hvd = self.hvd is not None and rng.random() < 0.5
            scenario = rng.choice(scenarios)
            if mine.random() < 0.2:
                time.sleep(mine.random() * 0.002)
            try:
                self.init()
            except Exception as error:  # noqa: BLE001 - nothing else can run this cycle
                self.fail(f"init(): {type(error).__name__}: {error}")
                continue
            cycle_start = time.monotonic()
            self.nap(mine)
            left = scenario(rng, mine)
            self.nap(mine)
            if left is None:
                self.guarded("barrier", self.barrier)
            else:
                self.final_barrier_fails(left)
            self.nap(mine)
            self.guarded("shutdown", self.shutdown)
            took = time.monotonic() - cycle_start
            self.expect(
                took < self.args.cycle_bound_s,
                f"{scenario.__name__} ({'horovod' if self.use_hvd else 'numpy'}) took {took:.2f} s",
            )
            done += 1
        faulthandler.cancel_dump_traceback_later()
        record = {
            "rank": self.rank,
            "cycles": done,
            "failures": self.failures,
            "slowest_shutdown_s": self.slowest_shutdown_s,
            "seconds": time.monotonic() - started,
            "horovod_api": self.hvd is not None,
        }
        with open(os.path.join(self.args.out, f"rank{rank}.json"), "w", encoding="utf-8") as file:
            json.dump(record, file)
        print("STRESS " + json.dumps(record), flush=True)
        return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--cycle-limit-s",
        type=float,
        default=30.0,
        help="the watchdog: a cycle that takes longer prints every stack and ends the rank",
    )
    parser.add_argument("--shutdown-limit-s", type=float, default=5.0)
    parser.add_argument(
        "--cycle-bound-s",
        type=float,
        default=5.0,
        help="a cycle that takes longer (a wait ended by a timeout) is a failure",
    )
    parser.add_argument("--no-torch", action="store_true", help="the NumPy API only")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    # ringrun stops the other ranks with SIGTERM when one ends: they print
    # their stacks first.
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    return Stress(args).run()


if __name__ == "__main__":
    sys.exit(main())
