"""PRECISION: the arithmetic a framework's precision probe measured differs from the baseline's
(suites/contract/precision.py): a TF32 matmul beside a float32 one is not a framework difference."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.judge.guards.base import Evidence, Guard
from harness.store.run_folder import Run
from suites.contract.precision import CLASSES as PROBE_CLASSES


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


def mismatches(run: Run, measured: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """framework -> why its measured arithmetic differs from the baseline's (ok jobs only)."""
    if (base := run.results.get(run.baseline)) is None or base["status"] != "ok":
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


class Precision(Guard):
    name = "precision"
    word = "NOT COMPARABLE"
    reads = ("environment.precision.measured",)
    heading = "not comparable: measured precision differs from the baseline's"
    catches = "measured arithmetic differs from the baseline's"
    order = 60
    scope = "framework"

    def frameworks(self, evidence: Evidence) -> Mapping[str, str]:
        return mismatches(evidence.run, evidence.measured)


GUARD = Precision()
