"""Every run of one suite as points per metric: median, the interval of the median, flags.

One point per (run, framework, metric) of every job that produced numbers. The chart and the
table under it are both built from these points, so what is drawn is what is written. A chart is
one workload on one machine with one thread setting (`workload.series_key`, less the metric's code
path, which is each framework's own): runs at another size, precision, device or dataset, or
measured on another machine or with other threads, get a chart of their own, titled with what tells
them apart (headings.py), never a "jump" in this one.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from harness.core import workload
from harness.core.result_types import Metric
from harness.core.statistics import Summary
from harness.judge.history import Point
from harness.publish import headings
from harness.publish.collect import PublishedRun
from harness.publish.flags import FlagBook
from harness.text.escape import plain
from harness.text.numbers import fmt_time, fmt_value, time_unit


@dataclass
class MetricHistory:
    name: str  # the metric's name as the files give it (inert text only when shown)
    unit: str
    better: str
    points: list[Point] = field(default_factory=list)  # every point of every framework, oldest run first
    # workload.series_key of each (framework) series drawn here: the change points they match. One chart
    # holds every framework's code path (a metric's `variant`: flax's jit epoch beside pytorch's eager
    # one), so that chart's frameworks are drawn together, each series named with its path.
    series_keys: set[str] = field(default_factory=set)
    fields: dict[str, str] = field(default_factory=dict)  # headings.fields: every defining field, in words
    heading: str = ""  # headings.heading: only the fields that differ between the suite's charts
    suite: str = ""

    @property
    def title(self) -> str:
        """`matmul (matrix_size=2000)`: the name, and what tells this chart from the suite's others."""
        name = self.name if self.unit in ("s", "") else f"{self.name} [{self.unit}]"
        return plain(f"{name} ({self.heading})" if self.heading else name)

    @property
    def description(self) -> str:
        """Every defining field (the heading's full form, shown under it)."""
        return headings.description(self.suite, self.fields)

    @property
    def arithmetic(self) -> str:
        return self.fields.get("arithmetic", "")

    @property
    def positions(self) -> list[int]:
        """The runs (positions among the suite's runs) with a point on this chart, in order."""
        return sorted({p.position for p in self.points})

    def scale(self) -> tuple[float, str]:
        """(divisor, unit) for the chart's axis: times in the unit of the typical median."""
        if self.unit != "s":
            return 1.0, plain(self.unit)
        return time_unit(statistics.median([p.median for p in self.points]))

    def axis_label(self) -> str:
        _, unit = self.scale()
        return f"median{f' [{unit}]' if unit else ''}, {'lower' if self.better == 'lower' else 'higher'} is better"

    def value_text(self, value: float, like: float) -> str:
        return fmt_time(value, scale_from=like) if self.unit == "s" else fmt_value(value, plain(self.unit))

    def point_text(self, point: Point, stats: Summary) -> str:
        """`1.23 ms [1.20 ms - 1.27 ms]`: the median and its interval (with its coverage when below 95 %);
        `stats`: the point's statistics (FlagBook.statistics)."""
        low, high = self.value_text(stats.ci_low, point.median), self.value_text(stats.ci_high, point.median)
        coverage = f", covers {stats.ci_claimed}" if stats.ci_claimed else ""
        return f"{self.value_text(point.median, point.median)} [{low} - {high}{coverage}]"


def flags_of(point: Point, runs: list[PublishedRun], book: FlagBook) -> tuple[list[str], list[str]]:
    """The point's flags and notes: the same words its run's page shows."""
    entry, key = runs[point.position], (point.framework, point.metric)
    return book.flags(entry).get(key, []), book.notes(entry).get(key, [])


def metric_of(point: Point) -> Metric | None:
    return next((m for m in point.result["metrics"] if m["name"] == point.metric), None)


def variant(point: Point) -> str:
    """The code path the point's framework measured (`jit`, `eager`), or ''."""
    metric = metric_of(point)
    found = metric.get("variant") if metric is not None else None
    return plain(found) if isinstance(found, str) else ""


def suite_history(runs: list[PublishedRun], book: FlagBook) -> list[MetricHistory]:
    """One chart per metric and chart key (workload without the code path, threads, machine), each
    with every framework's points, trusted or flagged, oldest run first; the series are the judging
    layer's (judge/history.py)."""
    charts: dict[tuple[str, str, str], MetricHistory] = {}
    machines: dict[tuple[str, str, str], str] = {}
    several_machines = False
    for series in book.verdicts.series([entry.run for entry in runs]):
        if not series.every:
            continue
        key = (series.metric, series.unit, workload.series_key(series.every[0].result))  # no metric: no variant
        chart = charts.setdefault(key, MetricHistory(series.metric, series.unit, series.better, suite=runs[0].suite))
        chart.series_keys.add(series.series_key)
        chart.points += series.every
        machines[key] = series.machine
        several_machines = several_machines or series.several_machines
    for key, chart in charts.items():
        chart.points.sort(key=lambda p: (p.position, list(runs[p.position].run.results).index(p.framework)))
        done = [headings.arithmetic(p.result, metric_of(p)) for p in chart.points]
        chart.fields = headings.fields(chart.points[0].result, done, machines[key] if several_machines else "")
    differ = headings.differing([chart.fields for chart in charts.values()])
    for chart in charts.values():
        chart.heading = headings.heading(chart.fields, differ)
    return list(charts.values())
