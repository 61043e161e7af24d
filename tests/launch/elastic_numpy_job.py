"""An elastic job without a framework (ringcc.elastic) for tests/launch/test_elastic.py:

    ringrun -np 2 --min-np 1 --max-np 2 python tests/launch/elastic_numpy_job.py --out DIR \\
        [--fault kill|stop --fault-rank R --fault-at STEP]

Every step allreduces ones and adds the average to the state's vector, so
the vector ends at the number of steps whatever the membership. The
worker of rank --fault-rank kills itself (SIGKILL) or stops itself
(SIGSTOP) at step --fault-at, once per job (a marker file in DIR). Each
worker appends its steps (step, size) to DIR/<worker>.jsonl; rank 0 of the
last membership writes DIR/result.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

import numpy as np

import ringcc
import ringcc.elastic as elastic


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--fault", choices=("kill", "stop"))
    parser.add_argument("--fault-rank", type=int, default=1)
    parser.add_argument("--fault-at", type=int, default=10)
    parser.add_argument("--step-time", type=float, default=0.03)
    args = parser.parse_args()

    ringcc.init()
    worker = os.environ.get("RINGCC_ELASTIC_WORKER", "worker")
    log = open(os.path.join(args.out, f"{worker}.jsonl"), "a", encoding="utf-8")
    state = elastic.ObjectState(elastic.broadcast_object, ringcc.rank, step=0, total=np.zeros(8))
    resets = []
    state.register_reset_callbacks([lambda: resets.append(ringcc.size())])

    @elastic.run
    def train(state):
        while state.step < args.steps:
            began = time.monotonic()
            state.total = state.total + ringcc.allreduce(np.ones(8)) / ringcc.size()
            state.step += 1
            log.write(
                json.dumps(
                    {
                        "step": state.step,
                        "size": ringcc.size(),
                        "rank": ringcc.rank(),
                        "pid": os.getpid(),
                        "t": time.time(),
                    }
                )
                + "\n"
            )
            log.flush()
            marker = os.path.join(args.out, "fault-done")
            if (
                args.fault
                and ringcc.rank() == args.fault_rank
                and state.step == args.fault_at
                and not os.path.exists(marker)
            ):
                open(marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL if args.fault == "kill" else signal.SIGSTOP)
            time.sleep(max(0.0, args.step_time - (time.monotonic() - began)))
            state.commit()

    train(state)
    if ringcc.rank() == 0:
        with open(os.path.join(args.out, "result.json"), "w", encoding="utf-8") as file:
            json.dump(
                {"total": state.total.tolist(), "step": state.step, "size": ringcc.size(), "resets": resets}, file
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
