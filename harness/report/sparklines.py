"""`harness show RUN --plot`: the pictures of report/pictures.py as text, for people in a shell.

One sparkline per (metric, framework): every steady sample in order on a scale shared by the
frameworks of that metric (log when it spans more than 30x), `|` between rounds, a marked sample
(escaped, contended, throttled) drawn as its mark's letter instead of a bar, and a flagged metric
named FLAGGED. Training runs add the test accuracy (a language model: the validation loss) and
train loss per epoch of each process.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from harness.judge.assessment import Assessment
from harness.report.pictures import LearningCurves, Timeline, TimelineSeries, learning_curves, timelines, wide
from harness.text.escape import plain
from harness.text.numbers import fmt_loss, fmt_time

BARS = "▁▂▃▄▅▆▇█"
ROUND_EDGE = "|"
MAX_WIDTH = 64  # characters of samples per line; more samples are binned (each bin shows its median)
MAX_CURVE_LINES = 8  # processes printed per framework; the PNG and the site draw every one
MARK_LETTERS = {"escaped": "E", "contended": "C", "throttled": "T"}


def bar(value: float, low: float, high: float, log: bool) -> str:
    v = math.log(value) if log else value
    if high <= low:
        return BARS[len(BARS) // 2]
    share = min(max((v - low) / (high - low), 0.0), 1.0)
    return BARS[min(int(share * len(BARS)), len(BARS) - 1)]


def _bins(size: int, count: int) -> list[range]:
    """`size` samples in at most `count` consecutive bins of near-equal length."""
    count = min(size, count)
    edges = [round(i * size / count) for i in range(count + 1)] if count else [0]
    return [range(a, b) for a, b in zip(edges, edges[1:], strict=False) if b > a]


def line(series: TimelineSeries, low: float, high: float, log: bool) -> str:
    width = max(4, MAX_WIDTH // max(len(series.round_sizes), 1))
    parts, start = [], 0
    for size in series.round_sizes:
        chars = []
        for span in _bins(size, width):
            indices = [start + i for i in span]
            marks = [r for i in indices for r in series.marks.get(i, ())]
            if marks:
                chars.append(MARK_LETTERS.get(marks[0], "!"))
            else:
                chars.append(bar(statistics.median(series.samples[i] for i in indices), low, high, log))
        parts.append("".join(chars))
        start += size
    return ROUND_EDGE.join(parts)


def timeline_lines(timeline: Timeline) -> list[str]:
    values = [v for s in timeline.series for v in s.samples]
    log = wide(values)
    low, high = (math.log(min(values)), math.log(max(values))) if log else (min(values), max(values))
    scale = "log scale" if log else "linear scale"
    out = [f"{plain(timeline.metric)} ({scale}, {fmt_time(min(values))} .. {fmt_time(max(values))})"]
    width = max(len(plain(s.framework)) for s in timeline.series)
    for s in timeline.series:
        binned = any(size > max(4, MAX_WIDTH // len(s.round_sizes)) for size in s.round_sizes)
        facts = [f"median {fmt_time(statistics.median(s.samples))}", f"n={len(s.samples)}"]
        if len(s.round_sizes) > 1:
            facts.append(f"{len(s.round_sizes)} rounds")
        if binned:
            facts.append("binned: each char the median of its samples")
        if s.marks:
            facts.append(f"{len(s.marks)} marked")
        if s.first_calls:
            facts.append("first call " + ", ".join(fmt_time(v) for v in s.first_calls))
        if s.flags:
            facts.append("FLAGGED: " + "; ".join(plain(f) for f in s.flags))
        out.append(f"  {plain(s.framework):<{width}}  {line(s, low, high, log)}  {', '.join(facts)}")
    for reason, meaning in timeline.reasons.items():
        out.append(f"  {MARK_LETTERS.get(reason, '!')} = {plain(reason)}: {plain(meaning)}")
    return out


def _spark(values: Sequence[float], low: float, high: float) -> str:
    """One character per value, or per bin of values (their median) beyond MAX_WIDTH."""
    return "".join(
        bar(statistics.median(values[i] for i in span), low, high, False) for span in _bins(len(values), MAX_WIDTH)
    )


def curve_lines(curves: LearningCurves) -> list[str]:
    target = f", target {curves.measure.show(curves.target)}" if curves.target is not None else ""
    out = [f"learning curves (per epoch, one line per process{target})"]
    evaluated = [v for c in curves.curves for p in c.points if (v := curves.evaluated(p)) is not None]
    losses = [p.train_loss for c in curves.curves for p in c.points]
    loss_range = (min(losses), max(losses))  # one scale for every line, worked out once
    evaluated_range = (min(evaluated), max(evaluated)) if evaluated else (0.0, 100.0)
    width = max(len(plain(c.framework)) + 6 for c in curves.curves)
    shown: dict[str, int] = {}
    for c in curves.curves:
        shown[c.framework] = shown.get(c.framework, 0) + 1
        if shown[c.framework] > MAX_CURVE_LINES:
            continue
        name = f"{plain(c.framework)} #{c.process}"
        tested = [v for p in c.points if (v := curves.evaluated(p)) is not None]
        text = f"  {name:<{width}}  loss {_spark([p.train_loss for p in c.points], *loss_range)}"
        if tested and curves.measure.lower_is_better:
            text += f"  val loss {_spark(tested, *evaluated_range)} {fmt_loss(tested[-1])}"
        elif tested:
            text += f"  test accuracy {_spark(tested, *evaluated_range)} {tested[-1]:.2f} %"
        text += f"  ({len(c.points)} epochs, {c.points[-1].seconds:.3g} s of training)"
        if curves.flags.get(c.framework):
            text += "  FLAGGED: " + "; ".join(plain(f) for f in curves.flags[c.framework])
        out.append(text)
    for fw, count in shown.items():
        if count > MAX_CURVE_LINES:
            out.append(
                f"  {plain(fw)}: {count - MAX_CURVE_LINES} more rounds not printed (harness report draws every one)"
            )
    return out


def render_plots(judged: Assessment) -> str:
    blocks: list[list[str]] = []
    curves = learning_curves(judged)
    if curves is not None:
        blocks.append(curve_lines(curves))
    found = timelines(judged)
    if found:
        head = ["samples in order (first call apart; | = a new round)"]
        blocks.append(head + [text for t in found for text in timeline_lines(t)])
    if not blocks:
        return "no samples to plot: no job of this run finished with numbers"
    return "\n\n".join("\n".join(b) for b in blocks)
