"""Numbers we cannot stand behind: escaped synchronisation, and rates above the device's peak.

Three independent tests, any of which keeps a metric out of ratios, comparisons and records:
- sync escape: the job's barrier after the samples found work still running (suites/runtime/syncguard.py);
- FLOP lint: achieved FLOP/s above the device's physical peak;
- bandwidth lint: achieved bytes/s above the device's physical memory-system ceiling.
The last two catch an unsynchronised timing even from an old result without barrier evidence.
Each run is linted once, in assessment.py, which turns the three into the run's exclusions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.calibration import Ceilings
from harness.peaks import Peak, bandwidth_for, peak_for
from harness.result_types import Metric
from harness.run_reader import Run

IMPLAUSIBLE = "implausible - likely a missing device synchronisation"
ESCAPED = "sync escaped - work was still running when the clock stopped"


@dataclass(frozen=True)
class Finding:
    framework: str
    metric: str
    quantity: str  # "flops" (FLOP/s) or "bytes" (bytes/s)
    achieved: float  # per second, at the median
    peak: float | None
    basis: str
    synchronised: bool
    limit: float | None = None  # above this it is impossible (default: the peak)
    achievable: float | None = None  # measured on this machine by `harness calibrate`

    @property
    def fraction(self) -> float | None:
        return self.achieved / self.peak if self.peak else None

    @property
    def achievable_fraction(self) -> float | None:
        return self.achieved / self.achievable if self.achievable else None

    @property
    def ceiling(self) -> float | None:
        return self.limit if self.limit is not None else self.peak

    @property
    def plausible(self) -> bool:
        return self.ceiling is None or self.achieved <= self.ceiling

    @property
    def unit(self) -> str:
        return "GFLOP/s" if self.quantity == "flops" else "GB/s"


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    return float(value) if ok else None


def _finding(
    fw: str, metric: Metric, quantity: str, amount: float, peak: Peak | None, achievable: float | None
) -> Finding | None:
    median = _number(metric["stats"]["median"])
    if median is None:
        return None
    return Finding(
        framework=fw,
        metric=metric["name"],
        quantity=quantity,
        achieved=amount / median,
        peak=peak.value if peak else None,
        basis=peak.basis if peak else "device peak unknown",
        synchronised=bool(metric.get("synchronised", True)),
        limit=peak.ceiling if peak else None,
        achievable=achievable,
    )


def lint(run: Run, ceilings: Ceilings | None) -> list[Finding]:
    """Every FLOP/s and bytes/s of the ok jobs' time metrics, against the datasheet peaks and the
    `ceilings` measured on this machine (None: not calibrated). Called by assessment.assess only."""
    findings = []
    for fw, result in run.results.items():
        if result["status"] != "ok":
            continue
        for metric in result["metrics"]:
            if metric["kind"] != "time":
                continue
            flops, moved = _number(metric.get("flops")), _number(metric.get("bytes"))
            if flops is not None:
                achievable = ceilings.flops(metric.get("dtype")) if ceilings else None
                finding = _finding(fw, metric, "flops", flops, peak_for(result, metric.get("dtype")), achievable)
                if finding is not None:
                    findings.append(finding)
            if moved is not None:
                achievable = ceilings.bandwidth if ceilings else None
                finding = _finding(fw, metric, "bytes", moved, bandwidth_for(result), achievable)
                if finding is not None:
                    findings.append(finding)
    return findings


def sync_state(metric: Mapping[str, Any]) -> str:
    """ok, escaped, or unchecked (no barrier evidence: an old result, or the check switched off)."""
    sync = metric.get("sync")
    state = sync.get("state") if isinstance(sync, dict) else None
    return state if state in ("ok", "escaped", "unchecked") else "unchecked"


__all__ = ["ESCAPED", "IMPLAUSIBLE", "Ceilings", "Finding", "lint", "sync_state"]
