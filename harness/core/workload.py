"""What defines the work a result measured: two numbers are one series only when this is equal.

A history line, a comparison pair or a regression check across runs that differ here compares
different work (`matrix_size=128` against `matrix_size=2000` is a 1000x "jump" that is only a size),
so every one of them keys by `workload` and says what differs (`differences`). Machine, versions
and code are not part of it: they are what a comparison over time is there to find. A history
series (`series_key`) adds the machine and threads that measured it (harness/core/machine_id.py): a level
measured on another machine is a series of its own, not a change point.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.core import machine_id
from harness.core.result_types import Metric, Result


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _first(doc: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((doc[k] for k in keys if doc.get(k)), None)


def _params_text(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items())) or "-"


def workload(result: Result, metric: Metric | None = None) -> dict[str, str]:
    """The defining fields as short text, in a fixed order (a metric adds its code-path variant)."""
    settings = _dict(result.get("settings"))
    dataset = _dict(result.get("dataset"))
    fields = {
        "suite": str(result.get("suite")),
        "params": _params_text(_dict(result.get("params"))),
        "precision": str(settings.get("precision") or "fp32"),
        "device": str(result.get("device")),
        "dataset": str(_first(dataset, ("used_fingerprint", "fingerprint", "sha256", "name")) or "-"),
    }
    if metric is not None and isinstance(metric.get("variant"), str):
        fields["variant"] = str(metric.get("variant"))
    return fields


def key(result: Result, metric: Metric | None = None) -> str:
    """One string per workload (a dictionary key, a series id)."""
    return json.dumps(workload(result, metric), sort_keys=True)


def series_key(result: Result, metric: Metric | None = None) -> str:
    """One string per history series: the workload, the threads and the machine (its fingerprint)."""
    return json.dumps({"workload": key(result, metric), "machine": machine_id.identity(result)}, sort_keys=True)


def label(result: Result) -> str:
    """`matrix_size=128, fp32, cpu`: what a series title adds to the suite's name."""
    fields = workload(result)
    parts = [fields["params"] if fields["params"] != "-" else "", fields["precision"], fields["device"]]
    if fields["dataset"] != "-":
        parts.append(f"data {fields['dataset'][:12]}")
    return ", ".join(p for p in parts if p)


def differences(a: Result, b: Result, metric_a: Metric | None = None, metric_b: Metric | None = None) -> list[str]:
    """`params matrix_size=128 vs matrix_size=2000`: each defining field that differs."""
    wa, wb = workload(a, metric_a), workload(b, metric_b)
    names = list(dict.fromkeys([*wa, *wb]))
    return [f"{name} {wa.get(name, '-')} vs {wb.get(name, '-')}" for name in names if wa.get(name) != wb.get(name)]


def plan_key(suite: str, params: Mapping[str, Any], precision: str, device: str) -> str:
    """The workload as a plan knows it before any job ran (no dataset fingerprint, no variant)."""
    fields = {"suite": suite, "params": _params_text(params), "precision": precision, "device": device}
    return json.dumps(fields, sort_keys=True)
