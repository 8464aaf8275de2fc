"""`harness compare RUN_A RUN_B`: the same suite twice (before/after, two machines), with significance.

The unit of evidence is the process. Two processes of the same code differ by more than the samples
inside one process do (a warm cache, a neighbour, where the allocator landed), so a test fed the
samples of one process a side calls that drift a change. A verdict therefore comes from each round's
median (one per process, `--rounds K`), never from samples; with too few processes a side for the
exact test to reach significance at all, the row gets the ratio and "no verdict", not a guess.

Every row of one compare is a test, and a compare has 10-50 of them: without a correction one in
twenty unchanged metrics would be "significant". The p-values are Holm-adjusted across the rows
(`family`), which keeps the chance of any false alarm in the whole compare at 5 %.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from harness import assessment, workload
from harness.assessment import Assessment
from harness.errors import HarnessError
from harness.result_types import Metric, Result
from harness.run_folder import Run
from harness.statistics import (
    ALPHA,
    geometric_mean,
    holm,
    mann_whitney_u,
    observations_needed,
    ratio_interval,
    smallest_exact_p,
)
from harness.text.numbers import fmt_change

# Metadata that makes two numbers comparable (pyperf's check, for our result files).
COMPARED_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("stack", ("stack",)),
    ("backend", ("backend",)),
    ("device", ("device",)),
    ("params", ("params",)),
    ("threads", ("settings", "threads")),
    ("versions", ("environment", "versions")),
    ("device name", ("environment", "device", "name")),
    ("cpu", ("environment", "machine", "cpu", "model")),
    ("cores", ("environment", "machine", "cpu", "usable_cores")),
    ("precision", ("environment", "precision")),
    ("image", ("image", "id")),
    ("variables", ("environment", "variables")),
)


SAMPLES = "samples within one process"
ROUNDS = "round medians"
CORRECTION = "Holm"


@dataclass(frozen=True)
class Change:
    framework: str
    metric: str
    unit: str
    better: str
    median_a: float
    median_b: float
    ratio: float  # median_b / median_a
    ci_low: float
    ci_high: float
    p_value: float
    excluded: str | None = None  # why the metric is not compared at all (e.g. implausible)
    ci_coverage: float = 0.95  # what [ci_low, ci_high] really covers (less with few samples)
    basis: str = SAMPLES  # SAMPLES (one process a side), or ROUNDS when both runs ran interleaved rounds
    processes: tuple[int, int] = (1, 1)  # independent observations (processes) of A and of B
    # Set by `family` only: a Change nobody corrected across its family is never significant.
    p_adjusted: float = math.nan
    no_verdict: str | None = None  # why the evidence cannot give a verdict (too few processes)
    # Set by noise_floor.apply: the run-to-run change this row stayed within (it is then not significant).
    within_sessions: float | None = None

    @property
    def significant(self) -> bool:
        inside = self.ci_low <= 1.0 <= self.ci_high or math.isnan(self.ci_low)
        tested = self.excluded is None and self.no_verdict is None and self.within_sessions is None
        return tested and self.p_adjusted < ALPHA and not inside

    @property
    def slowdown(self) -> float:
        """Fractional worsening (0.25 = 25 % worse); negative for an improvement."""
        return self.ratio - 1 if self.better == "lower" else (1 / self.ratio - 1 if self.ratio else math.inf)

    @property
    def verdict(self) -> str:
        if self.excluded:
            return f"excluded: {self.excluded}"
        if self.no_verdict:
            return f"no verdict: {self.no_verdict}"
        if self.within_sessions is not None:
            return f"not significant (within run-to-run noise, {fmt_change(self.within_sessions)})"
        if not self.significant:
            return "not significant"
        if self.better == "lower":
            word = "slower" if self.slowdown > 0 else "faster"
        else:
            word = "worse" if self.slowdown > 0 else "better"
        return f"{fmt_change(abs(self.slowdown))} {word}"


@dataclass
class Comparison:
    a: Run
    b: Run
    changes: list[Change]
    warnings: list[str]
    floor: list[str] = field(default_factory=list)  # what the machine's noise floor says (noise_floor.explain)

    def geomean(self, framework: str | None = None) -> float | None:
        """Geometric mean of the time ratios B/A that count; None when every one was excluded."""
        ratios = [
            c.ratio
            for c in self.changes
            if c.excluded is None and c.better == "lower" and (framework is None or c.framework == framework)
        ]
        value = geometric_mean(ratios)
        return None if math.isnan(value) else value

    @property
    def without_verdict(self) -> list[Change]:
        return [c for c in self.changes if c.excluded is None and c.no_verdict is not None]

    def worst_significant_slowdown(self) -> Change | None:
        bad = [c for c in self.changes if c.significant and c.slowdown > 0]
        return max(bad, key=lambda c: c.slowdown, default=None)


def field_at(doc: Any, *path: str) -> Any:
    """doc[path[0]][path[1]]..., or None where a level is missing or not an object."""
    node: Any = doc
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def metadata_warnings(a: Run, b: Run) -> list[str]:
    warnings = []
    for fw in a.results:
        if fw not in b.results:
            continue
        differing = [
            label for label, path in COMPARED_FIELDS if field_at(a.results[fw], *path) != field_at(b.results[fw], *path)
        ]
        if differing:
            warnings.append(f"{fw}: runs differ in {', '.join(differing)}")
    codes = [(run.summary.get("code") or {}).get("suites_sha256") for run in (a, b)]
    if all(codes) and codes[0] != codes[1]:
        warnings.append("the suites' code differs between the runs (summary.json code.suites_sha256)")
    return warnings


def _round_medians(metric: Metric) -> list[float]:
    """Per-round medians of a pooled metric (harness/rounds.py); [] for a single-round run.

    A round most of whose samples were contended (the CPU was shared while it ran) measured its
    neighbours: its median is left out of the test, so a hog in one round is not a "regression".
    """
    found = metric.get("round_medians")
    if not isinstance(found, list) or len(found) < 2:
        return []
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in found)
    if not ok:
        return []
    sizes = metric.get("round_sizes")
    contended = set((metric.get("contention") or {}).get("contended") or [])
    if not contended or not isinstance(sizes, list) or len(sizes) != len(found):
        return [float(v) for v in found]
    kept, start = [], 0
    for median, size in zip(found, sizes, strict=True):
        disturbed = len(contended.intersection(range(start, start + size)))
        if disturbed * 2 <= size:
            kept.append(float(median))
        start += size
    return kept


def family(changes: list[Change], what: str = "a side", option: str = "--rounds") -> list[Change]:
    """The rows of one compare judged together: too few processes -> no verdict; Holm across the rest.

    Every row that is compared counts in the family, also one without enough processes (as p = 1),
    so adding untestable rows never makes the others easier to call.
    """
    tested = [i for i, c in enumerate(changes) if c.excluded is None]
    needed = observations_needed(len(tested))
    reasons: dict[int, str] = {}
    for i in tested:
        processes = changes[i].processes
        if smallest_exact_p(*processes) * len(tested) >= ALPHA:
            fewest = min(processes)
            reasons[i] = f"{fewest} process{'es' if fewest != 1 else ''} {what}; `{option} {needed}` gives one"
    # A row without a verdict enters Holm as p = 1: its samples' p says nothing about the code.
    adjusted = holm([1.0 if i in reasons else changes[i].p_value for i in tested])
    out = list(changes)
    for i, p in zip(tested, adjusted, strict=True):
        out[i] = replace(changes[i], p_adjusted=p, no_verdict=reasons.get(i))
    return out


def paired_metrics(a: Run, b: Run) -> Iterator[tuple[str, Result, Result, Metric, Metric]]:
    """(framework, result A, result B, metric A, metric B) for every metric both runs measured with an ok job."""
    for fw, result_a in a.results.items():
        result_b = b.results.get(fw)
        if result_b is None or result_a["status"] != "ok" or result_b["status"] != "ok":
            continue
        metrics_b = {m["name"]: m for m in result_b["metrics"]}
        for ma in result_a["metrics"]:
            mb = metrics_b.get(ma["name"])
            if mb is not None:
                yield fw, result_a, result_b, ma, mb


def compare_runs(a: Run, b: Run, judged_a: Assessment | None = None, judged_b: Assessment | None = None) -> Comparison:
    """`judged_a`, `judged_b`: the runs' assessments when the caller has them (else made here)."""
    suite_a, suite_b = a.summary.get("suite"), b.summary.get("suite")
    if suite_a != suite_b:
        raise HarnessError(f"cannot compare suite {suite_a} with suite {suite_b}; compare two runs of one suite")
    judged_a, judged_b = assessment.of(a, judged_a), assessment.of(b, judged_b)
    bad_a, bad_b = judged_a.exclusions, judged_b.exclusions
    # A framework whose checks disagree (or whose arithmetic differs) in either run computed
    # something else: its speed is not a comparison (issue: "50 % faster" from a wrong answer).
    off_a, off_b = judged_a.not_comparable, judged_b.not_comparable
    changes = []
    for fw, result_a, result_b, ma, mb in paired_metrics(a, b):
        if ma["stats"]["median"] == 0:
            continue
        # Samples of one process are not independent (one warm cache, one neighbour); where both
        # runs have interleaved rounds, each round's median is one independent observation.
        xa, xb = _round_medians(ma), _round_medians(mb)
        basis = ROUNDS if xa and xb else SAMPLES
        processes = (len(xa), len(xb)) if xa and xb else (len(xa) or 1, len(xb) or 1)
        if not (xa and xb):
            xa, xb = ma["samples"], mb["samples"]
        interval = ratio_interval(xa, xb)
        _, p = mann_whitney_u(xa, xb)
        key = (fw, ma["name"])
        excluded = bad_a.get(key) or bad_b.get(key)
        if fw in off_a or fw in off_b:
            excluded = f"not comparable in run {'A' if fw in off_a else 'B'} ({(off_a.get(fw) or off_b.get(fw))})"
        differs = workload.differences(result_a, result_b, ma, mb)
        if differs:
            excluded = f"not the same workload ({'; '.join(differs)})"
        changes.append(
            Change(
                framework=fw,
                metric=ma["name"],
                unit=ma["unit"],
                better=ma["better"],
                median_a=ma["stats"]["median"],
                median_b=mb["stats"]["median"],
                ratio=mb["stats"]["median"] / ma["stats"]["median"],
                ci_low=interval.low,
                ci_high=interval.high,
                p_value=p,
                excluded=excluded,
                ci_coverage=interval.coverage,
                basis=basis,
                processes=processes,
            )
        )
    if not changes:
        raise HarnessError("the two runs share no successful (framework, metric) pair; nothing to compare")
    return Comparison(a=a, b=b, changes=family(changes), warnings=metadata_warnings(a, b))
