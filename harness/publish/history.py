"""Every run of one suite as points per metric: median, the interval of the median, flags.

One point per (run, framework, metric) of every job that produced numbers. The chart and the
table under it are both built from these points, so what is drawn is what is written. A chart is
one workload on one machine with one thread setting (`workload.series_key`): runs at another size,
precision, device or dataset, or measured on another machine or with other threads, get a chart of
their own, titled with what tells them apart, never a "jump" in this one.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from harness.judge.history import Point
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
    workload: str = ""  # shown when the suite's runs measured more than one workload
    workload_key: str = ""  # harness/core/workload.py's key
    series_key: str = ""  # workload.series_key (workload, threads, machine): what this chart's change points match
    machine: str = ""  # shown when the suite's runs come from more than one machine or thread setting

    @property
    def title(self) -> str:
        name = self.name if self.unit in ("s", "") else f"{self.name} [{self.unit}]"
        where = "; ".join(part for part in (self.workload, self.machine) if part)
        return plain(f"{name} ({where})" if where else name)

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

    def point_text(self, point: Point) -> str:
        """`1.23 ms [1.20 ms - 1.27 ms]`: the median and its interval (with its coverage when below 95 %)."""
        stats = point.statistics
        low, high = self.value_text(stats.ci_low, point.median), self.value_text(stats.ci_high, point.median)
        coverage = f", covers {stats.ci_claimed}" if stats.ci_claimed else ""
        return f"{self.value_text(point.median, point.median)} [{low} - {high}{coverage}]"


def flags_of(point: Point, runs: list[PublishedRun], book: FlagBook) -> tuple[list[str], list[str]]:
    """The point's flags and notes: the same words its run's page shows."""
    entry, key = runs[point.position], (point.framework, point.metric)
    return book.flags(entry).get(key, []), book.notes(entry).get(key, [])


def suite_history(runs: list[PublishedRun], book: FlagBook) -> list[MetricHistory]:
    """One chart per metric and series key (workload, threads, machine), each with every framework's
    points, trusted or flagged, oldest run first; the series are the judging layer's (judge/history.py)."""
    charts: dict[tuple[str, str, str], MetricHistory] = {}
    several_machines = False
    for series in book.verdicts.series([entry.run for entry in runs]):
        key = (series.metric, series.unit, series.series_key)
        chart = charts.setdefault(
            key,
            MetricHistory(
                series.metric, series.unit, series.better, workload_key=series.workload_key, series_key=key[2]
            ),
        )
        chart.workload, chart.machine = series.workload, series.machine
        chart.points += series.every
        several_machines = several_machines or series.several_machines
    for chart in charts.values():
        chart.points.sort(key=lambda p: (p.position, list(runs[p.position].run.results).index(p.framework)))
        # Labels only where the suite's charts differ in them.
        chart.workload = chart.workload if len({c.workload_key for c in charts.values()}) > 1 else ""
        chart.machine = chart.machine if several_machines else ""
    return [chart for chart in charts.values() if chart.points]
