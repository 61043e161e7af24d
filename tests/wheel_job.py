"""The job of the wheel checks (tests/test_wheel.py, cibuildwheel's test
command): an allreduce over every rank, then one line per rank saying what
ringcc used. Runs under ringrun, mpirun or mpiexec."""

import numpy as np

import ringcc

ringcc.init()
rank, size = ringcc.rank(), ringcc.size()
total = ringcc.allreduce(np.arange(1000, dtype=np.float32) + rank)
expected = size * np.arange(1000, dtype=np.float32) + size * (size - 1) / 2
mpi = ringcc.mpi_info()
print("JOB", rank, size, ringcc.transport_name(), "ok" if np.array_equal(total, expected) else "WRONG",
      mpi["abi"] or "-", (mpi["found_by"] or "-").replace(" ", "_"), ringcc.__file__, flush=True)
ringcc.shutdown()
