"""Soak: 100,000 random collectives on 2 ranks (tests/ranks/rank_soak.py), every
result checked against NumPy, resident memory flat after the warm-up."""

from __future__ import annotations

import json
from pathlib import Path

from rank_groups import rank_environment, ringrun_command, run_command

HERE = Path(__file__).resolve().parent

OPS = 100_000
LIMIT_S = 400
RSS_GROWTH_LIMIT_KIB = 8 * 1024


def test_100000_random_collectives_match_numpy_with_flat_memory(tmp_path):
    command = ringrun_command(
        2, [str(HERE / "rank_soak.py"), "--ops", str(OPS), "--out", str(tmp_path)], ["--timeout", str(LIMIT_S)]
    )
    completed = run_command(command, rank_environment({"RINGCC_TIMEOUT_S": "60"}), LIMIT_S + 30)
    assert completed.returncode == 0, completed.describe()
    for rank in range(2):
        result = json.loads((tmp_path / f"soak{rank}.json").read_text())
        assert result["collectives"] >= OPS and not result["mismatches"], result["mismatches"]
        for kind in (
            "allreduce",
            "allgather",
            "broadcast",
            "reduce_scatter",
            "alltoall",
            "grouped",
            "named",
            "barrier",
        ):
            assert result["counts"].get(kind, 0) > 100, (kind, result["counts"])
        samples = [kib for _, kib in result["rss_kib"]]
        warm = samples[len(samples) // 4]  # after a quarter: pools, caches and the engine are set up
        assert samples[-1] - warm < RSS_GROWTH_LIMIT_KIB, f"rank {rank}: resident memory {samples} KiB"
