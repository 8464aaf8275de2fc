"""What the three pictures of a run show, worked out once from the validated result files.

- learning curves (training suites): test accuracy (or a language model's validation loss) and
  train loss against cumulative training time, evaluations excluded, one line per framework and
  process; with rounds, a median line and a min-max band per framework;
- a roofline (any run whose time metrics declare both FLOPs and bytes): each (framework, metric)
  at its arithmetic intensity and achieved FLOP/s, under the ceilings measured on this machine
  (`harness calibrate`) and the datasheet peaks;
- a sample timeline per time metric: every steady sample in order, per framework and process,
  the first calls apart, and samples the job marked (suites/contract/marks.py) told apart.

The PNG figures (report/picture_figures.py), the terminal sparklines (report/sparklines.py) and
the site (publish/run_page.py) all draw these objects, so the three media show the same points.
A flagged (framework, metric) keeps its flags here, and every medium draws it as flagged.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.core.result_types import Metric, Result
from harness.judge.assessment import Assessment
from harness.store.peaks import Peak, achievable_key, bandwidth_for, peak_for
from harness.store.run_folder import Run
from harness.text.numbers import fmt_giga, fmt_loss, fmt_percent
from suites.contract.marks import MARKS

Key = tuple[str, str]  # (framework, metric)

# Values spanning more than this factor get a log axis, in every medium (the PNGs, the site, the
# sparklines): on a linear one, a framework 30x faster than another is a flat line at zero.
LOG_SPAN = 30.0


def wide(values: Sequence[float]) -> bool:
    """Every value positive and the largest more than LOG_SPAN times the smallest."""
    positive = [v for v in values if v > 0]
    return bool(positive) and len(positive) == len(values) and max(positive) / min(positive) > LOG_SPAN


def flag_reasons(judged: Assessment) -> dict[Key, tuple[str, ...]]:
    """Why a (framework, metric) must not be drawn as a plain point: escaped, implausible, not comparable."""
    run = judged.run
    found: dict[Key, list[str]] = {}
    for key, why in judged.exclusions.items():
        found.setdefault(key, []).append(why)
    for fw, why in judged.not_comparable.items():
        result = run.results[fw]
        for metric in result["metrics"] if result["status"] == "ok" else []:
            found.setdefault((fw, metric["name"]), []).append(f"not comparable: {why}")
    return {key: tuple(reasons) for key, reasons in found.items()}


def _ok(run: Run) -> list[tuple[str, Result]]:
    return [(fw, r) for fw, r in run.results.items() if r["status"] == "ok"]


def _time_metrics(run: Run) -> list[tuple[str, Result, Metric]]:
    return [(fw, r, m) for fw, r in _ok(run) for m in r["metrics"] if m["kind"] == "time"]


# ---------------------------------------------------------------------------------------------
# Learning curves


@dataclass(frozen=True)
class Measure:
    """What a learning curve evaluates after each epoch, in the words every medium shows."""

    key: str  # the curve's field in a result (and CurvePoint's attribute)
    field: str  # Band's attribute, the site's chart field, the PNG's line ids
    target_key: str  # the field of training.target with the target in this measure
    name: str  # "test accuracy": titles and alt text
    axis: str  # the y axis
    unit: str  # after a number on the site's hover
    lower_is_better: bool

    def show(self, value: float) -> str:
        """`75 %`, `val loss 1.80`: a loss says what it is, having no unit to say it."""
        return f"val loss {fmt_loss(value)}" if self.lower_is_better else fmt_percent(value)


ACCURACY = Measure("test_accuracy", "accuracy", "accuracy", "test accuracy", "test accuracy (%)", " %", False)
# Language models (suites/gpt): an "epoch" there is an interval of optimizer steps.
VAL_LOSS = Measure("val_loss", "val_loss", "loss", "validation loss", "validation loss", "", True)


@dataclass(frozen=True)
class CurvePoint:
    epoch: int  # 1-based
    seconds: float  # training time of epochs 1..epoch (epoch 1's compilation in, evaluations out)
    train_loss: float
    test_accuracy: float | None  # percent; None where the test split was not evaluated after this epoch
    val_loss: float | None = None  # a language model's; None where not evaluated (or an accuracy curve)


@dataclass(frozen=True)
class Curve:
    framework: str
    process: int  # 1-based: the round that trained it
    points: tuple[CurvePoint, ...]
    measure: Measure = ACCURACY  # what its points evaluate (test_accuracy or val_loss)


@dataclass(frozen=True)
class Band:
    """Rounds of one framework at each epoch every round reached: the median line and the min-max band."""

    framework: str
    rounds: int
    epochs: tuple[int, ...]
    seconds: tuple[float, ...]  # median cumulative seconds at that epoch
    loss: tuple[tuple[float, float, float], ...]  # (min, median, max)
    accuracy: tuple[tuple[float, float, float] | None, ...]
    val_loss: tuple[tuple[float, float, float] | None, ...] = ()


@dataclass(frozen=True)
class LearningCurves:
    suite: str
    target: float | None  # the time-to-target target, in `measure` (percent, or a validation loss)
    curves: tuple[Curve, ...]
    bands: tuple[Band, ...]  # frameworks with more than one process
    flags: dict[str, tuple[str, ...]] = field(default_factory=dict)  # framework -> why not a plain line
    measure: Measure = ACCURACY  # what the evaluated panel draws

    @property
    def frameworks(self) -> list[str]:
        return list(dict.fromkeys(c.framework for c in self.curves))

    def evaluated(self, point: CurvePoint) -> float | None:
        """The point's value in `measure`: None where not evaluated (or evaluated in another measure)."""
        value: float | None = getattr(point, self.measure.key)
        return value

    def spread(self, band: Band) -> tuple[tuple[float, float, float] | None, ...]:
        """The band's (min, median, max) in `measure` at each epoch."""
        found: tuple[tuple[float, float, float] | None, ...] = getattr(band, self.measure.field)
        return found


def _curve(framework: str, process: int, doc: Mapping[str, Any]) -> Curve:
    seconds = list(itertools.accumulate(float(s) for s in doc["epoch_seconds"]))
    tests = list(doc.get("test_accuracy") or [])
    losses = list(doc.get("val_loss") or [])
    points = tuple(
        CurvePoint(
            i + 1,
            seconds[i],
            float(loss),
            float(tests[i]) if i < len(tests) else None,
            float(losses[i]) if i < len(losses) else None,
        )
        for i, loss in enumerate(doc["train_loss"])
    )
    return Curve(framework, process, points, VAL_LOSS if "val_loss" in doc else ACCURACY)


def _spread(values: Sequence[float]) -> tuple[float, float, float]:
    return (min(values), statistics.median(values), max(values))


def _band(framework: str, curves: Sequence[Curve]) -> Band:
    # Only the epochs every round reached: rounds that stopped at the target earlier would leave
    # later epochs to the slower rounds alone, and the median line would run back in time.
    shortest = min(len(c.points) for c in curves)
    epochs, seconds, loss, accuracy, val_loss = [], [], [], [], []
    for i in range(shortest):
        at = [c.points[i] for c in curves]
        epochs.append(i + 1)
        seconds.append(statistics.median(p.seconds for p in at))
        loss.append(_spread([p.train_loss for p in at]))
        tests = [p.test_accuracy for p in at if p.test_accuracy is not None]
        accuracy.append(_spread(tests) if tests else None)
        validated = [p.val_loss for p in at if p.val_loss is not None]
        val_loss.append(_spread(validated) if validated else None)
    return Band(framework, len(curves), tuple(epochs), tuple(seconds), tuple(loss), tuple(accuracy), tuple(val_loss))


def _target(result: Result, measure: Measure) -> float | None:
    target = (result.get("training") or {}).get("target")
    value = target.get(measure.target_key) if isinstance(target, dict) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def learning_curves(judged: Assessment) -> LearningCurves | None:
    """None when no job recorded a learning curve (not a training suite, or an older result)."""
    run = judged.run
    curves: list[Curve] = []
    for fw, result in _ok(run):
        docs = (result.get("training") or {}).get("curves") or []
        curves += [_curve(fw, i + 1, doc) for i, doc in enumerate(docs)]
    if not curves:
        return None
    # One suite's jobs evaluate one measure (schema.py holds each job to one); should frameworks
    # differ, validation loss is drawn and the others' evaluations are left off that panel.
    measure = VAL_LOSS if any(c.measure is VAL_LOSS for c in curves) else ACCURACY
    target = next((t for _, result in _ok(run) if (t := _target(result, measure)) is not None), None)
    by_fw: dict[str, list[Curve]] = {}
    for c in curves:
        by_fw.setdefault(c.framework, []).append(c)
    bands = tuple(_band(fw, found) for fw, found in by_fw.items() if len(found) > 1)
    flags: dict[str, tuple[str, ...]] = {
        fw: (f"not comparable: {why}",) for fw, why in judged.not_comparable.items() if fw in by_fw
    }
    return LearningCurves(str(run.summary.get("suite")), target, tuple(curves), bands, flags, measure)


# ---------------------------------------------------------------------------------------------
# Roofline


@dataclass(frozen=True)
class RooflinePoint:
    framework: str
    metric: str
    dtype: str | None
    flops: float  # per call
    bytes: float  # per call
    rate: float  # FLOP/s at the median
    flags: tuple[str, ...]

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


@dataclass(frozen=True)
class Roof:
    """min(compute, bandwidth x intensity): one ceiling, measured here or from the datasheet."""

    kind: str  # "measured" (harness calibrate on this machine) or "datasheet"
    dtype: str | None
    flops: float  # FLOP/s
    bandwidth: float | None  # bytes/s; None: no memory roof known
    label: str

    def at(self, intensity: float) -> float:
        return self.flops if self.bandwidth is None else min(self.flops, self.bandwidth * intensity)

    @property
    def ridge(self) -> float | None:
        """The intensity where the memory roof meets the compute roof."""
        return self.flops / self.bandwidth if self.bandwidth else None


@dataclass(frozen=True)
class Roofline:
    suite: str
    points: tuple[RooflinePoint, ...]
    roofs: tuple[Roof, ...]
    left_out: tuple[str, ...]  # time metrics without both counts, said in words


def _positive(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    return float(value) if ok else None


def _datasheet_roof(result: Result, dtype: str | None) -> Roof | None:
    peak: Peak | None = peak_for(result, dtype)
    if peak is None:
        return None
    memory = bandwidth_for(result)
    label = f"datasheet {dtype or 'peak'}: {fmt_giga(peak.value)} GFLOP/s"
    if memory is not None:
        label += f", {fmt_giga(memory.value)} GB/s ({'L1 bound' if memory.basis.startswith('L1') else 'memory'})"
    return Roof("datasheet", dtype, peak.value, memory.value if memory else None, label)


def roofline(judged: Assessment, flags: Mapping[Key, Sequence[str]] | None = None) -> Roofline | None:
    """None when no time metric declares both a FLOP and a byte count. `flags`: the flags to draw
    (default: `flag_reasons`); `judged`: the run's assessment, which holds the measured ceilings."""
    run = judged.run
    flags = flag_reasons(judged) if flags is None else flags
    points: list[RooflinePoint] = []
    left_out: list[str] = []
    sample_result: dict[str | None, Result] = {}
    for fw, result, metric in _time_metrics(run):
        flops, moved = _positive(metric.get("flops")), _positive(metric.get("bytes"))
        median = _positive(metric["stats"]["median"])
        if flops is None or moved is None or median is None:
            missing = [w for w, v in (("FLOP", flops), ("byte", moved)) if v is None]
            if missing and (flops or moved):
                left_out.append(f"{fw} {metric['name']}: no {' or '.join(missing)} count")
            continue
        if not (math.isfinite(flops / moved) and math.isfinite(flops / median)):
            # 1e150 FLOPs in 1e-300 s passes every per-field check and overflows here
            left_out.append(f"{fw} {metric['name']}: intensity or rate beyond what a number can hold")
            continue
        dtype = metric.get("dtype")
        sample_result.setdefault(dtype, result)
        flagged = tuple(flags.get((fw, metric["name"]), ()))
        points.append(RooflinePoint(fw, metric["name"], dtype, flops, moved, flops / median, flagged))
    if not points:
        return None
    roofs: list[Roof] = []
    ceilings = judged.ceilings
    for dtype, result in sample_result.items():
        # The ceiling of this dtype under the arithmetic the job measured: a TF32 run's roof is TF32's.
        key = achievable_key(result, dtype)
        measured = ceilings.flops(key) if ceilings else None
        if measured is not None and ceilings is not None:
            label = f"measured here {key}: {fmt_giga(measured)} GFLOP/s"
            if ceilings.bandwidth:
                label += f", {fmt_giga(ceilings.bandwidth)} GB/s (stream)"
            roofs.append(Roof("measured", dtype, measured, ceilings.bandwidth, label))
        sheet = _datasheet_roof(result, dtype)
        if sheet is not None:
            roofs.append(sheet)
    return Roofline(str(run.summary.get("suite")), tuple(points), tuple(roofs), tuple(left_out))


# ---------------------------------------------------------------------------------------------
# Sample timelines


@dataclass(frozen=True)
class TimelineSeries:
    framework: str
    samples: tuple[float, ...]  # every steady sample, in the order it was taken
    round_sizes: tuple[int, ...]  # samples per process, in order (one entry without rounds)
    first_calls: tuple[float, ...]  # one per process
    marks: dict[int, tuple[str, ...]]  # sample index -> mark reasons
    flags: tuple[str, ...]  # the metric's own flags (escaped, implausible, not comparable)

    def process_of(self, index: int) -> int:
        """1-based process (round) the sample at `index` came from."""
        edge = 0
        for k, size in enumerate(self.round_sizes):
            edge += size
            if index < edge:
                return k + 1
        return len(self.round_sizes)


@dataclass(frozen=True)
class Timeline:
    metric: str
    unit: str
    series: tuple[TimelineSeries, ...]
    reasons: dict[str, str]  # mark reason -> what it means, for the reasons that occur


def _round_sizes(metric: Metric) -> tuple[int, ...]:
    sizes = metric.get("round_sizes")
    n = len(metric["samples"])
    if isinstance(sizes, list) and sizes and sum(sizes) == n:
        return tuple(int(s) for s in sizes)
    return (n,)


def _marks(metric: Metric) -> dict[int, tuple[str, ...]]:
    by_index: dict[int, list[str]] = {}
    for reason, indices in (metric.get("marks") or {}).items():
        for i in indices:
            by_index.setdefault(int(i), []).append(reason)
    return {i: tuple(reasons) for i, reasons in sorted(by_index.items())}


def timelines(judged: Assessment, flags: Mapping[Key, Sequence[str]] | None = None) -> list[Timeline]:
    """One timeline per time metric, in the order the metrics first appear."""
    flags = flag_reasons(judged) if flags is None else flags
    found: dict[str, list[TimelineSeries]] = {}
    for fw, _, metric in _time_metrics(judged.run):
        name = metric["name"]
        firsts = metric.get("first_calls") or []
        if not firsts and metric.get("first_call") is not None:
            firsts = [metric["first_call"]]  # type: ignore[list-item]
        found.setdefault(name, []).append(
            TimelineSeries(
                fw,
                tuple(float(s) for s in metric["samples"]),
                _round_sizes(metric),
                tuple(float(f) for f in firsts if f is not None),
                _marks(metric),
                tuple(flags.get((fw, name), ())),
            )
        )
    drawn: list[Timeline] = []
    for name, series in found.items():
        present = sorted({r for s in series for reasons in s.marks.values() for r in reasons})
        drawn.append(Timeline(name, "s", tuple(series), {r: MARKS.get(r, r) for r in present}))
    return drawn
