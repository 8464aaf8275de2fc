"""The run page's pictures: learning curves, a roofline, an inference run's throughput sweep and
latency tails (inference_charts.py) and a sample timeline per time metric.

The points are report/pictures.py's (the PNG figures draw the same objects) and the colours
report/palette.py's, so a framework looks the same on the site and in the PNGs. `chart_data` is
what site.js draws, embedded as JSON (text/html.data_element): every string from a run file made inert, every
number finite. `figures` is the markup around each chart: its container (role="img" with an
aria-label saying what it shows), a caption saying how to read it, and what is not drawn (the
first calls, metrics left off the roofline) in words; all of it text placed through page.py.
A flagged framework or (framework, metric) keeps its own colour, is drawn dashed or ringed in the
flag colour, and says FLAGGED: the flag is a mark on the framework, never its replacement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.judge.assessment import Assessment
from harness.publish import inference_charts
from harness.publish.inference_charts import InferencePictures, figure, finite, inference_pictures, words
from harness.publish.page import Markup, join, lines, tag
from harness.report import palette
from harness.report.pictures import (
    Band,
    Curve,
    Key,
    LearningCurves,
    Measure,
    Roofline,
    Timeline,
    TimelineSeries,
    learning_curves,
    roofline,
    timelines,
    wide,
)
from harness.text.escape import plain
from harness.text.numbers import fmt_time, time_unit

TRAINING_TIME = "cumulative training time (s), evaluations excluded"
# Thin lines drawn per framework: the browser places every line on the union of all lines' x
# values, so a thousand rounds would be a thousand columns of that length; the median and its
# band still cover every round, and the PNG draws every line.
MAX_ROUND_LINES = 20


def _undrawn_words(curves: LearningCurves) -> str:
    total = Counter(c.framework for c in curves.curves)
    left = [f"{plain(fw)} {n - MAX_ROUND_LINES}" for fw, n in total.items() if n > MAX_ROUND_LINES]
    if not left:
        return ""
    return (
        f" Only the first {MAX_ROUND_LINES} rounds of a framework are drawn as thin lines (not drawn: "
        + ", ".join(left)
        + "); the median and the band cover every round, and harness report draws every line."
    )


@dataclass(frozen=True)
class RunPictures:
    curves: LearningCurves | None
    roofline: Roofline | None
    timelines: list[Timeline]
    inference: InferencePictures | None = None  # inference_charts.py: throughput sweep, latency tails

    @property
    def empty(self) -> bool:
        return self.curves is None and self.roofline is None and not self.timelines and self.inference is None


def run_pictures(judged: Assessment, flags: Mapping[Key, Sequence[str]]) -> RunPictures:
    """`flags`: the run's FlagBook flags, so the charts flag exactly what the page's Flags list names."""
    return RunPictures(
        learning_curves(judged), roofline(judged, flags), timelines(judged, flags), inference_pictures(judged)
    )


def _words(items: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`, each made inert."""
    return words([plain(i) for i in items])


def _flagged(name: str, flags: Sequence[str]) -> str:
    return f"{name} (FLAGGED: {'; '.join(plain(f) for f in flags)})" if flags else name


def _count(n: int, what: str) -> str:
    """`1 sample`, `2 samples`, `1 round boundary`, `3 round boundaries`."""
    if n == 1:
        return f"1 {what}"
    return f"{n} {what[:-1]}ies" if what.endswith("y") else f"{n} {what}s"


def target_label(target: float, measure: Measure) -> str:
    """`target 75 %`, `target val loss 1.80`."""
    return f"target {measure.show(target)}"


# ---------------------------------------------------------------------------------------------
# Learning curves


def _curve_data(curves: LearningCurves, curve: Curve, banded: bool) -> dict[str, Any]:
    fw = plain(curve.framework)
    flags = curves.flags.get(curve.framework, ())
    name = f"{fw} round {curve.process}" if banded else fw
    return {
        "framework": fw,
        "process": curve.process,
        "label": _flagged(name, flags),
        "colour": palette.colour(curve.framework),
        "flagged": bool(flags),
        "thin": banded,
        "seconds": [finite(p.seconds) for p in curve.points],
        "loss": [finite(p.train_loss) for p in curve.points],
        "accuracy": [finite(p.test_accuracy) for p in curve.points],
        "val_loss": [finite(p.val_loss) for p in curve.points],
    }


def _spread(value: tuple[float, float, float] | None) -> list[float | None] | None:
    return None if value is None else [finite(v) for v in value]


def _band_data(curves: LearningCurves, band: Band) -> dict[str, Any]:
    fw = plain(band.framework)
    flags = curves.flags.get(band.framework, ())
    return {
        "framework": fw,
        "rounds": band.rounds,
        "label": f"{_flagged(fw, flags)}: median of {band.rounds} rounds (band: min-max)",
        "colour": palette.colour(band.framework),
        "flagged": bool(flags),
        "seconds": [finite(s) for s in band.seconds],
        "loss": [_spread(v) for v in band.loss],
        "accuracy": [_spread(v) for v in band.accuracy],
        "val_loss": [_spread(v) for v in band.val_loss],
    }


def _learning_data(curves: LearningCurves) -> dict[str, Any]:
    banded = {b.framework for b in curves.bands}
    # One framework's first epoch (with its compilation) can take 50x another's whole run: a log
    # time axis keeps both curves readable.
    log = wide([p.seconds for c in curves.curves for p in c.points] + [s for b in curves.bands for s in b.seconds])
    x = TRAINING_TIME.replace("(s)", "(s, log scale)") if log else TRAINING_TIME
    measure = curves.measure
    return {
        "log_x": log,
        "target": finite(curves.target),
        "target_label": target_label(curves.target, measure) if curves.target is not None else None,
        "target_field": measure.field,  # the chart the target line is drawn on
        # `process` numbers each framework's rounds from 1: the first MAX_ROUND_LINES of each are drawn.
        "curves": [
            _curve_data(curves, c, c.framework in banded) for c in curves.curves if c.process <= MAX_ROUND_LINES
        ],
        "bands": [_band_data(curves, b) for b in curves.bands],
        "charts": [
            {
                "id": f"chart-{field}",
                "field": field,
                "title": f"{plain(curves.suite)}: {what} against training time",
                "x": x,
                "y": y,
                "unit": unit,
            }
            for field, what, y, unit in (
                (measure.field, measure.name, measure.axis, measure.unit),
                ("loss", "train loss", "mean train loss of the epoch", ""),
            )
        ],
    }


def _rounds_words(curves: LearningCurves) -> str:
    if not curves.bands:
        return ""
    return "; " + ", ".join(
        f"{plain(b.framework)} over {b.rounds} rounds (median and min-max band)" for b in curves.bands
    )


def _learning_figures(curves: LearningCurves) -> Markup:
    names = _words(curves.frameworks)
    measure = curves.measure
    target = f"; {target_label(curves.target, measure)}" if curves.target is not None else ""
    tested = any(curves.evaluated(p) is not None for c in curves.curves for p in c.points)
    rounds = _rounds_words(curves)
    flags = "".join(
        f"; {plain(name)} FLAGGED ({'; '.join(plain(f) for f in why)})" for name, why in curves.flags.items()
    )
    lines_read = (
        "Each line is one training process, a point at the end of each epoch; x is the training time so far "
        "(epoch 1 with its compilation, evaluations left out), so a line further left got there sooner."
    )
    if curves.bands:
        lines_read += (
            " With rounds, the thick line is the median over the rounds at each epoch, the shaded band spans the "
            "lowest to the highest round, and the thin lines are the single rounds."
        ) + _undrawn_words(curves)
    if curves.flags:
        lines_read += (
            " Dashed lines whose points are ringed in red are FLAGGED frameworks (each in its own colour): "
            "not comparable with the others."
        )
    evaluated_read = lines_read
    if measure.lower_is_better:
        evaluated_read += " Lower is better: the validation loss falls as the model learns."
    if curves.target is not None:
        evaluated_read += (
            f" The dashed grey line is the {target_label(curves.target, measure)}: where a line first crosses it, "
            "that framework reached the target."
        )
    if not tested:
        evaluated_read += (
            " The validation split was evaluated only after the last epoch."
            if measure.lower_is_better
            else " The test split was evaluated only after the last epoch (--param curve=true draws this curve)."
        )
    return join(
        [
            figure(
                f"chart-{measure.field}",
                f"{measure.name.capitalize()} against cumulative training time for {names}{rounds}{target}{flags}",
                evaluated_read,
            ),
            figure("chart-loss", f"Train loss against cumulative training time for {names}{rounds}{flags}", lines_read),
        ]
    )


# ---------------------------------------------------------------------------------------------
# Roofline


def _roofline_data(roof: Roofline) -> dict[str, Any]:
    points = []
    for p in roof.points:
        fw, metric = plain(p.framework), plain(p.metric)
        flags = [plain(f) for f in p.flags]
        points.append(
            {
                "framework": fw,
                "metric": metric,
                "dtype": plain(p.dtype) if p.dtype is not None else None,
                "flops": finite(p.flops),
                "bytes": finite(p.bytes),
                "intensity": finite(p.intensity),
                "rate": finite(p.rate),
                "flags": flags,
                "colour": palette.colour(p.framework),
                "label": f"{fw} {metric}: FLAGGED (not a normal point)" if flags else f"{fw} {metric}",
            }
        )
    roofs = [
        {
            "kind": r.kind,
            "dtype": plain(r.dtype) if r.dtype is not None else None,
            "flops": finite(r.flops),
            "bandwidth": finite(r.bandwidth),
            "label": plain(r.label),
            "dashed": r.kind != "measured",
        }
        for r in roof.roofs
    ]
    return {
        "id": "chart-roofline",
        "title": f"{plain(roof.suite)}: roofline (median of the steady samples)",
        "x": "arithmetic intensity (FLOP per byte)",
        "y": "achieved GFLOP/s",
        "points": points,
        "roofs": roofs,
    }


def _roofline_figure(roof: Roofline) -> Markup:
    measured = [p for p in roof.points if not p.flags]
    flagged = [p for p in roof.points if p.flags]
    shown = _words([f"{p.framework} {p.metric}" for p in measured]) if measured else "no unflagged measurement"
    alt = f"Roofline: achieved GFLOP/s against arithmetic intensity (FLOP per byte) for {shown}"
    if flagged:
        alt += "; FLAGGED: " + _words([f"{p.framework} {p.metric}" for p in flagged])
    if roof.roofs:
        alt += f"; under {len(roof.roofs)} roofs ({'; '.join(plain(r.label) for r in roof.roofs)})"
    else:
        alt += "; no roof known for this machine"
    read = (
        "Each point is one framework's metric: the FLOPs it declares per byte it moves (x) and the FLOP/s it "
        "achieved at the median (y), both axes logarithmic. Each roof is min(peak FLOP/s, bandwidth x intensity): "
        "solid ones measured on this machine (harness calibrate), dashed ones the datasheet's. A point far under "
        "its roof leaves speed unused; a point above a measured roof is a measurement to doubt. A red ring around "
        "a point (in its framework's colour) marks a FLAGGED number, never a normal one."
    )
    extra = Markup("")
    if roof.left_out:
        extra = join([tag("p", "Not on the roofline:", class_="left-out"), lines([plain(t) for t in roof.left_out])])
    return figure("chart-roofline", alt, read, extra)


# ---------------------------------------------------------------------------------------------
# Sample timelines


def _series_data(timeline: Timeline, series: TimelineSeries) -> dict[str, Any]:
    fw = plain(series.framework)
    flags = [plain(f) for f in series.flags]
    marked = []
    for reason in timeline.reasons:
        indices = [i for i, reasons in series.marks.items() if reason in reasons]
        if indices:
            text = plain(timeline.reasons[reason])
            marked.append(
                {"reason": plain(reason), "label": f"{fw} marked {plain(reason)}: {text}", "indices": indices}
            )
    return {
        "framework": fw,
        "label": _flagged(fw, flags),
        "colour": palette.colour(series.framework),
        "flagged": bool(flags),
        "samples": [finite(s) for s in series.samples],
        "round_sizes": list(series.round_sizes),
        "first_calls": [finite(f) for f in series.first_calls],
        "marks": [[i, [plain(r) for r in reasons]] for i, reasons in series.marks.items()],
        "marked": marked,
        "flags": flags,
    }


def _timeline_data(number: int, timeline: Timeline) -> dict[str, Any]:
    samples = sorted(s for series in timeline.series for s in series.samples)
    scale, unit = time_unit(samples[len(samples) // 2] if samples else 1.0)
    metric = plain(timeline.metric)
    log = wide(samples)  # as the PNG timeline does
    return {
        "id": f"chart-timeline-{number}",
        "metric": metric,
        "unit": plain(timeline.unit),
        "scale": scale,
        "log": log,
        "title": f"{metric}: every steady sample in order",
        "x": "sample number (in the order taken; rounds one after another)",
        "y": f"time per call ({unit}{', log scale' if log else ''})",
        "value_unit": unit,
        "series": [_series_data(timeline, s) for s in timeline.series],
        "reasons": {plain(k): plain(v) for k, v in timeline.reasons.items()},
    }


def first_calls_line(timeline: Timeline) -> str:
    """`first calls: jax 356 ms (round 1), 340 ms (round 2); numpy 1.2 ms`."""
    parts = []
    for s in timeline.series:
        if len(s.first_calls) > 1:
            calls = ", ".join(f"{fmt_time(v)} (round {k + 1})" for k, v in enumerate(s.first_calls))
        else:
            calls = fmt_time(s.first_calls[0]) if s.first_calls else "not recorded"
        parts.append(f"{plain(s.framework)} {calls}")
    return "first calls: " + "; ".join(parts)


def _timeline_figure(number: int, timeline: Timeline) -> Markup:
    metric = plain(timeline.metric)
    rounds = max((len(s.round_sizes) for s in timeline.series), default=1)
    alt = f"Time of every steady sample of {metric} in the order taken, for {_words([s.framework for s in timeline.series])}"
    if rounds > 1:
        alt += f"; {rounds} rounds, {_count(rounds - 1, 'round boundary')}"
    for reason in timeline.reasons:
        count = sum(1 for s in timeline.series for reasons in s.marks.values() if reason in reasons)
        alt += f"; {_count(count, 'sample')} marked {plain(reason)}"
    flagged = [s.framework for s in timeline.series if s.flags]
    if flagged:
        alt += f"; FLAGGED: {_words(flagged)}"
    read = (
        "Every steady sample in the order it was taken, one line per framework; a drift, a step or a few high "
        "points mean the samples are not interchangeable draws, and the median hides it."
    )
    if rounds > 1:
        read += (
            f" Dashed vertical lines mark the {_count(rounds - 1, 'round boundary')}: each round is a process of "
            "its own, so a step there is a difference between processes."
        )
    if timeline.reasons:
        read += (
            " Black rings are samples the job marked: "
            + "; ".join(f"{plain(r)}: {plain(text)}" for r, text in timeline.reasons.items())
            + "."
        )
    if flagged:
        read += (
            " Dashed lines whose samples are ringed in red are FLAGGED (each in its framework's colour): the "
            "metric's median is not a normal number (see Flags)."
        )
    read += " The first calls (tracing, compilation and one run) are left off the chart, listed beside it."
    beside = tag("p", first_calls_line(timeline), class_="first-calls")
    return figure(f"chart-timeline-{number}", alt, read, beside)


# ---------------------------------------------------------------------------------------------


def chart_data(pictures: RunPictures) -> dict[str, Any]:
    """What site.js draws on a run page (text/html.data_element writes it into the page)."""
    return {
        "pictures": {
            "flag_colour": palette.FLAG_COLOUR,
            "mark_colour": palette.MARK_COLOUR,
            "learning": _learning_data(pictures.curves) if pictures.curves is not None else None,
            "roofline": _roofline_data(pictures.roofline) if pictures.roofline is not None else None,
            "timelines": [_timeline_data(i, t) for i, t in enumerate(pictures.timelines)],
            "inference": inference_charts.throughput_data(pictures.inference) if pictures.inference else None,
        }
    }


def figures(pictures: RunPictures) -> Markup:
    """The run page's picture sections, in the order people look at them."""
    parts: list[Markup] = []

    def section(section_id: str, title: str, content: Markup) -> None:
        parts.append(tag("section", join([tag("h2", title), content]), id=section_id, class_="pictures"))

    if pictures.inference is not None:
        section("inference", "Inference", inference_charts.section(pictures.inference))
    if pictures.curves is not None:
        section("learning-curves", "Learning curves", _learning_figures(pictures.curves))
    if pictures.roofline is not None:
        section("roofline", "Roofline", _roofline_figure(pictures.roofline))
    if pictures.timelines:
        timeline_figures = join(_timeline_figure(i, t) for i, t in enumerate(pictures.timelines))
        section("timelines", "Sample timelines", timeline_figures)
    return join(parts)
