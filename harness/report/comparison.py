"""A comparison in every export format."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from harness.compare import Change, Comparison
from harness.report.exports import Format, html_page, to_csv
from harness.statistics import CONFIDENCE
from harness.text import escape, html
from harness.text.numbers import fmt_geomean, fmt_interval, fmt_p, fmt_ratio, fmt_share, fmt_value

CHANGE_FIELDS = (
    "framework", "metric", "unit", "better", "median_a", "median_b", "ratio", "ci_low", "ci_high",
    "ci_coverage", "basis", "p_value", "significant", "verdict",
)  # fmt: skip


def change_rows(comparison: Comparison) -> list[dict[str, Any]]:
    rows = []
    for c in comparison.changes:
        row = asdict(c)
        row["significant"] = c.significant
        row["verdict"] = c.verdict
        rows.append(row)
    return rows


def ratio_cell(c: Change) -> str:
    """`B/A [interval]`; "-" for an excluded metric: a number flagged in either run is not compared."""
    if c.excluded:
        return "-"
    claimed = None if c.ci_coverage >= CONFIDENCE - 1e-9 else fmt_share(c.ci_coverage)
    return f"{fmt_ratio(c.ratio)} {fmt_interval(c.ci_low, c.ci_high, claimed)}" + (
        " (rounds)" if c.basis == "round medians" else ""
    )


def p_cell(c: Change) -> str:
    return "-" if c.excluded else fmt_p(c.p_value)


def _table(comparison: Comparison, tablefmt: str) -> str:
    headers, rows = _rows(comparison)
    return escape.table(rows, headers, tablefmt)


def _rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    headers = ["framework", "metric", "A", "B", "B/A [interval]", "p (Mann-Whitney)", "verdict"]
    rows = [
        [
            c.framework,
            c.metric,
            fmt_value(c.median_a, c.unit),
            fmt_value(c.median_b, c.unit),
            ratio_cell(c),
            p_cell(c),
            c.verdict,
        ]
        for c in comparison.changes
    ]
    return headers, rows


def _summary_lines(comparison: Comparison) -> list[str]:
    lines = []
    for fw in dict.fromkeys(c.framework for c in comparison.changes):
        lines.append(f"geometric mean of time ratios B/A, {fw}: {fmt_geomean(comparison.geomean(fw))}")
    lines.append(f"geometric mean of time ratios B/A, all: {fmt_geomean(comparison.geomean())}")
    lines.append(
        "intervals: 95 % unless the coverage they really have is printed inside the brackets (few samples); "
        "(rounds) = per-round medians of interleaved rounds were the observations"
    )
    lines += [f"WARNING: {w}" for w in comparison.warnings]
    return lines


def render_comparison(comparison: Comparison, fmt: Format) -> str:
    a, b = comparison.a.summary.get("run_id"), comparison.b.summary.get("run_id")
    head = f"compare A={a} B={b} (suite {comparison.a.summary.get('suite')})"
    if fmt is Format.csv:
        return to_csv(change_rows(comparison), CHANGE_FIELDS)
    if fmt is Format.json:
        doc = {
            "format": "harness-comparison",
            "version": 1,
            "a": a,
            "b": b,
            "changes": change_rows(comparison),
            "geomean": comparison.geomean(),
            "warnings": comparison.warnings,
        }
        return json.dumps(doc, indent=2)
    if fmt is Format.html:
        headers, rows = _rows(comparison)
        body = html.table(headers, rows) + html.tag("pre", "\n".join(_summary_lines(comparison)))
        return html_page(head, body)
    tablefmt = "github" if fmt is Format.markdown else "simple"
    line = escape.for_tablefmt(tablefmt)
    return "\n".join([line(head), "", _table(comparison, tablefmt), ""] + [line(s) for s in _summary_lines(comparison)])
