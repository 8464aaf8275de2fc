"""`harness publish` in a real headless Chromium: load the site from files, click through, read it.

Debian's chromium driven by playwright (never `playwright install`: no browser is downloaded).
Under CI=true a missing browser fails the test; elsewhere it is skipped with the reason. The
screenshots go to $HARNESS_ARTIFACTS (default <repo>/artifacts/), CI's artefacts.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.publish import publish_site
from tests.browser import artifacts, require_browser, watched_page
from tests.test_publish import HOSTILE, bisect_doc, build_results, write_bisect


def test_click_from_the_index_to_a_comparison_and_read_the_verdict(tmp_path: Path) -> None:
    require_browser()

    results = build_results(tmp_path)
    hostile = results / "20240503-130000-jit-0003" / "numpy.json"  # a name that tries to run script
    doc = json.loads(hostile.read_text())
    doc["environment"]["versions"] = {"numpy": HOSTILE}
    hostile.write_text(json.dumps(doc))
    write_bisect(results, bisect_doc())
    site = tmp_path / "site"
    publish_site(results, site)
    problems: list[str] = []
    with watched_page(problems) as page:
        page.goto((site / "index.html").as_uri())
        assert page.locator("#suites a.suite-link").all_inner_texts() == ["jit", "xla"]
        assert "first significant change: 0.4.32" in page.locator("#bisects").inner_text()

        page.locator("#suites a.suite-link", has_text="xla").click()
        page.wait_for_selector(".uplot canvas")
        assert page.locator("h1").inner_text() == "suite xla"
        legend = page.locator(".u-legend").first.inner_text()
        assert "jax: FLAGGED (not a normal point)" in legend and "numpy" in legend
        # One table of points per chart, and a chart per machine (CPU A's runs, then CPU B's).
        points = " ".join(page.locator("table.points").all_inner_texts())
        for flag in ("ESCAPED: sync escaped", "IMPLAUSIBLE: ", "NOT COMPARABLE (†): failed the agreement gate"):
            assert flag in points
        page.select_option("#series-by", "machine")
        # One chart per machine (the history's series): CPU B's runs are on the second chart.
        assert "jax on Test CPU B (2 cores)" in " ".join(page.locator(".u-legend").all_inner_texts())
        page.screenshot(path=str(artifacts() / "publish-suite.png"), full_page=True)

        page.select_option("#run-a", "0")
        page.select_option("#run-b", "2")
        page.click("#compare-go")
        page.wait_for_selector("#changes")
        assert page.locator("h1").inner_text().startswith("compare A=20240501-120000-xla-0001 B=20240503")
        verdicts = dict(
            zip(
                page.locator("#changes td:first-child").all_inner_texts(),
                page.locator("#changes .verdict").all_inner_texts(),
                strict=True,
            )
        )
        assert verdicts["numpy"].endswith("% slower"), verdicts
        assert verdicts["jax"] == "excluded: implausible FLOP/s (above device peak)"
        assert "B: IMPLAUSIBLE" in page.locator("#changes").inner_text()
        assert "WARNING: numpy: runs differ in cpu" in page.locator("ul.warnings").inner_text()
        page.screenshot(path=str(artifacts() / "publish-comparison.png"), full_page=True)

        page.goto((site / "index.html").as_uri())
        page.locator("#suites a.suite-link", has_text="jit").click()
        page.wait_for_selector(".uplot canvas")
        assert "numpy " + HOSTILE.replace("\u2028", "\\u2028").replace("\u202e", "\\u202e") in " ".join(
            page.locator("table.points").all_inner_texts()
        )
    assert problems == []
