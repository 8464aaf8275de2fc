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
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from harness.core import workload
from harness.core.errors import HarnessError
from harness.core.machine_id import field_at
from harness.core.result_types import Metric, Result
from harness.core.statistics import (
    ALPHA,
    Interval,
    beyond_margin_p,
    geometric_mean,
    holm,
    mann_whitney_u,
    observations_needed,
    ratio_interval,
    shift_ratio,
    smallest_exact_p,
)
from harness.judge import assessment
from harness.judge.assessment import Assessment
from harness.store.run_folder import Run, session_margin
from harness.text.escape import plain
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
    # Rounds forked from one import vs new interpreters (--processes): the same work, another process history.
    ("process start", ("environment", "process", "start")),
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
    # Why one side has no number at all: "failed in B: round 3: boom", "missing in A". A failure of
    # the gate (`--fail-above`, JUnit), never a quiet absence.
    failed: str | None = None
    disturbed: bool = False  # excluded because the machine disturbed most of its samples (exit DISTURBED)
    left_out: tuple[int, int] = (0, 0)  # rounds of A and of B left out as disturbed
    # The smallest change the row may call (the two sides of one `ab` session): its p tests a
    # difference beyond 1 + margin either way, and its interval must clear that band, not only 1.
    margin: float = 0.0

    @property
    def tested(self) -> bool:
        """In the family of tests: neither excluded nor failed."""
        return self.excluded is None and self.failed is None

    @property
    def significant(self) -> bool:
        band = 1 + self.margin
        inside = self.ci_low <= band and self.ci_high >= 1 / band or math.isnan(self.ci_low)
        judged = self.tested and self.no_verdict is None and self.within_sessions is None
        return judged and self.p_adjusted < ALPHA and not inside

    @property
    def slowdown(self) -> float:
        """Fractional worsening (0.25 = 25 % worse); negative for an improvement."""
        return self.ratio - 1 if self.better == "lower" else (1 / self.ratio - 1 if self.ratio else math.inf)

    def fails(self, fail_above: float | None) -> bool:
        """Whether the row fails the gate (`--fail-above`, each JUnit case): a row with no number on one
        side always does; otherwise a significant slowdown above `fail_above` percent (any significant
        slowdown when it is not given). judge/conclusion.py applies it to finished comparisons only."""
        if self.failed is not None:
            return True
        threshold = 0.0 if fail_above is None else fail_above / 100
        return self.significant and self.slowdown > threshold

    @property
    def verdict(self) -> str:
        if self.failed:
            return self.failed
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
    # Why what the two sides recorded (an `ab` session's alpha and margin, read from disk) cannot be
    # trusted to judge the rows by: the sides disagree, or the alpha leaves rows out of reach. The
    # gate reports each and never passes over them (judge/records.py, sequential.judged).
    doubts: list[str] = field(default_factory=list)

    def geomean(self, framework: str | None = None) -> float | None:
        """Geometric mean of the time ratios B/A that count; None when every one was excluded."""
        ratios = [
            c.ratio
            for c in self.changes
            if c.tested and c.better == "lower" and (framework is None or c.framework == framework)
        ]
        value = geometric_mean(ratios)
        return None if math.isnan(value) else value

    @property
    def margin(self) -> float:
        """The margin its rows were judged beyond (the two sides of one `ab` session), else 0."""
        return max((c.margin for c in self.changes), default=0.0)

    @property
    def without_verdict(self) -> list[Change]:
        return [c for c in self.changes if c.tested and c.no_verdict is not None]

    @property
    def failed(self) -> list[Change]:
        """Rows where one side has no number: a failed, missing or interrupted job or metric."""
        return [c for c in self.changes if c.failed is not None]

    @property
    def disturbed(self) -> list[Change]:
        """Rows left unjudged because the machine disturbed most of a side's samples."""
        return [c for c in self.changes if c.disturbed]

    @property
    def family_size(self) -> int:
        return sum(1 for c in self.changes if c.tested)

    def worst_significant_slowdown(self) -> Change | None:
        bad = [c for c in self.changes if c.significant and c.slowdown > 0]
        return max(bad, key=lambda c: c.slowdown, default=None)


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


def family(changes: list[Change], what: str = "a side", option: str = "--rounds") -> list[Change]:
    """The rows of one compare judged together: too few processes -> no verdict; Holm across the rest.

    Every row that is compared counts in the family, also one without enough processes (as p = 1),
    so adding untestable rows never makes the others easier to call.
    """
    tested = [i for i, c in enumerate(changes) if c.tested]
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
        if (result_b := b.results.get(fw)) is None or result_a["status"] != "ok" or result_b["status"] != "ok":
            continue
        metrics_b = {m["name"]: m for m in result_b["metrics"]}
        for ma in result_a["metrics"]:
            if (mb := metrics_b.get(ma["name"])) is not None:
                yield fw, result_a, result_b, ma, mb


def _why_absent(run: Run, side: str, framework: str, metric: str | None = None) -> str | None:
    """Why `run` has no number for the framework (or one metric of it), in words; None when it has one."""
    if (result := run.results.get(framework)) is None:
        return f"missing in {side} (no {framework} job)"
    if result["status"] != "ok":  # skipped, failed, interrupted, ...
        return f"{result['status']} in {side}: {plain(result.get('reason') or 'no reason given')}"
    if metric is not None and all(m["name"] != metric for m in result["metrics"]):
        return f"missing in {side} (the {framework} job measured no {metric})"
    return None


def _absent_rows(a: Run, b: Run) -> list[Change]:
    """A framework or metric one run measured that the other failed, skipped, missed or was interrupted
    in: a row of its own, so a gate never passes by a side that quietly vanished. Frameworks neither run
    measured (both failed or skipped) are rows too when either failed: a failed job is never silent."""
    rows = []
    for fw in dict.fromkeys([*a.results, *b.results]):
        ok = [run.results.get(fw) is not None and run.results[fw]["status"] == "ok" for run in (a, b)]
        if all(ok):  # both measured it: any metric one of them lacks
            first: dict[str, Metric] = {}  # each name's metric, A's where A has it
            for metric in [*a.results[fw]["metrics"], *b.results[fw]["metrics"]]:
                first.setdefault(metric["name"], metric)
            for name, metric in first.items():
                if (why := _why_absent(a, "A", fw, name) or _why_absent(b, "B", fw, name)) is not None:
                    rows.append(_absent(fw, metric, why))
            continue
        whys = [w for w in (_why_absent(a, "A", fw), _why_absent(b, "B", fw)) if w is not None]
        if all(run.results.get(fw) is None or run.results[fw]["status"] == "skipped" for run in (a, b)):
            continue  # skipped (or not planned) on both sides: nothing was asked of it here
        measured = a.results[fw] if ok[0] else b.results[fw] if ok[1] else None
        rows += [_absent(fw, m, "; ".join(whys)) for m in (measured["metrics"] if measured is not None else [None])]
    return rows


def _absent(framework: str, metric: Metric | None, why: str) -> Change:
    nan = math.nan
    return Change(
        framework=framework,
        metric=metric["name"] if metric is not None else "(every metric)",
        unit=metric["unit"] if metric is not None else "",
        better=metric["better"] if metric is not None else "lower",
        median_a=nan, median_b=nan, ratio=nan, ci_low=nan, ci_high=nan, p_value=nan,
        failed=why,
    )  # fmt: skip


def evidence(
    xa: Sequence[float], xb: Sequence[float], rounds: bool, margin: float = 0.0
) -> tuple[float, Interval, float]:
    """(ratio of B to A, its interval, the two-sided p) from the observations of a row; with a
    margin (round medians only), the p that B differs from A by more than it (beyond_margin_p).

    Round medians (one per process, `rounds`): the Hodges-Lehmann ratio and the interval the
    Mann-Whitney test inverts (statistics.shift_ratio), so the interval and the test judge the same
    thing and a machine whose rounds fall in two speed modes cannot make them disagree. Samples of
    one process a side: the ratio of the medians and its interval (those rows never get a verdict).
    """
    if rounds:
        return *shift_ratio(xa, xb), beyond_margin_p(xa, xb, margin)
    _, p = mann_whitney_u(xa, xb)
    return statistics.median(xb) / statistics.median(xa), ratio_interval(xa, xb), p


def compare_runs(judged_a: Assessment, judged_b: Assessment) -> Comparison:
    """Run A against run B, each read through its own assessment."""
    a, b = judged_a.run, judged_b.run
    suite_a, suite_b = a.summary.get("suite"), b.summary.get("suite")
    if suite_a != suite_b:
        raise HarnessError(f"cannot compare suite {suite_a} with suite {suite_b}; compare two runs of one suite")
    bad_a, bad_b = judged_a.exclusions, judged_b.exclusions
    # A framework whose checks disagree (or whose arithmetic differs) in either run computed
    # something else: its speed is not a comparison (issue: "50 % faster" from a wrong answer).
    off_a, off_b = judged_a.not_comparable, judged_b.not_comparable
    # The two sides of one `ab` session are judged beyond the margin it recorded (0 for other runs).
    margin = session_margin(a.summary, b.summary)
    changes = []
    for fw, result_a, result_b, ma, mb in paired_metrics(a, b):
        if ma["stats"]["median"] == 0:
            continue
        # Samples of one process are not independent (one warm cache, one neighbour); where both
        # runs have interleaved rounds, each round's median is one independent observation, and
        # the rounds the machine disturbed are left out of the test and of the ratio alike.
        (xa, out_a), (xb, out_b) = assessment.kept_rounds(result_a, ma), assessment.kept_rounds(result_b, mb)
        rounds = bool(xa) and bool(xb)
        processes = (len(xa), len(xb)) if rounds else (len(xa) or 1, len(xb) or 1)
        if not rounds:
            xa, xb = ma["samples"], mb["samples"]
        # The row's ratio is the one its interval and test are about: of the round medians kept.
        median_a = statistics.median(xa) if rounds else ma["stats"]["median"]
        median_b = statistics.median(xb) if rounds else mb["stats"]["median"]
        if median_a == 0:
            continue
        ratio, interval, p = evidence(xa, xb, rounds, margin if rounds else 0.0)
        key = (fw, ma["name"])
        excluded = bad_a.get(key) or bad_b.get(key)
        disturbed = excluded is not None and key in (judged_a.disturbed | judged_b.disturbed)
        if fw in off_a or fw in off_b:
            excluded = f"not comparable in run {'A' if fw in off_a else 'B'} ({(off_a.get(fw) or off_b.get(fw))})"
            disturbed = False
        if differs := workload.differences(result_a, result_b, ma, mb):
            excluded = f"not the same workload ({'; '.join(differs)})"
            disturbed = False
        changes.append(
            Change(
                framework=fw,
                metric=ma["name"],
                unit=ma["unit"],
                better=ma["better"],
                median_a=median_a,
                median_b=median_b,
                ratio=ratio,
                ci_low=interval.low,
                ci_high=interval.high,
                p_value=p,
                excluded=excluded,
                ci_coverage=interval.coverage,
                basis=ROUNDS if rounds else SAMPLES,
                processes=processes,
                disturbed=disturbed,
                left_out=(out_a, out_b) if rounds else (0, 0),
                margin=margin if rounds else 0.0,
            )
        )
    changes += _absent_rows(a, b)
    if not changes:
        raise HarnessError("the two runs share no successful (framework, metric) pair; nothing to compare")
    return Comparison(a=a, b=b, changes=family(changes), warnings=metadata_warnings(a, b))
