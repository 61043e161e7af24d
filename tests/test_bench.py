"""Tests of the benchmark (bench/): its measurement rules in one process, and a
2-rank run through the launcher when the core is built."""
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
ADAPTERS = REPO / "adapters"
sys.path.insert(0, str(REPO))

from bench.allreduce import Bench, parse_args  # noqa: E402
from bench.measure import OPS, Case, make_cases, size_sweep, sweep  # noqa: E402
from bench.table import aggregate, op_table  # noqa: E402

# Launcher output may carry a "[RANK]<stream>: " prefix.
_PREFIX = re.compile(r"^\[\d+\]<\w+>: ?")
_HEADER = re.compile(r"^#\s+size\s+count\s+type\s+time\s+algbw\s+busbw\b")


def _one_rank_ringcc():
    """The documented API for a job of one rank (every collective is a copy)."""

    def allgather(x, *, out=None):
        out = np.empty_like(x) if out is None else out
        np.copyto(out, x)
        return out

    return types.SimpleNamespace(
        rank=lambda: 0, size=lambda: 1, local_size=lambda: 1, Max="max",
        allreduce_=lambda x, op="sum": x, broadcast_=lambda x, root=0: x,
        allgather=allgather, barrier=lambda: None)


# -- measurement rules, no core needed ------------------------------------------


def test_size_sweep_keeps_key_sizes_and_max():
    sizes = size_sweep(8, 256 << 20, 4)
    assert sizes[0] == 8 and sizes[-1] == 256 << 20
    assert {8, 1 << 20, 64 << 20} <= set(sizes)
    assert sizes == sorted(set(sizes))


def test_bandwidths_follow_nccl_tests():
    t = 1e-3
    ar = Case("allreduce", 64 << 20, np.float32, 4)
    assert ar.count == 16 << 20 and ar.nbytes == 64 << 20
    assert ar.algbw(t) == pytest.approx((64 << 20) / t / 1e9)
    assert ar.busbw(t) == pytest.approx(ar.algbw(t) * 2 * 3 / 4)
    ag = Case("allgather", 64 << 20, np.float32, 4)
    assert ag.count == 4 << 20  # elements per rank; S is the total output
    assert ag.nbytes == ag.count * 4 * 4
    assert ag.busbw(t) == pytest.approx(ag.algbw(t) * 3 / 4)
    bc = Case("broadcast", 1 << 20, np.float64, 4)
    assert bc.busbw(t) == pytest.approx(bc.algbw(t))
    # Sizes below one element per rank round up to one element, once.
    assert [c.count for c in make_cases("allgather", [8, 16], np.float64, 2)] == [1]


def test_one_rank_sweep_checks_and_tables():
    from bench.allreduce import RingccBackend

    backend = RingccBackend(_one_rank_ringcc())
    out = sweep(backend, list(OPS), [8, 4096], np.dtype(np.float32), iters=3, warmup=1, check=True)
    assert out["skipped"] == {}
    assert len(out["results"]) == 6
    assert all(r["wrong"] == 0 and r["time"] > 0 and r["iters"] == 3 for r in out["results"])
    e = aggregate("allreduce", 4096, 1024, [2e-6, 1e-6, 3e-6], 2)
    assert e["time_us"] == pytest.approx(2.0) and e["spread"] == pytest.approx(1.0)
    assert e["busbw"] == pytest.approx(4096 / 2e-6 / 1e9)
    text = op_table("allreduce", {"ringcc": {4096: dict(e, wrong=0)}, "gloo": {}}, ["gloo"],
                    "float32", 2, 3, True)
    assert any(_HEADER.match(line) for line in text.splitlines())
    assert "n/a" in text.splitlines()[-1]


def test_unknown_peer_is_skipped_with_reason(tmp_path, capsys):
    path = tmp_path / "bench.json"
    args = parse_args(["--maxbytes", "1K", "--iters", "2", "--warmup", "0", "--repeats", "2",
                       "--compare", "nosuchpeer", "--json", str(path)])
    assert Bench(args, _one_rank_ringcc()).run() == 0
    doc = json.loads(path.read_text())
    assert doc["peers"]["nosuchpeer"]["status"] == "skipped"
    assert "unknown peer" in doc["peers"]["nosuchpeer"]["reason"]
    assert all(len(r["times_us"]) == 2 for r in doc["results"])
    assert "skipped: unknown peer" in capsys.readouterr().out


# -- two ranks through the launcher ---------------------------------------------


def _env():
    env = dict(os.environ)
    # The source tree's package only when it holds a built core; otherwise
    # the installed one (as in CI, after pip install .).
    source = [str(ADAPTERS)] if any((ADAPTERS / "ringcc").glob("_core*.so")) else []
    paths = source + [str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


@pytest.fixture(scope="module")
def core_built():
    probe = subprocess.run([sys.executable, "-c", "import ringcc._core, ringcc.launcher"],
                           env=_env(), cwd=REPO, capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines()
        pytest.skip("ringcc._core is not importable from adapters/ (build the core first): "
                    + (lines[-1] if lines else f"exit {probe.returncode}"))


def test_two_rank_run(core_built, tmp_path):
    path = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "ringcc.launcher", "-np", "2",
           sys.executable, "-m", "bench.allreduce", "--maxbytes", "64K", "--iters", "3",
           "--warmup", "1", "--repeats", "1", "--check", "--compare", "socket", "--json", str(path)]
    run = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = [_PREFIX.sub("", line) for line in run.stdout.splitlines()]
    assert sum(bool(_HEADER.match(line)) for line in lines) == len(OPS)
    for op in OPS:
        assert any(line.startswith(f"# {op}: 2 ranks") for line in lines)
    assert "# check: all ringcc results correct" in lines

    doc = json.loads(path.read_text())
    assert doc["meta"]["ranks"] == 2
    got = {(r["op"], r["nbytes"]): r for r in doc["results"] if r["impl"] == "ringcc"}
    sizes = size_sweep(8, 64 << 10, 4)
    for op in OPS:
        for case in make_cases(op, sizes, np.float32, 2):
            r = got.pop((op, case.nbytes))
            assert r["count"] == case.count
            assert r["iters"] == [3] and r["wrong"] == 0
            assert 0 < r["time_min_us"] <= r["time_us"] <= r["time_max_us"]
            assert r["algbw"] > 0 and r["busbw"] > 0
    assert not got, f"unexpected points {sorted(got)}"
    # The socket peer: the ring's bytes over plain sockets, allreduce only.
    assert doc["peers"]["socket"]["status"] == "ok", doc["peers"]["socket"]
    assert set(doc["peers"]["socket"]["skipped_ops"]) == {"allgather", "broadcast"}
    sock = {r["nbytes"]: r for r in doc["results"] if r["impl"] == "socket"}
    assert {r["op"] for r in sock.values()} == {"allreduce"}
    assert sorted(sock) == [c.nbytes for c in make_cases("allreduce", sizes, np.float32, 2)]
    assert all(r["busbw"] > 0 and r["iters"] == [3] for r in sock.values())
