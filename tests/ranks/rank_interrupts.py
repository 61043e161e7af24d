"""Signals interrupt every kind of blocking wait, in one job of 2 ranks:

    ringrun -np 2 python tests/ranks/rank_interrupts.py --out DIR

For each kind of wait and each signal (SIGINT, whose default handler raises
KeyboardInterrupt, and SIGALRM from an interval timer, whose handler raises
an exception of its own), rank 0's main thread blocks in the wait, which
cannot complete because rank 1 holds back; the signal comes 0.2 s later and
the handler's exception must end the wait at once. Only then (rank 0 leaves
a file behind) does rank 1 take part, so a wait that ignored the signal
would last until rank 1 gives up waiting for that file (--hold-s), and show.

Then what the interruption left behind is checked: a wait that was
interrupted on a collective that was still queued or negotiated
(Handle.wait, synchronize, join, torch Work.wait) can be waited on again
and returns the right result; a blocking collective abandoned halfway
(barrier, allreduce, shutdown, init) aborted the communicator, so rank 1
gets PeerFailureError naming rank 0 and rank 0's next call raises clearly.
Every case ends with shutdown() and the next starts with init().

Each rank writes DIR/rank<R>.json: one record per case.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

import numpy as np

import ringcc

KINDS = ("handle_wait", "synchronize", "join", "barrier", "allreduce", "shutdown", "init", "torch_work_wait")
SIGNALS = ("SIGINT", "alarm")
DELAY_S = 0.2


class Alarm(Exception):
    """Raised by the SIGALRM handler."""


def on_alarm(signum, frame):
    raise Alarm("the alarm went off")


class Signaller:
    """Delivers `which` to this process DELAY_S from now; records when."""

    def __init__(self, which: str) -> None:
        self.which = which
        self.sent_at = None
        self._timer = None

    def arm(self) -> None:
        if self.which == "alarm":
            self.sent_at = time.monotonic() + DELAY_S
            signal.setitimer(signal.ITIMER_REAL, DELAY_S)
        else:

            def send():
                self.sent_at = time.monotonic()
                os.kill(os.getpid(), signal.SIGINT)

            self._timer = threading.Timer(DELAY_S, send)
            self._timer.start()

    def disarm(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()

    def expected(self):
        return Alarm if self.which == "alarm" else KeyboardInterrupt


def describe(error) -> str:
    return f"{type(error).__name__}: {error}"


class Job:
    def __init__(self, args) -> None:
        self.args = args
        self.rank = int(os.environ["RINGCC_RANK"])
        self.records = []
        self.torch_group = None

    def marker(self, name: str) -> str:
        return os.path.join(self.args.out, name)

    def wait_for_marker(self, name: str) -> bool:
        deadline = time.monotonic() + self.args.hold_s
        while time.monotonic() < deadline:
            if os.path.exists(self.marker(name)):
                return True
            time.sleep(0.005)
        return False

    # -- rank 0: the interrupted wait ----------------------------------

    def interrupted(self, record: dict, signaller: Signaller, wait) -> None:
        """Runs wait() with the signal armed; records how it ended."""
        signaller.arm()
        start = time.monotonic()
        try:
            wait()
            record["outcome"] = "returned"
        except BaseException as error:  # noqa: BLE001 - judged below
            ended = time.monotonic()
            record["outcome"] = describe(error)
            record["right_exception"] = isinstance(error, signaller.expected())
            record["latency_s"] = ended - (signaller.sent_at or start)
        finally:
            signaller.disarm()
        record["blocked_s"] = time.monotonic() - start

    def after(self, record: dict, what: str, call) -> None:
        try:
            record[what] = ["ok", repr(call())[:200]]
        except BaseException as error:  # noqa: BLE001 - recorded
            record[what] = ["error", describe(error)]

    # -- the cases -----------------------------------------------------

    def run_case(self, kind: str, which: str) -> None:
        tag = f"{kind}-{which}"
        record = {"case": tag}
        x = np.full(4, self.rank + 1.0, np.float32)
        total = float(sum(r + 1 for r in range(2)))
        if kind != "init":
            ringcc.init()
            ringcc.barrier()
        signaller = Signaller(which)
        if self.rank == 0:
            if kind == "handle_wait":
                h = ringcc.allreduce_async(x)
                self.interrupted(record, signaller, lambda: h.wait())
                open(self.marker(tag), "w").close()
                self.after(record, "again", lambda: h.wait(30).tolist())
            elif kind == "synchronize":
                h = ringcc.allreduce_async(x, name="interrupted")
                self.interrupted(record, signaller, lambda: ringcc.synchronize(h))
                open(self.marker(tag), "w").close()
                self.after(record, "again", lambda: ringcc.synchronize(h, 30).tolist())
            elif kind == "join":
                self.interrupted(record, signaller, ringcc.join)
                open(self.marker(tag), "w").close()
                # Taken up again only once the join has finished and the
                # peer has gone on: the interrupted join's result, still.
                record["peer_done_seen"] = self.wait_for_marker(tag + "-peer-done")
                self.after(record, "again", ringcc.join)
            elif kind in ("barrier", "allreduce"):
                call = ringcc.barrier if kind == "barrier" else (lambda: ringcc.allreduce(x))
                self.interrupted(record, signaller, call)
                open(self.marker(tag), "w").close()
                self.after(record, "later_call", lambda: ringcc.allreduce(x).tolist())
            elif kind == "shutdown":
                queued = ringcc.allreduce_async(x)  # rank 1 holds back: shutdown() waits for it
                self.interrupted(record, signaller, ringcc.shutdown)
                open(self.marker(tag), "w").close()
                record["initialized_after"] = ringcc.is_initialized()
                self.after(record, "queued", lambda: queued.wait(30))
            elif kind == "init":
                self.interrupted(record, signaller, ringcc.init)  # rank 1 is not there yet
                open(self.marker(tag), "w").close()
                self.after(record, "init_again", ringcc.init)
            elif kind == "torch_work_wait":
                import torch
                import torch.distributed as dist

                t = torch.full((4,), self.rank + 1.0)
                work = dist.all_reduce(t, async_op=True, group=self.torch_group)
                self.interrupted(record, signaller, work.wait)
                open(self.marker(tag), "w").close()
                self.after(record, "again", lambda: (work.wait(), t.tolist())[1])
        else:
            record["marker_seen"] = self.wait_for_marker(tag)
            if kind in ("handle_wait", "allreduce", "shutdown"):
                self.after(record, "peer_call", lambda: ringcc.allreduce(x).tolist())
            elif kind == "synchronize":
                self.after(
                    record,
                    "peer_call",
                    lambda: ringcc.synchronize(ringcc.allreduce_async(x, name="interrupted"), 30).tolist(),
                )
            elif kind == "join":
                self.after(record, "peer_call", ringcc.join)
                open(self.marker(tag + "-peer-done"), "w").close()
            elif kind == "barrier":
                self.after(record, "peer_call", ringcc.barrier)
            elif kind == "init":
                self.after(record, "peer_call", ringcc.init)
            elif kind == "torch_work_wait":
                import torch
                import torch.distributed as dist

                t = torch.full((4,), self.rank + 1.0)
                self.after(record, "peer_call", lambda: (dist.all_reduce(t, group=self.torch_group), t.tolist())[1])
        record["expected_sum"] = total
        start = time.monotonic()
        self.after(record, "shutdown", ringcc.shutdown)
        record["shutdown_s"] = time.monotonic() - start
        self.records.append(record)
        print("INTERRUPT " + json.dumps(record), flush=True)

    def handler_calls_shutdown(self) -> None:
        """A handler that calls shutdown() while the main thread is in a barrier: it cannot wait
        for the barrier it interrupted, so it raises, which ends the barrier; shutdown() then works."""
        tag = "handler-calls-shutdown"
        record = {"case": tag}
        ringcc.init()
        ringcc.barrier()
        if self.rank == 0:
            previous = signal.signal(signal.SIGUSR1, lambda *_: ringcc.shutdown())
            timer = threading.Timer(DELAY_S, os.kill, (os.getpid(), signal.SIGUSR1))
            timer.start()
            start = time.monotonic()
            try:
                ringcc.barrier()
                record["outcome"] = "returned"
            except Exception as error:  # noqa: BLE001 - judged by the test
                record["outcome"] = describe(error)
                record["invalid_argument"] = isinstance(error, ringcc.InvalidArgumentError)
            record["blocked_s"] = time.monotonic() - start
            timer.join()
            signal.signal(signal.SIGUSR1, previous)
            open(self.marker(tag), "w").close()
        else:
            record["marker_seen"] = self.wait_for_marker(tag)
            self.after(record, "peer_call", ringcc.barrier)
        start = time.monotonic()
        self.after(record, "shutdown", ringcc.shutdown)
        record["shutdown_s"] = time.monotonic() - start
        self.records.append(record)
        print("INTERRUPT " + json.dumps(record), flush=True)

    def run(self) -> int:
        signal.signal(signal.SIGALRM, on_alarm)
        os.makedirs(self.args.out, exist_ok=True)
        kinds = [
            k
            for k in KINDS
            if (not self.args.kinds or k in self.args.kinds.split(","))
            and not (self.args.no_torch and k == "torch_work_wait")
        ]
        if "torch_work_wait" in kinds:
            try:
                import datetime

                import torch.distributed as dist

                import ringcc.torch  # noqa: F401  (registers backend "ring")

                dist.init_process_group("ring", timeout=datetime.timedelta(seconds=30))
                self.torch_group = dist.group.WORLD
            except ImportError:
                kinds.remove("torch_work_wait")
        for kind in kinds:
            for which in SIGNALS:
                self.run_case(kind, which)
        if not self.args.kinds:
            self.handler_calls_shutdown()
        if self.torch_group is not None:
            import torch.distributed as dist

            dist.destroy_process_group()
        with open(os.path.join(self.args.out, f"rank{self.rank}.json"), "w", encoding="utf-8") as file:
            json.dump(self.records, file)
        return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--kinds", default="", help="comma-separated subset of " + ",".join(KINDS))
    parser.add_argument("--no-torch", action="store_true", help="leave out torch_work_wait")
    parser.add_argument(
        "--hold-s", type=float, default=5.0, help="how long rank 1 holds back when rank 0's wait is not interrupted"
    )
    return Job(parser.parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
