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


def rate_text(rate: float) -> str:
    """`13712`, `476.2`: whole numbers from a thousand up (never `1.37e+04`), four digits below."""
    return f"{rate:.0f}" if abs(rate) >= 1000 else f"{rate:.4g}"


def tail_cell(tail: Tail, level: float) -> str:
    """`2.10 ms [2.08-2.12 ms]` (`[332 us-2.96 ms]` across units), with the coverage inside the brackets
    where it is under `level`."""
    text = fmt_time(tail.seconds)
    if tail.low is None or tail.high is None or tail.coverage is None:
        return text
    low, high = fmt_time(tail.low), fmt_time(tail.high)
    if low.split()[1] == high.split()[1]:
        low = low.split()[0]
    short = f" {fmt_share(tail.coverage)}" if tail.coverage < level - 1e-9 else ""
    return f"{text} [{low}-{high}{short}]"


GENERATION_HEADERS = [
    "framework",
    "prompts x tokens",
    "new tokens",
    "time to first token",
    "cold prefill",
    "decode tokens/s",
]


def generation_rows(inference: InferenceJudgement) -> list[list[str]]:
    rows = []
    for f in inference.figures:
        g = f.generation
        if g is None:
            continue
        ttft = fmt_time(g.ttft_s)
        cold = "-" if g.ttft_cold_s is None else fmt_time(g.ttft_cold_s)
        rate = rate_text(g.tokens_per_s)
        if g.excluded:
            ttft = f"({ttft})"
        if f.latency_excluded:
            rate = f"({rate})"
        rows.append([f.framework, f"{g.batch} x {g.prompt_len}", str(g.new_tokens), ttft, cold, rate])
    return rows


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
            text = rate_text(point.rate)
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
    ]
    if any(f.sweep for f in inference.figures):
        lines.append(f"saturates at: the smallest batch reaching {fmt_share(SATURATION_SHARE)} of the best throughput")
    if any(f.generation for f in inference.figures):
        lines.append("a decode step's cold request is its compilation; time to first token is the prompt's prefill")
    for f in inference.figures:
        if f.latency_excluded:
            lines.append(f"{f.framework} latency in parentheses: {f.latency_excluded}")
        if f.stopped:
            lines.append(f"{f.framework} sweep stopped at {f.stopped}")
        flagged = [p for p in f.sweep if p.excluded]
        if flagged:
            lines.append(f"{f.framework} batch {flagged[0].batch} in parentheses: {flagged[0].excluded}")
    return lines


def section_title(text: str, tablefmt: str) -> list[str]:
    """A blank line, then a section's heading escaped for the medium (`###` in Markdown)."""
    esc = escape.for_tablefmt(tablefmt)
    return ["", f"### {esc(text)}" if tablefmt == "github" else esc(text)]


def note_lines(notes: list[str], tablefmt: str) -> list[str]:
    """A blank line, then a section's notes escaped for the medium (a bullet list in Markdown)."""
    esc = escape.for_tablefmt(tablefmt)
    return ["", *(f"- {esc(line)}" if tablefmt == "github" else esc(line) for line in notes)]


def inference_section(judged: Assessment, tablefmt: str = "simple") -> list[str]:
    """The Inference section's lines for `render` (table.py); [] for a run without an inference job."""
    inference = judged.inference
    if inference is None:
        return []
    parts: list[str] = []
    generated = generation_rows(inference)
    if generated:
        parts += section_title(f"{HEADING}: generation (greedy, KV cache)", tablefmt)
        parts.append(escape.table(generated, GENERATION_HEADERS, tablefmt))
    infer = [f for f in inference.figures if f.mode == "infer"]
    decode = [f for f in inference.figures if f.mode != "infer"]
    for heading, chosen in (("latency of single requests at batch 1", infer), ("latency per decode step", decode)):
        if chosen:
            parts += section_title(f"{HEADING}: {heading}", tablefmt)
            parts.append(escape.table(latency_rows(InferenceJudgement(tuple(chosen))), LATENCY_HEADERS, tablefmt))
    if any(f.sweep for f in inference.figures):
        headers, rows = sweep_rows(InferenceJudgement(tuple(f for f in inference.figures if f.sweep)))
        parts += section_title(f"{HEADING}: throughput against batch size", tablefmt)
        parts.append(escape.table(rows, headers, tablefmt))
    return parts + note_lines(notes(inference), tablefmt)
