"""The job of the wheel checks (tests/wheel/test_wheel.py, cibuildwheel's test
command): an allreduce over every rank, then one line per rank saying what
ringcc used. Runs under ringrun, mpirun or mpiexec."""

import sys

import numpy as np

import ringcc

ringcc.init()
rank, size = ringcc.rank(), ringcc.size()
total = ringcc.allreduce(np.arange(1000, dtype=np.float32) + rank)
expected = size * np.arange(1000, dtype=np.float32) + size * (size - 1) / 2
mpi = ringcc.mpi_info()
words = [
    "JOB",
    rank,
    size,
    ringcc.transport_name(),
    "ok" if np.array_equal(total, expected) else "WRONG",
    mpi["abi"] or "-",
    (mpi["found_by"] or "-").replace(" ", "_"),
    ringcc.__file__,
]
# One write of the whole line: mpiexec merges the ranks' output as it comes.
sys.stdout.write(" ".join(map(str, words)) + "\n")
sys.stdout.flush()
ringcc.shutdown()
