"""Issue 57, the site and the report's pictures at first contact: every framework named and drawn
whatever is flagged, short chart headings, the arithmetic really run, no empty axis slots, legends
with swatches, no horizontal scroll, runs without numbers never a default, progress on stderr.

The runs are result files built by tests/factories.py (an mnist history with flax's jit epoch beside
pytorch's eager one, an xla history in float64); the browser tests use Debian's chromium (tests/browser.py).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from matplotlib.colors import to_hex

from harness.core.errors import HarnessError
from harness.judge.assessment import assess
from harness.publish import publish_site
from harness.publish.progress import Progress
from harness.report import palette, pictures
from harness.report import picture_figures as pictured
from harness.report.figures import _pyplot
from harness.store.run_folder import load_run
from tests.browser import ARGS, CHROMIUM, require_browser, watched_page
from tests.conftest import harness
from tests.factories import check, metric, result, write_run

CPU = {"model": "Test CPU", "logical_cores": 2, "usable_cores": 2, "vector": "avx2", "max_mhz": 3000.0}
MNIST_PARAMS = {  # a training suite's parameters: the dump that made 200-character headings
    "artifacts": False, "batch_size": 128, "curve": True, "data": "device", "dataset": "synthetic",
    "drop_last": False, "epochs": 6, "lr": 0.01, "seed": 42, "target_accuracy": 0.0, "test_samples": 0,
    "train_samples": 1024, "variant": "default",
}  # fmt: skip
MNIST_CHECKS = [
    check("first_step_loss", 2.30, rtol=1e-5),
    check("first_step_weights", [1.0, 2.0], rtol=5e-4),
    check("param_count", 1199882, rtol=0.0),
    check("initial_logits", [0.1, 0.2], rtol=1e-3),
    check("test_accuracy", 91.0),
]


def _stamp(doc: dict[str, Any], day: int, run_id: str) -> dict[str, Any]:
    doc["run_id"] = run_id
    doc["started_at"] = doc["finished_at"] = f"2024-05-{day:02d}T12:00:00.000+00:00"
    doc["environment"] = {"machine": {"cpu": CPU}, "versions": {doc["framework"]: "1.0"}}
    return doc


def _write(results: Path, run_id: str, docs: list[dict[str, Any]]) -> Path:
    """factories.write_run with the run's own id (write_run names every run r1)."""
    path = write_run(results / run_id, docs)
    summary = json.loads((path / "summary.json").read_text())
    summary["run_id"] = run_id
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def mnist_doc(fw: str, path: str, day: int, run_id: str, batch_size: int = 128) -> dict[str, Any]:
    """One epoch metric measured on `path` (the suite's code path: flax jit, pytorch eager)."""
    epoch = metric("epoch", [0.5 + 0.01 * day + 0.001 * k for k in range(6)])
    epoch["variant"] = path
    doc = result(fw, [epoch], checks=[dict(c) for c in MNIST_CHECKS])
    doc["suite"] = "mnist"
    doc["params"] = dict(MNIST_PARAMS, batch_size=batch_size)
    return _stamp(doc, day, run_id)


def xla_doc(fw: str, day: int, run_id: str, size: int, seconds: float = 0.05) -> dict[str, Any]:
    """matmul of two float64 matrices (what the xla suite declares), `seconds` a call."""
    m = metric("matmul", [seconds * (1 + 0.01 * k) for k in range(6)], flops=2.0 * size**3)
    m.update(bytes=3.0 * size * size * 8, dtype="float64", marks={})
    doc = result(fw, [m])
    doc["params"] = {"matrix_size": size}
    return _stamp(doc, day, run_id)


def site_data(page: str) -> Any:
    found = re.search(r'<script type="application/json" id="site-data">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))


def suite_page(site: Path, suite: str) -> str:
    return next(p.read_text() for p in sorted(site.glob("suite-*.html")) if f"<h1>suite {suite}</h1>" in p.read_text())


def mnist_history(results: Path) -> None:
    """Three mnist runs at batch size 128 and one at 64, flax (jit) and pytorch (eager) in each."""
    for day, batch in ((1, 128), (2, 128), (3, 64), (4, 128)):
        run_id = f"2024050{day}-mnist"
        _write(results, run_id, [mnist_doc(fw, path, day, run_id, batch) for fw, path in (("flax", "jit"), ("pytorch", "eager"))])  # fmt: skip


@pytest.fixture
def mnist_site(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    mnist_history(results)
    publish_site(results, tmp_path / "site")
    return tmp_path / "site"


def test_flax_jit_and_pytorch_eager_epochs_are_one_chart_with_both_series(mnist_site: Path) -> None:
    # Before: the metric's code path (variant) split the epoch into one chart per framework, both
    # titled alike, so the page showed "Flax's epoch series" and PyTorch's seemed dropped.
    charts = site_data(suite_page(mnist_site, "mnist"))["metrics"]
    assert [c["title"] for c in charts] == ["epoch (batch_size=128)", "epoch (batch_size=64)"]
    for chart in charts:
        assert {p["series"] for p in chart["points"]} == {"flax (jit)", "pytorch (eager)"}
    assert {p["framework"]: p["colour"] for p in charts[0]["points"]} == {
        "flax": palette.colour("flax"),
        "pytorch": palette.colour("pytorch"),
    }


def test_headings_carry_only_what_differs_and_the_full_workload_sits_under_them(mnist_site: Path) -> None:
    page = suite_page(mnist_site, "mnist")
    found = re.findall(r'<h2>([^<]*)</h2><details class="workload"><summary>([^<]*)</summary><p>([^<]*)</p>', page)
    assert [(h, summary) for h, summary, _ in found] == [
        ("epoch (batch_size=128)", "workload: float32, cpu"),
        ("epoch (batch_size=64)", "workload: float32, cpu"),
    ]  # before: every parameter in the heading, about 200 characters
    full = found[0][2]
    for name, value in MNIST_PARAMS.items():
        assert f"{name}={128 if name == 'batch_size' else value}" in full
    assert full.startswith("suite mnist; parameters ") and full.endswith("; arithmetic float32; device cpu")


def test_the_xla_suite_says_float64_not_fp32(tmp_path: Path) -> None:
    results = tmp_path / "results"
    for day in (1, 2):
        _write(results, f"r{day}", [xla_doc(fw, day, f"r{day}", 128) for fw in ("numpy", "jax")])
    publish_site(results, tmp_path / "site")
    page = suite_page(tmp_path / "site", "xla")
    assert "fp32" not in page  # before: the heading said `matrix_size=128, fp32, cpu`
    assert "<summary>workload: float64, cpu</summary>" in page and "arithmetic float64" in page
    assert [c["title"] for c in site_data(page)["metrics"]] == ["matmul"]


def test_a_chart_has_an_x_slot_only_for_the_runs_with_a_point_on_it(mnist_site: Path) -> None:
    charts = site_data(suite_page(mnist_site, "mnist"))["metrics"]
    # Runs 1, 2 and 4 measured batch size 128, run 3 batch size 64: before, both charts had four slots.
    assert [c["runs"] for c in charts] == [[0, 1, 3], [2]]
    assert all(sorted({p["x"] for p in c["points"]}) == c["runs"] for c in charts)


def _unmeasured(results: Path) -> None:
    """After two measured xla runs: one whose summary lists no job, one whose only job failed."""
    path = _write(results, "r3-no-jobs", [xla_doc("numpy", 3, "r3-no-jobs", 128)])
    summary = json.loads((path / "summary.json").read_text())
    summary["jobs"] = []
    (path / "summary.json").write_text(json.dumps(summary))
    (path / "numpy.json").unlink()
    failed = xla_doc("numpy", 4, "r4-failed", 128)
    failed.update(status="failed", reason="out of memory", metrics=[], checks=[])
    _write(results, "r4-failed", [failed])


def test_runs_without_numbers_are_listed_and_labelled_never_a_default(tmp_path: Path) -> None:
    results = tmp_path / "results"
    for day in (1, 2):
        _write(results, f"r{day}", [xla_doc(fw, day, f"r{day}", 128) for fw in ("numpy", "jax")])
    _unmeasured(results)
    published = publish_site(results, tmp_path / "site")
    site = tmp_path / "site"
    page = suite_page(site, "xla")
    selected = re.findall(r'<option value="(\d+)" selected="selected">([^<]*)</option>', page)
    # Before: B defaulted to the run without jobs ('started start unknown on -'), A to the failed one.
    assert [text for _, text in selected] == ["1: r1 (2024-05-01 12:00:00 UTC)", "2: r2 (2024-05-02 12:00:00 UTC)"]
    assert "r4-failed (nothing measured: numpy FAILED (out of memory))" in page
    assert "r3-no-jobs (nothing measured: no job produced a valid result)" in page
    assert published.comparisons == 1  # r1 against r2 only: a run without numbers has nothing to compare
    assert all("start unknown on -" not in p.read_text() for p in site.glob("compare-*.html"))
    data = site_data(page)
    assert [r["measured"] for r in data["runs"]] == [True, True, False, False]
    index = (site / "index.html").read_text()
    suites_row = re.search(r'<table id="suites".*?</table>', index, re.S)
    assert suites_row is not None and "start unknown" not in suites_row.group(0)
    assert "4 (2 without numbers)" in suites_row.group(0) and "2024-05-02 12:00:00 UTC" in suites_row.group(0)


def _all_flagged(tmp_path: Path) -> Any:
    """Every framework's every sample faster than the CPU can go: IMPLAUSIBLE everywhere."""
    docs = [xla_doc(fw, 1, "flagged", 512, seconds=1e-7) for fw in ("numpy", "jax", "pytorch")]
    return assess(load_run(_write(tmp_path / "results", "flagged", docs)))


def test_with_every_sample_flagged_the_report_pictures_tell_each_framework_apart(tmp_path: Path) -> None:
    judged = _all_flagged(tmp_path)
    flags = pictures.flag_reasons(judged)
    assert len(flags) == 3 and all(flags.values())
    roof = pictures.roofline(judged, flags)
    assert roof is not None and all(p.flags for p in roof.points)
    plt = _pyplot()
    fig = pictured.roofline_figure(plt, roof)
    drawn = {c.get_gid(): c for c in fig.axes[0].collections}
    faces = {fw: to_hex(drawn[f"point:{fw}:matmul"].get_facecolors()[0]) for fw in ("numpy", "jax", "pytorch")}
    # Before: three identical hollow red rings. Now each its own colour, ringed in red.
    assert faces == {fw: palette.colour(fw) for fw in faces} and len(set(faces.values())) == 3
    assert all(to_hex(drawn[f"point:{fw}:matmul"].get_edgecolors()[0]) == palette.FLAG_COLOUR for fw in faces)
    plt.close(fig)
    (timeline,) = pictures.timelines(judged, flags)
    fig = pictured.timeline_figure(plt, timeline, "xla")
    lines = {ln.get_gid(): ln for ln in fig.axes[1].lines if str(ln.get_gid()).startswith("samples:")}
    colours = {gid.split(":")[1]: to_hex(ln.get_color()) for gid, ln in lines.items()}
    assert colours == {fw: palette.colour(fw) for fw in ("numpy", "jax", "pytorch")}  # before: all red
    assert all(to_hex(ln.get_markeredgecolor()) == palette.FLAG_COLOUR and "FLAGGED" in ln.get_label()
               for ln in lines.values())  # fmt: skip
    plt.close(fig)


def test_with_every_sample_flagged_the_run_page_tells_each_framework_apart(tmp_path: Path) -> None:
    _all_flagged(tmp_path)
    publish_site(tmp_path / "results", tmp_path / "site")
    data = site_data((tmp_path / "site" / "run-0.html").read_text())["pictures"]
    roof = {p["framework"]: p for p in data["roofline"]["points"]}
    assert {fw: p["colour"] for fw, p in roof.items()} == {fw: palette.colour(fw) for fw in roof}
    assert all(p["flags"] for p in roof.values())
    series = {s["framework"]: s for s in data["timelines"][0]["series"]}
    assert {fw: s["colour"] for fw, s in series.items()} == {fw: palette.colour(fw) for fw in series}  # before: red
    assert all(s["flagged"] and "FLAGGED" in s["label"] for s in series.values())


def test_progress_goes_to_stderr_step_by_step_for_a_large_folder(tmp_path: Path) -> None:
    results = tmp_path / "results"
    mnist_history(results)
    said = io.StringIO()
    progress = Progress(stream=said, every=0.0)
    progress.loud = True  # as `expect` makes it for a folder of SHOW_FROM entries or more
    publish_site(results, tmp_path / "site", progress=progress)
    lines = said.getvalue().splitlines()
    assert all(line.startswith("publish: ") and line.endswith(" s)") for line in lines)
    for step in ("run folders read 4/4", "suite mnist: 4 runs, 3 comparisons",
                 "suite mnist: run pages and comparisons 7/7", "pages written"):  # fmt: skip
        assert any(step in line for line in lines), lines
    quiet = Progress(stream=io.StringIO())
    quiet.expect(results)  # four folders, not a terminal: nothing to watch
    assert not quiet.loud


def test_progress_says_at_most_a_line_every_few_seconds_and_always_the_last_count() -> None:
    now = [0.0]
    said = io.StringIO()
    progress = Progress(stream=said, every=2.0, clock=lambda: now[0])
    progress.loud = True
    for done in range(1, 101):
        now[0] = done / 8  # 100 items in 12.5 s (eighths: no rounding in the sums)
        progress.step("run pages", done, 100)
    counts = [re.search(r"run pages (\d+)/100", line).group(1) for line in said.getvalue().splitlines()]  # type: ignore[union-attr]
    assert counts == ["1", "17", "33", "49", "65", "81", "97", "100"]


# ---------------------------------------------------------------------------------------------
# In a real browser


@contextmanager
def page_with_scrollbars(problems: list[str]) -> Iterator[Any]:
    """tests/browser.py's page, but with the scrollbars a person sees: playwright hides them by
    default, and a hidden scrollbar takes no width, so a page could overflow unseen."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=ARGS, ignore_default_args=["--hide-scrollbars"], timeout=60_000
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_navigation_timeout(90_000)
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            yield page
        finally:
            browser.close()


def test_no_page_scrolls_sideways_at_1400_px(tmp_path: Path) -> None:
    require_browser()
    results = tmp_path / "results"
    mnist_history(results)
    _unmeasured(results)
    # A long unbroken folder name (a hash, a path): before, the runs table made the index 1554 px wide.
    (results / "20240501-mnist").rename(results / ("20240501-mnist-" + "0123456789abcdef" * 8))
    publish_site(results, tmp_path / "site")
    problems: list[str] = []
    with page_with_scrollbars(problems) as page:
        for path in sorted((tmp_path / "site").glob("*.html")):
            page.goto(path.as_uri())
            wide, seen = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            assert wide <= seen, (path.name, wide, seen)
    assert problems == []


def test_legends_have_swatches_both_series_and_no_empty_slots_in_a_browser(mnist_site: Path) -> None:
    require_browser()
    problems: list[str] = []
    with watched_page(problems) as page:
        page.goto((mnist_site / "suite-0.html").as_uri())
        page.wait_for_selector(".uplot canvas")
        legend = page.locator(".u-legend").first
        names = legend.locator(".u-series th .u-label").all_inner_texts()
        assert names[1:] == ["flax (jit)", "pytorch (eager)"]  # both frameworks drawn on the one chart
        # Swatches filled with each series' colour (before: outlines over an empty box) and no "--"
        # values while the cursor is elsewhere (before: a row of them).
        fills = legend.locator(".u-series .u-marker").evaluate_all(
            "ms => ms.slice(1).map(m => getComputedStyle(m).backgroundColor)"
        )
        assert fills == ["rgb(44, 160, 44)", "rgb(148, 103, 189)"], fills
        assert palette.colour("flax") == "#2ca02c" and palette.colour("pytorch") == "#9467bd"
        assert "--" not in legend.inner_text()
        # The cursor at the right end of the first chart is on its last run (the fourth), not on an
        # empty slot for a run that measured the other batch size.
        box = page.locator(".uplot .u-over").first.bounding_box()
        assert box is not None
        page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)
        values = legend.locator(".u-series td.u-value").all_inner_texts()
        assert values[0].startswith("20240504-mnist"), values
        assert all(v.strip() for v in values[1:]), values
    assert problems == []


def _pages(site: Path) -> dict[str, str]:
    # The index says when it was published: the one line two publishes may differ in.
    return {p.name: re.sub(r"published \d{4}-\d\d-\d\d \d\d:\d\d UTC", "", p.read_text()) for p in site.glob("*.html")}


def test_worker_processes_write_the_same_site_as_one_process(tmp_path: Path) -> None:
    results = tmp_path / "results"
    mnist_history(results)
    _unmeasured(results)
    one = publish_site(results, tmp_path / "one", workers=1)
    two = publish_site(results, tmp_path / "two", workers=2)  # forked workers write the run pages
    assert (one.runs, one.comparisons) == (two.runs, two.comparisons)
    assert _pages(tmp_path / "one") == _pages(tmp_path / "two")
    for site in (tmp_path / "one", tmp_path / "two"):  # each page listed once, whoever wrote it
        manifest = json.loads((site / ".fw-harness-site.json").read_text())["pages"]
        assert sorted(manifest) == sorted(p.name for p in site.glob("*-*.html"))


def test_a_page_a_worker_cannot_write_stops_the_publish_with_one_line(tmp_path: Path) -> None:
    results = tmp_path / "results"
    mnist_history(results)
    (tmp_path / "site" / "run-2.html").mkdir(parents=True)  # a folder where a worker writes a page
    with pytest.raises(HarnessError, match=r"site/run-2\.html: is a directory, not a regular file"):
        publish_site(results, tmp_path / "site", workers=2)


def test_workers_below_one_is_bad_input_in_one_line(tmp_path: Path) -> None:
    results = tmp_path / "results"
    mnist_history(results)
    proc = harness("publish", str(results), "--out", str(tmp_path / "site"), "--workers", "0")
    assert (
        proc.returncode == 2
        and proc.stderr.strip() == "error: --workers 0 must be 1 or more (1: everything in this process)"
    )
    assert not (tmp_path / "site").exists()
