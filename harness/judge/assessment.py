"""`assess(run)`: everything a run is judged on, worked out once; renderers and the exit code read it.

The judgment of a run, in one object:
- the agreement gate (below): each check's row, and the frameworks that failed one;
- numbers we cannot stand behind (plausibility.py): rates above the device's ceilings (with the
  ceilings `harness calibrate` measured, read once from the run's copy) and escaped syncs;
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
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from harness.core.result_types import Check, Metric, Result
from harness.core.schema import missing_rounds
from harness.core.stack_facts import STACKS
from harness.core.statistics import Interval, Summary, describe, ratio_interval
from harness.judge.plausibility import Finding, lint, sync_state
from harness.store.calibration import Ceilings, ceilings_for_run
from harness.store.run_folder import Run
from harness.text.numbers import fmt_rel_diff
from suites.contract.marks import COMPILED
from suites.contract.precision import CLASSES as PROBE_CLASSES
from suites.contract.registry import all_suites
from suites.contract.spec import CheckSpec

Key = tuple[str, str]  # (framework, metric)

GATE = "failed the agreement gate"
SYNC_ESCAPED = "sync escaped"  # the exclusion reason of an escaped metric, in footers and exports
CONTENDED = "contended"  # the start of the exclusion reason of a metric whose samples were mostly contended
RECOMPILED = "compiled in the steady state"  # the start of the exclusion reason of a retracing metric
OVER_THREADS = "more cores than --threads allows"  # the start of the exclusion reason of such a metric
# The job is pinned to `--threads` cores (suites/contract/settings.py pin_cores), so its CPU time per
# second cannot exceed that while the pin holds: above it by this much, the job undid its limit
# (a widened affinity). The slack covers the kernel's CPU accounting; under MIN_WALL_S of samples
# the quotient is not read at all.
THREADS_SLACK_CORES = 0.25
MIN_WALL_S = 0.05


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
    # ok jobs' time metrics whose steady samples compiled -> (samples marked `compiled`, samples)
    recompiled: Mapping[Key, tuple[int, int]] = field(default_factory=dict)
    # ok jobs' time metrics that kept more cores busy than --threads allows -> (cores busy, allowed)
    over_threads: Mapping[Key, tuple[float, int]] = field(default_factory=dict)

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
        return frozenset(key for key, (k, n) in self.contention.items() if mostly_disturbed(k, n))

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
    def implausible_findings(self) -> tuple[Finding, ...]:
        """Rates above their ceiling, in the order `findings` holds them."""
        return tuple(f for f in self.findings if not f.plausible)

    @cached_property
    def implausible(self) -> frozenset[Key]:
        """(framework, metric) pairs whose numbers must not be printed as records or used in ratios."""
        return (
            frozenset((f.framework, f.metric) for f in self.implausible_findings)
            | self.escaped
            | set(self.recompiled)
            | set(self.over_threads)
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
        if (framework, metric) in self.exclusions or (baseline, metric) in self.exclusions:
            return None
        if not (self.comparable(framework) and self.comparable(baseline)):
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


def ok_metrics(run: Run) -> Iterator[tuple[str, Result, Metric]]:
    """(framework, result, metric) for every metric of an ok job: a failed job's partial metrics are
    not numbers to judge."""
    for fw, result in run.results.items():
        if result["status"] == "ok":
            for metric in result["metrics"]:
                yield fw, result, metric


def assess(run: Run) -> Assessment:
    """Judge a run once. Reads the run's calibration copy (a broken one joins `run.problems`)."""
    checks = tuple(evaluate(run))
    gate_failed = frozenset(failing_frameworks(list(checks)))
    ceilings = ceilings_for_run(run)
    findings = tuple(lint(run, ceilings))
    sync_states = {(fw, m["name"]): sync_state(m) for fw, _, m in ok_metrics(run) if m["kind"] == "time"}
    exclusions: dict[Key, str] = {key: SYNC_ESCAPED for key, state in sync_states.items() if state == "escaped"}
    for f in findings:
        if not f.plausible:
            word = "FLOP/s" if f.quantity == "flops" else "bandwidth"
            exclusions.setdefault((f.framework, f.metric), f"implausible {word} (above device peak)")
    # A compilation inside a steady sample is the code's doing, not the machine's: one is enough.
    recompiled = _recompiled(run)
    for key, (compiled, n) in recompiled.items():
        exclusions.setdefault(key, f"{RECOMPILED} ({compiled}/{n} samples)")
    over_threads = _over_threads(run)
    for key, (busy, allowed) in over_threads.items():
        exclusions.setdefault(key, f"{OVER_THREADS} ({busy:.2f} cores busy, --threads {allowed})")
    contention = _contention(run)
    for key, (contended, n) in contention.items():
        if mostly_disturbed(contended, n):  # most samples disturbed: the median itself is the neighbours' doing
            exclusions.setdefault(key, f"{CONTENDED} ({contended}/{n} samples)")
    measured = {fw: measured_precision(result) for fw, result in run.results.items()}
    mismatches = _precision_mismatches(run, measured)
    unfair = _fairness_mismatches(run)
    not_comparable = {fw: GATE for fw in sorted(gate_failed, key=list(run.results).index)}
    for fw, why in [*mismatches.items(), *unfair.items()]:
        not_comparable[fw] = f"{not_comparable[fw]}; {why}" if fw in not_comparable else why
    return Assessment(
        run=run,
        checks=checks,
        gate_failed=gate_failed,
        ceilings=ceilings,
        findings=findings,
        sync_states=sync_states,
        exclusions=exclusions,
        measured=measured,
        precision_mismatches=mismatches,
        not_comparable=not_comparable,
        all_ran=all(r["status"] in ("ok", "skipped") for r in run.results.values()) and not run.problems,
        interrupted=bool(run.summary.get("interrupted")),
        contention=contention,
        fairness_mismatches=unfair,
        recompiled=recompiled,
        over_threads=over_threads,
    )


def _over_threads(run: Run) -> dict[Key, tuple[float, int]]:
    """Time metrics whose process kept more cores busy, on average over its samples, than the
    `--threads` it ran under (recorded in the result's settings)."""
    found: dict[Key, tuple[float, int]] = {}
    for fw, result, m in ok_metrics(run):
        allowed = (result.get("settings") or {}).get("threads")
        seen = m.get("contention")
        if m["kind"] != "time" or not isinstance(allowed, int) or allowed < 1 or not isinstance(seen, dict):
            continue
        # The schema holds both lists to one finite, non-negative value per sample.
        cpu, wall = seen.get("cpu_s") or [], seen.get("wall_s") or []
        if sum(wall) >= MIN_WALL_S and sum(cpu) / sum(wall) > allowed + THREADS_SLACK_CORES:
            found[(fw, m["name"])] = (sum(cpu) / sum(wall), allowed)
    return found


def _recompiled(run: Run) -> dict[Key, tuple[int, int]]:
    """Time metrics with samples the job marked `compiled` (suites/contract/marks.py)."""
    found: dict[Key, tuple[int, int]] = {}
    for fw, _, m in ok_metrics(run):
        if m["kind"] == "time":
            n = len(m["samples"])
            marked = _indices((m.get("marks") or {}).get(COMPILED), n)
            if marked:
                found[(fw, m["name"])] = (len(marked), n)
    return found


def _contention(run: Run) -> dict[Key, tuple[int, int]]:
    return {
        (fw, m["name"]): (len(disturbed_samples(m)), len(m["samples"]))
        for fw, _, m in ok_metrics(run)
        if m["kind"] == "time" and isinstance(m.get("contention"), dict)
    }


# Which samples and rounds the machine disturbed: the one rule every verdict filters by (compare,
# the noise floor, bisect, the exit status). It lives here, with the judgment that uses it first,
# and not in a module of its own: one run's path stays within its 20 modules (tests/test_run_path.py).
#
# A sample is disturbed when the job's runtime marked it `contended` (the CPUs it may use were
# shared while its clock ran: suites/runtime/contention.py) or `throttled` for a reason outside the
# device's normal loaded state: thermal or hardware slowdown, or a power brake. A GPU under a
# sustained load runs at its power cap as a matter of course (NVML's "SW power cap" is set for most
# of any long matmul on an H100), and sync boost only ties GPUs together, so those two are recorded
# but do not disturb a sample: marking them would mark every honest GPU run.
#
# A round (one process) most of whose samples were disturbed measured its neighbours: its median is
# left out of every between-process statistic, in `compare` and in `harness noise` alike, so the
# allowance a noise floor grants is built from exactly the evidence a verdict is judged on.

# NVML clock-event reasons (suites/runtime/contention.py THROTTLING) that disturb a sample:
# hardware slowdown, thermal (software), thermal (hardware), power brake.
DISTURBING_REASONS = 0x8 | 0x20 | 0x40 | 0x80


def _indices(value: Any, n: int) -> set[int]:
    if not isinstance(value, list):
        return set()
    return {i for i in value if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n}


def disturbed_samples(metric: Metric) -> frozenset[int]:
    """Indices (into `metric["samples"]`) of the samples the machine disturbed."""
    seen = metric.get("contention")
    if not isinstance(seen, dict):
        return frozenset()
    n = len(metric["samples"])
    found = _indices(seen.get("contended"), n)
    reasons = seen.get("clock_event_reasons")
    if isinstance(reasons, list) and len(reasons) == n:
        found |= {
            i
            for i, r in enumerate(reasons)
            if isinstance(r, int) and not isinstance(r, bool) and r & DISTURBING_REASONS
        }
    return frozenset(found)


def mostly_disturbed(disturbed: int, n: int) -> bool:
    """The rule for a metric, a round or a run: most of its samples disturbed."""
    return n > 0 and disturbed * 2 > n


def _finite_medians(metric: Metric) -> list[float] | None:
    found = metric.get("round_medians")
    if not isinstance(found, list) or len(found) < 2:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in found):
        return None
    return [float(v) for v in found]


def quiet_rounds(metric: Metric) -> tuple[list[float], int]:
    """(the medians of the rounds the machine left alone, how many rounds were left out as disturbed);
    ([], 0) for a metric without rounds (a single process)."""
    medians = _finite_medians(metric)
    if medians is None:
        return [], 0
    sizes = metric.get("round_sizes")
    disturbed = disturbed_samples(metric)
    if not disturbed or not isinstance(sizes, list) or len(sizes) != len(medians):
        return medians, 0
    if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
        return medians, 0
    kept, start = [], 0
    for median, size in zip(medians, sizes, strict=True):
        if not mostly_disturbed(len(disturbed.intersection(range(start, start + size))), size):
            kept.append(median)
        start += size
    return kept, len(medians) - len(kept)


INTERRUPTED = 130  # the shell's convention for SIGINT
FAILED = 1
# Measured, but the machine disturbed it (contended or throttled beyond the rule) and nothing else
# is wrong: "rerun on a quiet machine", which a script must tell from FAILED ("the code is wrong").
DISTURBED = 3
# When several apply, the most telling wins: an interruption, then a wrong answer, then a busy machine.
_PRECEDENCE = (INTERRUPTED, FAILED, DISTURBED)


def worst(*codes: int) -> int:
    """The exit status of several outcomes together (`ab`'s two sides and its gate, a compare's rows)."""
    for code in _PRECEDENCE:
        if code in codes:
            return code
    return max(codes, default=0)  # another non-zero status (2) passes through; else 0


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


def measured_precision(result: Mapping[str, Any]) -> dict[str, str]:
    """operation -> measured class (fp32, tf32, ...) from the job's precision probe."""
    env = result.get("environment")
    precision = env.get("precision") if isinstance(env, dict) else None
    measured = precision.get("measured") if isinstance(precision, dict) else None
    found: dict[str, str] = {}
    if isinstance(measured, dict):
        for op in ("matmul", "conv"):
            entry = measured.get(op)
            # Read from disk: only a class the probe can produce reaches a table or a terminal.
            if isinstance(entry, dict) and entry.get("class") in PROBE_CLASSES:
                found[op] = entry["class"]
    return found


def _precision_mismatches(run: Run, measured: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """framework -> why its measured arithmetic differs from the baseline's (ok jobs only)."""
    base = run.results.get(run.baseline)
    if base is None or base["status"] != "ok":
        return {}
    reference = measured[run.baseline]
    found: dict[str, str] = {}
    for fw, result in run.results.items():
        if fw == run.baseline or result["status"] != "ok":
            continue
        mine = measured[fw]
        differing = [
            f"{op} {mine[op]} vs {reference[op]}"
            for op in sorted(mine.keys() & reference.keys())
            if mine[op] != reference[op]
        ]
        if differing:
            found[fw] = f"measured precision differs from {run.baseline}: " + ", ".join(differing)
    return found


# Like-for-like settings (`training.fairness`, written by suites/runtime): setting -> true/false, a
# word ("async", "bfloat16"), or null where the setting does not apply on this device. Read from
# disk, so checked here before use: a field that is not a small object of such values is ignored
# and named in `run.problems` (the run then fails), never half trusted.
Setting = bool | str | None
MAX_FAIRNESS_SETTINGS = 32  # a suite writes three; a few dozen is no longer a list of knobs
_SETTING_NAME = re.compile(r"[a-z][a-z0-9_]{0,59}")
# A value is shown in every medium's "not comparable" line: a word with nothing to escape.
_SETTING_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,39}")


def fairness_settings(result: Mapping[str, Any]) -> tuple[dict[str, Setting], str | None]:
    """(setting -> value, why the field was ignored) of one result; ({}, None) without the field."""
    training = result.get("training")
    found = training.get("fairness") if isinstance(training, dict) else None
    if found is None:
        return {}, None
    if not isinstance(found, dict):
        return {}, "expected an object"
    if len(found) > MAX_FAIRNESS_SETTINGS:
        return {}, f"{len(found)} settings is more than the {MAX_FAIRNESS_SETTINGS} a result may hold"
    for key, value in found.items():
        if not isinstance(key, str) or not _SETTING_NAME.fullmatch(key):
            return {}, "a setting name is not lower-case letters, digits and '_'"
        if not (value is None or isinstance(value, bool) or isinstance(value, str) and _SETTING_WORD.fullmatch(value)):
            return {}, f"{key}: expected true, false, null or a short word"
    return dict(found), None


def _word(value: Setting) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _called(key: str, stacks: tuple[str, str]) -> str:
    """' (cuDNN benchmark vs XLA autotuning)': the setting's name in both stacks, when known."""
    # What the setting is called in each stack (its declaration), so the reason names the knob to turn.
    mine, theirs = (STACKS[s].setting_names.get(key) if s in STACKS else None for s in stacks)
    if mine is None or theirs is None:
        return ""
    return f" ({mine})" if mine == theirs else f" ({mine} vs {theirs})"


def _fairness_mismatches(run: Run) -> dict[str, str]:
    """framework -> the like-for-like settings it ran with that differ from the baseline's (ok jobs;
    a setting one side leaves null does not apply there and compares with anything)."""
    settings: dict[str, dict[str, Setting]] = {}
    for fw, result in run.results.items():
        if result["status"] != "ok":
            continue
        settings[fw], problem = fairness_settings(result)
        if problem is not None:
            note = f"{fw}: training.fairness ignored ({problem})"
            if note not in run.problems:  # assessing a run twice must not say it twice
                run.problems.append(note)
    reference = settings.get(run.baseline)
    if reference is None:
        return {}
    found: dict[str, str] = {}
    for fw, mine in settings.items():
        if fw == run.baseline:
            continue
        stacks = (run.results[fw]["stack"], run.results[run.baseline]["stack"])
        differing = [
            f"{key} {_word(mine[key])} in {fw}, {_word(reference[key])} in {run.baseline}{_called(key, stacks)}"
            for key in sorted(mine.keys() & reference.keys())
            if mine[key] is not None and reference[key] is not None and mine[key] != reference[key]
        ]
        if differing:
            found[fw] = "unfair: " + "; ".join(differing)
    return found


# The agreement gate: each framework's check values against the suite's limits and each other.
#
# Tolerances come from the suite as this harness declares it (suites/<name>/spec.py), not from
# what a result file says about itself. Every ok job must report every check the suite requires
# of it. Agreement is measured against a reference: the baseline when two frameworks compare;
# with three or more, the framework most others agree with (the baseline on a tie), so one wrong
# framework, even the baseline, is the one marked and not the two that agree.
@dataclass
class CheckRow:
    name: str
    help: str
    tolerance: str
    values: dict[str, Any] = field(default_factory=dict)
    rel_diff: dict[str, float | None] = field(default_factory=dict)
    passed: dict[str, bool] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    # The framework the rtol/atol comparison used (None: nothing to compare against).
    reference: str | None = None


def _flat(value: Any) -> list[float]:
    if isinstance(value, list):
        return [x for v in value for x in _flat(v)]
    return [float(value)]


def _shape(value: Any) -> Any:
    return [_shape(v) for v in value] if isinstance(value, list) else None


def tolerance_text(check: dict[str, Any], reference: str = "baseline") -> str:
    parts = []
    if check.get("limit") is not None:
        parts.append(f"|v| <= {check['limit']:g}")
    if check.get("rtol") is not None:
        atol = check.get("atol") or 0.0
        parts.append(f"rtol {check['rtol']:g}" + (f", atol {atol:g}" if atol else "") + f" vs {reference}")
    return "; ".join(parts) or "reported only"


def reference_framework(run: Run) -> str | None:
    """The default reference: `Run.baseline`, which already falls back from a skipped or failed
    baseline to the first framework that ran; None when nothing ran."""
    base = run.results.get(run.baseline)
    return run.baseline if base is not None and base["status"] == "ok" else None


def max_rel_diff(value: Any, base: Any) -> float:
    worst = 0.0
    for v, b in zip(_flat(value), _flat(base), strict=False):
        denom = abs(b) if b != 0 else 1.0
        worst = max(worst, abs(v - b) / denom)
    return worst


def agrees(value: Any, base: Any, rtol: float, atol: float) -> bool:
    if _shape(value) != _shape(base):
        return False
    return all(abs(v - b) <= atol + rtol * abs(b) for v, b in zip(_flat(value), _flat(base), strict=True))


def declared_checks(run: Run) -> dict[str, CheckSpec]:
    """The checks the run's suite declares in this harness (empty for a suite it does not know)."""
    spec = all_suites().get(str(run.summary.get("suite")))
    return {c.name: c for c in spec.checks} if spec is not None else {}


def _tolerance(declared: CheckSpec | None, reported: Mapping[str, Any]) -> dict[str, Any]:
    if declared is not None:
        return declared.as_record()
    return {"limit": reported.get("limit"), "rtol": reported.get("rtol"), "atol": reported.get("atol") or 0.0}


def choose_reference(values: dict[str, Any], rtol: float, atol: float, default: str | None) -> str | None:
    """The framework most others agree with; `default` (the baseline) unless another has more."""
    if not values:
        return None
    if len(values) < 3:
        return default if default in values else next(iter(values))

    def support(candidate: str) -> int:
        base = values[candidate]
        return sum(agrees(v, base, rtol, atol) for fw, v in values.items() if fw != candidate)

    best = max(support(fw) for fw in values)
    if default in values and support(default) == best:
        return default
    return next(fw for fw in values if support(fw) == best)


def evaluate(run: Run) -> list[CheckRow]:
    ok = {fw: r for fw, r in run.results.items() if r["status"] == "ok"}
    declared = declared_checks(run)
    default = reference_framework(run)
    reported: dict[str, dict[str, Check]] = {}  # check -> framework -> record
    for fw, result in ok.items():
        for check in result["checks"]:
            reported.setdefault(check["name"], {})[fw] = check
    names = [n for n in declared if n in reported or any(declared[n].required_of(fw) for fw in ok)]
    names += [n for n in reported if n not in names]
    rows = []
    for name in names:
        records = reported.get(name, {})
        spec = declared.get(name)
        tol = _tolerance(spec, next(iter(records.values()), {}))
        values = {fw: rec["value"] for fw, rec in records.items()}
        rtol, atol, limit = tol["rtol"], tol["atol"] or 0.0, tol["limit"]
        # A framework that left the check out of some round cannot be what the others are held to.
        complete = {fw: v for fw, v in values.items() if not missing_rounds(records[fw])}
        reference = choose_reference(complete, rtol, atol, default) if rtol is not None else None
        if reference is not None and reference != default:
            label = f"{reference} (majority)"
        elif reference == run.summary.get("baseline"):
            label = "baseline"
        else:
            label = str(reference)
        row = CheckRow(
            name,
            spec.help if spec else str(next((r.get("help", "") for r in records.values()), "")),
            tolerance_text(tol, label),
            reference=reference,
        )
        for fw in ok:
            if fw not in values:
                if spec is not None:
                    if spec.required_of(fw):
                        row.passed[fw], row.why[fw] = False, "declared check not reported"
                elif rtol is not None and reference is not None:
                    row.passed[fw], row.why[fw] = False, f"no value, but {reference} reported one"
                continue
            value = values[fw]
            row.values[fw] = value
            passed, why = True, ""
            if limit is not None and max(abs(v) for v in _flat(value)) > limit:
                passed, why = False, f"exceeds limit {limit:g}"
            if rtol is not None and reference is not None and fw != reference:
                base = values[reference]
                if _shape(value) != _shape(base):
                    passed, why = False, f"shape differs from {reference}"
                    row.rel_diff[fw] = None
                else:
                    diff = row.rel_diff[fw] = max_rel_diff(value, base)
                    if not agrees(value, base, rtol, atol):
                        passed, why = False, f"differs from {reference} by {fmt_rel_diff(diff)} (rtol {rtol:g})"
            missing = missing_rounds(records[fw])
            if missing:  # pooled rounds (harness/execute/rounds.py): the rounds it has say nothing of the others
                rounds = ok[fw]["settings"].get("rounds")
                words = f"round{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} of {rounds}"
                passed, why = False, f"not reported in {words}"
            row.passed[fw] = passed
            if why:
                row.why[fw] = why
        rows.append(row)
    return rows


def failing_frameworks(rows: list[CheckRow]) -> set[str]:
    return {fw for row in rows for fw, ok in row.passed.items() if not ok}


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
