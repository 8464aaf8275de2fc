"""A run flattened into one record per (framework, metric): the shape CSV, JSON and figures share."""

from __future__ import annotations

from typing import Any

from harness.judge.assessment import Assessment

RECORD_FIELDS = (
    "run_id", "suite", "framework", "stack", "backend", "device", "status", "metric", "kind", "unit", "better",
    "n", "median", "q1", "q3", "iqr", "min", "max", "mean", "stdev", "ci_low", "ci_high", "outliers", "unstable",
    "first_call", "flops", "flops_per_s", "peak_fraction", "achievable_fraction", "achievable_note",
    "bytes", "bytes_per_s", "bandwidth_peak_fraction", "bandwidth_achievable_fraction", "bandwidth_achievable_note",
    "sync", "plausible", "excluded", "comparable", "not_comparable_reason",
    "ratio_to_baseline", "ratio_ci_low", "ratio_ci_high", "ratio_ci_coverage", "ratio_ci_basis", "ci_coverage",
)  # fmt: skip
_SUMMARY_FIELDS = ("n", "median", "q1", "q3", "iqr", "min", "max", "mean", "stdev", "ci_low", "ci_high")


def metric_records(judged: Assessment) -> list[dict[str, Any]]:
    run = judged.run
    flagged = judged.not_comparable
    records = []
    for fw, result in run.results.items():
        for metric in result["metrics"] if result["status"] == "ok" else []:
            summary = judged.summary(fw, metric["name"])
            finding = judged.finding(fw, metric["name"], "flops")
            traffic = judged.finding(fw, metric["name"], "bytes")
            why = judged.excluded(fw, metric["name"])
            plausible = not any(hit.key == (fw, metric["name"]) for hit in judged.hits("plausible"))
            ratio = judged.ratio(fw, metric["name"])
            interval = ratio.interval if ratio else None
            basis = None
            if ratio is not None and interval is not None:
                basis = "round medians" if ratio.between_processes else "samples within one process"
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
                    **{name: getattr(summary, name) for name in _SUMMARY_FIELDS},
                    "outliers": len(summary.outliers),
                    "unstable": summary.unstable,
                    "first_call": metric.get("first_call"),
                    "flops": metric.get("flops"),
                    "flops_per_s": finding.achieved if finding else None,
                    "peak_fraction": finding.fraction if finding else None,
                    "achievable_fraction": finding.achievable_fraction if finding else None,
                    # Above 100 %: flagged here too; no ceiling for the key: why.
                    "achievable_note": finding.achievable_note if finding else None,
                    "bytes": metric.get("bytes"),
                    "bytes_per_s": traffic.achieved if traffic else None,
                    "bandwidth_peak_fraction": traffic.fraction if traffic else None,
                    "bandwidth_achievable_fraction": traffic.achievable_fraction if traffic else None,
                    "bandwidth_achievable_note": traffic.achievable_note if traffic else None,
                    "sync": judged.sync(fw, metric["name"]) if metric["kind"] == "time" else None,
                    "plausible": plausible,
                    "excluded": why,
                    "comparable": fw not in flagged and why is None,
                    "not_comparable_reason": flagged.get(fw),
                    "ratio_to_baseline": ratio.value if ratio else None,
                    "ratio_ci_low": interval.low if interval else None,
                    "ratio_ci_high": interval.high if interval else None,
                    "ratio_ci_coverage": interval.coverage if interval else None,
                    "ratio_ci_basis": basis,
                    "ci_coverage": summary.ci_coverage,
                }
            )
    return records
