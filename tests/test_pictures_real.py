"""The pictures drawn from small real runs (tests/picture_runs.py): what a figure shows must be
what the result files hold, point for point."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from harness.judge.assessment import assess
from harness.report import picture_figures as pictured
from harness.report import pictures
from harness.report.figures import _pyplot, write_figures
from harness.store.run_folder import Run
from tests.conftest import harness
from tests.picture_runs import TRAINING_TARGET, escaped_run, training_run, xla_run  # noqa: F401

pytestmark = pytest.mark.slow


def test_learning_curves_are_the_results_accuracies_against_cumulative_epoch_times(training_run: Run) -> None:  # noqa: F811
    curves = pictures.learning_curves(assess(training_run))
    assert curves is not None and curves.target == TRAINING_TARGET
    assert curves.frameworks == ["flax", "pytorch"] and {b.framework for b in curves.bands} == {"flax", "pytorch"}
    for fw in ("flax", "pytorch"):
        result = training_run.results[fw]
        docs = result["training"]["curves"]
        mine = [c for c in curves.curves if c.framework == fw]
        assert len(mine) == len(docs) == 2  # one curve per round (process)
        for drawn, doc in zip(mine, docs, strict=True):
            assert [p.seconds for p in drawn.points] == pytest.approx(list(itertools.accumulate(doc["epoch_seconds"])))
            assert [p.test_accuracy for p in drawn.points] == doc["test_accuracy"]
            assert [p.train_loss for p in drawn.points] == doc["train_loss"]
        # The time-to-target record agrees with the curve: the first epoch at or above the target.
        rounds = result["training"]["target"]["rounds"]
        for drawn, record in zip(mine, rounds, strict=True):
            if record["status"] == "reached":
                reached = next(p for p in drawn.points if (p.test_accuracy or 0) >= TRAINING_TARGET)
                assert reached.epoch == record["epochs"] and reached.seconds == pytest.approx(record["seconds"])
    plt = _pyplot()
    fig = pictured.learning_curves_figure(plt, curves)
    lines = {ln.get_gid(): ln for ln in fig.axes[0].lines}
    first = next(c for c in curves.curves if c.framework == "pytorch" and c.process == 1)
    assert list(lines["accuracy:pytorch:1"].get_ydata()) == [p.test_accuracy for p in first.points]
    assert list(lines["target"].get_ydata()) == [TRAINING_TARGET, TRAINING_TARGET]
    plt.close(fig)


def test_the_roofline_puts_xla_at_its_declared_intensity_under_the_calibrated_ceilings(xla_run: Run) -> None:  # noqa: F811
    roof = pictures.roofline(assess(xla_run))
    assert roof is not None
    drawn = {(p.framework, p.metric): p for p in roof.points}
    assert {m for _, m in drawn} == {"matmul", "inverse", "mean_sum"}
    for (fw, name), point in drawn.items():
        metric = next(m for m in xla_run.results[fw]["metrics"] if m["name"] == name)
        assert point.intensity == pytest.approx(metric["flops"] / metric["bytes"])  # type: ignore[operator]
        assert point.rate == pytest.approx(metric["flops"] / metric["stats"]["median"])  # type: ignore[operator]
    assert drawn[("numpy", "matmul")].intensity == pytest.approx(512 / 12)  # 2n^3 FLOPs over 3 n^2 float64
    kinds = {(r.kind, r.dtype) for r in roof.roofs}
    assert ("measured", "float64") in kinds and ("datasheet", "float64") in kinds
    measured = next(r for r in roof.roofs if r.kind == "measured")
    assert measured.bandwidth is not None and measured.ridge is not None
    # Matmul is compute-bound here and mean_sum memory-bound: the picture's whole point.
    assert drawn[("numpy", "matmul")].intensity > measured.ridge > drawn[("numpy", "mean_sum")].intensity


def test_the_timeline_has_one_point_per_sample_and_a_boundary_between_rounds(xla_run: Run) -> None:  # noqa: F811
    found = {t.metric: t for t in pictures.timelines(assess(xla_run))}
    matmul = found["matmul"]
    for series in matmul.series:
        metric = next(m for m in xla_run.results[series.framework]["metrics"] if m["name"] == "matmul")
        assert list(series.samples) == metric["samples"] and series.round_sizes == (4, 4)
        assert len(series.first_calls) == 2
    plt = _pyplot()
    fig = pictured.timeline_figure(plt, matmul, "xla")
    ax = fig.axes[1]
    for series in matmul.series:
        line = next(ln for ln in ax.lines if ln.get_gid() == f"samples:{series.framework}")
        assert list(line.get_ydata()) == list(series.samples) and len(line.get_xdata()) == 8
    assert [ln.get_gid() for ln in ax.lines if (ln.get_gid() or "").startswith("boundary:")] == ["boundary:4.5"]
    plt.close(fig)


def test_samples_that_escaped_their_clock_are_marked_and_drawn_apart(escaped_run: Run, tmp_path: Path) -> None:  # noqa: F811
    metric = next(m for m in escaped_run.results["jax"]["metrics"] if m["name"] == "matmul")
    marked = metric.get("marks", {}).get("escaped", [])
    assert len(marked) >= len(metric["samples"]) // 2  # an unsynchronised 768^2 matmul outlives most clocks
    timeline = next(t for t in pictures.timelines(assess(escaped_run)) if t.metric == "matmul")
    assert "escaped" in timeline.reasons
    plt = _pyplot()
    fig = pictured.timeline_figure(plt, timeline, "xla")
    ring = next(c for c in fig.axes[1].collections if c.get_gid() == "marked:jax:escaped")
    assert [int(x) - 1 for x, _ in ring.get_offsets()] == marked
    plt.close(fig)
    proc = harness("show", str(escaped_run.path), "--plot")
    assert proc.returncode == 0 and "E = escaped: work still running" in proc.stdout
    assert any(f.path.name == "xla-timeline-1.png" for f in write_figures(assess(escaped_run), tmp_path / "figures"))


def test_report_writes_the_pictures_of_a_training_run(training_run: Run, tmp_path: Path) -> None:  # noqa: F811
    proc = harness("report", str(training_run.path), "--out", str(tmp_path / "report"))
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "](figures/mlp-learning-curves.png)" in text and f"target {TRAINING_TARGET:g} %" in text
    assert "](figures/mlp-timeline-1.png)" in text
