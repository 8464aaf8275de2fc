"""One run (or comparison) in every output format: table, markdown, csv, json, html."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from enum import Enum
from typing import Any

from harness.judge.assessment import Assessment
from harness.judge.breakdown import LABELS, Breakdown
from harness.judge.parallel import Parallel
from harness.report.records import RECORD_FIELDS, metric_records
from harness.report.table import check_rows, render, timing_rows
from harness.text import escape, html


class Format(str, Enum):
    table = "table"
    markdown = "markdown"
    csv = "csv"
    json = "json"
    html = "html"


REPORT_FORMAT_VERSION = 1

HTML_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;}table{border-collapse:collapse;margin:1em 0;}"
    "td,th{border:1px solid #ccc;padding:4px 8px;font-variant-numeric:tabular-nums;}th{background:#f4f4f4;}"
)


def to_csv(rows: list[dict[str, Any]], fields: tuple[str, ...]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(fields), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else escape.csv_cell(row.get(k))) for k in fields})
    return buffer.getvalue()


EXPORT_POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def html_page(title: str, body: html.Markup) -> str:
    """A whole HTML export, built like the site's pages (harness/text/html.py: every text escaped)."""
    head = [
        html.void("meta", charset="utf-8"),
        # Like the site's pages: nothing loads, nothing runs; only the inline style below applies.
        html.void("meta", http_equiv="Content-Security-Policy", content=EXPORT_POLICY),
        html.tag("title", title),
        html.tag("style", html.Markup(HTML_STYLE)),
    ]
    return html.document(head, html.tag("h1", title) + body)


def run_document(judged: Assessment) -> dict[str, Any]:
    run = judged.run
    document: dict[str, Any] = {
        "format": "harness-run-report",
        "version": REPORT_FORMAT_VERSION,
        "run_id": run.summary.get("run_id"),
        "suite": run.summary.get("suite"),
        "baseline": run.baseline,
        "jobs": [{"framework": fw, "status": r["status"], "reason": r["reason"]} for fw, r in run.results.items()],
        "metrics": metric_records(judged),
        "checks": [
            {
                "name": row.name,
                "tolerance": row.tolerance,
                "values": row.values,
                "rel_diff": row.rel_diff,
                "passed": row.passed,
            }
            for row in judged.checks
        ],
        "gate_failed": sorted(judged.gate_failed),
        "not_comparable": dict(judged.not_comparable),
        "excluded_metrics": [
            {"framework": fw, "metric": m, "why": why} for (fw, m), why in sorted(judged.exclusions.items())
        ],
        "rejected_files": run.problems,
    }
    if judged.breakdowns or judged.profile_problems:  # `--profile` runs only: other documents stay as they were
        document["profiles"] = [profile_record(b) for b in judged.breakdowns]
        document["profile_problems"] = list(judged.profile_problems)
    if judged.parallel is not None:  # data-parallel runs only, like the profiles
        document["parallel"] = parallel_record(judged.parallel)
    if judged.inference is not None:  # inference runs only: every percentile's interval, the sweep, the saturation
        document["inference"] = {
            "level": judged.inference.level,
            "figures": [asdict(f) for f in judged.inference.figures],
        }
    return document


def parallel_record(parallel: Parallel) -> dict[str, Any]:
    """The judged data-parallel figures (host-recomputed efficiency, exposed communication and straggler;
    every rank) and the 1-way gate's rows, as the JSON export writes them."""
    return {
        "figures": [
            {**asdict(f), "items": f.items, "peak_share": f.peak_share, "over_peak": f.over_peak}
            for f in parallel.figures
        ],
        "gate": [
            {
                "name": row.name,
                "tolerance": row.tolerance,
                "one_way": row.values,
                "n_way": row.nway,
                "rel_diff": row.rel_diff,
                "passed": row.passed,
                "why": row.why,
            }
            for row in parallel.gate
        ],
        "gate_passed": parallel.gate_passed,
        "missing_block": list(parallel.missing),
    }


def profile_record(b: Breakdown) -> dict[str, Any]:
    """One breakdown as the JSON export writes it: seconds per profiled step, shares of that step."""
    return {
        "framework": b.framework,
        "metric": b.metric,
        "device_kind": b.device_kind,
        "profiler": b.profiler,
        "steps": b.steps,
        "step_s": b.step_s,
        "timed_step_s": b.timed_step_s,
        "profiler_overhead": b.overhead,
        "flag": b.flag,
        "trace": b.trace,
        "categories": [
            {
                "key": c.key,
                "label": LABELS[c.key],
                "seconds": c.seconds,
                "share": c.share,
                "top": [{"name": op.name, "seconds": op.seconds} for op in c.top],
            }
            for c in b.categories
        ],
        "unattributed_s": b.unattributed_s,
        "notes": list(b.notes),
    }


def render_run(judged: Assessment, fmt: Format) -> str:
    if fmt in (Format.table, Format.markdown):
        return render(judged, tablefmt="github" if fmt is Format.markdown else "simple")
    if fmt is Format.csv:
        return to_csv(metric_records(judged), RECORD_FIELDS)
    if fmt is Format.json:
        return json.dumps(run_document(judged), indent=2)
    headers, rows = timing_rows(judged)
    check_headers, checks = check_rows(judged)
    body = html.join(
        [
            html.table(headers, rows),
            html.tag("h2", "checks"),
            html.table(check_headers, checks),
            html.tag("h2", "details"),
            html.tag("pre", render(judged).split("\n\n", 1)[-1]),
        ],
        "\n",
    )
    return html_page(f"{judged.run.summary.get('suite')} - {judged.run.summary.get('run_id')}", body)
