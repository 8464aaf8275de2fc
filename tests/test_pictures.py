"""The pictures of a run (report/pictures.py) and their PNG and terminal forms, on runs whose
numbers are known: each test reads the drawn data back and checks it against the result files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from matplotlib.colors import to_hex

from harness.judge.assessment import assess
from harness.report import palette, pictures
from harness.report import picture_figures as pictured
from harness.report.exports import Format, render_run
from harness.report.figures import _pyplot, write_figures
from harness.report.sparklines import MARK_LETTERS, render_plots
from harness.store.run_folder import Run, load_run
from suites.contract.frameworks import FRAMEWORKS
from tests.factories import metric, result, write_run

CPU = {"model": "Test CPU", "logical_cores": 2, "usable_cores": 2, "vector": "avx2", "max_mhz": 3000.0}


def _xla_doc(fw: str, matmul: list[float], *, marks: dict[str, list[int]] | None = None,
             sizes: list[int] | None = None, firsts: list[float] | None = None) -> dict[str, Any]:  # fmt: skip
    m = metric("matmul", matmul, flops=2.0 * 512**3)
    m.update(bytes=3.0 * 512 * 512 * 8, dtype="float64", marks=marks or {})
    if sizes is not None:
        m["round_sizes"] = sizes
    if firsts is not None:
        m["first_calls"] = firsts
    s = metric("mean_sum", [1e-3] * len(matmul), flops=4.0 * 512 * 512)
    s.update(bytes=2.0 * 512 * 512 * 8, dtype="float64", marks={})
    g = metric("generate", [2e-3] * len(matmul))  # no counts: a timeline, never a roofline point
    doc = result(fw, [m, s, g])
    doc["environment"]["machine"] = {"cpu": CPU}
    return doc


def _curve(seconds: list[float], loss: list[float], accuracy: list[float]) -> dict[str, Any]:
    return {"epoch_seconds": seconds, "train_loss": loss, "train_accuracy": [50.0] * len(loss),
            "test_accuracy": accuracy, "evaluation_seconds": [0.1] * len(accuracy), "seed": 42}  # fmt: skip


def _training_doc(fw: str, curves: list[dict[str, Any]], target: float | None = 90.0) -> dict[str, Any]:
    doc = result(fw, [metric("epoch", [1.0, 1.1])], checks=[])
    doc["suite"] = "mlp"
    doc["training"] = {"data": "device", "curves": curves}
    if target is not None:
        doc["training"]["target"] = {"accuracy": target, "status": "reached", "seconds": 3.0, "wall_seconds": 3.5,
                                     "epochs": 2, "best_accuracy": 91.0}  # fmt: skip
    return doc


@pytest.fixture
def xla(tmp_path: Path) -> Run:
    docs = [
        _xla_doc("numpy", [0.05, 0.051, 0.052, 0.05, 0.049, 0.05], sizes=[3, 3], firsts=[0.06, 0.061]),
        _xla_doc(
            "jax", [0.04, 1e-6, 0.041, 0.04, 0.042, 0.04], marks={"escaped": [1, 4]}, sizes=[3, 3], firsts=[0.3, 0.31]
        ),  # fmt: skip
    ]
    return load_run(write_run(tmp_path / "xla", docs))


def test_a_roofline_point_sits_at_its_declared_intensity_and_measured_rate(xla: Run) -> None:
    roof = pictures.roofline(assess(xla))
    assert roof is not None
    by_key = {(p.framework, p.metric): p for p in roof.points}
    assert set(by_key) == {(fw, m) for fw in ("numpy", "jax") for m in ("matmul", "mean_sum")}
    for (fw, name), point in by_key.items():
        m = next(m for m in xla.results[fw]["metrics"] if m["name"] == name)
        assert point.intensity == pytest.approx(m["flops"] / m["bytes"])  # type: ignore[operator]
        assert point.rate == pytest.approx(m["flops"] / m["stats"]["median"])  # type: ignore[operator]
    assert by_key[("numpy", "matmul")].intensity == pytest.approx(512 / 12)
    # The datasheet roof of this CPU: 2 cores x 3 GHz x 16 FLOP/cycle for float64; L1 bound for bytes.
    sheet = next(r for r in roof.roofs if r.kind == "datasheet")
    assert sheet.flops == pytest.approx(2 * 3e9 * 16) and sheet.bandwidth == pytest.approx(2 * 3e9 * 96)
    assert sheet.at(0.01) == pytest.approx(0.01 * sheet.bandwidth) and sheet.at(1e6) == sheet.flops
    assert not any(r.kind == "measured" for r in roof.roofs)  # no calibration.json in this run folder
    assert roof.left_out == ()  # generate declares neither count: not "left out", simply not a roofline metric


def test_the_roofline_figure_draws_each_point_and_roof_where_the_data_says(xla: Run) -> None:
    plt = _pyplot()
    roof = pictures.roofline(assess(xla))
    assert roof is not None
    fig = pictured.roofline_figure(plt, roof)
    ax = fig.axes[0]
    drawn = {c.get_gid(): c.get_offsets()[0] for c in ax.collections}
    for p in roof.points:
        x, y = drawn[f"point:{p.framework}:{p.metric}"]
        assert x == pytest.approx(p.intensity) and y == pytest.approx(p.rate / 1e9)
    line = next(ln for ln in ax.lines if ln.get_gid() == "roof:datasheet:float64")
    xs, ys = line.get_xdata(), line.get_ydata()
    assert ys[-1] == pytest.approx(2 * 3e9 * 16 / 1e9) and ys[0] == pytest.approx(xs[0] * 2 * 3e9 * 96 / 1e9)
    assert ax.get_xscale() == "log" and "FLOP per byte" in ax.get_xlabel() and "GFLOP/s" in ax.get_ylabel()
    plt.close(fig)


def test_a_flagged_point_keeps_its_colour_ringed_in_red_never_a_plain_point(tmp_path: Path) -> None:
    fast = _xla_doc("jax", [1e-7] * 3)  # 268 MFLOP in 100 ns: far above this CPU's peak
    run = load_run(write_run(tmp_path / "f", [_xla_doc("numpy", [0.05] * 3), fast]))
    roof = pictures.roofline(assess(run))
    assert roof is not None
    flagged = next(p for p in roof.points if p.framework == "jax" and p.metric == "matmul")
    assert any("implausible" in f for f in flagged.flags)
    plt = _pyplot()
    fig = pictured.roofline_figure(plt, roof)
    ring = next(c for c in fig.axes[0].collections if c.get_gid() == "point:jax:matmul")
    assert ring.get_label().startswith("jax matmul: FLAGGED")
    # The flag is a red ring on jax's own colour (issue 57), not a replacement for it.
    assert to_hex(ring.get_facecolors()[0]) == palette.colour("jax")
    assert to_hex(ring.get_edgecolors()[0]) == palette.FLAG_COLOUR
    plain_point = next(c for c in fig.axes[0].collections if c.get_gid() == "point:numpy:matmul")
    assert "FLAGGED" not in plain_point.get_label()
    plt.close(fig)


def test_the_timeline_has_one_point_per_sample_with_marked_ones_apart_and_rounds_split(xla: Run) -> None:
    found = {t.metric: t for t in pictures.timelines(assess(xla))}
    assert list(found) == ["matmul", "mean_sum", "generate"]
    matmul = found["matmul"]
    assert matmul.reasons == {"escaped": pictures.MARKS["escaped"]}
    jax = next(s for s in matmul.series if s.framework == "jax")
    assert (
        jax.round_sizes == (3, 3) and jax.first_calls == (0.3, 0.31) and jax.marks == {1: ("escaped",), 4: ("escaped",)}
    )
    assert [jax.process_of(i) for i in range(6)] == [1, 1, 1, 2, 2, 2]
    plt = _pyplot()
    fig = pictured.timeline_figure(plt, matmul, "xla")
    first_ax, ax = fig.axes
    lines = {ln.get_gid(): ln for ln in ax.lines}
    for s in matmul.series:
        drawn = lines[f"samples:{s.framework}"]
        assert list(drawn.get_xdata()) == list(range(1, 7)) and list(drawn.get_ydata()) == list(s.samples)
        assert palette.colour(s.framework) == drawn.get_color()
    marked = next(c for c in ax.collections if c.get_gid() == "marked:jax:escaped")
    assert [tuple(xy) for xy in marked.get_offsets()] == [(2.0, 1e-6), (5.0, 0.042)]
    assert "work still running" in marked.get_label()
    assert [g for g in lines if g and g.startswith("boundary:")] == ["boundary:3.5"]  # one edge between 2 rounds
    firsts = {ln.get_gid(): list(ln.get_ydata()) for ln in first_ax.lines}
    assert firsts["first:jax"] == [0.3, 0.31] and firsts["first:numpy"] == [0.06, 0.061]
    plt.close(fig)


def test_learning_curves_are_cumulative_training_time_with_a_median_band_over_rounds(tmp_path: Path) -> None:
    flax = [_curve([2.0, 1.0, 1.0], [0.9, 0.5, 0.3], [80.0, 88.0, 91.0]),
            _curve([2.2, 1.2], [0.8, 0.4], [82.0, 92.0])]  # fmt: skip
    torch = [_curve([1.5, 1.0, 1.0], [1.0, 0.6, 0.35], [78.0, 86.0, 90.5])]
    run = load_run(write_run(tmp_path / "t", [_training_doc("flax", flax), _training_doc("pytorch", torch)]))
    curves = pictures.learning_curves(assess(run))
    assert curves is not None and curves.target == 90.0 and curves.frameworks == ["flax", "pytorch"]
    first = curves.curves[0]
    assert [p.seconds for p in first.points] == [2.0, 3.0, 4.0]
    assert [p.test_accuracy for p in first.points] == [80.0, 88.0, 91.0]
    assert [p.train_loss for p in first.points] == [0.9, 0.5, 0.3]
    (band,) = curves.bands  # only flax has more than one process
    # Epochs every round reached: round 2 stopped after epoch 2, so the median ends there.
    assert band.framework == "flax" and band.rounds == 2 and band.epochs == (1, 2)
    assert band.seconds == (2.1, pytest.approx(3.2))
    assert band.accuracy[1] == (88.0, 90.0, 92.0) and band.loss[0] == pytest.approx((0.8, 0.85, 0.9))

    plt = _pyplot()
    fig = pictured.learning_curves_figure(plt, curves)
    acc_ax, loss_ax = fig.axes
    lines = {ln.get_gid(): ln for ln in acc_ax.lines}
    assert list(lines["accuracy:pytorch:1"].get_xdata()) == [1.5, 2.5, 3.5]
    assert list(lines["accuracy:pytorch:1"].get_ydata()) == [78.0, 86.0, 90.5]
    assert list(lines["accuracy-median:flax"].get_ydata()) == [81.0, 90.0]
    assert list(lines["target"].get_ydata()) == [90.0, 90.0]
    assert "test accuracy (%)" in acc_ax.get_ylabel() and "cumulative training time (s)" in acc_ax.get_xlabel()
    assert list({ln.get_gid(): ln for ln in loss_ax.lines}["loss:flax:2"].get_ydata()) == [0.8, 0.4]
    plt.close(fig)


def test_report_writes_every_picture_with_alt_text(xla: Run, tmp_path: Path) -> None:
    figures = write_figures(assess(xla), tmp_path / "figures")
    names = [f.path.name for f in figures]
    assert names == ["xla-steady.png", "xla-first-vs-steady.png", "xla-roofline.png", "xla-timeline-1.png",
                     "xla-timeline-2.png", "xla-timeline-3.png"]  # fmt: skip
    for f in figures:
        assert f.path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f.alt
    timeline = next(f for f in figures if f.path.name == "xla-timeline-1.png")
    assert "matmul" in timeline.alt and "2 marked" in timeline.alt and "first calls: numpy 60 ms, 61 ms" in timeline.alt


def test_a_hostile_metric_name_never_becomes_a_file_name_or_markup(tmp_path: Path) -> None:
    doc = _xla_doc("numpy", [0.05] * 3)
    doc["metrics"][0]["name"] = "../../x $\\frac{1}{0}$ \x1b[31m"
    run = load_run(write_run(tmp_path / "h", [doc]))
    figures = write_figures(assess(run), tmp_path / "figures")
    assert all(f.path.parent == tmp_path / "figures" for f in figures)
    assert any("\\x1b[31m" in f.alt for f in figures) and not any("\x1b" in f.alt for f in figures)
    assert "\x1b" not in render_plots(assess(run))


def test_sparklines_show_every_sample_rounds_and_marks(xla: Run) -> None:
    text = render_plots(assess(xla))
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("jax") and "first call" in ln and "|" in ln)
    spark = line.split()[1]
    left, right = spark.split("|")
    assert len(left) == 3 and len(right) == 3  # one character per sample, a bar between the rounds
    assert left[1] == MARK_LETTERS["escaped"] and right[1] == MARK_LETTERS["escaped"]
    assert "2 marked" in line and "first call 300 ms, 310 ms" in line
    assert "E = escaped: work still running" in text


def test_show_plot_goes_with_the_table_format_only(xla: Run) -> None:
    from tests.conftest import harness

    proc = harness("show", str(xla.path), "--plot", "--format", "json")
    assert proc.returncode == 2 and "--plot" in proc.stderr and "Traceback" not in proc.stderr
    proc = harness("show", str(xla.path), "--plot")
    assert proc.returncode == 0 and "samples in order" in proc.stdout


def test_every_framework_has_its_own_colour_and_flags_keep_red() -> None:
    chosen = [palette.colour(fw) for fw in FRAMEWORKS]
    assert len(set(chosen)) == len(chosen) and palette.FLAG_COLOUR not in chosen
    assert palette.colour("some-new-framework") == palette.colour("some-new-framework")


def _calibrate(run: Run, flops: float = 4e10, bandwidth: float = 2e10) -> Run:
    doc = {"format": "harness-calibration", "version": 2, "fingerprint": "abc123",
           "frameworks": {"numpy": {"flops": {"float64/fp64": flops}, "bandwidth": bandwidth}}}  # fmt: skip
    (run.path / "calibration.json").write_text(json.dumps(doc))
    return load_run(run.path)


def test_measured_ceilings_make_the_solid_roof_and_pick_each_metrics_rate_row(xla: Run) -> None:
    before = render_run(assess(xla), Format.table)
    assert "matmul GB/s" in before and "mean_sum GFLOP/s" in before  # no ceilings measured: both rates
    run = _calibrate(xla)
    roof = pictures.roofline(assess(run))
    assert roof is not None
    measured = next(r for r in roof.roofs if r.kind == "measured")
    assert (measured.flops, measured.bandwidth, measured.ridge) == (4e10, 2e10, 2.0)
    text = render_run(assess(run), Format.table)
    # matmul (intensity 42.7) sits under the compute roof, mean_sum (0.25) under the memory roof.
    assert "matmul GFLOP/s" in text and "matmul GB/s" not in text
    assert "mean_sum GB/s" in text and "mean_sum GFLOP/s" not in text


def test_counts_that_overflow_a_float_are_left_off_the_roofline_not_a_crash(tmp_path: Path) -> None:
    doc = _xla_doc("numpy", [1e-300] * 3)  # every field within its own limits; the quotients are not
    doc["metrics"][0].update(flops=1e150, bytes=1e-300)
    run = load_run(write_run(tmp_path / "o", [doc, _xla_doc("jax", [0.05] * 3)]))
    roof = pictures.roofline(assess(run))
    assert roof is not None and ("numpy", "matmul") not in {(p.framework, p.metric) for p in roof.points}
    assert any(t.startswith("numpy matmul: intensity or rate beyond") for t in roof.left_out)
    assert "xla-roofline.png" in [f.path.name for f in write_figures(assess(run), tmp_path / "figures")]
