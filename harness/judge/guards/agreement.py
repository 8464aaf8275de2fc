"""NOT COMPARABLE (†): a framework failed the agreement gate, its check values disagree with the
reference's: it computed something else, so its speed is no comparison. The gate itself is here
too (`evaluate`, the check rows): the assessment runs it once, and the data-parallel gate
(judge/parallel.py) holds a job's N-way values to its own 1-way values with the same rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from harness.core.result_types import Check
from harness.core.schema import missing_rounds
from harness.judge.guards.base import Evidence, Guard, Planted
from harness.store.run_folder import Run
from harness.text.numbers import fmt_rel_diff
from suites.contract.inference import INFERENCE_CHECKS, checks_of, inferring
from suites.contract.ranks import PARALLEL_CHECKS, data_parallel, parallel_checks
from suites.contract.registry import all_suites
from suites.contract.spec import CheckSpec

GATE = "failed the agreement gate"


class Agreement(Guard):
    name = "check"
    word = "NOT COMPARABLE"
    reads = ("checks[].value",)
    heading = "not comparable: failed the agreement gate"
    catches = "failed check against the other frameworks' outputs"
    order = 15
    scope = "framework"
    planted = (
        Planted("float32", "float32 arithmetic under a float64 suite", "pytorch", "numpy"),
        Planted("own_data", "its own random inputs instead of the shared ones", "jax", "numpy"),
        Planted("half_work", "half the rows of the product: less work than the metric claims", "pytorch", "numpy"),
    )  # fmt: skip

    def frameworks(self, evidence: Evidence) -> Mapping[str, str]:
        order = list(evidence.run.results)
        return {fw: GATE for fw in sorted(evidence.failed_checks, key=order.index)}


GUARD = Agreement()


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
    """The checks the run's suite declares in this harness (empty for a suite it does not know).

    A data-parallel job (`devices` >= 1) runs another loop than the suite's own, with checks of its
    own (suites/contract/ranks.py): it is held to those alone (the suite's declaration of them, else
    the contract's), and a job of the suite's own loop never to them. So is an inference job (`mode`
    other than train, suites/contract/inference.py), to its mode's checks, each then required."""
    if (spec := all_suites().get(str(run.summary.get("suite")))) is None:
        return {}
    params = run_params(run)
    if inferring(params):  # an inference job is held to its mode's checks, each then required
        wanted = checks_of(params)
        return {c.name: replace(c, required=True) for c in spec.checks if c.name in wanted}
    if not data_parallel(params):
        return {c.name: c for c in spec.checks if c.name not in PARALLEL_CHECKS and c.name not in INFERENCE_CHECKS}
    declared = {c.name: c for c in spec.checks}
    return {c.name: declared.get(c.name, c) for c in parallel_checks()}


def run_params(run: Run) -> Mapping[str, Any]:
    """The parameters the run's jobs ran with (one set per run: the plan's), read off its first result."""
    return next((r["params"] for r in run.results.values()), {})


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
            value = row.values[fw] = values[fw]
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


def failing_frameworks(rows: list[CheckRow]) -> dict[str, tuple[str, ...]]:
    """framework -> the agreement checks it failed, in the suite's order (frameworks that failed one)."""
    failed: dict[str, tuple[str, ...]] = {}
    for row in rows:
        for fw, ok in row.passed.items():
            if not ok:
                failed[fw] = (*failed.get(fw, ()), row.name)
    return failed
