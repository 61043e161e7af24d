"""ringcc's benches, installed with the package:

    ringrun --no-prefix -np 2 python -m ringcc.bench allreduce --compare gloo,mpi
    python -m ringcc.bench            # the list of benches

In a checkout, `python -m bench.allreduce` from the repository's root runs
the same code (bench/__init__.py points there).
"""

import os

# The bench's compute load (busy.py) counts threads: one BLAS call is one
# thread's work. Set before NumPy (and its OpenBLAS) loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
