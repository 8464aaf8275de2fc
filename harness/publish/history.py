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

from harness.core import machine_id, workload
from harness.core.result_types import Metric, Result
from harness.publish import labels
from harness.publish.collect import PublishedRun
from harness.publish.flags import FlagBook
from harness.text.escape import plain
from harness.text.numbers import fmt_time, fmt_value, time_unit


@dataclass(frozen=True)
class Point:
    position: int  # the run's place in the suite's history (the chart's x)
    run: PublishedRun
    framework: str
    machine: str
    version: str
    median: float
    low: float  # interval of the median (95 %, or what `claimed` says it covers)
    high: float
    claimed: str  # "" at the nominal 95 %, else the coverage the interval really has
    n: int
    flags: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass
class MetricHistory:
    name: str  # the metric's name as the files give it (inert text only when shown)
    unit: str
    better: str
    points: list[Point] = field(default_factory=list)
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
        low, high = self.value_text(point.low, point.median), self.value_text(point.high, point.median)
        coverage = f", covers {point.claimed}" if point.claimed else ""
        return f"{self.value_text(point.median, point.median)} [{low} - {high}{coverage}]"


def _point(position: int, entry: PublishedRun, fw: str, metric: Metric, book: FlagBook) -> Point:
    result = entry.run.results[fw]
    summary = book.assessment(entry).summary(fw, metric["name"])  # the interval every medium shows
    found = (fw, metric["name"])
    return Point(
        position=position,
        run=entry,
        framework=plain(fw),
        machine=labels.machine(result),
        version=labels.version(result),
        median=metric["stats"]["median"],
        low=summary.ci_low,
        high=summary.ci_high,
        claimed=summary.ci_claimed,
        n=len(metric["samples"]),
        flags=tuple(book.flags(entry).get(found, [])),
        notes=tuple(book.notes(entry).get(found, [])),
    )


def suite_history(runs: list[PublishedRun], book: FlagBook) -> list[MetricHistory]:
    """Per metric (in the order metrics first appear), every point of every run, oldest first."""
    metrics: dict[tuple[str, str, str], MetricHistory] = {}
    labels_of: dict[tuple[str, str, str], str] = {}
    machines_of: dict[tuple[str, str, str], str] = {}  # chart -> machine_id.identity
    machines: dict[str, Result] = {}  # machine_id.identity -> the first result measured there
    for position, entry in enumerate(runs):
        for fw, result in entry.run.results.items():
            if result["status"] != "ok":
                continue  # a failed job's partial metrics are not numbers to plot
            for metric in result["metrics"]:
                if not metric["samples"]:
                    continue
                key = (metric["name"], metric["unit"], workload.series_key(result, metric))
                labels_of.setdefault(key, workload.label(result))
                machines_of.setdefault(key, machine_id.identity(result))
                machines.setdefault(machines_of[key], result)
                history = metrics.setdefault(
                    key,
                    MetricHistory(
                        metric["name"],
                        metric["unit"],
                        metric["better"],
                        workload_key=workload.key(result, metric),
                        series_key=key[2],
                    ),
                )
                history.points.append(_point(position, entry, fw, metric, book))
    if len({history.workload_key for history in metrics.values()}) > 1:
        for key, history in metrics.items():
            history.workload = labels_of[key]
    names = machine_id.labels(machines)
    if len(names) > 1:
        for key, history in metrics.items():
            history.machine = names[machines_of[key]]
    return list(metrics.values())
