"""The run page's pictures in a real headless Chromium, drawn from small real runs (tests/picture_runs.py).

Like test_publish_browser.py: Debian's chromium driven by playwright, a missing browser fails
under CI=true and is skipped elsewhere, page and console errors fail the test, and screenshots
go to $HARNESS_ARTIFACTS (default <repo>/artifacts/).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.judge.assessment import assess
from harness.publish import publish_site
from harness.publish.flags import run_flags
from harness.publish.run_charts import first_calls_line
from harness.report import pictures
from harness.store.run_folder import Run, load_run
from tests.browser import artifacts, require_browser, watched_page
from tests.picture_runs import TRAINING_TARGET, training_run, xla_run  # noqa: F401

pytestmark = pytest.mark.slow


def _publish(run: Run, site: Path) -> Path:
    """The run's results folder as a site; the path of the run's page."""
    publish_site(run.path.parent, site)
    pages = sorted(site.glob("run-*.html"))
    assert len(pages) == 1, pages
    return pages[0]


def _canvases(page: Any, section: str) -> None:
    page.wait_for_selector(f"#{section} .uplot canvas")
    assert page.locator(f"#{section} figure.picture").count() == page.locator(f"#{section} .uplot").count()


def test_the_run_pages_draw_learning_curves_a_roofline_and_timelines(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    require_browser()

    training: Run = request.getfixturevalue("training_run")
    xla: Run = request.getfixturevalue("xla_run")
    curves = pictures.learning_curves(assess(training))
    assert curves is not None, "the training run recorded no learning curve (training.curves)"
    roof = pictures.roofline(assess(xla), run_flags(assess(xla)))
    assert roof is not None, "no xla time metric declares both a FLOP and a byte count"
    timeline = pictures.timelines(assess(xla), run_flags(assess(xla)))[0]
    training_page = _publish(training, tmp_path / "training-site")
    xla_page = _publish(xla, tmp_path / "xla-site")
    problems: list[str] = []
    with watched_page(problems) as page:
        page.goto(training_page.as_uri())
        _canvases(page, "learning-curves")
        accuracy = page.locator("#chart-accuracy")
        legend = accuracy.locator(".u-legend").inner_text()
        target = f"target {TRAINING_TARGET:g} %"
        for fw in ("flax", "pytorch"):
            assert f"{fw}: median of 2 rounds (band: min-max)" in legend, legend
            assert f"{fw} round 1" in legend and f"{fw} round 2" in legend, legend
        assert target in legend
        assert accuracy.locator(".u-title").inner_text() == "mlp: test accuracy against training time"
        alt = accuracy.get_attribute("aria-label") or ""
        assert accuracy.get_attribute("role") == "img"
        assert alt.startswith("Test accuracy against cumulative training time for flax and pytorch") and target in alt
        assert "train loss" in (page.locator("#chart-loss").get_attribute("aria-label") or "").lower()
        captions = page.locator("#learning-curves figcaption").all_inner_texts()
        assert len(captions) == 2 and all("thick line is the median" in c for c in captions), captions
        page.locator("#learning-curves").screenshot(path=str(artifacts() / "publish-learning-curves.png"))

        page.goto(xla_page.as_uri())
        _canvases(page, "roofline")
        chart = page.locator("#chart-roofline")
        legend = chart.locator(".u-legend").inner_text()
        for r in roof.roofs:
            assert r.label in legend, (r.label, legend)
        assert any(r.kind == "measured" for r in roof.roofs), roof.roofs
        for p in roof.points:
            name = f"{p.framework} {p.metric}"
            assert (f"{name}: FLAGGED (not a normal point)" if p.flags else name) in legend, legend
        assert (chart.get_attribute("aria-label") or "").startswith("Roofline: achieved GFLOP/s")
        if roof.left_out:
            assert roof.left_out[0] in page.locator("#roofline").inner_text()
        page.locator("#roofline").screenshot(path=str(artifacts() / "publish-roofline.png"))

        _canvases(page, "timelines")
        figure = page.locator("#timelines figure.picture").first
        legend = figure.locator(".u-legend").inner_text()
        assert "numpy" in legend and "jax" in legend
        assert "1 round boundary (a new process)" in legend, legend
        alt = figure.locator(".chart").get_attribute("aria-label") or ""
        assert f"sample of {timeline.metric} in the order taken, for numpy and jax; 2 rounds, 1 round boundary" in alt
        first_calls = figure.locator(".first-calls").inner_text()
        assert first_calls == first_calls_line(timeline) and "(round 2)" in first_calls, first_calls
        figure.screenshot(path=str(artifacts() / "publish-timeline.png"))
    assert problems == []


def test_a_log_time_axis_whose_ends_are_not_decades_draws_without_a_page_error(tmp_path: Path) -> None:
    """The files of a real mlp run (CI, 2026-11-28) whose learning curves span 0.0125-0.749 s: the
    log time axis ran from 0.0125 / 1.3, uPlot's log ticks rounded to 0 from there and looped
    until the page failed with "Invalid array length"; whole decades draw it."""
    require_browser()
    run = tmp_path / "results" / "20261128-000354-mlp-82aa"
    shutil.copytree(Path(__file__).parent / "fixtures" / "log-axis-run", run)
    loaded = load_run(run)
    curves = pictures.learning_curves(assess(loaded))
    assert curves is not None and pictures.wide([p.seconds for c in curves.curves for p in c.points])
    site_page = _publish(loaded, tmp_path / "site")
    problems: list[str] = []
    with watched_page(problems) as page:
        page.goto(site_page.as_uri())
        _canvases(page, "learning-curves")
    assert problems == []


def test_an_inference_run_page_draws_throughput_against_batch_size(tmp_path: Path) -> None:
    """The recorded inference runs (tests/data/inference/): gpt's sweep saturates at batch 8, every point of
    resnet18's is flagged (contended), so one page draws lines and the other only red-ringed points."""
    require_browser()
    data = Path(__file__).parent / "data" / "inference"
    legends = {}
    problems: list[str] = []
    for case in ("gpt-infer", "resnet18-infer"):
        run = tmp_path / case / "results" / case
        shutil.copytree(data / case, run)
        site_page = _publish(load_run(run), tmp_path / case / "site")
        with watched_page(problems) as page:
            page.goto(site_page.as_uri())
            _canvases(page, "inference")
            chart = page.locator("#chart-throughput")
            legends[case] = chart.locator(".u-legend").inner_text()
            assert chart.locator(".u-title").inner_text().endswith(": throughput against batch size")
            assert (chart.get_attribute("aria-label") or "").startswith("Throughput (")
            page.locator("#inference figure.picture").screenshot(path=str(artifacts() / f"publish-{case}.png"))
    assert "flax saturates at batch 8" in legends["gpt-infer"] and "FLAGGED" not in legends["gpt-infer"]
    for fw in ("flax", "pytorch"):
        assert f"{fw}: FLAGGED (not a normal point)" in legends["resnet18-infer"], legends["resnet18-infer"]
    assert problems == []
