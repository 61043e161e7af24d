"""Tests of the benches' figure (adapters/ringcc/bench/figure.py) read back
from the files it writes: a PNG's size and dots per inch, an SVG's panels,
their titles and the legend, a PDF's embedded fonts; and, from the figure
itself, the title inside the picture, the quartile bars, the shared axes.
Also the bench as an installed tool: `python -m ringcc.bench`, the
repository's `python -m bench.allreduce`, and what a bench says run alone."""

import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from ringcc.bench.figure import PLOT_DPI, build_figure, picture_error, plot_results, quartile_times
from ringcc.bench.launch_hint import alone_hint, started_alone

REPO = Path(__file__).resolve().parents[2]
HAVE_MATPLOTLIB = __import__("importlib.util").util.find_spec("matplotlib") is not None
needs_matplotlib = pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="matplotlib is not installed")


def _entry(nbytes, time_us, samples, busbw_factor=1.0, times=None):
    return {
        "time_us": time_us,
        "samples_us": samples,
        "times_us": times or [time_us],
        "busbw": nbytes / (time_us * 1e-6) / 1e9 * busbw_factor,
    }


SIZES = (8, 1024, 64 << 10, 1 << 20, 16 << 20)


def _entries(ops=("allreduce", "broadcast"), peers=("gloo", "mpi")):
    """op -> impl -> nbytes -> entry; ringcc 2x faster than gloo, as fast as mpi."""
    out = {}
    for op in ops:
        impls = {"ringcc": {n: _entry(n, 10 + n / 1e3, [9 + n / 1e3, 10 + n / 1e3, 12 + n / 1e3]) for n in SIZES}}
        for k, peer in enumerate(peers):
            factor = 2.0 if k == 0 else 1.0
            impls[peer] = {n: _entry(n, factor * (10 + n / 1e3), [factor * (10 + n / 1e3)] * 3) for n in SIZES}
        out[op] = impls
    return out


def _png_header(path):
    """(width, height, dots per inch) from the IHDR and pHYs chunks."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    at = data.index(b"pHYs")
    per_metre_x, per_metre_y, unit = struct.unpack(">IIB", data[at + 4 : at + 13])
    assert unit == 1 and per_metre_x == per_metre_y  # metres, square pixels
    return width, height, per_metre_x * 0.0254


@needs_matplotlib
def test_png_has_the_dpi_and_size_of_the_figure(tmp_path):
    path = tmp_path / "f.png"
    layout = plot_results(str(path), _entries(), "a title")
    width_in, height_in = layout.size_in()
    width, height, dpi = _png_header(path)
    assert dpi == pytest.approx(PLOT_DPI, abs=0.5) and PLOT_DPI >= 200
    assert (width, height) == (round(width_in * PLOT_DPI), round(height_in * PLOT_DPI))
    plot_results(str(tmp_path / "g.png"), _entries(), "a title", dpi=300)
    assert _png_header(tmp_path / "g.png")[2] == pytest.approx(300, abs=0.5)


@needs_matplotlib
def test_svg_has_a_panel_per_op_and_view_with_titles_and_one_legend(tmp_path):
    path = tmp_path / "f.svg"
    layout = plot_results(str(path), _entries(), "a title")
    svg = path.read_text()
    assert layout.rows == ["busbw", "latency", "speed-up over gloo", "speed-up over mpi"]
    assert layout.ops == ["allreduce", "broadcast"]
    # Every panel is an axes group; the legend is the figure's, once.
    assert len(re.findall(r'<g id="axes_\d+"', svg)) == 8
    assert len(re.findall(r'<g id="legend_\d+"', svg)) == 1
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)  # text stays text (svg.fonttype none)
    for op in layout.ops:
        for row in layout.rows:
            assert f"{op}: {row}" in texts
    for label in ("ringcc", "gloo", "mpi", "bus bandwidth (GB/s)", "time per call (us)", "message size (bytes)"):
        assert label in texts, label


@needs_matplotlib
def test_no_latency_panel_without_small_messages_and_no_speedup_without_peers(tmp_path):
    big = {"allreduce": {"ringcc": {n: _entry(n, 100.0, [100.0]) for n in (1 << 20, 4 << 20)}}}
    layout = plot_results(str(tmp_path / "f.svg"), big, "t")
    assert layout.rows == ["busbw"] and layout.peers == []


@needs_matplotlib
def test_pdf_embeds_truetype_fonts(tmp_path):
    path = tmp_path / "f.pdf"
    plot_results(str(path), _entries(), "a title")
    data = path.read_bytes()
    assert data.startswith(b"%PDF") and b"/FontFile2" in data and b"/Type3" not in data


def test_unknown_picture_types_are_refused_before_measuring(capsys):
    assert picture_error("x.png") == "" and picture_error("x.SVG") == "" and picture_error("x.pdf") == ""
    assert ".png, .svg, .pdf (got .gif)" in picture_error("x.gif")
    from ringcc.bench.allreduce import parse_args

    if HAVE_MATPLOTLIB:
        with pytest.raises(SystemExit) as exit_info:
            parse_args(["--plot", "x.gif"])
        assert exit_info.value.code == 2
        assert "the picture's type comes from its extension" in capsys.readouterr().err


def _draw(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


@needs_matplotlib
def test_a_long_title_wraps_inside_the_picture_above_the_panels():
    title = "busbw of a long run — " + ", ".join(f"library{k} 1.{k}.0" for k in range(30)) + "\nhost: a long machine"
    fig, layout = build_figure(_entries(ops=("allreduce",), peers=("gloo",)), title)
    renderer = _draw(fig)
    picture = fig.bbox
    box = fig._suptitle.get_window_extent(renderer)
    assert picture.x0 <= box.x0 and box.x1 <= picture.x1 and picture.y0 <= box.y0 and box.y1 <= picture.y1
    assert fig._suptitle.get_text().count("\n") >= 2  # wrapped
    top = max(ax.title.get_window_extent(renderer).y1 for ax in fig.axes)
    assert box.y0 >= top - 1  # above every panel's own title
    legend = fig.legends[0].get_window_extent(renderer)
    assert picture.y0 <= legend.y0 and legend.x1 <= picture.x1


@needs_matplotlib
def test_bars_span_the_quartiles_of_the_samples():
    n = 1 << 20
    ours = _entry(n, 100.0, [80.0, 90.0, 100.0, 110.0, 200.0])
    p25, med, p75 = quartile_times(ours)
    assert (p25, med, p75) == (90.0, 100.0, 110.0)
    fig, layout = build_figure({"allreduce": {"ringcc": {n: ours}}}, "t")
    busbw_ax = fig.axes[0]
    (container,) = busbw_ax.containers
    segments = container.lines[2][0].get_segments()
    (low, high) = sorted(segments[0][:, 1])
    # busbw is bytes over time: the slow quartile (p75) is the low end.
    assert low == pytest.approx(ours["busbw"] * med / p75) and high == pytest.approx(ours["busbw"] * med / p25)


@needs_matplotlib
def test_speedup_is_peer_time_over_ringcc_time_with_the_repeats_quartiles():
    n = 1024
    ours = _entry(n, 10.0, [10.0], times=[10.0, 10.0, 10.0, 10.0])
    theirs = _entry(n, 30.0, [30.0], times=[20.0, 30.0, 30.0, 40.0])
    fig, layout = build_figure({"allreduce": {"ringcc": {n: ours}, "gloo": {n: theirs}}}, "t")
    speedup_ax = fig.axes[layout.rows.index("speed-up over gloo")]
    (container,) = speedup_ax.containers
    assert list(container.lines[0].get_ydata()) == [3.0]
    (low, high) = sorted(container.lines[2][0].get_segments()[0][:, 1])
    assert (low, high) == (pytest.approx(2.75), pytest.approx(3.25))  # quartiles of 2, 3, 3, 4


@needs_matplotlib
def test_rows_share_y_and_columns_share_x():
    fig, layout = build_figure(_entries(), "t")
    cols = len(layout.ops)
    grid = [fig.axes[r * cols : (r + 1) * cols] for r in range(len(layout.rows))]
    for row in grid:
        assert all(row[0].get_shared_y_axes().joined(row[0], ax) for ax in row[1:])
    for c in range(cols):
        busbw, latency, *speedups = (grid[r][c] for r in range(len(layout.rows)))
        assert all(busbw.get_shared_x_axes().joined(busbw, ax) for ax in speedups)
        assert not busbw.get_shared_x_axes().joined(busbw, latency)  # the latency row has its own range
    assert all(ax.get_xscale() == "log" and ax.get_yscale() == "log" for ax in fig.axes)


# -- the bench as an installed tool ------------------------------------------------


def _python(args, cwd, timeout=120):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_ringcc_bench_lists_its_benches_and_names_the_closest(tmp_path):
    listing = _python(["-m", "ringcc.bench"], tmp_path)
    assert listing.returncode == 0 and "allreduce" in listing.stdout and "torch_allreduce" in listing.stdout
    wrong = _python(["-m", "ringcc.bench", "allredce"], tmp_path)
    assert wrong.returncode == 2 and "no bench named 'allredce' (did you mean allreduce?)" in wrong.stderr


def test_the_bench_runs_from_any_directory_and_says_it_runs_alone(tmp_path):
    tiny = ["--maxbytes", "64", "--iters", "2", "--warmup", "0", "--repeats", "1", "--ops", "allreduce"]
    run = _python(["-m", "ringcc.bench", "allreduce", *tiny, "--no-progress"], tmp_path)
    assert run.returncode == 0, run.stderr
    assert re.search(r"^# ringcc \S+ benchmark: 1 ranks", run.stdout, re.M)
    lines = run.stderr.splitlines()
    assert "ringcc.bench allreduce: no launcher started this process, so it times one rank alone, and no peer." in lines
    command = f"ringrun -np 2 python -m ringcc.bench allreduce {' '.join(tiny)} --no-progress"
    assert f"ringcc.bench allreduce: to time 2 ranks on this host: {command}" in lines
    # The repository's name for it still works from the root.
    old = _python(["-m", "bench.allreduce", *tiny, "--no-progress"], REPO)
    assert old.returncode == 0 and "benchmark: 1 ranks" in old.stdout, old.stderr


def test_a_bench_under_a_launcher_says_nothing_of_it():
    assert started_alone({}) and started_alone({"RANK": ""})
    for variable in ("RINGCC_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK"):
        assert not started_alone({variable: "0"}), variable
    assert "needs ranks started by a launcher" in alone_hint("torch_allreduce", [], stops=True)
