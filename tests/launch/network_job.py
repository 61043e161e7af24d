"""The job of tests/launch/test_network.py: five allreduces of 4 MiB per rank (enough
bytes to tell on a link's counters which link carried them), checked, then
one line per rank. With --sockets, a second line per rank, "SOCKETS {json}":
where this process's TCP sockets listen and the peers they are connected to
(read from /proc, Linux only), and the rank's own description of the job
(its "this rank at <address>"). tcp_sockets() serves slurm_job.py as well."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))  # tests/harness
from proc_sockets import tcp_sockets  # noqa: E402,F401  (slurm_job.py takes it from here)


def main() -> None:
    import numpy as np

    import ringcc

    ringcc.init()
    rank, size = ringcc.rank(), ringcc.size()
    data = np.full(1 << 20, rank + 1, dtype=np.float32)
    ok = True
    for _ in range(5):
        total = ringcc.allreduce(data)
        ok &= bool(np.all(total == size * (size + 1) / 2))
    print("JOB", rank, size, ringcc.transport_name(), "ok" if ok else "WRONG", flush=True)
    if "--sockets" in sys.argv:
        described = ringcc._core.global_communicator().describe()
        print("SOCKETS " + json.dumps({"rank": rank, **tcp_sockets(), "describe": described}), flush=True)
    ringcc.shutdown()


if __name__ == "__main__":
    main()
