"""A run flattened into one record per (framework, metric): the shape CSV, JSON and figures share."""

from __future__ import annotations

from typing import Any

from harness.gate import evaluate, failing_frameworks
from harness.plausibility import lint
from harness.runs import Run
from harness.statistics import bootstrap_ratio_ci, describe

RECORD_FIELDS = (
    "run_id", "suite", "framework", "stack", "backend", "device", "status", "metric", "kind", "unit", "better",
    "n", "median", "q1", "q3", "iqr", "min", "max", "mean", "stdev", "ci_low", "ci_high", "outliers", "unstable",
    "first_call", "flops", "flops_per_s", "peak_fraction", "plausible", "comparable",
    "ratio_to_baseline", "ratio_ci_low", "ratio_ci_high",
)  # fmt: skip


def metric_records(run: Run) -> list[dict[str, Any]]:
    flagged = failing_frameworks(evaluate(run))
    findings = {(f.framework, f.metric): f for f in lint(run)}
    base_result = run.results.get(run.baseline)
    base_metrics = {m["name"]: m for m in base_result["metrics"]} if base_result else {}
    records = []
    for fw, result in run.results.items():
        for metric in result["metrics"] if result["status"] == "ok" else []:
            summary = describe(metric["samples"])
            finding = findings.get((fw, metric["name"]))
            plausible = finding.plausible if finding else True
            base = base_metrics.get(metric["name"])
            base_finding = findings.get((run.baseline, metric["name"]))
            ratio = low = high = None
            if base and base["stats"]["median"] and plausible and (base_finding is None or base_finding.plausible):
                ratio = metric["stats"]["median"] / base["stats"]["median"]
                if fw != run.baseline and min(len(base["samples"]), len(metric["samples"])) >= 3:
                    low, high = bootstrap_ratio_ci(base["samples"], metric["samples"])
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
                    "plausible": plausible,
                    "comparable": fw not in flagged and plausible,
                    "ratio_to_baseline": ratio,
                    "ratio_ci_low": low,
                    "ratio_ci_high": high,
                }
            )
    return records
