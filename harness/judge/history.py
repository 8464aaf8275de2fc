"""A metric over the runs of one suite, and where its level changed (`harness history`, the site).

A series is one (framework, metric, workload, threads, machine): the runs that measured the same
work (harness/core/workload.py) on one machine with the same threads (harness/core/machine_id.py), oldest
first, each contributing its median. Runs on another machine are a series of their own, labelled
with that machine, never a "change point" where the machine changed. A point the run's own
assessment distrusts (implausible, escaped, mostly contended, a framework that failed the gate)
is left out of the series and named, never drawn as a level. Change points come from
`change_points.find`; each is reported with the two runs it falls between and what differs
between them: stack versions, the suites' code, the machine, the measured precision, the image.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.core import machine_id, workload
from harness.core.result_types import Result
from harness.core.statistics import Summary
from harness.judge import change_points
from harness.judge.assessment import Assessment, ok_metrics
from harness.store.run_folder import Run
from harness.text.escape import plain


@dataclass(frozen=True, eq=False)
class Point:
    position: int  # the run's place among the suite's runs (oldest first)
    run_id: str
    median: float
    result: Result
    summary: Mapping[str, Any]
    framework: str
    metric: str
    n: int  # samples
    judged: Assessment  # the run's assessment
    why: str | None  # why that assessment distrusts the point; None: a level of the series

    @property
    def statistics(self) -> Summary:
        """The median's statistics, its interval among them, from the run's assessment (worked out once)."""
        return self.judged.summary(self.framework, self.metric)


@dataclass
class Series:
    framework: str
    metric: str
    unit: str
    better: str
    workload: str  # the workload's label (matrix_size=128, fp32, cpu)
    points: list[Point] = field(default_factory=list)  # the trusted points: the levels and their changes
    left_out: list[str] = field(default_factory=list)  # "run <id>: why", for points not trusted
    every: list[Point] = field(default_factory=list)  # every point with samples, trusted or not (`why`)
    series_key: str = ""  # workload.series_key: the workload, threads and machine every point shares
    workload_key: str = ""  # workload.key: the workload alone
    machine_key: str = ""  # machine_id.identity: the machine and threads every point was measured with
    fingerprint: str = ""  # machine_id.fingerprint of that machine
    threads: int | None = None  # the threads asked for (None: the framework's default)
    machine: str = ""  # machine_id.labels: `machine <cpu or gpus>, <N> threads` (raw text)
    several_machines: bool = False  # the suite's runs come from more than one machine: titles name it

    @property
    def title(self) -> str:
        where = f"; {self.machine}" if self.several_machines else ""
        return plain(f"{self.framework} {self.metric} ({self.workload}{where})")


@dataclass(frozen=True)
class ChangePoint:
    series: Series
    before: Point  # the last run of the old level
    after: Point  # the first run of the new level
    level_before: float  # median of the segment before
    level_after: float
    changed: tuple[str, ...]  # what differs between `before` and `after`

    @property
    def ratio(self) -> float:
        return self.level_after / self.level_before

    @property
    def worse(self) -> bool:
        return self.ratio > 1 if self.series.better == "lower" else self.ratio < 1

    @property
    def change(self) -> float:
        """Fractional worsening (0.25 = 25 % worse); negative for an improvement."""
        return self.ratio - 1 if self.series.better == "lower" else 1 / self.ratio - 1


def series_of(runs: Sequence[tuple[Run, Assessment]]) -> list[Series]:
    """Every (framework, metric, workload, threads, machine) series of these runs (one suite, oldest first)."""
    found: dict[tuple[str, str, str], Series] = {}
    machines: dict[str, Result] = {}  # machine_id.identity -> the first result measured there
    for position, (run, judged) in enumerate(runs):
        run_id = plain(run.summary.get("run_id"))
        for fw, result, metric in ok_metrics(run):
            key = (fw, metric["name"], workload.series_key(result, metric))
            identity = machine_id.identity(result)
            machines.setdefault(identity, result)
            if key not in found:
                found[key] = Series(fw, metric["name"], metric["unit"], metric["better"], workload.label(result))
                found[key].machine_key = identity
                found[key].fingerprint = machine_id.fingerprint(result)
                found[key].threads = machine_id.threads(result)
                found[key].series_key, found[key].workload_key = key[2], workload.key(result, metric)
            series = found[key]
            median = metric["stats"]["median"]
            why = (
                judged.not_comparable.get(fw)
                or judged.excluded(fw, metric["name"])
                or (None if median > 0 else "median not above 0")
            )
            n = len(metric["samples"])
            point = Point(position, run_id, median, result, run.summary, fw, metric["name"], n, judged, why)
            if n:
                series.every.append(point)
            if why is not None:
                series.left_out.append(f"run {run_id}: {why}")
            else:
                series.points.append(point)
    names = machine_id.labels(machines)
    for series in found.values():
        series.machine, series.several_machines = names[series.machine_key], len(names) > 1
    return list(found.values())


# What else can differ between two runs of one workload: (label, summary or result, path, characters kept).
FACTS: tuple[tuple[str, str, tuple[str, ...], int], ...] = (
    ("suites' code", "summary", ("code", "suites_sha256"), 12),
    ("git commit", "summary", ("code", "git_commit"), 12),
    ("cpu", "result", ("environment", "machine", "cpu", "model"), 0),
    ("gpu", "result", ("environment", "device", "name"), 0),
    ("cores", "result", ("environment", "machine", "cpu", "usable_cores"), 0),
    ("threads", "result", ("settings", "threads"), 0),
    ("measured precision", "result", ("environment", "precision", "measured"), 0),
    ("image", "result", ("image", "id"), 19),
    ("backend", "result", ("backend",), 0),
)


def _fact(point: Point, source: str, path: tuple[str, ...], cut: int) -> Any:
    value = machine_id.field_at(point.summary if source == "summary" else point.result, *path)
    return str(value)[:cut] if cut and value is not None else value


def provenance_diff(a: Point, b: Point) -> Iterator[str]:
    """What differs between two runs of one series, in words: where to look for the cause."""
    versions_a = machine_id.field_at(a.result, "environment", "versions") or {}
    versions_b = machine_id.field_at(b.result, "environment", "versions") or {}
    for package in dict.fromkeys([*versions_a, *versions_b]):
        if versions_a.get(package) != versions_b.get(package):
            yield plain(f"{package} {versions_a.get(package, '-')} -> {versions_b.get(package, '-')}")
    for label, source, path, cut in FACTS:
        before, after = _fact(a, source, path, cut), _fact(b, source, path, cut)
        if before != after:
            yield plain(f"{label} {before if before is not None else '-'} -> {after if after is not None else '-'}")


def find_changes(series: Series) -> list[ChangePoint]:
    """The level shifts of one series (none under change_points.MIN_POINTS points)."""
    values = [p.median for p in series.points]
    starts = change_points.find(values)
    bounds = [0, *starts, len(values)]
    found = []
    for i, start in enumerate(starts):
        before = statistics.median(values[bounds[i] : start])
        after = statistics.median(values[start : bounds[i + 2]])
        a, b = series.points[start - 1], series.points[start]
        found.append(ChangePoint(series, a, b, before, after, tuple(provenance_diff(a, b))))
    return found
