"""The words of an inference run: the batch-1 latency's tail with honest intervals, the cold first
request, and the throughput sweep with where it saturates (terminal and report.md).

Formatting only: everything was judged once (judge/inference.py) and is read off
`Assessment.inference`. Cells are built from raw values and escaped when placed.
"""

from __future__ import annotations

from harness.judge.assessment import Assessment
from harness.judge.inference import InferenceJudgement, Tail
from harness.text import escape
from harness.text.numbers import fmt_share, fmt_time
from suites.contract.inference import SATURATION_SHARE

HEADING = "Inference"
LATENCY_HEADERS = ["framework", "requests", "cold (first request)", "p50", "p90", "p99", "max"]


def tail_cell(tail: Tail, level: float) -> str:
    """`2.10 ms [2.08-2.12 ms]`, with the coverage inside the brackets where it is under `level`."""
    text = fmt_time(tail.seconds)
    if tail.low is None or tail.high is None or tail.coverage is None:
        return text
    scale_from = tail.seconds
    low, high = fmt_time(tail.low, scale_from), fmt_time(tail.high, scale_from)
    short = f" {fmt_share(tail.coverage)}" if tail.coverage < level - 1e-9 else ""
    return f"{text} [{low.split()[0]}-{high}{short}]"


def latency_rows(inference: InferenceJudgement) -> list[list[str]]:
    rows = []
    for f in inference.figures:
        tails = [tail_cell(t, inference.level) for t in f.tails]
        if f.latency_excluded:
            tails = [f"({t})" for t in tails]
        cold = "-" if f.cold_s is None else fmt_time(f.cold_s)
        processes = f" ({f.processes} processes)" if f.processes > 1 else ""
        rows.append([f.framework, f"{f.requests}{processes}", cold, *tails])
    return rows


def sweep_rows(inference: InferenceJudgement) -> tuple[list[str], list[list[str]]]:
    """One row per batch size, a column per framework: median rows/s, flagged ones in parentheses."""
    frameworks = [f.framework for f in inference.figures]
    units = {f.unit for f in inference.figures}
    unit = units.pop() if len(units) == 1 else "rows"
    batches = sorted({p.batch for f in inference.figures for p in f.sweep})
    rows = []
    for batch in batches:
        row = [str(batch)]
        for f in inference.figures:
            point = next((p for p in f.sweep if p.batch == batch), None)
            if point is None:
                row.append("-")
                continue
            text = f"{point.rate:.4g}"
            row.append(f"({text})" if point.excluded else text)
        rows.append(row)
    rows.append(["saturates at", *[str(f.saturation) if f.saturation is not None else "-" for f in inference.figures]])
    return [f"batch ({unit}/s)", *frameworks], rows


def notes(inference: InferenceJudgement) -> list[str]:
    lines = [
        f"p50/p90/p99: linear between order statistics; [interval]: the order statistics that hold the true "
        f"percentile with {fmt_share(inference.level)} probability, whatever the latency's distribution (the % "
        "they really cover is printed inside where the requests are too few); max has none",
        "cold: the first request after load (trace, compile, first allocation), apart from the timed ones",
        f"saturates at: the smallest batch reaching {fmt_share(SATURATION_SHARE)} of the best throughput measured",
    ]
    for f in inference.figures:
        if f.latency_excluded:
            lines.append(f"{f.framework} latency in parentheses: {f.latency_excluded}")
        if f.stopped:
            lines.append(f"{f.framework} sweep stopped at {f.stopped}")
        flagged = [p for p in f.sweep if p.excluded]
        if flagged:
            lines.append(f"{f.framework} batch {flagged[0].batch} in parentheses: {flagged[0].excluded}")
    return lines


def inference_section(judged: Assessment, tablefmt: str = "simple") -> list[str]:
    """The Inference section's lines for `render` (table.py); [] for a run without an inference job."""
    inference = judged.inference
    if inference is None:
        return []
    markdown = tablefmt == "github"
    esc = escape.for_tablefmt(tablefmt)

    def title(text: str) -> list[str]:
        return ["", f"### {esc(text)}" if markdown else esc(text)]

    parts = title(f"{HEADING}: latency of single requests at batch 1")
    parts.append(escape.table(latency_rows(inference), LATENCY_HEADERS, tablefmt))
    headers, rows = sweep_rows(inference)
    parts += title(f"{HEADING}: throughput against batch size")
    parts.append(escape.table(rows, headers, tablefmt))
    parts.append("")
    parts += [f"- {esc(line)}" if markdown else esc(line) for line in notes(inference)]
    return parts
