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


def _flat(value: Any) -> list[float]:
    if isinstance(value, list):
        return [x for v in value for x in _flat(v)]
    return [float(value)]


def _shape(value: Any) -> Any:
    return [_shape(v) for v in value] if isinstance(value, list) else None


def tolerance_text(check: dict[str, Any]) -> str:
    parts = []
    if check.get("limit") is not None:
        parts.append(f"|v| <= {check['limit']:g}")
    if check.get("rtol") is not None:
        atol = check.get("atol") or 0.0
        parts.append(f"rtol {check['rtol']:g}" + (f", atol {atol:g}" if atol else "") + " vs baseline")
    return "; ".join(parts) or "reported only"


def max_rel_diff(value: Any, base: Any) -> float:
    worst = 0.0
    for v, b in zip(_flat(value), _flat(base), strict=False):
        denom = abs(b) if b != 0 else 1.0
        worst = max(worst, abs(v - b) / denom)
    return worst


def evaluate(run: Run) -> list[CheckRow]:
    ok = {fw: r for fw, r in run.results.items() if r["status"] == "ok"}
    base = ok.get(run.baseline)
    base_checks = {c["name"]: c for c in base["checks"]} if base else {}
    rows: dict[str, CheckRow] = {}
    for fw, result in ok.items():
        for check in result["checks"]:
            row = rows.setdefault(check["name"], CheckRow(check["name"], check.get("help", ""), tolerance_text(check)))
            value = check["value"]
            row.values[fw] = value
            passed, why = True, ""
            limit = check.get("limit")
            if limit is not None and max(abs(v) for v in _flat(value)) > limit:
                passed, why = False, f"exceeds limit {limit:g}"
            reference = base_checks.get(check["name"])
            if reference is not None and fw != run.baseline:
                if _shape(value) != _shape(reference["value"]):
                    passed, why = False, "shape differs from baseline"
                    row.rel_diff[fw] = None
                else:
                    row.rel_diff[fw] = max_rel_diff(value, reference["value"])
                    rtol = check.get("rtol")
                    if rtol is not None:
                        atol = check.get("atol") or 0.0
                        bad = any(
                            abs(v - b) > atol + rtol * abs(b)
                            for v, b in zip(_flat(value), _flat(reference["value"]), strict=False)
                        )
                        if bad:
                            passed, why = (
                                False,
                                f"differs from {run.baseline} by {row.rel_diff[fw]:.2g} (rtol {rtol:g})",
                            )
            row.passed[fw] = passed
            if why:
                row.why[fw] = why
    return list(rows.values())


def failing_frameworks(rows: list[CheckRow]) -> set[str]:
    return {fw for row in rows for fw, ok in row.passed.items() if not ok}
