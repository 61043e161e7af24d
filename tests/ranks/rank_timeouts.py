"""The bounds of a job (run by tests/ranks/test_timeouts.py, 2 ranks):

    ringrun -np 2 python tests/ranks/rank_timeouts.py --out DIR

- init(timeout=1.5) bounds collectives, not joining: rank 1 reaches init()
  3 s after rank 0, and the job still forms (RINGCC_TIMEOUT_S, 60 s, bounds
  the rendezvous).
- rank 1 then stays away from an allreduce for 5 s: rank 0's fails with
  TimeoutError naming RINGCC_COLLECTIVE_TIMEOUT_S after about 1.5 s, and
  rank 1's, once it comes, with PeerFailureError naming rank 0.

Each rank writes DIR/rank<R>.json: the bounds the core reports and what
each call raised and when.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import ringcc
from ringcc import _core


def attempt(call) -> dict:
    start = time.monotonic()
    try:
        call()
        outcome = {"class": None, "message": ""}
    except Exception as error:  # noqa: BLE001 - recorded for the test to judge
        outcome = {"class": type(error).__name__, "message": str(error)}
    outcome["seconds"] = time.monotonic() - start
    return outcome


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    rank = int(os.environ["RINGCC_RANK"])
    record = {"before_init": {"collective": _core.collective_timeout_s(), "setup": _core.setup_timeout_s()}}
    if rank == 1:
        time.sleep(3.0)
    record["init"] = attempt(lambda: ringcc.init(timeout=1.5))
    record["after_init"] = {"collective": _core.collective_timeout_s(), "setup": _core.setup_timeout_s()}
    if record["init"]["class"] is None:
        if rank == 1:
            time.sleep(5.0)
        record["allreduce"] = attempt(lambda: ringcc.allreduce(np.ones(4, np.float32)))
        ringcc.shutdown()
    with open(os.path.join(args.out, f"rank{rank}.json"), "w", encoding="utf-8") as file:
        json.dump(record, file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
