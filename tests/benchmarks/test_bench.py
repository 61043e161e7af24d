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

REPO = Path(__file__).resolve().parents[2]
ADAPTERS = REPO / "adapters"
sys.path.insert(0, str(REPO))

from ringcc.bench.allreduce import Bench, parse_args  # noqa: E402
from ringcc.bench.measure import DEFAULT_OPS, OPS, Case, make_cases, size_sweep, sweep  # noqa: E402
from ringcc.bench.table import aggregate, op_table  # noqa: E402

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
        rank=lambda: 0,
        size=lambda: 1,
        local_size=lambda: 1,
        Max="max",
        allreduce_=lambda x, op="sum": x,
        broadcast_=lambda x, root=0: x,
        allgather=allgather,
        reduce_scatter=allgather,  # one rank: its one block is the whole input
        barrier=lambda: None,
    )


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
    # reduce_scatter: S is each rank's input, whole blocks of one per rank.
    rs = Case("reduce_scatter", (1 << 20) + 4, np.float32, 3)
    assert rs.count % 3 == 0 and rs.count == (((1 << 20) + 4) // 4) // 3 * 3
    assert rs.out_count == rs.count // 3 and rs.nbytes == rs.count * 4
    assert rs.busbw(t) == pytest.approx(rs.algbw(t) * 2 / 3)
    assert Case("reduce_scatter", 8, np.float32, 4).count == 4  # at least one element per rank
    # Sizes below one element per rank round up to one element, once.
    assert [c.count for c in make_cases("allgather", [8, 16], np.float64, 2)] == [1]


def test_one_rank_sweep_checks_and_tables():
    from ringcc.bench.allreduce import RingccBackend

    backend = RingccBackend(_one_rank_ringcc())
    out = sweep(backend, list(OPS), [8, 4096], np.dtype(np.float32), iters=3, warmup=1, check=True)
    assert out["skipped"] == {}
    assert len(out["results"]) == 2 * len(OPS)
    assert all(r["wrong"] == 0 and r["time"] > 0 and r["iters"] == 3 for r in out["results"])
    assert all(len(r["samples"]) == 3 for r in out["results"])  # one batch per iteration here
    # The machine's CPUs busy over each point's loop: a share of them, never more than all.
    assert all(0 <= r["cpus_busy"] <= os.cpu_count() + 0.5 for r in out["results"])
    e = aggregate("allreduce", 4096, 1024, [2e-6, 1e-6, 3e-6], 2)
    # No per-batch samples: the spread is over the repeats, (p75 - p25) / median.
    assert e["time_us"] == pytest.approx(2.0) and e["spread"] == pytest.approx(0.5)
    assert e["busbw"] == pytest.approx(4096 / 2e-6 / 1e9)
    text = op_table("allreduce", {"ringcc": {4096: dict(e, wrong=0)}, "gloo": {}}, ["gloo"], "float32", 2, 3, True)
    assert any(_HEADER.match(line) for line in text.splitlines())
    assert "n/a" in text.splitlines()[-1]


def test_unknown_peer_is_skipped_with_reason(tmp_path, capsys):
    path = tmp_path / "bench.json"
    args = parse_args(
        [
            "--maxbytes",
            "1K",
            "--iters",
            "2",
            "--warmup",
            "0",
            "--repeats",
            "2",
            "--compare",
            "nosuchpeer",
            "--json",
            str(path),
        ]
    )
    assert Bench(args, _one_rank_ringcc()).run() == 0
    doc = json.loads(path.read_text())
    assert doc["peers"]["nosuchpeer"]["status"] == "skipped"
    assert "unknown peer" in doc["peers"]["nosuchpeer"]["reason"]
    assert all(len(r["times_us"]) == 2 for r in doc["results"])
    assert "skipped: unknown peer" in capsys.readouterr().out


def test_spread_is_the_middle_half_of_the_samples():
    from ringcc.bench.table import quartiles, spread

    assert quartiles([4.0, 1.0, 3.0, 2.0, 5.0]) == (2.0, 3.0, 4.0)
    assert spread([1e-6] * 5) == 0.0
    # One slow batch in fifteen: (max - min) / median would say 1300 %.
    samples = [1e-6] * 14 + [14e-6]
    e = aggregate("allreduce", 8, 2, [1e-6, 1e-6, 1.2e-6], 2, samples)
    assert e["spread"] == pytest.approx(0.0)
    assert e["samples_us"] == pytest.approx([s * 1e6 for s in samples])
    e = aggregate("allreduce", 8, 2, [1e-6], 2, [1e-6, 1e-6, 2e-6, 3e-6, 3e-6])
    assert e["spread"] == pytest.approx((3 - 1) / 2)


def test_measure_samples_batches():
    from ringcc.bench.measure import batch_sizes

    assert batch_sizes(3) == [1, 1, 1]
    assert batch_sizes(12) == [3, 3, 2, 2, 2]
    assert sum(batch_sizes(1001)) == 1001 and len(batch_sizes(1001)) == 5


def _entry(op, nbytes, times_s, world=2):
    return aggregate(op, nbytes, nbytes // 4, times_s, world)


def test_every_ratio_is_a_speed_up_of_ringcc():
    """Latency and bandwidth alike: peer time / ringcc time, > 1 when ringcc is faster."""
    from ringcc.bench.table import summary, summary_text

    mib = 1 << 20
    entries = {
        "allreduce": {
            "ringcc": {
                8: _entry("allreduce", 8, [1e-6, 1e-6, 1e-6]),
                mib: _entry("allreduce", mib, [1e-4, 1e-4, 1e-4]),
            },
            "gloo": {8: _entry("allreduce", 8, [4e-6, 4e-6, 4e-6]), mib: _entry("allreduce", mib, [2e-4, 2e-4, 2e-4])},
        }
    }
    figures = {f["figure"]: f for f in summary(entries, ["gloo"], np.dtype(np.float32), 2)}
    latency = figures["allreduce 8 B latency (us)"]["impls"]["gloo"]
    assert latency["ratio"] == pytest.approx(4.0)  # ringcc's 1 us against gloo's 4 us
    assert latency["ratio_min"] == pytest.approx(4.0) and latency["ratio_max"] == pytest.approx(4.0)
    busbw = figures["allreduce 1 MiB busbw (GB/s)"]["impls"]["gloo"]
    assert busbw["ratio"] == pytest.approx(2.0)
    text = summary_text(list(figures.values()), ["gloo"], "float32", 2, 3)
    assert "higher is better for ringcc" in text and "speed-up of ringcc" in text
    table = op_table("allreduce", entries["allreduce"], ["gloo"], "float32", 2, 3, False)
    assert "speedup" in table and "higher is better" in table
    row8 = [line for line in table.splitlines() if line.split()[:1] == ["8"]][0]
    assert row8.split()[-1] == "4.00"


class _FakeStream:
    def __init__(self, tty=False):
        self.text, self.tty = "", tty

    def write(self, text):
        self.text += text

    def flush(self):
        pass

    def isatty(self):
        return self.tty


def test_progress_lines_are_throttled_and_say_where_the_run_is():
    from ringcc.bench.output import Progress, point_text

    now = [100.0]
    stream = _FakeStream()
    progress = Progress(stream, clock=lambda: now[0], interval_s=2.0)
    progress.update(point_text("gloo", "allreduce", 1 << 20, 3, 40, 0, 3))
    now[0] += 1.0
    progress.update("skipped: within the interval")
    now[0] += 1.5
    progress.update(point_text("ringcc", "broadcast", 64 << 20, 40, 40, 2, 3))
    progress.update("forced", force=True)
    lines = stream.text.splitlines()
    assert lines == [
        "# progress: 0 s elapsed, repeat 1/3, gloo: allreduce 1 MiB (point 3/40)",
        "# progress: 2 s elapsed, repeat 3/3, ringcc: broadcast 64 MiB (point 40/40)",
        "# progress: 2 s elapsed, forced",
    ]
    # On a terminal: one line rewritten in place, cleared at the end.
    tty = _FakeStream(tty=True)
    progress = Progress(tty, clock=lambda: now[0])
    progress.update("a")
    progress.update("b")
    progress.done()
    assert tty.text.count("\r") == 3 and "\n" not in tty.text
    off = _FakeStream()
    Progress(off, enabled=False).update("x", force=True)
    assert off.text == ""


def test_csv_and_plot_of_a_one_rank_run(tmp_path, capsys):
    import csv

    args = parse_args(
        ["--maxbytes", "4K", "--iters", "2", "--warmup", "0", "--repeats", "2", "--csv", str(tmp_path / "r.csv")]
        + (["--plot", str(tmp_path / "r.png")] if _have_matplotlib() else [])
    )
    assert Bench(args, _one_rank_ringcc()).run() == 0
    out, err = capsys.readouterr()
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    sizes = size_sweep(8, 4096, 4)
    assert len(rows) == sum(len(make_cases(op, sizes, np.float32, 1)) for op in DEFAULT_OPS)
    for row in rows:
        assert row["impl"] == "ringcc" and row["op"] in DEFAULT_OPS and row["ranks"] == "1"
        assert float(row["time_us"]) > 0 and row["repeats"] == "2" and row["speedup_x"] == ""
        assert float(row["time_p25_us"]) <= float(row["time_p75_us"])
    assert {int(r["size_bytes"]) for r in rows if r["op"] == "allreduce"} == set(sizes)
    # The spread in the table's unit (%): the CSV's values are the allreduce table's, to its digits.
    section = out.split("# allreduce:", 1)[1].split("\n\n", 1)[0]
    table = {int(line.split()[0]): float(line.split()[6]) for line in section.splitlines()[1:] if line.startswith(" ")}
    csv_spreads = {int(r["size_bytes"]): float(r["spread_pct"]) for r in rows if r["op"] == "allreduce"}
    assert set(table) == set(csv_spreads), section
    assert all(abs(csv_spreads[n] - table[n]) <= 0.05 + 1e-9 for n in table), (csv_spreads, table)
    # Progress went to stderr, not into the tables.
    assert "# progress:" in err and "# progress:" not in out
    if _have_matplotlib():
        png = (tmp_path / "r.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
        assert f"# plot written to {tmp_path / 'r.png'} (2 x 3 panels: busbw, latency)" in out


def _have_matplotlib():
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def test_plot_without_matplotlib_is_refused_before_measuring(monkeypatch, capsys):
    import ringcc.bench.allreduce

    monkeypatch.setattr(ringcc.bench.allreduce, "plot_available", lambda: False)
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--plot", "x.png"])
    assert exit_info.value.code == 2
    assert "--plot needs matplotlib" in capsys.readouterr().err


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
    probe = subprocess.run(
        [sys.executable, "-c", "import ringcc._core, ringcc.launcher"],
        env=_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines()
        pytest.skip(
            "ringcc._core is not importable from adapters/ (build the core first): "
            + (lines[-1] if lines else f"exit {probe.returncode}")
        )


def test_two_rank_run(core_built, tmp_path):
    path = tmp_path / "bench.json"
    cmd = [
        sys.executable,
        "-m",
        "ringcc.launcher",
        "--no-prefix",
        "-np",
        "2",
        sys.executable,
        "-m",
        "ringcc.bench.allreduce",
        "--maxbytes",
        "64K",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--repeats",
        "1",
        "--check",
        "--compare",
        "socket",
        "--ops",
        ",".join(OPS),
        "--json",
        str(path),
    ]
    run = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    # Rank 0 alone writes, without the launcher's prefix; progress goes to stderr only.
    assert not any(_PREFIX.match(line) for line in lines)
    assert not any("# progress" in line for line in lines)
    progress = [line for line in run.stderr.splitlines() if line.startswith("# progress:")]
    assert any("socket: allreduce" in line for line in progress), run.stderr[-2000:]
    assert any("ringcc: broadcast" in line for line in progress), run.stderr[-2000:]
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
    assert set(doc["peers"]["socket"]["skipped_ops"]) == {"allgather", "broadcast", "reduce_scatter"}
    sock = {r["nbytes"]: r for r in doc["results"] if r["impl"] == "socket"}
    assert {r["op"] for r in sock.values()} == {"allreduce"}
    assert sorted(sock) == [c.nbytes for c in make_cases("allreduce", sizes, np.float32, 2)]
    assert all(r["busbw"] > 0 and r["iters"] == [3] for r in sock.values())


def test_torch_bench_csv_plot_and_progress(core_built, tmp_path):
    """ringcc.bench.torch_allreduce on 2 ranks: its table, CSV rows per backend and size,
    a plot (with matplotlib), progress on stderr only."""
    pytest.importorskip("torch")
    csv_path, png_path = tmp_path / "t.csv", tmp_path / "t.png"
    cmd = [
        sys.executable,
        "-m",
        "ringcc.launcher",
        "--no-prefix",
        "-np",
        "2",
        sys.executable,
        "-m",
        "ringcc.bench.torch_allreduce",
        "--sizes",
        "4,4K",
        "--repeats",
        "2",
        "--min-time",
        "0.02",
        "--ddp-params",
        "0",
        "--csv",
        str(csv_path),
    ] + (["--plot", str(png_path)] if _have_matplotlib() else [])
    run = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "speedup = gloo time / ring time (higher is better for ring)" in run.stdout
    assert "# progress" not in run.stdout and "# progress:" in run.stderr
    import csv

    rows = list(csv.DictReader(csv_path.open()))
    assert sorted((r["backend"], int(r["size_bytes"])) for r in rows) == [
        ("gloo", 4),
        ("gloo", 4096),
        ("ring", 4),
        ("ring", 4096),
    ]
    for r in rows:
        assert float(r["time_us"]) > 0 and r["repeats"] == "2"
        assert (r["speedup_vs_gloo_x"] != "") == (r["backend"] == "ring")
    if _have_matplotlib():
        assert png_path.read_bytes()[:4] == b"\x89PNG"


def _jax_handlers_built():
    import importlib.util

    if importlib.util.find_spec("jax") is None:
        return False
    probe = subprocess.run(
        [sys.executable, "-c", "import ringcc; print(bool(ringcc._core.jax_ffi_targets()))"],
        env=_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return probe.stdout.strip() == "True"


def test_jax_bench_with_jax_own_gloo_collectives(core_built, tmp_path):
    """ringcc.bench.jax_allreduce --compare jax-gloo: JAX's CPU collectives over gloo
    (jax.distributed, a job of its own) beside ringcc.jax, in the table and CSV."""
    if not _jax_handlers_built():
        pytest.skip("jax is not installed, or this ringcc has no XLA FFI handlers")
    csv_path = tmp_path / "j.csv"
    cmd = [
        sys.executable,
        "-m",
        "ringcc.launcher",
        "--no-prefix",
        "-np",
        "2",
        sys.executable,
        "-m",
        "ringcc.bench.jax_allreduce",
        "--size",
        "64K",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--repeats",
        "1",
        "--variants",
        "numpy-inplace,jit-donated",
        "--compare",
        "jax-gloo",
        "--csv",
        str(csv_path),
    ]
    env = dict(_env(), JAX_PLATFORMS="cpu")
    run = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "jax_cpu_collectives_implementation=gloo" in run.stdout, run.stdout
    import csv

    got = {r["variant"]: r for r in csv.DictReader(csv_path.open())}
    assert set(got) == {"numpy-inplace", "jit-donated", "jax-gloo-psum", "jax-gloo-psum-donated"}, run.stdout
    assert all(float(r["time_ms"]) > 0 and float(r["speedup_x"]) > 0 for r in got.values())
    assert float(got["numpy-inplace"]["speedup_x"]) == 1.0
    assert "# progress:" in run.stderr and "# progress" not in run.stdout


@pytest.mark.skipif(not _have_matplotlib(), reason="matplotlib is not installed")
def test_plot_again_from_the_json(tmp_path, capsys):
    from ringcc.bench.plot import entries_of
    from ringcc.bench.plot import main as plot_main

    path = tmp_path / "r.json"
    args = parse_args(
        [
            "--maxbytes",
            "1K",
            "--iters",
            "2",
            "--warmup",
            "0",
            "--repeats",
            "1",
            "--ops",
            "broadcast",
            "--json",
            str(path),
            "--no-progress",
        ]
    )
    assert Bench(args, _one_rank_ringcc()).run() == 0
    doc = json.loads(path.read_text())
    assert doc["meta"]["machine"]["cpus"] == os.cpu_count()
    entries = entries_of(doc)
    assert list(entries) == ["broadcast"] and list(entries["broadcast"]) == ["ringcc"]
    assert plot_main([str(path), str(tmp_path / "again.svg")]) == 0
    assert b"broadcast: latency" in (tmp_path / "again.svg").read_bytes()


def test_device_cuda_without_a_gpu_is_one_line(monkeypatch):
    import ringcc.bench.allreduce as allreduce

    monkeypatch.setattr(allreduce, "cuda_missing", lambda: "torch sees no CUDA device")
    with pytest.raises(SystemExit) as stopped:
        allreduce.main(["--device", "cuda"])
    assert str(stopped.value) == (
        "ringcc.bench.allreduce: --device cuda: torch sees no CUDA device; run without --device on this machine"
    )


def test_tensorflow_bench_table_and_csv_carry_the_tape_ratio(tmp_path, capsys):
    # The TensorFlow bench's rows: times, a bus bandwidth, a rate and the
    # tape's ratio, each printed and written in its own column.
    from ringcc.bench.tensorflow_allreduce import print_rows

    rows = [
        {"case": "ringcc 8 per call", "seconds": 2e-4, "busbw_GBps": 4e-5},
        {"case": "tape step's communication (difference)", "seconds": 9e-3, "busbw_GBps": None},
        {"case": "tape / concatenated communication (ratio)", "seconds": None, "ratio": 1.625},
        {"case": "model.fit ringcc.keras (steps/s)", "seconds": 1 / 250.0, "busbw_GBps": None},
    ]
    path = tmp_path / "tf.csv"
    print_rows(rows, str(path))
    table = capsys.readouterr().out
    assert re.search(r"tape / concatenated communication \(ratio\)\s+1\.62\s*$", table, re.M), table
    assert re.search(r"model\.fit ringcc\.keras \(steps/s\)\s+250\.0\s*$", table, re.M), table
    assert re.search(r"ringcc 8 per call\s+200\.0\s+0\.000\s*$", table, re.M), table
    lines = path.read_text().splitlines()
    assert lines[0] == "case,seconds,busbw_GBps,ratio"
    assert lines[3] == "tape / concatenated communication (ratio),,,1.625"
    assert lines[2] == "tape step's communication (difference),0.009,,"
