"""bisect-N.html: one version bisect, as `harness bisect` shows it in the terminal, and its index rows.

The numbers use the terminal's rules (harness/text/numbers.py, as harness/execute/bisect/render.py does)
and the verdicts are the words the bisect recorded; every string from bisect.json is text placed
through page.py, never markup.
"""

from __future__ import annotations

from typing import Any

from harness.core.statistics import CONFIDENCE
from harness.publish.bisects import PublishedBisect
from harness.publish.names import INDEX, bisect_file
from harness.publish.page import Content, Markup, join, link, page, table, tag
from harness.text.numbers import fmt_interval, fmt_p, fmt_ratio, fmt_share, fmt_value

INDEX_HEADERS = ["bisect", "suite", "metric", "stack", "package", "versions", "answer"]


def headline(entry: PublishedBisect) -> str:
    """The terminal's first line of the bisect."""
    return (
        f"bisect of {entry.text('package')} in the {entry.text('stack')} stack: "
        f"{entry.suite}/{entry.text('framework')}, metric {entry.text('metric')}, "
        f"{entry.doc['rounds']} interleaved rounds"
    )


def bisect_label(entry: PublishedBisect) -> str:
    """How a suite page names the bisect: what it varied and what it found."""
    return f"{entry.text('package')} {', '.join(entry.versions)}, metric {entry.text('metric')}: {entry.answer}"


def index_row(entry: PublishedBisect) -> list[Content]:
    return [
        link(bisect_file(entry.key), entry.folder),
        entry.suite,
        entry.text("metric"),
        entry.text("stack"),
        entry.text("package"),
        ", ".join(entry.versions),
        entry.answer,
    ]


def _version_table(entry: PublishedBisect) -> Markup:
    doc, unit = entry.doc, entry.unit
    rows: list[list[Content]] = []
    for version in doc["versions"]:
        result: dict[str, Any] = doc["results"][version]
        median = result.get("median")
        rounds = ", ".join(fmt_value(m, unit) for m in result.get("round_medians", []))
        rows.append(
            [
                version,
                doc["locks"][version]["lock_hash"],
                fmt_value(median, unit) if median is not None else "-",
                rounds or "-",
                result.get("problem") or "",
            ]
        )
    headers: list[Content] = ["version", "lock hash", "median", "round medians", "problem"]
    if not any(row[-1] for row in rows):
        headers, rows = headers[:-1], [row[:-1] for row in rows]
    return table(headers, rows, id="versions", class_="data")


def _pair_row(pair: dict[str, Any]) -> list[Content]:
    ratio, low, high, p = pair.get("ratio"), pair.get("ci_low"), pair.get("ci_high"), pair.get("p_value")
    adjusted = pair.get("p_adjusted")  # absent from records written before the Holm correction
    coverage = pair.get("ci_coverage")
    shown = "" if coverage is None or coverage >= CONFIDENCE - 1e-9 else fmt_share(coverage)
    return [
        f"{pair['before']} -> {pair['after']}",
        fmt_ratio(ratio) if ratio is not None else "-",
        fmt_interval(low, high, shown) if low is not None and high is not None else "-",
        (fmt_p(p) if p is not None else "-") + (f" ({fmt_p(adjusted)})" if adjusted is not None else ""),
        pair["verdict"],
    ]


def bisect_page(entry: PublishedBisect, suite_href: str | None) -> str:
    nav: list[Content] = [link(INDEX, "all suites")]
    if suite_href is not None:
        nav += [" · ", link(suite_href, f"suite {entry.suite}")]
    pairs = [_pair_row(pair) for pair in entry.doc["pairs"]]
    significant = ["significant" if pair["significant"] else "" for pair in entry.doc["pairs"]]
    body = [
        tag("nav", join(nav)),
        tag("h1", f"version bisect {entry.folder}"),
        tag("p", headline(entry)),
        tag("p", join(["Answer: ", tag("strong", entry.answer)]), class_="answer"),
        tag("h2", "Versions"),
        tag(
            "p",
            "Each version ran in its own environment from its own lock (the hash identifies it); the median "
            "pools every sample, and each round's median is one independent observation.",
        ),
        _version_table(entry),
        tag("h2", "Consecutive versions"),
        tag(
            "p",
            "Ratio: later/earlier median; the interval and the Mann-Whitney p come from the round medians, "
            "as `harness compare` does for interleaved runs.",
        ),
        table(
            ["change", "ratio", "interval", "p (Holm-adjusted)", "verdict"],
            pairs,
            significant,
            id="pairs",
            class_="data",
        ),
    ]
    return page(f"version bisect {entry.folder}", join(body))
