"""The run page's pictures (publish/run_charts.py): the embedded points are report/pictures.py's,
and every chart says what it shows (aria-label) and how to read it (figcaption), as text.

`picture_results` is shared with the headless-browser test: a training run (flax over two
rounds, pytorch over one and not comparable) and an xla run with FLOP and byte counts, a
calibration of this "machine", rounds, first calls and a marked sample.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from harness.judge.assessment import assess
from harness.publish import publish_site
from harness.publish.flags import run_flags
from harness.report import palette, pictures
from harness.store.calibration import FORMAT, RUN_FILE, VERSION
from harness.store.run_folder import Run, load_run
from suites.contract.marks import MARKS
from suites.contract.stats import summarize
from tests.factories import check, metric, result
from tests.test_publish import CPU_A, HOSTILE, site_data, write

TARGET = 75.0


def _curve(seed: int, first_epoch: float) -> dict[str, Any]:
    return {
        "epoch_seconds": [first_epoch, 0.5, 0.5 + 0.05 * seed, 0.5],
        "train_loss": [0.9 - 0.05 * seed, 0.55 - 0.04 * seed, 0.35 - 0.02 * seed, 0.3],
        "train_accuracy": [50.0, 70.0, 78.0, 80.0],
        "test_accuracy": [50.0 + 3 * seed, 68.0 + 3 * seed, 79.0 + seed, 81.0],
        "evaluation_seconds": [0.1, 0.1, 0.1, 0.1],
        "seed": seed,
    }


def training_job(fw: str, seeds: list[int], test_accuracy: float) -> dict[str, Any]:
    """An mlp job: an epoch time metric over len(seeds) rounds and one learning curve per round."""
    samples = [0.5, 0.52, 0.51, 0.5][: 2 * len(seeds)]
    epoch = metric("epoch", samples, first=2.0)
    epoch.update(round_sizes=[2] * len(seeds), first_calls=[2.0 + 0.1 * s for s in seeds])
    checks = [
        check("first_step_loss", [0.7, 0.6], rtol=1e-5),
        check("first_step_weights", [1.0, 2.0], rtol=5e-4),
        check("param_count", 52, rtol=0.0),
        check("initial_logits", [0.1, 0.2], rtol=1e-3),
        check("test_accuracy", test_accuracy, rtol=0.0),
    ]
    doc = result(fw, [epoch], checks=checks)
    doc["suite"] = "mlp"
    doc["params"] = {"epochs": 4, "target_accuracy": TARGET}
    doc["started_at"] = doc["finished_at"] = "2024-05-01T10:00:00.000+00:00"
    doc["training"] = {
        "target": {"accuracy": TARGET, "status": "reached", "seconds": 2.5, "wall_seconds": 3.0, "epochs": 2},
        "curves": [_curve(seed, 1.0 + 0.2 * k) for k, seed in enumerate(seeds)],
    }
    return doc


def xla_job(fw: str, center: float, marks: dict[str, list[int]] | None = None) -> dict[str, Any]:
    """matmul with FLOP and byte counts over two rounds of three; `add` with a FLOP count only."""
    samples = [center * (1 + 0.01 * k) for k in range(6)]
    matmul = metric("matmul", samples, flops=2 * 128**3)
    matmul.update(dtype="float64", bytes=3 * 8 * 128**2, round_sizes=[3, 3], first_calls=[0.356, 0.340])
    if marks:
        matmul["marks"] = marks
    add = metric("add", [center / 10] * 6, flops=128**2)
    add["dtype"] = "float64"
    doc = result(fw, [matmul, add])
    doc["started_at"] = doc["finished_at"] = "2024-05-01T12:00:00.000+00:00"
    doc["environment"] = {"machine": {"cpu": CPU_A}, "versions": {fw: "1.0"}}
    return doc


def calibration(path: Path) -> None:
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "fingerprint": "abc123",
        "frameworks": {"numpy": {"flops": {"float64/fp64": 30e9, "float32/fp32": 60e9}, "bandwidth": 12e9}},
    }
    (path / RUN_FILE).write_text(json.dumps(doc))


def picture_results(root: Path, metric_name: str = "matmul") -> Path:
    results = root / "results"
    write(results, "20240501-100000-mlp-0001", "20240501-100000-mlp-0001",
          [training_job("flax", [1, 2], 80.0), training_job("pytorch", [3], 20.0)])  # fmt: skip
    docs = [xla_job("numpy", 0.004), xla_job("jax", 0.002, {"escaped": [4]})]
    for doc in docs:
        doc["metrics"][0]["name"] = metric_name
    calibration(write(results, "20240501-120000-xla-0001", "20240501-120000-xla-0001", docs))
    return results


def run_pages(site: Path) -> dict[str, str]:
    """suite -> its (one) run page."""
    found = {}
    for path in site.glob("run-*.html"):
        text = path.read_text()
        suite = re.search(r'<a href="suite-\d+\.html">suite (\w+)</a>', text)
        assert suite is not None
        found[suite.group(1)] = text
    return found


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("pictures")
    results = picture_results(root)
    publish_site(results, root / "site")
    return results, run_pages(root / "site")


def _load(results: Path, suite: str) -> Run:
    return load_run(next(results.glob(f"*-{suite}-*")))


def test_the_learning_curves_embedded_are_the_pictures_points(published: tuple[Path, dict[str, str]]) -> None:
    results, pages = published
    expected = pictures.learning_curves(assess(_load(results, "mlp")))
    assert expected is not None and expected.flags == {"pytorch": ("not comparable: failed the agreement gate",)}
    learning = site_data(pages["mlp"])["pictures"]["learning"]
    assert learning["target"] == TARGET and learning["target_label"] == "target 75 %"
    assert learning["log_x"] is False  # 1 to 3 s: a linear time axis (a log one past a 30x span)
    assert [(c["framework"], c["process"], c["seconds"], c["loss"], c["accuracy"]) for c in learning["curves"]] == [
        (
            c.framework,
            c.process,
            [p.seconds for p in c.points],
            [p.train_loss for p in c.points],
            [p.test_accuracy for p in c.points],
        )
        for c in expected.curves
    ]
    assert [(b["framework"], b["rounds"], b["seconds"], b["loss"], b["accuracy"]) for b in learning["bands"]] == [
        (
            b.framework,
            b.rounds,
            list(b.seconds),
            [list(v) for v in b.loss],
            [list(v) if v else None for v in b.accuracy],
        )
        for b in expected.bands
    ]
    assert [b["framework"] for b in learning["bands"]] == ["flax"]  # pytorch trained once: no band
    colours = {c["framework"]: c["colour"] for c in learning["curves"]}
    # A flagged framework keeps its own colour; the flag is the dashed line and the label (issue 57).
    assert colours == {"flax": palette.colour("flax"), "pytorch": palette.colour("pytorch")}
    assert {c["framework"]: c["flagged"] for c in learning["curves"]} == {"flax": False, "pytorch": True}
    labels = [c["label"] for c in learning["curves"]]
    assert labels == [
        "flax round 1",
        "flax round 2",
        "pytorch (FLAGGED: not comparable: failed the agreement gate)",
    ]
    assert learning["bands"][0]["label"] == "flax: median of 2 rounds (band: min-max)"


def test_the_roofline_embedded_is_the_pictures_roofline(published: tuple[Path, dict[str, str]]) -> None:
    results, pages = published
    run = _load(results, "xla")
    expected = pictures.roofline(assess(run), run_flags(assess(run)))
    assert expected is not None
    roofline = site_data(pages["xla"])["pictures"]["roofline"]
    assert [(p["framework"], p["metric"], p["dtype"], p["flops"], p["bytes"], p["intensity"], p["rate"], p["flags"])
            for p in roofline["points"]] == [
        (p.framework, p.metric, p.dtype, p.flops, p.bytes, p.intensity, p.rate, list(p.flags)) for p in expected.points
    ]  # fmt: skip
    assert [(r["kind"], r["dtype"], r["flops"], r["bandwidth"], r["label"]) for r in roofline["roofs"]] == [
        (r.kind, r.dtype, r.flops, r.bandwidth, r.label) for r in expected.roofs
    ]
    assert [r["kind"] for r in roofline["roofs"]] == ["measured", "datasheet"]
    assert [r["dashed"] for r in roofline["roofs"]] == [False, True]
    assert roofline["roofs"][0]["label"] == "measured here float64/fp64: 30 GFLOP/s, 12 GB/s (stream)"
    assert {p["framework"]: p["colour"] for p in roofline["points"]} == {
        "numpy": palette.colour("numpy"),
        "jax": palette.colour("jax"),
    }
    # `add` declares FLOPs but no bytes: not a point, said in words under the chart.
    assert expected.left_out == ("numpy add: no byte count", "jax add: no byte count")
    page = pages["xla"]
    assert '<p class="left-out">Not on the roofline:</p><ul><li>numpy add: no byte count</li>' in page


def test_the_timelines_embedded_are_the_pictures_timelines(published: tuple[Path, dict[str, str]]) -> None:
    results, pages = published
    for suite in ("xla", "mlp"):
        run = _load(results, suite)
        expected = pictures.timelines(assess(run), run_flags(assess(run)))
        embedded = site_data(pages[suite])["pictures"]["timelines"]
        assert [t["metric"] for t in embedded] == [t.metric for t in expected]
        for got, want in zip(embedded, expected, strict=True):
            assert [
                (s["framework"], s["samples"], s["round_sizes"], s["first_calls"], s["marks"], s["flags"])
                for s in got["series"]
            ] == [
                (
                    s.framework,
                    list(s.samples),
                    list(s.round_sizes),
                    list(s.first_calls),
                    [[i, list(r)] for i, r in s.marks.items()],
                    list(s.flags),
                )
                for s in want.series
            ]
            assert got["reasons"] == want.reasons
    matmul = site_data(pages["xla"])["pictures"]["timelines"][0]
    jax = matmul["series"][1]
    assert jax["marks"] == [[4, ["escaped"]]]
    assert jax["marked"] == [{"reason": "escaped", "label": f"jax marked escaped: {MARKS['escaped']}", "indices": [4]}]
    assert matmul["scale"] == 1e-3 and matmul["y"] == "time per call (ms)"


def test_every_chart_has_a_title_alt_text_and_a_caption(published: tuple[Path, dict[str, str]]) -> None:
    _, pages = published
    mlp, xla = pages["mlp"], pages["xla"]
    labels = dict(re.findall(r'<div id="(chart-[\w-]+)" class="chart picture" role="img" aria-label="([^"]*)">', mlp))
    assert labels["chart-accuracy"] == (
        "Test accuracy against cumulative training time for flax and pytorch; flax over 2 rounds (median and "
        "min-max band); target 75 %; pytorch FLAGGED (not comparable: failed the agreement gate)"
    )
    assert labels["chart-loss"].startswith("Train loss against cumulative training time for flax and pytorch")
    assert labels["chart-timeline-0"].startswith("Time of every steady sample of epoch in the order taken")
    labels = dict(re.findall(r'<div id="(chart-[\w-]+)" class="chart picture" role="img" aria-label="([^"]*)">', xla))
    assert set(labels) == {"chart-roofline", "chart-timeline-0", "chart-timeline-1"}
    assert labels["chart-roofline"].startswith(
        "Roofline: achieved GFLOP/s against arithmetic intensity (FLOP per byte) for numpy matmul and jax matmul; "
        "under 2 roofs (measured here float64/fp64: 30 GFLOP/s"
    )
    assert labels["chart-timeline-0"] == (
        "Time of every steady sample of matmul in the order taken, for numpy and jax; 2 rounds, 1 round boundary; "
        "1 sample marked escaped"
    )
    assert '<p class="first-calls">first calls: numpy 356 ms (round 1), 340 ms (round 2); jax 356 ms (round 1), ' in xla
    for page in (mlp, xla):
        charts = re.findall(r'<figure class="picture"><div id="(chart-[\w-]+)"', page)
        assert len(charts) == page.count("<figcaption>") == len(re.findall(r'role="img" aria-label="[^"]+"', page))
        specs = site_data(page)["pictures"]
        titled = [*(specs["learning"] or {"charts": []})["charts"], *([specs["roofline"]] if specs["roofline"] else []),
                  *specs["timelines"]]  # fmt: skip
        assert sorted(c["id"] for c in titled) == sorted(charts)
        assert all(c["title"] and "(" in c["x"] + c["y"] for c in titled)  # every chart: a title and a unit
    assert "uPlot.iife.min.js" in mlp and "site.js" in mlp
    # The page's own content is all still there.
    for heading in ("Flags", "The harness&#x27;s table", "Fairness settings", "Environment"):
        assert f"<h2>{heading}</h2>" in xla


def test_a_hostile_metric_name_is_text_in_the_alt_text_caption_and_data(tmp_path: Path) -> None:
    results = picture_results(tmp_path, metric_name="matmul" + HOSTILE)
    publish_site(results, tmp_path / "site")
    page = run_pages(tmp_path / "site")["xla"]
    assert "<script>alert" not in page and "<img" not in page and "\u2028" not in page and "\u202e" not in page
    assert page.count("<script") == page.count("</script>")
    inert = "matmul&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;\\u2028\\u202e&amp;amp;"
    alt = re.search(r'id="chart-roofline" class="chart picture" role="img" aria-label="([^"]*)"', page)
    assert alt is not None and f"for numpy {inert} and jax {inert};" in alt.group(1)
    assert f"Time of every steady sample of {inert} in the order taken" in page
    assert html.unescape(inert) in site_data(page)["pictures"]["timelines"][0]["metric"]


def test_a_wide_timeline_gets_a_log_axis_and_a_run_without_numbers_no_charts(tmp_path: Path) -> None:
    results = tmp_path / "results"
    wide = xla_job("jax", 0.002)
    wide["metrics"][0]["samples"] = samples = [0.001, 0.002, 0.05, 0.001, 0.001, 0.001]
    wide["metrics"][0]["stats"] = summarize(samples)
    write(results, "20240501-120000-xla-0001", "20240501-120000-xla-0001", [xla_job("numpy", 0.004), wide])
    failed = result("numpy", [])
    failed.update(status="failed", reason="out of memory")
    write(results, "20240502-120000-xla-0002", "20240502-120000-xla-0002", [failed])
    publish_site(results, tmp_path / "site")
    pages = {p.name: p.read_text() for p in (tmp_path / "site").glob("run-*.html")}
    timelines = site_data(pages["run-0.html"])["pictures"]["timelines"]
    assert [(t["metric"], t["log"], t["y"]) for t in timelines] == [
        ("matmul", True, "time per call (ms, log scale)"),
        ("add", False, "time per call (us)"),
    ]
    assert 'id="site-data"' not in pages["run-1.html"] and "uPlot" not in pages["run-1.html"]
    assert "<h2>Sample timelines</h2>" not in pages["run-1.html"] and "<figure" not in pages["run-1.html"]


def test_a_thousand_rounds_draw_twenty_thin_lines_a_framework_and_say_so(tmp_path: Path) -> None:
    from harness.publish.run_charts import MAX_ROUND_LINES

    results = tmp_path / "results"
    doc = training_job("flax", [1] * 30, 80.0)  # seeds above 16 would make accuracies above 100 %
    doc["metrics"][0].update(round_sizes=[1] * 30, first_calls=[2.0] * 30)
    doc["metrics"][0]["samples"] = [0.5] * 30
    doc["metrics"][0]["stats"] = summarize([0.5] * 30)
    write(results, "20240501-100000-mlp-0001", "20240501-100000-mlp-0001", [doc])
    publish_site(results, tmp_path / "site")
    page = run_pages(tmp_path / "site")["mlp"]
    data = site_data(page)["pictures"]["learning"]
    assert len(data["curves"]) == MAX_ROUND_LINES and data["bands"][0]["rounds"] == 30
    assert "not drawn: flax 10" in html.unescape(page)


def test_the_terminal_prints_eight_rounds_a_framework_and_counts_the_rest(tmp_path: Path) -> None:
    from harness.report.sparklines import MAX_CURVE_LINES, render_plots

    results = tmp_path / "results"
    doc = training_job("flax", [2] * 12, 80.0)
    doc["metrics"][0].update(round_sizes=[1] * 12, first_calls=[2.0] * 12, samples=[0.5] * 12)
    doc["metrics"][0]["stats"] = summarize([0.5] * 12)
    write(results, "20240501-100000-mlp-0001", "20240501-100000-mlp-0001", [doc])
    text = render_plots(assess(_load(results, "mlp")))
    assert sum(1 for line in text.splitlines() if line.strip().startswith("flax #")) == MAX_CURVE_LINES
    assert f"flax: {12 - MAX_CURVE_LINES} more rounds not printed" in text
