"""`assess(run)`: everything a run is judged on, worked out once; renderers and the exit code read it.

The judgment of a run, in one object:
- the agreement gate (below): each check's row, and the frameworks that failed one;
- numbers we cannot stand behind: every guard registered in judge/guards/ (escaped syncs, rates
  above the device's ceilings with the ceilings `harness calibrate` measured, compilation in the
  steady state, more cores than --threads, samples the machine disturbed), each raised once here;
- the arithmetic each job's precision probe measured, and where it differs from the baseline's;
- the like-for-like settings each job recorded (`training.fairness`: a convolution algorithm
  search, how batches are copied from the host) and where they differ from the baseline's;
- from those, which frameworks may stand side by side with the baseline: two frameworks are
  comparable only if both passed the gate (same results), the probe measured the same
  arithmetic in both (same precision) and they ran with the same like-for-like settings: a TF32
  matmul against a float32 one, or cuDNN's autotuned convolutions against untuned XLA ones, is
  not a framework difference.

Every medium (table, markdown, CSV, JSON, HTML, figures, sparklines, the site) and the exit code
read one Assessment, so they cannot disagree about a run. Statistics stay in statistics.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from harness.core.exit_codes import DISTURBED as DISTURBED
from harness.core.exit_codes import FAILED as FAILED
from harness.core.exit_codes import INTERRUPTED as INTERRUPTED
from harness.core.exit_codes import worst as worst
from harness.core.result_types import Metric, Result
from harness.core.schema import derived_sources
from harness.core.statistics import Interval, Summary, describe, ratio_interval
from harness.judge import attribution, guards
from harness.judge import inference as inference_judge
from harness.judge import parallel as dp_judge
from harness.judge.breakdown import Breakdown
from harness.judge.guards import Evidence, Guard, Hit, ok_metrics
from harness.judge.guards.agreement import GATE
from harness.judge.guards.agreement import (  # re-exported (`as`): the check rows were this module's
    CheckRow as CheckRow,
)
from harness.judge.guards.agreement import agrees as agrees
from harness.judge.guards.agreement import declared_checks as declared_checks
from harness.judge.guards.agreement import evaluate as evaluate
from harness.judge.guards.agreement import failing_frameworks as failing_frameworks
from harness.judge.guards.agreement import reference_framework as reference_framework
from harness.judge.guards.agreement import tolerance_text as tolerance_text
from harness.judge.guards.contention import REASON as CONTENDED
from harness.judge.guards.contention import (
    disturbed_samples,
    disturbed_tails,
    mostly_disturbed,
    readings,
    tail_quantile,
)
from harness.judge.guards.precision import measured_precision
from harness.judge.guards.recompiled import REASON as RECOMPILED
from harness.judge.guards.threads import MIN_WALL_S
from harness.judge.guards.threads import REASON as OVER_THREADS
from harness.judge.inference import InferenceJudgement
from harness.judge.parallel import Parallel
from harness.judge.plausibility import Finding, lint, sync_state
from harness.store.calibration import Ceilings, ceilings_for_run
from harness.store.run_folder import Run
from suites.contract.ranks import data_parallel

# The guards' words, re-exported: every medium and test names them from here.
__all__ = ["CONTENDED", "GATE", "MIN_WALL_S", "OVER_THREADS", "RECOMPILED", "disturbed_samples", "measured_precision",
           "mostly_disturbed", "ok_metrics"]  # fmt: skip

Key = tuple[str, str]  # (framework, metric)


@dataclass(frozen=True)
class Ratio:
    """A metric's median over the baseline's, with the interval of that ratio when both sides have 3+
    samples (`framework_ratio`); the baseline's own ratio (1) has none."""

    value: float
    interval: Interval | None = None
    between_processes: bool = False  # the interval rests on round medians, not one process's samples


@dataclass(frozen=True)
class Assessment:
    """The judgment of one run. Read-only: every mapping is built by `assess` and never changed."""

    run: Run
    checks: tuple[CheckRow, ...]  # the gate's rows, in the suite's order
    gate_failed: frozenset[str]  # frameworks with at least one failed check
    ceilings: Ceilings | None  # measured on this machine (`harness calibrate`), the run's copy
    findings: tuple[Finding, ...]  # every FLOP/s and bytes/s of an ok job's time metric
    sync_states: Mapping[Key, str]  # ok jobs' time metrics -> ok, escaped or unchecked
    exclusions: Mapping[Key, str]  # untrustworthy (framework, metric) -> why, in words
    measured: Mapping[str, Mapping[str, str]]  # every job -> operation -> measured class (fp32, tf32)
    precision_mismatches: Mapping[str, str]  # framework -> why its arithmetic differs from the baseline's
    not_comparable: Mapping[str, str]  # framework -> why it must not be compared (gate, precision, fairness)
    all_ran: bool  # every job ok or skipped, and no file of the run rejected
    interrupted: bool
    # ok jobs' time metrics that recorded contention -> (contended samples, samples)
    contention: Mapping[Key, tuple[int, int]] = field(default_factory=dict)
    # framework -> which like-for-like settings differ from the baseline's (`training.fairness`)
    fairness_mismatches: Mapping[str, str] = field(default_factory=dict)
    # guard name -> what it raised on (metric guards, judge/guards/), in the run's order
    raised: Mapping[str, tuple[Hit, ...]] = field(default_factory=dict)
    # (framework, metric) -> the name of the guard whose reason excludes it (the first raised on it)
    flagged_by: Mapping[Key, str] = field(default_factory=dict)
    # guard name -> framework -> why (framework guards: agreement, precision, fairness)
    raised_frameworks: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # data-parallel jobs' figures and their 1-way gate (judge/parallel.py); None for a run without any
    parallel: Parallel | None = None
    # inference jobs' latency percentiles and throughput sweep (judge/inference.py); None for a run without any
    inference: InferenceJudgement | None = None

    def hits(self, name: str) -> tuple[Hit, ...]:
        """What one guard raised on this run (nothing for a guard not registered)."""
        return self.raised.get(name, ())

    def guard_hits(self) -> list[tuple[Guard, tuple[Hit, ...]]]:
        """Every registered metric guard with what it raised on this run, in the registry's order: what
        each medium loops over (the table's footer, the site's flags)."""
        return [(guard, self.hits(guard.name)) for guard in guards.registered("metric")]

    def flag_word(self, framework: str, metric: str) -> str | None:
        """The word of the guard that excludes the number (ESCAPED, IMPLAUSIBLE, ...), or None."""
        name = self.flagged_by.get((framework, metric))
        guard = guards.by_name(name) if name is not None else None
        return guard.word if guard is not None else None

    def guards_raised(self, framework: str) -> list[Guard]:
        """The registered guards raised against one framework, in their order."""
        found = []
        for guard in guards.registered():
            if guard.scope == "metric":
                if any(hit.key[0] == framework for hit in self.hits(guard.name)):
                    found.append(guard)
            elif framework in self.raised_frameworks.get(guard.name, {}):
                found.append(guard)
        return found

    @cached_property
    def _profiles(self) -> attribution.Profiles:
        return attribution.profiles(self.run)  # every trace read once, whichever of the two is asked first

    @property
    def breakdowns(self) -> tuple[Breakdown, ...]:
        """The run's profiles (`--profile`), attributed (judge/attribution.py); () without any."""
        return self._profiles.breakdowns

    @property
    def profile_problems(self) -> tuple[str, ...]:
        """One line per profile that could not be attributed (a framework with no profiler, an unreadable trace)."""
        return self._profiles.problems

    @cached_property
    def recompiled(self) -> Mapping[Key, tuple[int, int]]:
        """Time metrics whose steady samples compiled -> (samples marked `compiled`, samples)."""
        return {h.key: (int(h.counts[0]), int(h.counts[1])) for h in self.hits("steady")}

    @cached_property
    def over_threads(self) -> Mapping[Key, tuple[float, int]]:
        """Time metrics that kept more cores busy than --threads allows -> (cores busy, allowed)."""
        return {h.key: (h.counts[0], int(h.counts[1])) for h in self.hits("threads")}

    @cached_property
    def crowded(self) -> str | None:
        """Why the run as a whole must not be read as a measurement of the code: most of its samples
        were disturbed (`disturbed_samples`, below: the CPUs were shared, or the GPU throttled, while
        the clock ran); None when not."""
        contended = sum(k for k, _ in self.contention.values())
        total = sum(n for _, n in self.contention.values())
        if not mostly_disturbed(contended, total):
            return None
        return (
            f"{contended} of {total} samples were contended or throttled (the CPU was shared, or the GPU slowed, "
            "while the clock ran): the numbers measure the neighbours as much as the code; rerun on a quiet machine"
        )

    @cached_property
    def disturbed(self) -> frozenset[Key]:
        """Time metrics most of whose samples the machine disturbed (left out of ratios and comparisons)."""
        machine = {guard.name for guard in guards.registered("metric") if guard.disturbance}
        # A value computed from a disturbed time metric's samples (derived_exclusions) is disturbed with it.
        derived = {key for key, name in self.flagged_by.items() if name in machine}
        return frozenset(hit.key for name in machine for hit in self.hits(name)) | derived

    @property
    def disturbed_only(self) -> bool:
        """Measured, but the machine disturbed it: nothing else is wrong with the run (exit DISTURBED)."""
        return (
            not self.interrupted
            and self.all_ran
            and self.gate_passed
            and not self.implausible
            and (self.crowded is not None or bool(self.disturbed))
        )

    @cached_property
    def escaped(self) -> frozenset[Key]:
        return frozenset(key for key, state in self.sync_states.items() if state == "escaped")

    @cached_property
    def implausible(self) -> frozenset[Key]:
        """(framework, metric) pairs the code made untrustworthy (every guard but the machine's
        disturbance): never printed as records or used in ratios, and the run fails."""
        return frozenset(
            hit.key for guard in guards.registered("metric") if not guard.disturbance for hit in self.hits(guard.name)
        )

    @property
    def gate_passed(self) -> bool:
        """Every framework comparable: passed the agreement gate, measured the baseline's arithmetic
        and ran with its like-for-like settings."""
        return not self.not_comparable

    @property
    def passed(self) -> bool:
        """What exit status 0 means: every job ok or skipped, every check passed, every number plausible,
        and the run as a whole not disturbed by the machine."""
        return self.all_ran and self.gate_passed and not self.implausible and self.crowded is None

    def finding(self, framework: str, metric: str, quantity: str) -> Finding | None:
        """The rate of one metric: quantity "flops" (FLOP/s) or "bytes" (bytes/s); None if not declared."""
        return self._by_key.get((framework, metric, quantity))

    def excluded(self, framework: str, metric: str) -> str | None:
        """Why a (framework, metric) is kept out of ratios, comparisons and records, or None."""
        return self.exclusions.get((framework, metric))

    def sync(self, framework: str, metric: str) -> str:
        """ok, escaped, or unchecked (no barrier evidence) for a time metric of an ok job."""
        return self.sync_states.get((framework, metric), "unchecked")

    def comparable(self, framework: str) -> bool:
        return framework not in self.not_comparable

    def precision(self, framework: str) -> Mapping[str, str]:
        """operation -> the class the job's precision probe measured ({} without a probe)."""
        return self.measured.get(framework, {})

    @cached_property  # written once into the instance's __dict__, which a frozen dataclass allows
    def _by_key(self) -> dict[tuple[str, str, str], Finding]:
        return {(f.framework, f.metric, f.quantity): f for f in self.findings}

    def summary(self, framework: str, metric: str) -> Summary:
        """The metric's statistics (median, IQR, its interval, unstable), worked out once from its samples."""
        key = (framework, metric)
        if key not in self._summaries:
            self._summaries[key] = describe(self._metrics[key]["samples"])
        return self._summaries[key]

    def ratio(self, framework: str, metric: str) -> Ratio | None:
        """The metric against the baseline's, or None where no ratio may be printed: either side is
        excluded or not comparable, the baseline did not run it, or its median is 0."""
        key = (framework, metric)
        if key not in self._ratios:
            self._ratios[key] = self._work_out_ratio(framework, metric)
        return self._ratios[key]

    def _work_out_ratio(self, framework: str, metric: str) -> Ratio | None:
        baseline = self.run.baseline
        excluded = (framework, metric) in self.exclusions or (baseline, metric) in self.exclusions
        if excluded or not (self.comparable(framework) and self.comparable(baseline)):
            return None
        ours, base = self._metrics.get((framework, metric)), self._metrics.get((baseline, metric))
        if ours is None or base is None or not base["stats"]["median"]:
            return None
        value = ours["stats"]["median"] / base["stats"]["median"]
        if framework == baseline or min(len(ours["samples"]), len(base["samples"])) < 3:
            return Ratio(value)
        interval, between = framework_ratio(base, ours)
        return Ratio(value, interval, between)

    def plain_ratio(self, framework: str, metric: str, of: str) -> float | None:
        """A ratio to the baseline with no interval: `of` "first_call" (the first call's time) or a
        quantity ("flops", "bytes": the rate achieved). None where none may be printed: the framework
        or the baseline is not comparable, the baseline's metric is excluded (for a rate, the
        framework's too), either side lacks the number, or the baseline's is 0."""
        baseline = self.run.baseline
        if not (self.comparable(framework) and self.comparable(baseline)) or self.excluded(baseline, metric):
            return None
        if of == "first_call":
            ours, base = self._metrics.get((framework, metric)), self._metrics.get((baseline, metric))
            mine = ours.get("first_call") if ours is not None else None
            theirs = base.get("first_call") if base is not None else None
        elif self.excluded(framework, metric):
            return None
        else:
            found, base_found = self.finding(framework, metric, of), self.finding(baseline, metric, of)
            mine = found.achieved if found is not None else None
            theirs = base_found.achieved if base_found is not None else None
        return mine / theirs if mine is not None and theirs else None

    @cached_property
    def _metrics(self) -> dict[Key, Metric]:
        return {(fw, m["name"]): m for fw, _, m in ok_metrics(self.run)}

    @cached_property  # filled on first use: a run's bootstrap intervals are not free
    def _summaries(self) -> dict[Key, Summary]:
        return {}

    @cached_property
    def _ratios(self) -> dict[Key, Ratio | None]:
        return {}


def assess(run: Run) -> Assessment:
    """Judge a run once. Reads the run's calibration copy (a broken one joins `run.problems`).

    Every registered guard (judge/guards/) judges the same evidence; a number is excluded with the
    reason of the first guard raised on it, and a framework is not comparable for every reason a
    framework guard gives."""
    # The data-parallel 1-way gate (judge/parallel.py) fails a framework as a failed cross-framework check does.
    checks = tuple(evaluate(run))
    # Only a run with a data-parallel job reaches judge/parallel.py (the everyday path stays as short).
    dp_run = any(data_parallel(r.get("params") or {}) or "parallel" in r for r in run.results.values())
    gate = dp_judge.gate_rows(run) if dp_run else ()
    failed_checks = failing_frameworks([*checks, *gate])
    ceilings = ceilings_for_run(run)
    findings = tuple(lint(run, ceilings))
    measured = {fw: measured_precision(result) for fw, result in run.results.items()}
    evidence = Evidence(run, ceilings, findings, measured, failed_checks)
    raised = {guard.name: tuple(guard.hits(evidence)) for guard in guards.registered("metric")}
    exclusions: dict[Key, str] = {}
    flagged_by: dict[Key, str] = {}
    for guard in guards.registered("metric"):
        for hit in raised[guard.name]:
            if hit.key not in exclusions:
                exclusions[hit.key], flagged_by[hit.key] = hit.reason, guard.name
    framework_reasons = {guard.name: dict(guard.frameworks(evidence)) for guard in guards.registered("framework")}
    not_comparable: dict[str, str] = {}
    for found in framework_reasons.values():
        for fw, why in found.items():
            not_comparable[fw] = f"{not_comparable[fw]}; {why}" if fw in not_comparable else why
    derived_exclusions(run, exclusions, flagged_by)
    return Assessment(
        run=run,
        checks=checks,
        gate_failed=frozenset(failed_checks),
        ceilings=ceilings,
        findings=findings,
        sync_states={(fw, m["name"]): sync_state(m) for fw, _, m in ok_metrics(run) if m["kind"] == "time"},
        exclusions=exclusions,
        measured=measured,
        precision_mismatches=framework_reasons.get("precision", {}),
        not_comparable=not_comparable,
        all_ran=all(r["status"] in ("ok", "skipped") for r in run.results.values()) and not run.problems,
        interrupted=bool(run.summary.get("interrupted")),
        contention=readings(run),
        fairness_mismatches=framework_reasons.get("fairness", {}),
        raised=raised,
        flagged_by=flagged_by,
        raised_frameworks=framework_reasons,
        parallel=dp_judge.judge(run, gate, flagged_by) if dp_run else None,
        # Only a run with an inference job reaches judge/inference.py (the everyday path stays as short).
        inference=inference_judge.judge(run, lambda fw, m: exclusions.get((fw, m)))
        if any("inference" in r for r in run.results.values())
        else None,
    )


def derived_exclusions(run: Run, exclusions: dict[Key, str], flagged_by: dict[Key, str]) -> None:
    """A value metric computed from a time metric's samples (`derived_from`: samples/s from epoch
    seconds, tokens/s from step times) is excluded with that metric's reason, flagged by the same
    guard, whenever the time metric is excluded: whatever a guard found in the seconds holds for the
    rate made of them. Added to `exclusions` and `flagged_by` in place; the first excluded source
    gives the reason. The schema has checked that each source is a time metric of the same result."""
    for fw, _, m in ok_metrics(run):
        key = (fw, m["name"])
        if m["kind"] != "value" or key in exclusions:
            continue
        if (source := next((name for name in derived_sources(m) if (fw, name) in exclusions), None)) is not None:
            exclusions[key] = exclusions[(fw, source)]
            if (fw, source) in flagged_by:
                flagged_by[key] = flagged_by[(fw, source)]


def _finite_medians(metric: Metric) -> list[float] | None:
    found = metric.get("round_medians")
    if not isinstance(found, list) or len(found) < 2:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in found):
        return None
    return [float(v) for v in found]


def disturbed_rounds(metric: Metric, tail: float | None = None) -> set[int] | None:
    """Indices of the rounds (processes) most of whose samples the machine disturbed, or with `tail` (q of
    a tail percentile made of them) whose q-tail it disturbed; None for a metric without rounds or whose
    round sizes cannot be read."""
    medians = _finite_medians(metric)
    sizes = metric.get("round_sizes")
    if medians is None or not isinstance(sizes, list) or len(sizes) != len(medians):
        return None
    if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
        return None
    if tail is not None:
        return None if (tails := disturbed_tails(metric, tail)) is None else tails[0]
    disturbed = disturbed_samples(metric)
    found, start = set(), 0
    for i, size in enumerate(sizes):
        if mostly_disturbed(len(disturbed.intersection(range(start, start + size))), size):
            found.add(i)
        start += size
    return found


def quiet_rounds(metric: Metric, sources: Sequence[Metric] = (), tail: float | None = None) -> tuple[list[float], int]:
    """(the medians of the rounds the machine left alone, how many rounds were left out as disturbed);
    ([], 0) for a metric without rounds (a single process). A value computed from time metrics'
    samples (`derived_from`: throughput, tokens/s) loses the rounds its `sources` lost: its own
    record carries no contention readings, theirs do, and round i is one process for all of them.
    A tail percentile (`tail`: its q) loses those whose q-tail was disturbed (guards/contention.py)."""
    if (medians := _finite_medians(metric)) is None:
        return [], 0
    left: set[int] = set()
    for measured in (metric, *sources):
        found = disturbed_rounds(measured, None if measured is metric else tail)
        if found is not None and (measured is metric or len(measured.get("round_medians") or []) == len(medians)):
            left |= found
    kept = [median for i, median in enumerate(medians) if i not in left]
    return kept, len(medians) - len(kept)


def kept_rounds(result: Result, metric: Metric) -> tuple[list[float], int]:
    """`quiet_rounds` of one metric of a result, a derived value judged by its sources' rounds: what
    `compare`, the noise floor and its explanation all use, so they rest on the same rounds."""
    names = derived_sources(metric)
    tail = tail_quantile(result, metric["name"])
    return quiet_rounds(metric, [m for m in result["metrics"] if m["name"] in names], tail[1] if tail else None)


def run_exit_code(judged: Assessment) -> int:
    """What a finished run means for the shell (`run`, `reproduce`, `selftest`, `ab`'s sides): 0 when
    every job was ok or skipped, every check passed, every number is plausible and most samples were
    not disturbed (`Assessment.passed`); 130 when the run was interrupted; DISTURBED (3) when the machine's
    disturbance is all that is wrong; else 1."""
    if judged.interrupted:
        return INTERRUPTED
    if judged.passed:
        return 0
    return DISTURBED if judged.disturbed_only else FAILED


def framework_ratio(base: Metric, metric: Metric) -> tuple[Interval, bool]:
    """The interval of metric / base between two frameworks of one run, and whether it rests on processes.

    With interleaved rounds each round's median is one observation per framework (the unit a claim
    about frameworks needs); without, the samples of one process a side, whose interval says how
    steady those two processes were, not how the frameworks differ, and is labelled so.
    """
    rounds_base, rounds = base.get("round_medians"), metric.get("round_medians")
    if isinstance(rounds_base, list) and isinstance(rounds, list) and min(len(rounds_base), len(rounds)) >= 2:
        return ratio_interval(rounds_base, rounds), True
    return ratio_interval(base["samples"], metric["samples"]), False
