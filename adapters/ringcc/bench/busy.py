"""Compute threads beside the collectives (ringcc.bench.allreduce --busy-threads N):
each thread multiplies two 256 x 256 float32 matrices over and over, as a
framework's intra-op pool or a data loader keeps CPUs busy next to the
communication. NumPy's matmul releases the GIL, so the threads compete for
CPUs, not for the interpreter. OpenBLAS is held to one thread per call
(OPENBLAS_NUM_THREADS=1, set by ringcc/bench/__init__.py before NumPy loads), so
N threads are N threads' worth of load.

The threads run only while resume() is in force: a process that waits
while another job runs its sweep (the mpi peer under its own mpirun)
pauses them, so every implementation is timed beside the same load."""

import threading
import time

import numpy as np

MATRIX = 256


class BusyThreads:
    def __init__(self, count):
        self.count = max(0, int(count))
        self.products = 0  # matrix products done, all threads together
        self._go = threading.Event()
        self._stop = False
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, name=f"bench-busy-{i}", daemon=True) for i in range(self.count)
        ]
        for t in self._threads:
            t.start()

    def _work(self):
        rng = np.random.default_rng(len(self._threads))
        a = rng.standard_normal((MATRIX, MATRIX), dtype=np.float32)
        b = rng.standard_normal((MATRIX, MATRIX), dtype=np.float32)
        c = np.empty_like(a)
        while True:
            self._go.wait()
            if self._stop:
                break
            np.matmul(a, b, out=c)
            with self._lock:  # a product takes far longer than the lock
                self.products += 1

    def resume(self):
        """Lets the threads run, and returns once they have done a product
        (at most 5 s): the timing that follows has its load from the start."""
        if not self.count:
            return
        before = self.products
        self._go.set()
        deadline = time.monotonic() + 5.0
        while self.products == before and time.monotonic() < deadline:
            time.sleep(0.001)

    def pause(self):
        self._go.clear()

    def stop(self):
        self._stop = True
        self._go.set()
        for t in self._threads:
            t.join(timeout=30)
