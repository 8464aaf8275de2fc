"""The words of a data-parallel run: the scaling figures, every rank, and the 1-way gate (terminal and
report.md; the JSON export writes the same object, report/exports.py).

Formatting only: everything was judged once on the host (judge/parallel.py) and is read off
`Assessment.parallel`. Tables and lines are built from raw values and escaped when placed, through the
one escaper for the medium (a host name comes from the file).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.judge.assessment import Assessment
from harness.judge.parallel import Figures, GateRow, Parallel, RankRow
from harness.report.inference_text import note_lines, section_title
from harness.text import escape
from harness.text.numbers import fmt_check_value, fmt_giga, fmt_rel_diff, fmt_share, fmt_time
from suites.contract.ranks import STRAGGLER_RATIO

HEADING = "Data-parallel"
MAX_RANK_ROWS = 32  # per framework; the straggler's row is always among them, every rank is in the JSON export
OVER_PEAK = "IMPLAUSIBLE"  # a bus bandwidth above the link's peak: the word the rate guard uses
FIGURE_HEADERS = [
    "framework", "devices", "scaling", "global batch", "step (N-way)", "step (1-way)", "efficiency", "compute",
    "exposed comm", "all-reduce", "bus GB/s", "grad all-reduce", "overlap", "straggler",
]  # fmt: skip
RANK_HEADERS = ["rank", "host", "step", "compute", "all-reduce", ""]


def _time(seconds: float | None) -> str:
    return "-" if seconds is None else fmt_time(seconds)


def _share(fraction: float | None) -> str:
    return "-" if fraction is None else fmt_share(fraction)


def _batch(f: Figures) -> str:
    """`256` (samples), `16 x 128 tokens` (a language model's rows of tokens)."""
    return str(f.global_batch) + (f" x {f.items_per_row} tokens" if f.unit == "tokens" else "")


def efficiency_cell(f: Figures) -> str:
    """`87%`, or `CONTENDED 87%` when a step it divides is flagged: a figure, never a verdict."""
    if f.efficiency is None:
        return "-"
    text = fmt_share(f.efficiency)
    return f"{f.efficiency_flag} {text}" if f.efficiency_flag else text


def bandwidth_cell(f: Figures) -> str:
    """Bus bandwidth in GB/s with its share of the link's peak where known; above the peak it is flagged."""
    if f.busbw_Bps is None:
        return "-"
    text = fmt_giga(f.busbw_Bps)
    if f.peak_Bps is None:
        return text
    if f.over_peak:
        return f"{OVER_PEAK} {text} > peak {fmt_giga(f.peak_Bps)}"
    return f"{text} ({_share(f.peak_share)} of peak)"


def gradient_cell(f: Figures) -> str:
    """The gradients' all-reduce as the framework runs it: its time, and the buffers it reduces (XLA: one
    per tensor; DDP: its buckets)."""
    if f.gradient_allreduce_s is None or f.gradient_collectives is None:
        return "-"
    n = f.gradient_collectives
    return f"{fmt_time(f.gradient_allreduce_s)} ({n} buffer{'s' if n != 1 else ''})"


def straggler_cell(f: Figures) -> str:
    if f.devices < 2:
        return "-"
    return "none" if f.straggler is None else f"rank {f.straggler.rank} ({f.straggler.ratio:.2f}x)"


def figure_rows(parallel: Parallel) -> list[list[str]]:
    return [
        [
            f.framework,
            f"{f.devices} ({f.collectives})",
            f.scaling,
            _batch(f),
            fmt_time(f.step_s),
            _time(f.single_step_s) + (f" ({f.single_batch} rows)" if f.single_batch is not None else ""),
            efficiency_cell(f),
            fmt_time(f.compute_s),
            _time(f.exposed_comm_s),
            _time(f.allreduce_s),
            bandwidth_cell(f),
            gradient_cell(f),
            _share(f.overlap),
            straggler_cell(f),
        ]
        for f in parallel.figures
    ]


def shown_ranks(f: Figures, limit: int = MAX_RANK_ROWS) -> list[RankRow]:
    """The first `limit` ranks, and the straggler's wherever it is."""
    shown = list(f.ranks[:limit])
    if f.straggler is not None and f.straggler.rank >= limit:
        shown.append(f.ranks[f.straggler.rank])
    return shown


def rank_rows(f: Figures) -> list[list[str]]:
    return [
        [
            str(r.rank),
            r.host,
            fmt_time(r.step_s),
            fmt_time(r.compute_s),
            _time(r.allreduce_s),
            f"STRAGGLER ({f.straggler.ratio:.2f}x the others' compute)" if r.straggler and f.straggler else "",
        ]
        for r in shown_ranks(f)
    ]


def gate_cell(row: GateRow, fw: str) -> str:
    """`1-way 0.693 vs N-way 0.693 (pass, rel diff 1.2e-08)`, like a check row's cell."""
    if fw not in row.passed:
        return "-"
    sides = []
    if fw in row.values:
        sides.append(f"1-way {fmt_check_value(row.values[fw])}")
    if fw in row.nway:
        sides.append(f"N-way {fmt_check_value(row.nway[fw])}")
    verdict = "pass" if row.passed[fw] else f"FAIL: {row.why.get(fw, '')}"
    diff = row.rel_diff.get(fw)
    extra = f", rel diff {fmt_rel_diff(diff)}" if diff is not None else ""
    return (" vs ".join(sides) + " " if sides else "- ") + f"({verdict}{extra})"


def gate_table(parallel: Parallel, frameworks: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    headers = ["check (1-way vs N-way)", "tolerance", *frameworks]
    return headers, [[row.name, row.tolerance, *(gate_cell(row, fw) for fw in frameworks)] for row in parallel.gate]


def notes(parallel: Parallel) -> list[str]:
    lines = [
        "efficiency = N-way throughput / (N x 1-way throughput), both steps timed interleaved in the same job: "
        "a figure of this job, not a verdict between runs; flagged where a step it divides was flagged or disturbed",
        f"straggler: a rank computing more than {STRAGGLER_RATIO:g}x the median of the other ranks, in every "
        "sample (read on the host from every rank's compute samples)",
        "compute: the step with communication off on each rank (the slowest shown); exposed comm = step - compute; "
        "all-reduce: one flat buffer of the gradients' bytes (bus GB/s, the nccl-tests definition); grad all-reduce: "
        "the gradients as the framework reduces them; overlap: the share of that the step did not pay",
    ]
    for f in parallel.figures:
        if f.efficiency_flag:
            lines.append(f"{f.framework} efficiency {f.efficiency_flag}: {f.efficiency_why}")
        if f.over_peak:
            lines.append(f"{f.framework} all-reduce: bus bandwidth above the link's peak is a measurement bug")
        lines += [f"{f.framework} {note}" for note in f.notes]
    lines += [f"{fw}: an ok data-parallel job with no parallel block in its result" for fw in parallel.missing]
    return lines


def parallel_section(judged: Assessment, tablefmt: str = "simple") -> list[str]:
    """The Data-parallel section's lines for `render` (table.py); [] for a run without a data-parallel job."""
    parallel = judged.parallel
    if parallel is None:
        return []
    parts = section_title(HEADING, tablefmt)
    if parallel.figures:
        parts.append(escape.table(figure_rows(parallel), FIGURE_HEADERS, tablefmt))
    for f in parallel.figures:
        shown = len(shown_ranks(f))
        cut = f" ({shown} of {len(f.ranks)} shown, every rank in the JSON export)" if shown < len(f.ranks) else ""
        parts += section_title(f"{f.framework}: ranks{cut}", tablefmt)
        parts.append(escape.table(rank_rows(f), RANK_HEADERS, tablefmt))
    if parallel.gate:
        frameworks = [fw for fw in judged.run.results if any(fw in row.passed for row in parallel.gate)]
        headers, rows = gate_table(parallel, frameworks)
        parts += section_title("data-parallel gate: the 1-way step's checks against the N-way step's", tablefmt)
        parts.append(escape.table(rows, headers, tablefmt))
    return parts + note_lines(notes(parallel), tablefmt)
