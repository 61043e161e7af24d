import os

# The bench's compute load (bench/busy.py) counts threads: one BLAS call is
# one thread's work. Set before NumPy (and its OpenBLAS) loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
