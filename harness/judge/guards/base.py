"""What a guard is: a registered rule that keeps a number we cannot stand behind from being printed
as a record.

A guard reads named fields of a run's result files and raises on a (framework, metric), keeping
that number out of ratios, comparisons and records (`scope` "metric"), or on a whole framework,
keeping all its numbers from standing beside the others' (`scope` "framework": it computed
something else). It declares everything the media need to say so alike: its flag word, the
exclusion reason, the table footer's heading and bullets, and the mistake it exists to catch with
that mistake's planted rows in `harness selftest --mistakes`. The table, the site's flags, the
records and the mistakes corpus loop over the registry (`harness.judge.guards.registered`), so a
new guard is one module in this folder and its test (pyperf keeps its stability checks in one
place for the same reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.core.result_types import Metric, Result
from harness.judge.plausibility import Finding
from harness.store.calibration import Ceilings
from harness.store.run_folder import Run

Key = tuple[str, str]  # (framework, metric)


@dataclass(frozen=True)
class Hit:
    """One guard raised on one (framework, metric). Texts are plain words: each medium escapes them."""

    key: Key
    reason: str  # why the number is excluded, as every medium's "excluded: ..." says it
    flag: str  # the site's line after the guard's word
    footer: str  # the table footer's bullet after "framework metric: "
    counts: tuple[float, float] = (0.0, 0.0)  # the guard's two figures (e.g. compiled samples, samples)


@dataclass(frozen=True)
class Planted:
    """A row of the mistakes corpus (`harness selftest --mistakes`): the mistake planted in the hidden
    suite `mistakes` (its parameter `mistake=NAME`), made by `culprit` beside the honest `honest`,
    which the guard declaring it must catch."""

    name: str  # the suite's `mistake` parameter
    what: str  # the mistake, as a user would recognise it
    culprit: str  # the framework that makes it
    honest: str  # the framework beside it, honest: the baseline and the reference of the checks
    devices: tuple[str, ...] = ("cpu", "gpu")
    threads: int | None = None  # the run's --threads
    params: tuple[str, ...] = ()  # more of the suite's parameters, key=value
    cores: int = 1  # usable cores the mistake needs to show at all


@dataclass(frozen=True)
class Evidence:
    """What the guards judge, gathered once by `assess`: the run, the rates linted against its
    ceilings, each ok job's measured arithmetic, and each framework's failed agreement checks."""

    run: Run
    ceilings: Ceilings | None
    findings: tuple[Finding, ...]
    measured: Mapping[str, Mapping[str, str]]  # framework -> operation -> class the precision probe measured
    failed_checks: Mapping[str, tuple[str, ...]]  # framework -> the agreement checks it failed


class Guard:
    """The base of every guard; a subclass sets the class attributes and overrides `hits` (scope
    "metric") or `frameworks` (scope "framework")."""

    name: ClassVar[str]  # its key in the mistakes corpus and in `Assessment.raised`
    word: ClassVar[str]  # the flag word in capitals, in every medium
    reads: ClassVar[tuple[str, ...]]  # the result fields it reads (docs/method.md lists them)
    heading: ClassVar[str]  # the table footer's heading over its bullets
    catches: ClassVar[str]  # the mistake it raises on, as the mistakes table names it
    order: ClassVar[int]  # its place: the first guard raised on a number gives its reason
    scope: ClassVar[str] = "metric"
    # Raised by the machine (a shared CPU, a throttled GPU), not by the code: the run exits DISTURBED (3).
    disturbance: ClassVar[bool] = False
    # Its evidence is a timing (a rate, a barrier's wait, CPU time per second of the samples), which a
    # machine that disturbed most samples can blur: `selftest --mistakes` calls its silence there
    # undecided, not missed. A product or a compilation count no load can change: False.
    timing: ClassVar[bool] = False
    planted: ClassVar[tuple[Planted, ...]] = ()  # its rows in the mistakes corpus

    def hits(self, evidence: Evidence) -> Iterable[Hit]:
        """Scope "metric": every (framework, metric) it raises on, in the run's order."""
        return ()

    def frameworks(self, evidence: Evidence) -> Mapping[str, str]:
        """Scope "framework": framework -> why its numbers must not stand beside the others'."""
        return {}


def ok_metrics(run: Run) -> Iterator[tuple[str, Result, Metric]]:
    """(framework, result, metric) for every metric of an ok job: a failed job's partial metrics are
    not numbers to judge."""
    for fw, result in run.results.items():
        if result["status"] == "ok":
            for metric in result["metrics"]:
                yield fw, result, metric


def time_metrics(run: Run) -> Iterator[tuple[str, Result, Metric]]:
    """The time metrics of the ok jobs: the numbers the metric guards judge."""
    return ((fw, r, m) for fw, r, m in ok_metrics(run) if m["kind"] == "time")


def indices(value: Any, n: int) -> set[int]:
    """Sample indices read from a result file (hostile): only in-range integers count."""
    if not isinstance(value, list):
        return set()
    return {i for i in value if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n}
