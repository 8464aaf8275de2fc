"""Numbers we cannot stand behind: escaped synchronisation, and rates above the device's peak.

Three independent tests, any of which keeps a metric out of ratios, comparisons and records:
- sync escape: the job's barrier after the samples found work still running (suites/runtime/syncguard.py);
- FLOP lint: achieved FLOP/s above the device's physical peak;
- bandwidth lint: achieved bytes/s above the device's physical memory-system ceiling.
The last two catch an unsynchronised timing even from an old result without barrier evidence.
Each run is linted once, in assessment.py, which turns the three into the run's exclusions.

Beside the datasheet's peak, each rate is shown against the ceiling `harness calibrate` measured on
this machine ("% of achievable"): a matmul rate only against the ceiling of its own dtype and
measured arithmetic (`achievable_key`), never a neighbour's. A rate above that ceiling is possible
(the calibration ran under more load than the run) but not a record: it is flagged wherever it is
shown (`Finding.achievable_text`), never printed as a plain share.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.core.result_types import Metric
from harness.store.calibration import Ceilings, ceiling_key
from harness.store.peaks import NO_PEAK, Peak, achievable_key, bandwidth_or_why, peak_or_why
from harness.store.run_folder import Run
from harness.text.numbers import fmt_share
from suites.contract.registry import all_suites

IMPLAUSIBLE = "implausible - likely a missing device synchronisation"
ESCAPED = "sync escaped - work was still running when the clock stopped"
ABOVE_ACHIEVABLE = "above the measured ceiling: calibrate again with --calibrate always"


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
    # Calibrated, yet no ceiling applies: why (e.g. "no ceiling for float32/tf32"). None otherwise.
    achievable_missing: str | None = None
    # The name the suite gives this share of peak (SuiteSpec.peak_shares: gpt's train step, "MFU").
    share_name: str | None = None

    @property
    def fraction(self) -> float | None:
        return self.achieved / self.peak if self.peak else None

    @property
    def achievable_fraction(self) -> float | None:
        return self.achieved / self.achievable if self.achievable else None

    @property
    def above_achievable(self) -> bool:
        """Faster than the best sample calibration saw: the ceiling is stale, not the rate a record."""
        fraction = self.achievable_fraction
        return fraction is not None and fraction > 1.0

    @property
    def ceiling(self) -> float | None:
        return self.limit if self.limit is not None else self.peak

    @property
    def plausible(self) -> bool:
        return self.ceiling is None or self.achieved <= self.ceiling

    @property
    def unit(self) -> str:
        return "GFLOP/s" if self.quantity == "flops" else "GB/s"

    @property
    def achievable_text(self) -> str | None:
        """ "% of achievable" as every renderer shows it: flagged above 100 %, or why there is no ceiling;
        None when the run was not calibrated."""
        if (fraction := self.achievable_fraction) is None:
            return self.achievable_missing
        text = f"{fmt_share(fraction)} of achievable"
        return f"{text} ({ABOVE_ACHIEVABLE})" if self.above_achievable else text

    @property
    def achievable_note(self) -> str | None:
        """What a bare "achievable" fraction does not say (CSV, JSON): that it is above the measured
        ceiling, or why there is no ceiling; None for a plain share, or no calibration."""
        return ABOVE_ACHIEVABLE if self.above_achievable else self.achievable_missing

    @property
    def peak_text(self) -> str | None:
        """ "% of peak" (or of the CPU's L1 bound), or why a GPU has no datasheet peak; None if neither."""
        if self.fraction is not None:
            # A CPU's bandwidth peak is its L1 bound (the only physical ceiling whatever the size).
            text = f"{fmt_share(self.fraction)} of {'L1 peak' if self.basis.startswith('L1') else 'peak'}"
            return f"{text} ({self.share_name})" if self.share_name else text
        return self.basis if self.basis.startswith(NO_PEAK) else None


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    return float(value) if ok else None


def _finding(
    fw: str,
    metric: Metric,
    quantity: str,
    rate: float,
    peak: Peak | str,
    achievable: tuple[float | None, str | None],
    share_name: str | None = None,
) -> Finding:
    """`peak`: the datasheet peak, or why there is none; `achievable`: (ceiling, why there is none);
    `share_name`: what the suite calls this share of peak (None: no name of its own)."""
    found = peak if isinstance(peak, Peak) else None
    return Finding(
        framework=fw,
        metric=metric["name"],
        quantity=quantity,
        achieved=rate,
        peak=found.value if found else None,
        basis=found.basis if found else str(peak),
        synchronised=bool(metric.get("synchronised", True)),
        limit=found.ceiling if found else None,
        achievable=achievable[0],
        achievable_missing=achievable[1],
        share_name=share_name,
    )


def _flops_ceiling(ceilings: Ceilings | None, result: Mapping[str, Any], dtype: Any) -> tuple[float | None, str | None]:
    if ceilings is None:
        return None, None
    if (key := achievable_key(result, dtype)) is None:
        why = "float32 arithmetic not measured" if ceiling_key(dtype, "fp32") else "undeclared or unknown dtype"
        return None, f"no ceiling ({why})"
    value = ceilings.flops(key)
    return (value, None) if value is not None else (None, f"no ceiling for {key}")


def _bandwidth_ceiling(ceilings: Ceilings | None) -> tuple[float | None, str | None]:
    if ceilings is None:
        return None, None
    return (ceilings.bandwidth, None) if ceilings.bandwidth is not None else (None, "no bandwidth ceiling")


def lint(run: Run, ceilings: Ceilings | None) -> list[Finding]:
    """Every FLOP/s and bytes/s of the ok jobs' time metrics, against the datasheet peaks and the
    `ceilings` measured on this machine (None: not calibrated). Called by assessment.assess only."""
    findings = []
    spec = all_suites().get(str(run.summary.get("suite")))
    names = spec.peak_shares if spec is not None else {}
    for fw, result in run.results.items():
        if result["status"] != "ok":
            continue
        for metric in result["metrics"]:
            median = _number(metric["stats"]["median"])
            if metric["kind"] != "time" or median is None:
                continue
            flops, moved = _number(metric.get("flops")), _number(metric.get("bytes"))
            dtype = metric.get("dtype")
            if flops is not None:
                achievable = _flops_ceiling(ceilings, result, dtype)
                peak = peak_or_why(result, dtype)
                name = names.get(metric["name"])
                findings.append(_finding(fw, metric, "flops", flops / median, peak, achievable, name))
            if moved is not None:
                achievable = _bandwidth_ceiling(ceilings)
                findings.append(_finding(fw, metric, "bytes", moved / median, bandwidth_or_why(result), achievable))
    return findings


def sync_state(metric: Mapping[str, Any]) -> str:
    """ok, escaped, or unchecked (no barrier evidence: an old result, or the check switched off)."""
    sync = metric.get("sync")
    state = sync.get("state") if isinstance(sync, dict) else None
    return state if state in ("ok", "escaped", "unchecked") else "unchecked"
