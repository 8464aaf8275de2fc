"""The run page's Inference section: throughput against batch size drawn as a line per framework,
the batch-1 latency's percentiles with their order-statistic intervals, and for generation runs the
time to first token and the decode rate.

Everything is read off `Assessment.inference` (judge/inference.py), judged once; the cells are
formatted by report/inference_text.py's helpers, so the site and the terminal print the same
numbers. `throughput_data` is what site.js draws, embedded as JSON (every string from a run file
made inert, every number finite); `section` is the markup, all of it text placed through page.py.
A point a guard keeps out of ratios (`Point.excluded`) is drawn as the other charts draw a flagged
number: in its framework's colour, ringed in red, in a series of its own whose legend says FLAGGED.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.judge.assessment import Assessment
from harness.judge.inference import Figures, InferenceJudgement
from harness.publish.page import Markup, join, lines, table, tag
from harness.report import palette
from harness.report.inference_text import GENERATION_HEADERS, LATENCY_HEADERS, rate_text, tail_cell
from harness.report.pictures import wide
from harness.text.escape import plain
from harness.text.numbers import fmt_share, fmt_time
from suites.contract.inference import SATURATION_SHARE

CHART_ID = "chart-throughput"
FLAGGED_POINT = "FLAGGED (not a normal point)"


@dataclass(frozen=True)
class InferencePictures:
    suite: str
    judgement: InferenceJudgement

    @property
    def swept(self) -> list[Figures]:
        """The frameworks with a throughput sweep (a generation run has none)."""
        return [f for f in self.judgement.figures if f.sweep]


def inference_pictures(judged: Assessment) -> InferencePictures | None:
    """None for a run without an inference job."""
    if judged.inference is None:
        return None
    return InferencePictures(plain(judged.run.summary.get("suite")), judged.inference)


def finite(value: float | None) -> float | None:
    """A number JSON can hold (a quotient of two huge declared counts may not be)."""
    return value if value is not None and math.isfinite(value) else None


def words(items: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c` (items already inert)."""
    if len(items) < 2:
        return items[0] if items else "nothing"
    return ", ".join(items[:-1]) + " and " + items[-1]


def figure(chart_id: str, alt: str, read: str, extra: Markup = Markup("")) -> Markup:
    """A chart's figure: the container site.js draws into, what it shows (aria-label), how to read it."""
    chart = tag("div", "", id=chart_id, class_="chart picture", role="img", aria_label=alt)
    return tag("figure", join([chart, extra, tag("figcaption", read)]), class_="picture")


def rate_unit(figures: Sequence[Figures]) -> str:
    """`images/s`: the frameworks' common unit per second, `rows/s` where they differ."""
    units = {f.unit for f in figures}
    return f"{plain(units.pop()) if len(units) == 1 else 'rows'}/s"


# ---------------------------------------------------------------------------------------------
# The throughput chart


def _series(f: Figures) -> dict[str, Any]:
    fw = plain(f.framework)
    return {
        "framework": fw,
        "label": fw,
        "flagged_label": f"{fw}: {FLAGGED_POINT}",
        "colour": palette.colour(f.framework),
        "unit": f"{plain(f.unit)}/s",
        "batches": [p.batch for p in f.sweep],
        "rates": [finite(p.rate) for p in f.sweep],
        "low": [finite(p.low) for p in f.sweep],
        "high": [finite(p.high) for p in f.sweep],
        "flags": [plain(p.excluded) if p.excluded is not None else None for p in f.sweep],
        "saturation": f.saturation,
        "saturation_label": f"{fw} saturates at batch {f.saturation}" if f.saturation is not None else None,
        "stopped": plain(f.stopped) if f.stopped else None,
    }


def throughput_data(pictures: InferencePictures) -> dict[str, Any] | None:
    """The chart's spec for site.js; None when no framework swept the batch size."""
    swept = pictures.swept
    if not swept:
        return None
    unit = rate_unit(swept)
    rates = [p.rate for f in swept for p in f.sweep]
    log_y = wide(rates)
    return {
        "id": CHART_ID,
        "title": f"{pictures.suite}: throughput against batch size",
        "x": "batch size (log scale, base 2)",
        "y": f"{unit}, median{' (log scale)' if log_y else ''}",
        "unit": unit,
        "log_y": log_y,
        "series": [_series(f) for f in swept],
    }


def _throughput_alt(swept: Sequence[Figures]) -> str:
    unit = rate_unit(swept)
    alt = f"Throughput ({unit}, median) against batch size for {words([plain(f.framework) for f in swept])}"
    batches = sorted({p.batch for f in swept for p in f.sweep})
    alt += f"; batch sizes {', '.join(str(b) for b in batches)}"
    saturated = [f"{plain(f.framework)} at batch {f.saturation}" for f in swept if f.saturation is not None]
    if saturated:
        alt += f"; saturates: {words(saturated)}"
    flagged = [
        f"{plain(f.framework)} batch {p.batch} ({plain(p.excluded)})" for f in swept for p in f.sweep if p.excluded
    ]
    if flagged:
        alt += f"; FLAGGED: {words(flagged)}"
    return alt


def _throughput_notes(swept: Sequence[Figures]) -> list[str]:
    notes = []
    for f in swept:
        fw = plain(f.framework)
        if f.stopped:
            notes.append(f"{fw}: the sweep stopped early at {plain(f.stopped)}")
        if f.saturation is None:
            notes.append(f"{fw}: no saturation batch: every point of its sweep is FLAGGED")
        flagged = [f"batch {p.batch} ({plain(p.excluded)})" for p in f.sweep if p.excluded]
        if flagged:
            notes.append(f"{fw} FLAGGED: {', '.join(flagged)}")
    return notes


def _throughput_figure(swept: Sequence[Figures]) -> Markup:
    read = (
        f"Each line is one framework: the median {rate_unit(swept)} of a call at each batch size (x, logarithmic), "
        "whiskers spanning the interquartile range of the calls. A line that flattens has saturated the device: "
        f"the dashed vertical line in a framework's colour is its saturation batch, the smallest batch reaching "
        f"{fmt_share(SATURATION_SHARE)} of its best throughput (judged on its unflagged points only)."
    )
    if any(p.excluded for f in swept for p in f.sweep):
        read += (
            " A point ringed in red (in its framework's colour, joined by a dashed line) is FLAGGED: a guard keeps "
            "it out of comparisons, and the words under the chart say why."
        )
    return figure(CHART_ID, _throughput_alt(swept), read, lines(_throughput_notes(swept), class_="flags"))


# ---------------------------------------------------------------------------------------------
# The tables


def _latency_table(figures: Sequence[Figures], level: float, table_id: str) -> Markup:
    rows, classes = [], []
    for f in figures:
        processes = f" ({f.processes} processes)" if f.processes > 1 else ""
        cold = "-" if f.cold_s is None else fmt_time(f.cold_s)
        flag = f"FLAGGED: {plain(f.latency_excluded)}" if f.latency_excluded else ""
        rows.append(
            [plain(f.framework), f"{f.requests}{processes}", cold, *(tail_cell(t, level) for t in f.tails), flag]
        )
        classes.append("flagged" if f.latency_excluded else "")
    return table([*LATENCY_HEADERS, "flags"], rows, classes, class_="data inference", id=table_id)


def _generation_table(figures: Sequence[Figures]) -> Markup:
    rows, classes = [], []
    for f in figures:
        g = f.generation
        if g is None:
            continue
        flags = []
        if g.excluded:
            flags.append(f"time to first token FLAGGED: {plain(g.excluded)}")
        if f.latency_excluded:
            flags.append(f"decode FLAGGED: {plain(f.latency_excluded)}")
        cold = "-" if g.ttft_cold_s is None else fmt_time(g.ttft_cold_s)
        rows.append(
            [
                plain(f.framework),
                f"{g.batch} x {g.prompt_len}",
                str(g.new_tokens),
                fmt_time(g.ttft_s),
                cold,
                rate_text(g.tokens_per_s),
                "; ".join(flags),
            ]
        )
        classes.append("flagged" if flags else "")
    return table([*GENERATION_HEADERS, "flags"], rows, classes, class_="data inference", id="inference-generation")


def _latency_read(judgement: InferenceJudgement) -> str:
    read = (
        "p50, p90 and p99 are linear between order statistics of the timed requests; the [interval] after each is "
        f"the pair of order statistics that holds the true percentile with {fmt_share(judgement.level)} probability "
        "whatever the latency's distribution, and where the requests are too few for that, the share they really "
        "cover is printed inside the brackets. The max has no interval. Cold is the first request after load "
        "(trace, compile, first allocation), kept apart from the timed ones."
    )
    flagged = any(f.latency_excluded or (f.generation and f.generation.excluded) for f in judgement.figures)
    if flagged:
        read += " A row marked in red is FLAGGED: its flags column says why, and its numbers are not comparable."
    return read


def section(pictures: InferencePictures) -> Markup:
    """The Inference section's content (its heading is run_charts.py's)."""
    judgement = pictures.judgement
    parts: list[Markup] = []
    swept = pictures.swept
    if swept:
        parts.append(_throughput_figure(swept))
    generated = [f for f in judgement.figures if f.generation is not None]
    if generated:
        parts += [
            tag("h3", "Generation (greedy, KV cache)"),
            _generation_table(generated),
            tag(
                "p",
                "Time to first token is the prompt's prefill (median; cold: its first call, with compilation); "
                "decode tokens/s is the median rate of the timed decode steps.",
                class_="axis",
            ),
        ]
    for heading, mode, table_id in (
        ("Latency of single requests at batch 1", "infer", "inference-latency"),
        ("Latency per decode step", "generate", "inference-decode"),
    ):
        chosen = [f for f in judgement.figures if (f.mode == "infer") == (mode == "infer")]
        if chosen:
            parts += [tag("h3", heading), _latency_table(chosen, judgement.level, table_id)]
    parts.append(tag("p", _latency_read(judgement), class_="axis"))
    return join(parts)
