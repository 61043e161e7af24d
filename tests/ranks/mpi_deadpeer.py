"""Bounded waits over the MPI transport (run by test_mpi.py under mpirun -np 2):

rank 1 stays away from a collective; rank 0 must raise TimeoutError after
RINGCC_TIMEOUT_S, not hang, and its abort must reach rank 1, whose next
collective then raises PeerFailureError at once naming rank 0. Each rank
prints one "RESULT ..." line.
"""

import os
import sys
import time

import numpy as np

import ringcc


def main():
    ringcc.init()
    rank = ringcc.rank()
    ringcc.barrier()
    if rank == 0:
        os.environ["RINGCC_TIMEOUT_S"] = "2"
        start = time.monotonic()
        try:
            ringcc.allreduce(np.ones(4, np.float32))
            print("RESULT rank 0: allreduce returned without its peer", flush=True)
        except ringcc.TimeoutError as error:
            print(f"RESULT rank 0: TimeoutError after {time.monotonic() - start:.1f} s: {error}", flush=True)
        except Exception as error:  # noqa: BLE001 - reported
            print(f"RESULT rank 0: {type(error).__name__}: {error}", flush=True)
        time.sleep(4)  # rank 1 must learn of the abort from rank 0 alive
    else:
        time.sleep(4)
        os.environ["RINGCC_TIMEOUT_S"] = "20"
        start = time.monotonic()
        try:
            ringcc.allreduce(np.ones(8, np.float32))
            print("RESULT rank 1: allreduce returned", flush=True)
        except ringcc.PeerFailureError as error:
            print(f"RESULT rank 1: PeerFailureError after {time.monotonic() - start:.1f} s: {error}", flush=True)
        except Exception as error:  # noqa: BLE001 - reported
            print(f"RESULT rank 1: {type(error).__name__} after {time.monotonic() - start:.1f} s: {error}", flush=True)
    sys.stdout.flush()
    os._exit(0)  # the communicator is broken on purpose; leave without the shutdown handshake


if __name__ == "__main__":
    main()
