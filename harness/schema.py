"""Validation of result files against schema v1 (docs/result-schema.md).

Hand-written rather than JSON Schema so every message names the file, the field and
what was wrong in one line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from suites.runtime.result import RESULT_KEYS, SCHEMA_VERSION, STATUSES

MAX_RESULT_BYTES = 64 * 1024 * 1024  # a result is metadata and samples, never bulk data
STAT_KEYS = ("n", "median", "q1", "q3", "iqr", "min", "max", "mean", "stdev")


class InvalidResult(HarnessError):
    pass


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _numbers(value: Any) -> bool:
    if isinstance(value, list):
        return len(value) > 0 and all(_numbers(v) if isinstance(v, list) else _number(v) for v in value)
    return _number(value)


def _problem(doc: dict[str, Any]) -> str | None:
    """The first thing wrong with a parsed result document, or None."""
    if not isinstance(doc, dict):
        return "top level is not a JSON object"
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        return f"schema_version is {version!r}; this harness reads version {SCHEMA_VERSION}"
    missing = [k for k in RESULT_KEYS if k not in doc]
    if missing:
        return "missing field(s): " + ", ".join(missing)
    for key in ("run_id", "suite", "framework", "stack", "backend", "device", "started_at"):
        if not isinstance(doc[key], str) or not doc[key]:
            return f"{key}: expected a non-empty string"
    if doc["status"] not in STATUSES:
        return f"status: {doc['status']!r} is not one of {', '.join(STATUSES)}"
    if doc["status"] != "ok" and not isinstance(doc["reason"], str):
        return f"reason: a {doc['status']} result must say why"
    for key in ("params", "settings", "environment"):
        if not isinstance(doc[key], dict):
            return f"{key}: expected an object"
    if doc["duration_s"] is not None and not _number(doc["duration_s"]):
        return "duration_s: expected a finite number or null"
    if not isinstance(doc["metrics"], list) or not isinstance(doc["checks"], list):
        return "metrics and checks must be lists"
    seen: set[str] = set()
    for i, metric in enumerate(doc["metrics"]):
        where = f"metrics[{i}]"
        if not isinstance(metric, dict) or not isinstance(metric.get("name"), str):
            return f"{where}: expected an object with a name"
        where = f"metrics[{i}] ({metric['name']})"
        if metric["name"] in seen:
            return f"{where}: duplicate metric name"
        seen.add(metric["name"])
        if metric.get("kind") not in ("time", "value"):
            return f"{where}.kind: expected 'time' or 'value'"
        if metric.get("better") not in ("lower", "higher"):
            return f"{where}.better: expected 'lower' or 'higher'"
        if not isinstance(metric.get("unit"), str):
            return f"{where}.unit: expected a string"
        samples = metric.get("samples")
        if not isinstance(samples, list) or not samples or not all(_number(s) for s in samples):
            return f"{where}.samples: expected a non-empty list of finite numbers"
        if metric.get("first_call") is not None and not _number(metric["first_call"]):
            return f"{where}.first_call: expected a finite number or null"
        if metric.get("flops") is not None and not _number(metric["flops"]):
            return f"{where}.flops: expected a finite number or null"
        stats = metric.get("stats")
        if not isinstance(stats, dict) or not all(_number(stats.get(k)) for k in STAT_KEYS):
            return f"{where}.stats: expected finite {', '.join(STAT_KEYS)}"
        if stats["n"] != len(samples):
            return f"{where}.stats.n is {stats['n']} but there are {len(samples)} samples"
    problem = _optional_problem(doc)
    if problem:
        return problem
    for i, check in enumerate(doc["checks"]):
        if not isinstance(check, dict) or not isinstance(check.get("name"), str):
            return f"checks[{i}]: expected an object with a name"
        if not _numbers(check.get("value")):
            return f"checks[{i}] ({check['name']}).value: expected a finite number or list of them"
        for key in ("limit", "rtol"):
            if check.get(key) is not None and not _number(check[key]):
                return f"checks[{i}] ({check['name']}).{key}: expected a finite number or null"
    return None


_DATASET_TEXT = ("name", "origin", "repo", "revision", "fingerprint", "used_fingerprint", "sha256", "what")
TARGET_STATUSES = ("reached", "not reached")


def _optional_problem(doc: dict[str, Any]) -> str | None:
    """The training suites' `dataset` and `training` fields: shown in reports, so typed strictly."""
    dataset = doc.get("dataset")
    if dataset is not None:
        if not isinstance(dataset, dict) or not isinstance(dataset.get("name"), str):
            return "dataset: expected an object with a name"
        for key in _DATASET_TEXT:
            if dataset.get(key) is not None and not isinstance(dataset[key], str):
                return f"dataset.{key}: expected a string or null"
        for key in ("train_samples", "test_samples"):
            value = dataset.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                return f"dataset.{key}: expected a non-negative integer"
    training = doc.get("training")
    if training is None:
        return None
    if not isinstance(training, dict):
        return "training: expected an object"
    target = training.get("target")
    if target is not None:
        if not isinstance(target, dict) or target.get("status") not in TARGET_STATUSES:
            return f"training.target.status: expected one of {', '.join(TARGET_STATUSES)}"
        if not _number(target.get("accuracy")):
            return "training.target.accuracy: expected a finite number"
        for key in ("seconds", "wall_seconds", "epochs"):
            if target["status"] == "reached" and not _number(target.get(key)):
                return f"training.target.{key}: a reached target needs a finite number"
            if target["status"] == "not reached" and target.get(key) is not None:
                return f"training.target.{key}: a target that was not reached has no {key}"
    return None


def validate(doc: Any, source: str) -> dict[str, Any]:
    problem = _problem(doc)
    if problem:
        raise InvalidResult(f"{source}: invalid result: {problem}")
    return doc  # type: ignore[no-any-return]


def load_result(path: Path) -> dict[str, Any]:
    try:
        size = path.stat().st_size
        if size > MAX_RESULT_BYTES:
            raise InvalidResult(f"{path}: {size} bytes is too large for a result file (limit {MAX_RESULT_BYTES})")
        doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=_reject_constant)
    except FileNotFoundError:
        raise InvalidResult(f"{path}: result file is missing") from None
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as error:
        raise InvalidResult(f"{path}: not valid JSON ({error}); the file is truncated or corrupt") from None
    return validate(doc, str(path))


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number this harness accepts")
