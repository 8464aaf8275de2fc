"""Which frameworks of a run may stand side by side with the baseline, and why the others may not.

Two frameworks are comparable only if both passed the agreement gate (same results) and the
precision probe measured the same arithmetic in both (same precision): a TF32 matmul against a
float32 one is not a framework difference. Everything that prints a ratio asks here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.gate import evaluate, failing_frameworks
from harness.run_reader import Run

GATE = "failed the agreement gate"


def measured_precision(result: Mapping[str, Any]) -> dict[str, str]:
    """operation -> measured class (fp32, tf32, ...) from the job's precision probe."""
    env = result.get("environment")
    precision = env.get("precision") if isinstance(env, dict) else None
    measured = precision.get("measured") if isinstance(precision, dict) else None
    found: dict[str, str] = {}
    if isinstance(measured, dict):
        for op in ("matmul", "conv"):
            entry = measured.get(op)
            if isinstance(entry, dict) and isinstance(entry.get("class"), str):
                found[op] = entry["class"]
    return found


def precision_mismatches(run: Run) -> dict[str, str]:
    """framework -> why its measured arithmetic differs from the baseline's (ok jobs only)."""
    base = run.results.get(run.baseline)
    if base is None or base["status"] != "ok":
        return {}
    reference = measured_precision(base)
    found: dict[str, str] = {}
    for fw, result in run.results.items():
        if fw == run.baseline or result["status"] != "ok":
            continue
        mine = measured_precision(result)
        differing = [
            f"{op} {mine[op]} vs {reference[op]}"
            for op in sorted(mine.keys() & reference.keys())
            if mine[op] != reference[op]
        ]
        if differing:
            found[fw] = f"measured precision differs from {run.baseline}: " + ", ".join(differing)
    return found


def not_comparable(run: Run) -> dict[str, str]:
    """framework -> reason it must not be compared with the others (gate, precision)."""
    reasons = {fw: GATE for fw in failing_frameworks(evaluate(run))}
    for fw, why in precision_mismatches(run).items():
        reasons[fw] = f"{reasons[fw]}; {why}" if fw in reasons else why
    return reasons
