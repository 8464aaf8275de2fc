"""A run flattened into one record per (framework, metric): the shape CSV, JSON and figures share."""

from __future__ import annotations

from typing import Any

from harness.core.statistics import describe
from harness.judge import assessment
from harness.judge.assessment import Assessment, framework_ratio
from harness.judge.plausibility import achievable_note
from harness.store.run_folder import Run

RECORD_FIELDS = (
    "run_id", "suite", "framework", "stack", "backend", "device", "status", "metric", "kind", "unit", "better",
    "n", "median", "q1", "q3", "iqr", "min", "max", "mean", "stdev", "ci_low", "ci_high", "outliers", "unstable",
    "first_call", "flops", "flops_per_s", "peak_fraction", "achievable_fraction", "achievable_note",
    "bytes", "bytes_per_s", "bandwidth_peak_fraction", "bandwidth_achievable_fraction", "bandwidth_achievable_note",
    "sync", "plausible", "excluded", "comparable", "not_comparable_reason",
    "ratio_to_baseline", "ratio_ci_low", "ratio_ci_high", "ratio_ci_coverage", "ratio_ci_basis", "ci_coverage",
)  # fmt: skip


def metric_records(run: Run, judged: Assessment | None = None) -> list[dict[str, Any]]:
    judged = assessment.of(run, judged)
    flagged = judged.not_comparable
    excluded = judged.exclusions
    base_result = run.results.get(run.baseline)
    base_ok = base_result is not None and base_result["status"] == "ok" and run.baseline not in flagged
    base_metrics = {m["name"]: m for m in base_result["metrics"]} if base_result and base_ok else {}
    records = []
    for fw, result in run.results.items():
        for metric in result["metrics"] if result["status"] == "ok" else []:
            summary = describe(metric["samples"])
            finding = judged.finding(fw, metric["name"], "flops")
            traffic = judged.finding(fw, metric["name"], "bytes")
            why = excluded.get((fw, metric["name"]))
            plausible = not (why or "").startswith("implausible")
            base = base_metrics.get(metric["name"])
            ratio = low = high = coverage = basis = None
            usable = why is None and (run.baseline, metric["name"]) not in excluded and fw not in flagged
            if base and base["stats"]["median"] and usable:
                ratio = metric["stats"]["median"] / base["stats"]["median"]
                if fw != run.baseline and min(len(base["samples"]), len(metric["samples"])) >= 3:
                    interval, between = framework_ratio(base, metric)
                    low, high, coverage = interval.low, interval.high, interval.coverage
                    basis = "round medians" if between else "samples within one process"
            records.append(
                {
                    "run_id": result["run_id"],
                    "suite": result["suite"],
                    "framework": fw,
                    "stack": result["stack"],
                    "backend": result["backend"],
                    "device": result["device"],
                    "status": result["status"],
                    "metric": metric["name"],
                    "kind": metric["kind"],
                    "unit": metric["unit"],
                    "better": metric["better"],
                    "n": summary.n,
                    "median": summary.median,
                    "q1": summary.q1,
                    "q3": summary.q3,
                    "iqr": summary.iqr,
                    "min": summary.min,
                    "max": summary.max,
                    "mean": summary.mean,
                    "stdev": summary.stdev,
                    "ci_low": summary.ci_low,
                    "ci_high": summary.ci_high,
                    "outliers": len(summary.outliers),
                    "unstable": summary.unstable,
                    "first_call": metric.get("first_call"),
                    "flops": metric.get("flops"),
                    "flops_per_s": finding.achieved if finding else None,
                    "peak_fraction": finding.fraction if finding else None,
                    "achievable_fraction": finding.achievable_fraction if finding else None,
                    # Above 100 %: flagged here too; no ceiling for the key: why.
                    "achievable_note": achievable_note(finding) if finding else None,
                    "bytes": metric.get("bytes"),
                    "bytes_per_s": traffic.achieved if traffic else None,
                    "bandwidth_peak_fraction": traffic.fraction if traffic else None,
                    "bandwidth_achievable_fraction": traffic.achievable_fraction if traffic else None,
                    "bandwidth_achievable_note": achievable_note(traffic) if traffic else None,
                    "sync": judged.sync(fw, metric["name"]) if metric["kind"] == "time" else None,
                    "plausible": plausible,
                    "excluded": why,
                    "comparable": fw not in flagged and why is None,
                    "not_comparable_reason": flagged.get(fw),
                    "ratio_to_baseline": ratio,
                    "ratio_ci_low": low,
                    "ratio_ci_high": high,
                    "ratio_ci_coverage": coverage,
                    "ratio_ci_basis": basis,
                    "ci_coverage": summary.ci_coverage,
                }
            )
    return records
