"""Ranks placed on hosts other than host by host: two "hosts" by name on this
machine (RINGCC_HOSTNAME), 2 ranks each, either in runs of consecutive
ranks (host-a: 0, 1; host-b: 2, 3, as launchers place them by default) or
round robin (host-a: 0, 2; host-b: 1, 3, as `mpirun --map-by node` or
SLURM's cyclic distribution place them), and three hosts of 2 host by host
(where the order in which the pipelined phases take the pieces matters);
round robin once more with shared memory staged through small areas, not
read directly (RINGCC_SHM_CMA=0). The hierarchical backend takes
allreduce (pipelined from one byte here), allgather and broadcast in both;
its reduce-scatter needs each host's blocks to be one piece of the input,
so round robin it leaves reduce-scatter to the flat ring. Every result is
checked against the sum computed here, on every rank."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rank_groups import rank_environment
from test_security import finish, free_port_pair

LIMIT_S = 120

RANK = textwrap.dedent(
    """
    import os
    import numpy as np
    import ringcc

    try:
        ringcc.init()
        rank, size = ringcc.rank(), ringcc.size()
        hosts = int(os.environ["EXPECTED_HOSTS"])
        assert ringcc.local_size() == 2 and ringcc.cross_size() == hosts, (ringcc.local_size(), ringcc.cross_size())
        assert ringcc.transport_name() == "shm+tcp", ringcc.transport_name()  # the hierarchical backend

        def inputs(rows, row_shape=(), dtype=np.float64):
            return [
                (np.arange(rows * int(np.prod(row_shape, dtype=np.int64)), dtype=np.float64) % 251 + 7 * r)
                .astype(dtype)
                .reshape((rows, *row_shape))
                for r in range(size)
            ]

        checked = 0
        for rows, row_shape in ((1, ()), (9, ()), (4 * 1000 + 3, (3,)), ((1 << 16) + 1, ()), ((1 << 20) + 5, ())):
            xs = inputs(rows, row_shape)
            total = sum(xs)
            got = ringcc.reduce_scatter(xs[rank], ringcc.Sum, prescale_factor=0.5, postscale_factor=4.0)
            q, extra = divmod(rows, size)
            first = rank * q + min(rank, extra)
            mine = q + (1 if rank < extra else 0)
            assert np.allclose(got, total[first : first + mine] * 2.0), ("reduce_scatter", rows, row_shape)
            out = ringcc.allreduce(xs[rank], ringcc.Average)
            assert np.allclose(out, total / size), ("allreduce", rows, row_shape)
            # Blocks of different lengths (none for some ranks when rows is 1), over one piece of the
            # shared-memory area and over several.
            gathered = ringcc.allgather(xs[rank][: max(rows - 3 * rank, 0)])
            expected = np.concatenate([x[: max(rows - 3 * r, 0)] for r, x in enumerate(xs)])
            assert np.array_equal(gathered, expected), ("allgather", rows, row_shape)
            sent = xs[rank].copy()
            assert np.array_equal(ringcc.broadcast(sent, size - 1), xs[size - 1]), "broadcast"
            checked += 4
        print("OK", rank, checked, flush=True)
        ringcc.shutdown()
    except Exception as error:
        print("ERROR", type(error).__name__, error, flush=True)
    """
)


@pytest.mark.parametrize("placement", ["host-by-host", "round-robin", "three-hosts", "round-robin-staged"])
def test_collectives_whatever_the_placement(tmp_path: Path, placement: str):
    port = free_port_pair()
    processes = []
    hosts = 3 if placement == "three-hosts" else 2
    size = 2 * hosts
    for rank in range(size):
        host = rank % 2 if placement.startswith("round-robin") else rank // 2
        env = {
            "RANK": str(rank),
            "WORLD_SIZE": str(size),
            "EXPECTED_HOSTS": str(hosts),
            "MASTER_ADDR": socket.gethostname(),
            "MASTER_PORT": str(port),
            "RINGCC_SECRET": "a secret of the test's",
            "RINGCC_HOSTNAME": f"host-{'abc'[host]}",
            "RINGCC_TIMEOUT_S": "30",
            "RINGCC_HIERARCHICAL_PIPELINE_BYTES": "1",
            "RINGCC_INLINE_BYTES": "0",  # nothing rides the agreement: every path below runs
        }
        if placement.endswith("-staged"):
            # Shared memory without direct reads, through areas smaller than the large cases.
            env.update(RINGCC_SHM_CMA="0", RINGCC_SHM_AREA_BYTES=str(256 << 10))
        out = open(tmp_path / f"r{rank}.out", "wb")
        with out:
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-c", RANK], env=rank_environment(env), stdout=out, stderr=subprocess.STDOUT
                )
            )
    outputs = [finish(p, tmp_path, f"r{rank}", LIMIT_S) for rank, p in enumerate(processes)]
    everything = "\n".join(f"rank {rank}: {text}" for rank, text in enumerate(outputs))
    for rank, text in enumerate(outputs):
        assert f"OK {rank} 20" in text, everything
