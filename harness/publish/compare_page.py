"""compare-A-B.html: `harness compare` of two runs of one suite, with each metric's flags beside it.

The verdicts are `harness.judge.compare`'s own (`Change.verdict`), the numbers numbers.py's: the page
says exactly what `harness compare A B` prints, plus the flags that excluded a metric.
"""

from __future__ import annotations

from harness.core.errors import HarnessError
from harness.judge.compare import Change, Comparison
from harness.publish import labels
from harness.publish.collect import PublishedRun
from harness.publish.flags import FlagBook
from harness.publish.names import INDEX, run_file
from harness.publish.page import Markup, join, lines, link, page, table, tag
from harness.report.comparison import evidence_lines, geomean_lines, p_cell, ratio_cell, value_cell
from harness.text.escape import plain


def _verdict_class(change: Change) -> str:
    if change.failed:
        return "worse"
    if change.excluded:
        return "flagged"
    if change.no_verdict:
        return "unjudged"
    if not change.significant:
        return "same"
    return "worse" if change.slowdown > 0 else "better"


def _flags(change: Change, a: PublishedRun, b: PublishedRun, book: FlagBook) -> str:
    key = (change.framework, change.metric)
    found = [f"{side}: {flag}" for side, entry in (("A", a), ("B", b)) for flag in book.flags(entry).get(key, [])]
    return "; ".join(found) or "-"


def _changes(comparison: Comparison, a: PublishedRun, b: PublishedRun, book: FlagBook) -> Markup:
    headers = ["framework", "metric", "A", "B", "B/A [interval]", "p (Holm-adjusted)", "verdict", "flags"]
    rows = [
        [
            plain(c.framework),
            plain(c.metric),
            value_cell(c.median_a, plain(c.unit)),
            value_cell(c.median_b, plain(c.unit)),
            ratio_cell(c),
            p_cell(c),
            tag("span", plain(c.verdict), class_="verdict"),
            _flags(c, a, b, book),
        ]
        for c in comparison.changes
    ]
    return table(headers, rows, [_verdict_class(c) for c in comparison.changes], id="changes", class_="data")


def _side(name: str, entry: PublishedRun) -> Markup:
    return tag(
        "p",
        join(
            [
                f"{name}: ",
                link(run_file(entry.key), entry.run_id),
                f" started {entry.started_text} on {labels.machines(entry.run)} with {labels.versions(entry.run)}"
                if entry.started is not None
                else f": {labels.jobs(entry.run)}",
            ]
        ),  # fmt: skip
    )


def compare_page(a: PublishedRun, b: PublishedRun, book: FlagBook, suite_href: str) -> str:
    body = [
        tag("nav", join([link(INDEX, "all suites"), link(suite_href, f"suite {a.suite}")], " | ")),
        tag("h1", f"compare A={a.run_id} B={b.run_id} (suite {a.suite})"),
        _side("A", a),
        _side("B", b),
    ]
    try:
        comparison = book.verdicts.comparison(a.run, b.run)
    except HarnessError as error:
        body.append(tag("p", f"Nothing to compare: {plain(error)}", class_="message"))
        return page(f"compare {a.run_id} {b.run_id}", join(body))
    if comparison.warnings:
        body.append(lines([f"WARNING: {plain(w)}" for w in comparison.warnings], class_="warnings"))
    body += [
        _changes(comparison, a, b, book),
        lines([plain(line) for line in geomean_lines(comparison) + evidence_lines(comparison)]),
        tag(
            "p",
            '"excluded" when a metric is flagged in either run or the runs measured different work; "no verdict" '
            "when either run has too few processes (rounds) for the test to reach significance. Intervals are 95 % "
            "unless the coverage they really have is printed inside the brackets (few samples); (rounds) = "
            "per-round medians of interleaved rounds were the observations.",
        ),
    ]
    return page(f"compare {a.run_id} {b.run_id}", join(body))
