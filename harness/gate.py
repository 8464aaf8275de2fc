"""The agreement gate: each framework's check values against the suite's limits and the baseline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.runs import Run


@dataclass
class CheckRow:
    name: str
    help: str
    tolerance: str
    values: dict[str, Any] = field(default_factory=dict)
    rel_diff: dict[str, float | None] = field(default_factory=dict)
    passed: dict[str, bool] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    # The framework the rtol/atol comparison used: the baseline, or the first framework that
    # ran when the baseline was skipped or failed (None: nothing to compare against).
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
    """Whose check values the others are compared with.

    `Run.baseline` already falls back from a skipped or failed baseline (say numpy in a suite
    it cannot run) to the first framework that ran, so a skipped baseline never switches the
    comparison off; None when nothing ran.
    """
    return run.baseline if run.results.get(run.baseline, {}).get("status") == "ok" else None


def max_rel_diff(value: Any, base: Any) -> float:
    worst = 0.0
    for v, b in zip(_flat(value), _flat(base), strict=False):
        denom = abs(b) if b != 0 else 1.0
        worst = max(worst, abs(v - b) / denom)
    return worst


def evaluate(run: Run) -> list[CheckRow]:
    ok = {fw: r for fw, r in run.results.items() if r["status"] == "ok"}
    reference = reference_framework(run)
    ref_checks = {c["name"]: c for c in ok[reference]["checks"]} if reference else {}
    label = "baseline" if reference == run.summary.get("baseline") else str(reference)
    rows: dict[str, CheckRow] = {}

    def row_for(check: dict[str, Any]) -> CheckRow:
        return rows.setdefault(
            check["name"],
            CheckRow(check["name"], check.get("help", ""), tolerance_text(check, label), reference=reference),
        )

    for fw, result in ok.items():
        for check in result["checks"]:
            row = row_for(check)
            value = check["value"]
            row.values[fw] = value
            passed, why = True, ""
            limit = check.get("limit")
            if limit is not None and max(abs(v) for v in _flat(value)) > limit:
                passed, why = False, f"exceeds limit {limit:g}"
            ref = ref_checks.get(check["name"])
            if ref is not None and fw != reference:
                if _shape(value) != _shape(ref["value"]):
                    passed, why = False, f"shape differs from {reference}"
                    row.rel_diff[fw] = None
                else:
                    row.rel_diff[fw] = max_rel_diff(value, ref["value"])
                    rtol = check.get("rtol")
                    if rtol is not None:
                        atol = check.get("atol") or 0.0
                        bad = any(
                            abs(v - b) > atol + rtol * abs(b)
                            for v, b in zip(_flat(value), _flat(ref["value"]), strict=False)
                        )
                        if bad:
                            passed, why = (
                                False,
                                f"differs from {reference} by {row.rel_diff[fw]:.2g} (rtol {rtol:g})",
                            )
            row.passed[fw] = passed
            if why:
                row.why[fw] = why
        # A comparison the reference makes but this framework skipped must not pass silently.
        reported = {c["name"] for c in result["checks"]}
        for name, ref in ref_checks.items():
            if name not in reported and ref.get("rtol") is not None:
                row = row_for(ref)
                row.passed[fw] = False
                row.why[fw] = f"no value, but {reference} reported one"
    return list(rows.values())


def failing_frameworks(rows: list[CheckRow]) -> set[str]:
    return {fw for row in rows for fw, ok in row.passed.items() if not ok}
