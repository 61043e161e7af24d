"""A rank killed in the middle of CUDA allreduces: the others must raise
within 10 s (tests/ranks/test_gpu_standin.py, tests/gpu). Arrays as in
rank_gpu_cases.py (RINGCC_TEST_ARRAYS)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rank_gpu_cases as cases  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--victim", type=int, default=1)
    parser.add_argument("--after", type=int, default=20)
    args = parser.parse_args()
    import ringcc

    cases.ringcc = ringcc
    ringcc.init()
    rank = ringcc.rank()
    if rank != args.victim:
        # ringrun stops the other ranks once it sees the victim die; the
        # survivors stay to report what ringcc told them.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    x = cases.to_device(np.ones(1 << 18, np.float32))

    def die():
        with open(os.path.join(args.out, "killed.json"), "w") as f:
            json.dump({"time": time.time()}, f)
        os.kill(os.getpid(), signal.SIGKILL)

    outcome = {"rank": rank, "class": None, "message": "", "time": None, "iterations": 0}
    try:
        for i in range(100000):
            if rank == args.victim and i == args.after:
                threading.Timer(0.002, die).start()  # fires during one of the next allreduces
            ringcc.allreduce_(x, op=ringcc.Average)
            cases.synchronize()
            outcome["iterations"] = i + 1
    except Exception as error:  # the point of the test
        outcome.update({"class": type(error).__name__, "message": str(error), "time": time.time()})
    with open(os.path.join(args.out, f"outcome{rank}.json"), "w") as f:
        json.dump(outcome, f)
    print("OUTCOME", json.dumps(outcome), flush=True)
    return 0 if outcome["class"] else 1


if __name__ == "__main__":
    sys.exit(main())
