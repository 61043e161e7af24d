"""Tests of the engine benchmark (adapters/ringcc/bench/engine.py): its arithmetic in this
process, and quick runs with tiny settings, on one rank and on two through
the launcher (beside Open MPI when mpi4py and mpirun are there)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys

import pytest
from rank_groups import REPO_DIR

if str(REPO_DIR) not in sys.path:
    sys.path.insert(0, str(REPO_DIR))

from ringcc.bench.engine import (  # noqa: E402
    RATIOS,
    RINGCC_FIGURES,
    cache_path_means,
    mpi_job_command,
    parse_args,
    stats_of,
)

RUN_TIMEOUT_S = 90
TINY = ["--tensors", "40", "--elements", "16", "--iters", "2", "--warmup", "1", "--repeats", "2"]
_PREFIX = re.compile(r"^\[\d+\]<\w+>: ?")


# -- no ranks -------------------------------------------------------------------


def test_defaults_match_the_issue():
    a = parse_args([])
    assert (a.tensors, a.elements, a.repeats, a.compare) == (1000, 1024, 5, [])
    assert parse_args(["--compare", "mpi", "--repeats", "3"]).compare == ["mpi"]
    with pytest.raises(SystemExit):
        parse_args(["--iters", "0"])


def test_cache_path_means_come_from_running_means():
    """engine_stats() holds means since the start; the loop's mean is recovered from two snapshots."""
    before = {
        "cycles": 10,
        "cached_cycles": 4,
        "cached_decide_us": 10.0,
        "cached_exchange_us": 30.0,
        "cached_negotiation_us": 40.0,
        "cached_peer_wait_us": 25.0,
        "cached_overhead_us": 15.0,
        "fused_collectives": 4,
        "tensors": 100,
    }
    # 6 more cache-hit cycles of decide 20, exchange 50 (negotiation 70) of
    # which 40 waiting for peers (overhead 30).
    after = {
        "cycles": 20,
        "cached_cycles": 10,
        "cached_decide_us": (4 * 10 + 6 * 20) / 10,
        "cached_exchange_us": (4 * 30 + 6 * 50) / 10,
        "cached_negotiation_us": (4 * 40 + 6 * 70) / 10,
        "cached_peer_wait_us": (4 * 25 + 6 * 40) / 10,
        "cached_overhead_us": (4 * 15 + 6 * 30) / 10,
        "fused_collectives": 9,
        "tensors": 160,
    }
    means = cache_path_means(before, after)
    assert means["decide_us"] == pytest.approx(20.0)
    assert means["exchange_us"] == pytest.approx(50.0)
    assert means["negotiation_us"] == pytest.approx(70.0)
    assert means["peer_wait_us"] == pytest.approx(40.0)
    assert means["overhead_us"] == pytest.approx(30.0)
    assert (means["cached_cycles"], means["cycles"], means["fused_collectives"], means["tensors"]) == (6, 10, 5, 60)
    assert cache_path_means(before, dict(before)) is None
    assert stats_of([3.0, None, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0}
    assert stats_of([None]) is None


def test_mpi_job_runs_this_module():
    pytest.importorskip("mpi4py")
    from ringcc.bench.peers_mpi import find_mpirun

    if find_mpirun() is None:
        pytest.skip("mpirun not found")
    cmd = mpi_job_command(2, parse_args(TINY + ["--mpirun-args", "--mca btl self,sm"]), "/tmp/x.json")
    assert cmd[cmd.index("-np") + 1] == "2" and "--mca" in cmd
    module = cmd.index("-m")
    assert cmd[module + 1] == "ringcc.bench.engine"
    assert cmd[module + 2 : module + 4] == ["--mpi-peer", "/tmp/x.json"]
    assert cmd[cmd.index("--tensors") + 1] == "40"


# -- runs -----------------------------------------------------------------------


def check_document(doc, ranks_expected, repeats=2, torch=False):
    assert doc["meta"]["ranks"] == ranks_expected
    assert (doc["meta"]["tensors"], doc["meta"]["elements"], doc["meta"]["repeats"]) == (40, 16, repeats)
    assert ("torch_engine" in doc["figures"]) is torch
    for key, _ in RINGCC_FIGURES:
        if key == "torch_engine" and not torch:
            continue
        figure = doc["figures"][key]
        assert len(figure["times_s"]) == repeats and all(t > 0 for t in figure["times_s"]), figure
        assert figure["min_s"] <= figure["median_s"] <= figure["max_s"]
        assert doc["wrong"][key] == 0
    engine = doc["figures"]["engine"]
    assert len(engine["split_per_repeat"]) == repeats
    for repeat, total in zip(engine["split_per_repeat"], engine["times_s"]):
        # Each part is a max over ranks, as is the total: neither part exceeds the total by much.
        assert 0 < repeat["enqueue_ms"] and 0 < repeat["synchronize_ms"], repeat
        assert max(repeat["enqueue_ms"], repeat["synchronize_ms"]) <= total * 1e3 * 1.05 + 0.05, (repeat, total)
    assert set(doc["ratios"]) == {name for name, *_ in RATIOS}
    for name, numerator, denominator, goal in RATIOS:
        ratio = doc["ratios"][name]
        assert ratio["goal"] == goal
        if numerator in doc["figures"] and denominator in doc["figures"]:
            want = doc["figures"][numerator]["median_s"] / doc["figures"][denominator]["median_s"]
            assert ratio["value"] == pytest.approx(want)
            assert ratio["met"] is (None if goal is None else ratio["value"] <= goal)
        else:
            missing = denominator if denominator not in doc["figures"] else numerator
            assert ratio["value"] is None and ratio["missing"] == missing
    negotiation = doc["negotiation"]
    assert len(negotiation["per_repeat"]) == repeats
    # 40 names reused every round: the rounds after the first go through the response cache.
    for repeat in negotiation["per_repeat"]:
        assert repeat is not None and repeat["cached_cycles"] >= 1, negotiation
        assert repeat["tensors"] == 40 * 2  # iters rounds of 40 tensors
        for key in ("decide_us", "exchange_us", "negotiation_us", "peer_wait_us", "overhead_us"):
            assert repeat[key] >= 0
        assert repeat["overhead_us"] <= repeat["negotiation_us"] * (1 + 1e-9) + 1e-9, repeat
    assert negotiation["goal_us"] == 50.0
    # The goal is on the overhead: the negotiation less the wait for the other ranks.
    assert negotiation["met"] is (negotiation["overhead_us"]["median"] < 50.0)


def output_lines(completed):
    return [_PREFIX.sub("", line) for line in completed.stdout.splitlines()]


def test_one_rank_run_with_unknown_peer(ranks, tmp_path):
    """Without the launcher (one rank): an unknown peer is reported as skipped, and MPI's
    ratio is n/a."""
    path = tmp_path / "engine.json"
    command = [sys.executable, "-m", "ringcc.bench.engine", *TINY, "--compare", "nosuchpeer", "--json", str(path)]
    completed = ranks.run(command, ranks.environment({"OPENBLAS_NUM_THREADS": "1"}), RUN_TIMEOUT_S)
    assert completed.returncode == 0, completed.describe()
    doc = json.loads(path.read_text())
    check_document(doc, 1)
    assert doc["peers"]["nosuchpeer"]["status"] == "skipped"
    assert "unknown peer" in doc["peers"]["nosuchpeer"]["reason"]
    assert doc["ratios"]["(a) / MPI one-by-one"]["value"] is None
    assert "# peer nosuchpeer skipped: unknown peer (known: mpi)" in output_lines(completed)


def test_two_rank_run_beside_mpi(ranks, tmp_path):
    """Two ranks through the launcher, with --compare mpi (and --torch where torch is
    installed): every figure, ratio and negotiation figure in the JSON; the MPI figures when
    mpi4py and mpirun are there, else the reason."""
    path = tmp_path / "engine.json"
    torch = importlib.util.find_spec("torch") is not None
    script = ["-m", "ringcc.bench.engine", *TINY, "--compare", "mpi", "--json", str(path)] + (
        ["--torch"] if torch else []
    )
    command = ranks.command(2, script, ["--timeout", str(RUN_TIMEOUT_S)])
    completed = ranks.run(command, ranks.environment({"OPENBLAS_NUM_THREADS": "1"}), RUN_TIMEOUT_S + 10)
    assert completed.returncode == 0, completed.describe()
    assert completed.seconds < 30, f"the tiny run took {completed.seconds:.1f} s"
    doc = json.loads(path.read_text())
    check_document(doc, 2, torch=torch)
    mpi = doc["peers"]["mpi"]
    if mpi["status"] == "ok":
        for key in ("mpi_one_by_one", "mpi_single"):
            assert len(doc["figures"][key]["times_s"]) == 2 and doc["wrong"][key] == 0
        assert doc["ratios"]["(a) / MPI one-by-one"]["value"] > 0
        assert doc["meta"]["versions"]["mpi"] == mpi["version"]
    else:
        assert mpi["status"] == "skipped" and mpi["reason"], mpi
    lines = output_lines(completed)
    assert any(line.startswith("# ringcc ") and "engine benchmark: 2 ranks" in line for line in lines)
    for name, *_ in RATIOS:
        assert any(line.strip().startswith(name) for line in lines), name
    assert any("cached_negotiation_us (mean per cycle)" in line for line in lines)
    assert any("of which the enqueue loop" in line for line in lines)
    assert "# check: all results correct" in lines
