"""A comparison in every export format."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from harness.core.statistics import CONFIDENCE
from harness.judge.compare import CORRECTION, ROUNDS, Change, Comparison
from harness.report.exports import Format, html_page, to_csv
from harness.text import escape, html
from harness.text.numbers import fmt_change, fmt_geomean, fmt_interval, fmt_p, fmt_ratio, fmt_share, fmt_value

CHANGE_FIELDS = (
    "framework", "metric", "unit", "better", "median_a", "median_b", "ratio", "ci_low", "ci_high",
    "ci_coverage", "basis", "processes_a", "processes_b", "p_value", "p_adjusted", "no_verdict", "significant",
    "verdict", "failed", "disturbed", "left_out_a", "left_out_b", "margin",
)  # fmt: skip


def change_rows(comparison: Comparison) -> list[dict[str, Any]]:
    rows = []
    for c in comparison.changes:
        row = asdict(c)
        row["processes_a"], row["processes_b"] = row.pop("processes")
        row["left_out_a"], row["left_out_b"] = row.pop("left_out")
        for name in ("p_adjusted", "median_a", "median_b", "ratio", "ci_low", "ci_high", "p_value"):
            if isinstance(row[name], float) and math.isnan(row[name]):  # not measured or not corrected (no NaN in JSON)
                row[name] = None
        row["significant"] = c.significant
        row["verdict"] = c.verdict
        rows.append(row)
    return rows


def ratio_cell(c: Change) -> str:
    """`B/A [interval]`; "-" for an excluded metric (a number flagged in either run is not compared) or
    a failed one (a side has no number)."""
    if c.excluded or c.failed:
        return "-"
    claimed = None if c.ci_coverage >= CONFIDENCE - 1e-9 else fmt_share(c.ci_coverage)
    return f"{fmt_ratio(c.ratio)} {fmt_interval(c.ci_low, c.ci_high, claimed)}" + (
        " (rounds)" if c.basis == ROUNDS else ""
    )


def p_cell(c: Change) -> str:
    """`p (Holm-adjusted p)`; "-" where no test is made (excluded, or too few processes for one)."""
    return "-" if not c.tested or c.no_verdict else f"{fmt_p(c.p_value)} ({fmt_p(c.p_adjusted)})"


def value_cell(value: float, unit: str) -> str:
    """A side's median, or "-" where that side has none (a failed row)."""
    return "-" if math.isnan(value) else fmt_value(value, unit)


def evidence_lines(comparison: Comparison) -> list[str]:
    """How the verdicts were reached: the unit of evidence, the correction, and rows without a verdict."""
    family = comparison.family_size
    margin = comparison.margin
    clears = (
        f"the interval lies beyond the session's margin, {fmt_change(margin)} either way (`harness ab --margin`: two "
        "copies of the same code in two folders differ by up to 0.7 %, which no number of rounds pins on the code; "
        "the p tests a change beyond the margin)"
        if margin
        else "the interval excludes 1"
    )
    lines = [
        f"verdicts: one observation per process (each round's median); significant when the {CORRECTION}-adjusted "
        f"p < 0.05 across the {family} compared rows (at most a 5 % chance of any false alarm in this compare) "
        f"and {clears}"
    ]
    missing = comparison.without_verdict
    if missing:
        lines.append(f"no verdict on {len(missing)} of {family} rows: {missing[0].no_verdict}")
    failed = comparison.failed
    if failed:
        lines.append(
            f"FAILED: {len(failed)} row(s) have no number on one side ({failed[0].framework}: {failed[0].failed}); "
            "`--fail-above` fails on them"
        )
    disturbed = comparison.disturbed
    if disturbed:
        lines.append(
            f"DISTURBED: {len(disturbed)} row(s) not judged because the machine disturbed most of their samples "
            f"({disturbed[0].framework} {disturbed[0].metric}); rerun on a quiet machine (`--fail-above` exits 3)"
        )
    left = [c for c in comparison.changes if c.tested and any(c.left_out)]
    if left:
        each = ", ".join(f"{c.framework} {c.metric} A {c.left_out[0]}, B {c.left_out[1]}" for c in left[:4])
        more = f" and {len(left) - 4} more" if len(left) > 4 else ""
        lines.append(f"rounds left out as contended or throttled (most of their samples disturbed): {each}{more}")
    return lines + comparison.floor


def _rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    headers = ["framework", "metric", "A", "B", "B/A [interval]", f"p ({CORRECTION}-adjusted)", "verdict"]
    rows = [
        [
            c.framework,
            c.metric,
            value_cell(c.median_a, c.unit),
            value_cell(c.median_b, c.unit),
            ratio_cell(c),
            p_cell(c),
            c.verdict,
        ]
        for c in comparison.changes
    ]
    return headers, rows


def geomean_lines(comparison: Comparison) -> list[str]:
    """The geometric mean of the time ratios per framework, then over all (`compare` and the site's page)."""
    each = [
        f"geometric mean of time ratios B/A, {fw}: {fmt_geomean(comparison.geomean(fw))}"
        for fw in dict.fromkeys(c.framework for c in comparison.changes)
    ]
    return each + [f"geometric mean of time ratios B/A, all: {fmt_geomean(comparison.geomean())}"]


def _summary_lines(comparison: Comparison) -> list[str]:
    lines = geomean_lines(comparison)
    lines.append(
        "intervals: 95 % unless the coverage they really have is printed inside the brackets (few samples); "
        "(rounds) = per-round medians of interleaved rounds were the observations, and the ratio is the median "
        "of every B round over every A round (Hodges-Lehmann) with the interval its test inverts; else the samples "
        "of one process a side (they say how steady that process was, not how the code differs)"
    )
    lines += evidence_lines(comparison)
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
            "version": 2,  # 2: verdicts from processes, Holm-adjusted (p_adjusted, no_verdict, processes_*)
            "correction": CORRECTION.lower(),
            "a": a,
            "b": b,
            "changes": change_rows(comparison),
            "geomean": comparison.geomean(),
            "warnings": comparison.warnings,
        }
        return json.dumps(doc, indent=2)
    headers, rows = _rows(comparison)
    if fmt is Format.html:
        body = html.table(headers, rows) + html.tag("pre", "\n".join(_summary_lines(comparison)))
        return html_page(head, body)
    tablefmt = "github" if fmt is Format.markdown else "simple"
    line = escape.for_tablefmt(tablefmt)
    table = escape.table(rows, headers, tablefmt)
    return "\n".join([line(head), "", table, ""] + [line(s) for s in _summary_lines(comparison)])
