"""The plausibility lint: an achieved FLOP/s above the device's peak is a measurement bug."""

from __future__ import annotations

from dataclasses import dataclass

from harness.peaks import peak_for
from harness.runs import Run

IMPLAUSIBLE = "implausible - likely a missing device synchronisation"


@dataclass(frozen=True)
class Finding:
    framework: str
    metric: str
    achieved: float  # FLOP/s at the median
    peak: float | None
    basis: str
    synchronised: bool

    @property
    def fraction(self) -> float | None:
        return self.achieved / self.peak if self.peak else None

    @property
    def plausible(self) -> bool:
        return self.peak is None or self.achieved <= self.peak


def lint(run: Run) -> list[Finding]:
    findings = []
    for fw, result in run.results.items():
        if result["status"] != "ok":
            continue
        for metric in result["metrics"]:
            if not metric.get("flops") or metric["kind"] != "time":
                continue
            achieved = metric["flops"] / metric["stats"]["median"]
            peak = peak_for(result, metric.get("dtype"))
            findings.append(
                Finding(
                    framework=fw,
                    metric=metric["name"],
                    achieved=achieved,
                    peak=peak.flops_per_s if peak else None,
                    basis=peak.basis if peak else "device peak unknown",
                    synchronised=bool(metric.get("synchronised", True)),
                )
            )
    return findings


def implausible(run: Run) -> set[tuple[str, str]]:
    """(framework, metric) pairs whose numbers must not be printed as records or used in ratios."""
    return {(f.framework, f.metric) for f in lint(run) if not f.plausible}
