"""`harness history` in every export format, and as JUnit XML (one test case per series)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

from harness.judge.change_points import MIN_POINTS, PENALTY
from harness.judge.history import ChangePoint, Series
from harness.report.exports import Format, html_page, to_csv
from harness.text import escape, html
from harness.text.escape import plain
from harness.text.numbers import fmt_change, fmt_ratio, fmt_value

FIELDS = (
    "framework", "metric", "unit", "workload", "machine", "run_before", "run_after", "level_before", "level_after",
    "ratio", "worse", "changed",
)  # fmt: skip


def _direction(c: ChangePoint) -> str:
    word = ("slower" if c.worse else "faster") if c.series.better == "lower" else ("worse" if c.worse else "better")
    return f"{fmt_change(abs(c.change))} {word}"


def change_rows(changes: list[ChangePoint]) -> list[dict[str, Any]]:
    return [
        {
            "framework": c.series.framework,
            "metric": c.series.metric,
            "unit": c.series.unit,
            "workload": c.series.workload,
            "machine": c.series.machine,
            "run_before": c.before.run_id,
            "run_after": c.after.run_id,
            "level_before": c.level_before,
            "level_after": c.level_after,
            "ratio": c.ratio,
            "worse": c.worse,
            "changed": "; ".join(c.changed),
        }
        for c in changes
    ]


def _table_rows(changes: list[ChangePoint]) -> tuple[list[str], list[list[str]]]:
    headers = ["series", "between runs", "level before", "level after", "change", "what changed"]
    rows = [
        [
            c.series.title,
            f"{c.before.run_id} -> {c.after.run_id}",
            fmt_value(c.level_before, plain(c.series.unit)),
            fmt_value(c.level_after, plain(c.series.unit)),
            f"{fmt_ratio(c.ratio)} ({_direction(c)})",
            "; ".join(c.changed) or "nothing recorded differs",
        ]
        for c in changes
    ]
    return headers, rows


def _footer(suite: str, series: list[Series], changes: list[ChangePoint]) -> list[str]:
    short = [s for s in series if len(s.points) < MIN_POINTS]
    lines = [
        f"suite {suite}: {len(series)} series (framework, metric, workload, machine and threads), "
        f"{len(changes)} change point(s); PELT (ruptures, L1 cost) on the log of each run's median, "
        f"penalty {PENALTY:g} ln(n) in units of the run-to-run noise"
    ]
    if short:
        lines.append(f"{len(short)} series with under {MIN_POINTS} trusted runs: not analysed")
    machines: dict[str, list[Series]] = {}
    for s in series:
        if s.several_machines:  # the runs come from more than one machine or thread setting: say which is which
            machines.setdefault(s.machine, []).append(s)
    for machine, theirs in machines.items():
        runs = dict.fromkeys(p.run_id for p in sorted((p for s in theirs for p in s.points), key=lambda p: p.position))
        where = f"{len(runs)} runs, {next(iter(runs))} to {list(runs)[-1]}" if runs else "no trusted run"
        lines.append(f"{machine}: {len(theirs)} series, {where}")
    return lines + [f"left out of {s.title}: {why}" for s in series for why in s.left_out]


def render_history(suite: str, series: list[Series], changes: list[ChangePoint], fmt: Format) -> str:
    if fmt is Format.csv:
        return to_csv(change_rows(changes), FIELDS)
    if fmt is Format.json:
        doc = {
            "format": "harness-history",
            "version": 1,
            "suite": suite,
            "series": [
                {
                    "framework": s.framework,
                    "metric": s.metric,
                    "workload": s.workload,
                    "machine": s.machine,
                    "machine_fingerprint": s.fingerprint,
                    "threads": s.threads,
                    "runs": [p.run_id for p in s.points],
                    "medians": [p.median for p in s.points],
                    "left_out": s.left_out,
                }
                for s in series
            ],  # fmt: skip
            "change_points": change_rows(changes),
        }
        return json.dumps(doc, indent=2)
    headers, rows = _table_rows(changes)
    if fmt is Format.html:
        body = html.table(headers, rows) + html.tag("pre", "\n".join(_footer(suite, series, changes)))
        return html_page(f"history of suite {suite}", body)
    tablefmt = "github" if fmt is Format.markdown else "simple"
    line = escape.for_tablefmt(tablefmt)
    table = escape.table(rows, headers, tablefmt) if rows else "no change points"
    return "\n".join([table, ""] + [line(s) for s in _footer(suite, series, changes)])


def history_junit(suite: str, series: list[Series], changes: list[ChangePoint]) -> str:
    """One test case per series: failed when its level got worse at a change point, skipped when too short."""
    by_series: dict[int, list[ChangePoint]] = {}
    for c in changes:
        by_series.setdefault(id(c.series), []).append(c)
    root = ET.Element("testsuites", name="harness history")
    group = ET.SubElement(root, "testsuite", name=plain(f"history {suite}"), errors="0")
    failures = skipped = 0
    for s in series:
        where = f"; {s.machine}" if s.several_machines else ""
        case = ET.SubElement(group, "testcase", classname=plain(f"harness.judge.history.{suite}.{s.framework}"),
                             name=plain(f"{s.metric} ({s.workload}{where})"))  # fmt: skip
        found = by_series.get(id(s), [])
        worse = [c for c in found if c.worse]
        text = "\n".join(f"{c.before.run_id} -> {c.after.run_id}: {fmt_ratio(c.ratio)} ({_direction(c)}); "
                         + ("; ".join(c.changed) or "nothing recorded differs") for c in found)  # fmt: skip
        if len(s.points) < MIN_POINTS:
            skipped += 1
            ET.SubElement(case, "skipped", message=f"{len(s.points)} trusted runs, under {MIN_POINTS}")
        elif worse:
            failures += 1
            message = f"level got worse at {len(worse)} change point(s), last between {worse[-1].before.run_id} and {worse[-1].after.run_id}"
            ET.SubElement(case, "failure", message=plain(message), type="regression").text = plain(text)
        if text:
            ET.SubElement(case, "system-out").text = plain(text)
    for element in (root, group):
        element.set("tests", str(len(series)))
        element.set("failures", str(failures))
    group.set("skipped", str(skipped))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
