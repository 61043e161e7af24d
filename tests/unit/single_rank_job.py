"""A one-rank job (run by tests/unit/test_single_rank.py): every collective,
in place and out of place, against what one rank must get; then what the
process holds: no socket, no shared-memory segment. Prints one JSON line."""

from __future__ import annotations

import json
import os

import numpy as np

import ringcc


def opened() -> list[str]:
    """What this process's descriptors point at."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the descriptor listdir itself used
            pass
    return names


def shm_mappings() -> list[str]:
    with open("/proc/self/maps") as f:
        return [line.split()[-1] for line in f if "/dev/shm/" in line]


def main() -> None:
    ringcc.init()
    assert ringcc.size() == 1 and ringcc.rank() == 0
    rng = np.random.default_rng(7)
    checked = 0
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.float16):
        x = (rng.standard_normal(1000) * 100).astype(dtype)
        for op in (ringcc.Sum, ringcc.Average, ringcc.Min, ringcc.Max, ringcc.Product):
            np.testing.assert_array_equal(ringcc.allreduce(x, op), x)
            y = x.copy()
            assert ringcc.allreduce_(y, op) is y
            np.testing.assert_array_equal(y, x)
            out = np.empty_like(x)
            assert ringcc.allreduce(x, op, out=out) is out
            np.testing.assert_array_equal(out, x)
            checked += 3
        if np.issubdtype(dtype, np.floating):
            scaled = ringcc.allreduce(x, prescale_factor=0.5, postscale_factor=3.0)
            want = ((x * dtype(0.5)).astype(dtype) * dtype(3.0)).astype(dtype)
            np.testing.assert_allclose(scaled, want, rtol=1e-3)
            checked += 1
        np.testing.assert_array_equal(ringcc.allgather(x), x)
        np.testing.assert_array_equal(ringcc.broadcast(x, 0), x)
        y = x.copy()
        assert ringcc.broadcast_(y, 0) is y
        np.testing.assert_array_equal(y, x)
        np.testing.assert_array_equal(ringcc.reduce_scatter(x), x)
        np.testing.assert_array_equal(ringcc.alltoall(x), x)
        got, splits = ringcc.alltoall(x, [len(x)])
        np.testing.assert_array_equal(got, x)
        assert list(splits) == [len(x)]
        checked += 7
    # A fused allreduce, in place and not, and named ones through the engine.
    parts = [rng.standard_normal(n).astype(np.float32) for n in (1, 17, 4096, 0, 3)]
    for got, want in zip(ringcc.grouped_allreduce(parts), parts):
        np.testing.assert_array_equal(got, want)
    copies = [p.copy() for p in parts]
    ringcc.grouped_allreduce_(copies, ringcc.Average)
    for got, want in zip(copies, parts):
        np.testing.assert_array_equal(got, want)
    handles = [ringcc.allreduce_async(p, name=f"part{i}") for i, p in enumerate(parts)]
    for handle, want in zip(handles, parts):
        np.testing.assert_array_equal(handle.wait(30), want)
    ringcc.barrier()
    checked += 3 * len(parts)
    # A bad argument still fails the call with the error every job size gives.
    try:
        ringcc.broadcast(parts[2], 1)
    except ringcc.InvalidArgumentError as e:
        bad_root = str(e)
    else:
        bad_root = ""
    print(
        json.dumps(
            {
                "checked": checked,
                "bad_root": bad_root,
                "sockets": [n for n in opened() if n.startswith("socket:")],
                "shm": [n for n in opened() if n.startswith("/dev/shm/")] + shm_mappings(),
            }
        ),
        flush=True,
    )
    ringcc.shutdown()


if __name__ == "__main__":
    main()
