"""Validation of what a run folder holds: results (schema v1, docs/result-schema.md) and summaries.

Hand-written rather than JSON Schema so every message names the file, the field and what was
wrong in one line. Everything a renderer, the gate or `reproduce` reads is checked here for its
type, so a schema-valid but hostile file is rejected here instead of crashing a renderer; names
that become paths (suite, framework, run id) must be names the registry knows.
"""

from __future__ import annotations

import json
import math
import re
from itertools import pairwise
from pathlib import Path
from typing import Any, cast

from harness import provenance
from harness.errors import HarnessError
from harness.result_types import Result
from harness.safe_files import MissingFile, UnsafeFile, read_bytes
from harness.text.escape import plain
from suites.runtime.marks import MARKS
from suites.runtime.registry import all_suites
from suites.runtime.result import RESULT_KEYS, SCHEMA_VERSION, STATUSES
from suites.runtime.syncguard import SYNC_STATES

MAX_RESULT_BYTES = 64 * 1024 * 1024  # a result is metadata and samples, never bulk data
MAX_SUMMARY_BYTES = 16 * 1024 * 1024
STAT_KEYS = ("n", "median", "q1", "q3", "iqr", "min", "max", "mean", "stdev")
# No real metric, FLOP count or check value comes near this; beyond it squares and products in
# the statistics could overflow a float.
MAX_MAGNITUDE = 1e150
MAX_DEPTH = 32  # deeper JSON is hostile: renderers and json.dumps recurse
# The bootstrap intervals cost O(samples) per resample: far beyond any real --repeat x --rounds,
# a file with millions of samples would keep every renderer busy for hours.
MAX_SAMPLES = 10_000  # per metric
MAX_TOTAL_SAMPLES = 50_000  # per result
MAX_CURVES = 1_000  # training.curves: one per process (round); far beyond any real --rounds
# Epochs over all curves of a result: every one is a point in three pictures, so the cap keeps
# `show --plot`, `report` and the site fast on a result within every other cap.
MAX_CURVE_POINTS = MAX_TOTAL_SAMPLES
MAX_CURVE_EPOCHS = 1000  # the training suites' `epochs` maximum
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
DEVICES = ("cpu", "gpu")
_SCALAR = (str, int, float, bool, type(None))


class InvalidResult(HarnessError):
    pass


def _name(value: Any) -> str:
    """A name from a file, quoted for a one-line message."""
    if not isinstance(value, str):
        text = plain(repr(value) if isinstance(value, (int, float, bool, type(None))) else type(value).__name__)
        return text if len(text) <= 60 else text[:57] + "..."
    text = plain(value)
    return repr(text if len(text) <= 60 else text[:57] + "...")


def number(value: Any) -> bool:
    """A finite int or float (not a bool) of sane magnitude; huge ints never reach float()."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return abs(value) <= MAX_MAGNITUDE and (isinstance(value, int) or math.isfinite(value))


def _numbers(value: Any) -> bool:
    if isinstance(value, list):
        return len(value) > 0 and all(_numbers(v) if isinstance(v, list) else number(v) for v in value)
    return number(value)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_MAGNITUDE


def _scalar(value: Any) -> bool:
    return isinstance(value, _SCALAR) and (
        not isinstance(value, (int, float)) or isinstance(value, bool) or number(value)
    )


def depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        if isinstance(node, dict):
            stack.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, level + 1) for v in node)
    return deepest


def suite_and_framework(suite: Any, framework: Any) -> str | None:
    """Why (suite, framework) are not names the registry knows, or None."""
    suites = all_suites()
    if not isinstance(suite, str) or suite not in suites:
        return f"suite {_name(suite)} is not a suite this harness knows"
    if framework is not None and (not isinstance(framework, str) or framework not in suites[suite].all_frameworks):
        return f"framework {_name(framework)} is not a framework of suite {suite}"
    return None


def _optional(doc: dict[str, Any], key: str, test: Any, expected: str, where: str = "") -> str | None:
    if doc.get(key) is not None and not test(doc[key]):
        return f"{where}{key}: expected {expected} or null"
    return None


def _environment_problem(env: dict[str, Any]) -> str | None:
    for key in ("machine", "device", "precision", "launch"):
        if env.get(key) is not None and not isinstance(env[key], dict):
            return f"environment.{key}: expected an object or null"
    for key in ("versions", "variables"):  # read without a fallback for null
        if key in env and not isinstance(env[key], dict):
            return f"environment.{key}: expected an object"
    machine = env.get("machine") or {}
    if machine.get("cpu") is not None and not isinstance(machine["cpu"], dict):
        return "environment.machine.cpu: expected an object"
    cpu = machine.get("cpu") or {}
    for key in ("logical_cores", "usable_cores", "mhz", "max_mhz"):
        problem = _optional(cpu, key, number, "a finite number", "environment.machine.cpu.")
        if problem:
            return problem
    problem = _optional(cpu, "vector", lambda v: isinstance(v, str), "a string", "environment.machine.cpu.")
    if problem:
        return problem
    for key in ("versions", "variables"):
        for name, value in (env.get(key) or {}).items():
            if not _scalar(value):
                return f"environment.{key}.{_name(name)}: expected a string, number or null"
    return None


def _metric_problem(i: int, metric: Any, seen: set[str]) -> str | None:
    where = f"metrics[{i}]"
    if not isinstance(metric, dict) or not isinstance(metric.get("name"), str) or not metric["name"]:
        return f"{where}: expected an object with a name"
    where = f"metrics[{i}] ({_name(metric['name'])})"
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
    if isinstance(samples, list) and len(samples) > MAX_SAMPLES:
        return f"{where}.samples: {len(samples)} samples is more than the {MAX_SAMPLES} a result may hold"
    if not isinstance(samples, list) or not samples or not all(number(s) for s in samples):
        return f"{where}.samples: expected a non-empty list of finite numbers"
    if metric["kind"] == "time" and min(samples) < 0:
        return f"{where}.samples: a time cannot be negative"
    for key in ("first_call", "flops", "bytes"):
        if metric.get(key) is not None and not (number(metric[key]) and metric[key] >= 0):
            return f"{where}.{key}: expected a finite number >= 0 or null"
    firsts = metric.get("first_calls")
    if firsts is not None and not (
        isinstance(firsts, list) and len(firsts) <= MAX_SAMPLES and all(number(v) for v in firsts)
    ):
        return f"{where}.first_calls: expected a list of at most {MAX_SAMPLES} finite numbers"
    for key, test, expected in (
        ("description", lambda v: isinstance(v, str), "a string"),
        ("dtype", lambda v: isinstance(v, str), "a string"),
        ("variant", lambda v: isinstance(v, str), "a string"),
        ("warnings", lambda v: isinstance(v, list) and all(isinstance(w, str) for w in v), "a list of strings"),
        ("synchronised", lambda v: isinstance(v, bool), "true or false"),
        ("warmup", _integer, "an integer"),
    ):
        problem = _optional(metric, key, test, expected, f"{where}.")
        if problem:
            return problem
    problem = _sync_problem(metric.get("sync"), f"{where}.sync")
    if problem:
        return problem
    problem = _marks_problem(metric.get("marks"), len(samples), f"{where}.marks")
    if problem:
        return problem
    problem = _round_sizes_problem(metric.get("round_sizes"), len(samples), f"{where}.round_sizes")
    if problem:
        return problem
    stats = metric.get("stats")
    if not isinstance(stats, dict) or not all(number(stats.get(k)) for k in STAT_KEYS):
        return f"{where}.stats: expected finite {', '.join(STAT_KEYS)}"
    if stats["n"] != len(samples):
        return f"{where}.stats.n is {stats['n']} but there are {len(samples)} samples"
    if (metric.get("flops") or metric.get("bytes")) and stats["median"] <= 0:
        return f"{where}.stats.median: a metric with a FLOP or byte count needs a median above 0"
    return None


SYNC_NUMBERS = (
    "pending_share",
    "excess_median_s",
    "excess_max_s",
    "idle_barrier_median_s",
    "sample_median_s",
    "threshold_s",
    "n",
)


def _sync_problem(sync: Any, where: str) -> str | None:
    """The barrier evidence (suites/runtime/syncguard.py): a known state, numbers where numbers go."""
    if sync is None:
        return None
    if not isinstance(sync, dict) or sync.get("state") not in SYNC_STATES:
        return f"{where}: expected an object whose state is one of {', '.join(SYNC_STATES)}"
    for key in SYNC_NUMBERS:
        if sync.get(key) is not None and not (number(sync[key]) and sync[key] >= 0):
            return f"{where}.{key}: expected a finite number >= 0"
    if sync.get("why") is not None and not isinstance(sync["why"], str):
        return f"{where}.why: expected a string"
    return None


def _marks_problem(marks: Any, n: int, where: str) -> str | None:
    """Per-sample marks (suites/runtime/marks.py): a picture indexes `samples` with them."""
    if marks is None:
        return None
    if not isinstance(marks, dict):
        return f"{where}: expected an object of mark reason -> sample indices"
    for reason, indices in marks.items():
        if reason not in MARKS:
            return f"{where}: {_name(reason)} is not a mark reason (one of {', '.join(MARKS)})"
        if not isinstance(indices, list) or not all(_integer(i) for i in indices[: n + 1]):
            return f"{where}.{reason}: expected a list of sample indices"
        if len(indices) > n or any(not 0 <= i < n for i in indices):
            return f"{where}.{reason}: expected indices of the {n} samples (0 to {n - 1})"
        if any(a >= b for a, b in pairwise(indices)):
            return f"{where}.{reason}: expected distinct indices in ascending order"
    return None


def _round_sizes_problem(sizes: Any, n: int, where: str) -> str | None:
    """Samples per pooled round (harness/rounds.py): together they must cover `samples` exactly."""
    if sizes is None:
        return None
    if (
        not isinstance(sizes, list)
        or len(sizes) > n
        or not all(_integer(s) and s >= 1 for s in sizes)
        or sum(sizes) != n
    ):
        return f"{where}: expected whole numbers >= 1 that add up to the {n} samples"
    return None


def _check_problem(i: int, check: Any) -> str | None:
    if not isinstance(check, dict) or not isinstance(check.get("name"), str):
        return f"checks[{i}]: expected an object with a name"
    where = f"checks[{i}] ({_name(check['name'])})"
    if not _numbers(check.get("value")):
        return f"{where}.value: expected a finite number or list of them"
    for key in ("limit", "rtol", "atol"):
        if check.get(key) is not None and not number(check[key]):
            return f"{where}.{key}: expected a finite number or null"
    return _optional(check, "help", lambda v: isinstance(v, str), "a string", f"{where}.")


def _problem(doc: dict[str, Any]) -> str | None:
    """The first thing wrong with a parsed result document, or None."""
    if not isinstance(doc, dict):
        return "top level is not a JSON object"
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        return f"schema_version is {_name(version)}; this harness reads version {SCHEMA_VERSION}"
    missing = [k for k in RESULT_KEYS if k not in doc]
    if missing:
        return "missing field(s): " + ", ".join(missing)
    if depth(doc) > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    for key in ("run_id", "suite", "framework", "stack", "backend", "device", "started_at"):
        if not isinstance(doc[key], str) or not doc[key]:
            return f"{key}: expected a non-empty string"
    if not RUN_ID.fullmatch(doc["run_id"]):
        return f"run_id: {_name(doc['run_id'])} is not a run id (letters, digits, '.', '_', '-')"
    names = suite_and_framework(doc["suite"], doc["framework"])
    if names:
        return names
    if doc["device"] not in DEVICES:
        return f"device: {_name(doc['device'])} is not cpu or gpu"
    if doc["status"] not in STATUSES:
        return f"status: {_name(doc['status'])} is not one of {', '.join(STATUSES)}"
    for key in ("reason", "stderr_tail", "finished_at"):
        if doc[key] is not None and not isinstance(doc[key], str):
            return f"{key}: expected a string or null"
    if doc["status"] != "ok" and not isinstance(doc["reason"], str):
        return f"reason: a {doc['status']} result must say why"
    for key in ("params", "settings", "environment"):
        if not isinstance(doc[key], dict):
            return f"{key}: expected an object"
    for key, value in doc["params"].items():
        if not _scalar(value):
            return f"params.{_name(key)}: expected a string, number, true/false or null"
    for key in ("repeat", "warmup", "threads", "rounds"):
        problem = _optional(doc["settings"], key, _integer, "an integer", "settings.")
        if problem:
            return problem
    if doc["image"] is not None and not (
        isinstance(doc["image"], dict) and all(_scalar(v) for v in doc["image"].values())
    ):
        return "image: expected an object of strings or null"
    if not isinstance(doc["notes"], list) or not all(isinstance(n, str) for n in doc["notes"]):
        return "notes: expected a list of strings"
    problem = _environment_problem(doc["environment"])
    if problem:
        return problem
    if doc["duration_s"] is not None and not number(doc["duration_s"]):
        return "duration_s: expected a finite number or null"
    if not isinstance(doc["metrics"], list) or not isinstance(doc["checks"], list):
        return "metrics and checks must be lists"
    total = sum(len(m["samples"]) for m in doc["metrics"] if isinstance(m, dict) and isinstance(m.get("samples"), list))
    if total > MAX_TOTAL_SAMPLES:
        return f"metrics: {total} samples in all is more than the {MAX_TOTAL_SAMPLES} a result may hold"
    seen: set[str] = set()
    for i, metric in enumerate(doc["metrics"]):
        problem = _metric_problem(i, metric, seen)
        if problem:
            return problem
    problem = _optional_problem(doc)
    if problem:
        return problem
    for i, check in enumerate(doc["checks"]):
        problem = _check_problem(i, check)
        if problem:
            return problem
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
    problem = _curves_problem(training.get("curves"))
    if problem:
        return problem
    target = training.get("target")
    if target is not None:
        if not isinstance(target, dict) or target.get("status") not in TARGET_STATUSES:
            return f"training.target.status: expected one of {', '.join(TARGET_STATUSES)}"
        if not number(target.get("accuracy")):
            return "training.target.accuracy: expected a finite number"
        for key in ("seconds", "wall_seconds", "epochs"):
            if target["status"] == "reached" and not number(target.get(key)):
                return f"training.target.{key}: a reached target needs a finite number"
            if target["status"] == "not reached" and target.get(key) is not None:
                return f"training.target.{key}: a target that was not reached has no {key}"
        return _pooled_target_problem(target)
    return None


CURVE_EPOCHS = ("epoch_seconds", "train_loss", "train_accuracy")  # one entry per epoch
CURVE_EVALUATIONS = ("test_accuracy", "evaluation_seconds")  # one per evaluated epoch
CURVE_PERCENT = ("train_accuracy", "test_accuracy")
CURVE_SECONDS = ("epoch_seconds", "evaluation_seconds")


def _curves_problem(curves: Any) -> str | None:
    """Learning curves (runtime/training.py), one per process: a picture plots every number."""
    if curves is None:
        return None
    if not isinstance(curves, list) or len(curves) > MAX_CURVES:
        return f"training.curves: expected a list of at most {MAX_CURVES} objects"
    for k, curve in enumerate(curves):
        problem = _curve_problem(curve, f"training.curves[{k}]")
        if problem:
            return problem
    points = sum(len(c["epoch_seconds"]) for c in curves)
    if points > MAX_CURVE_POINTS:
        return f"training.curves: {points} epochs in all is more than the {MAX_CURVE_POINTS} a result may hold"
    return None


def _curve_problem(curve: Any, where: str) -> str | None:
    if not isinstance(curve, dict):
        return f"{where}: expected an object"
    epochs = curve.get("epoch_seconds")
    if not isinstance(epochs, list) or not 1 <= len(epochs) <= MAX_CURVE_EPOCHS:
        return f"{where}.epoch_seconds: expected a list of 1 to {MAX_CURVE_EPOCHS} finite numbers"
    n = len(epochs)
    for key in (*CURVE_EPOCHS, *CURVE_EVALUATIONS):
        values = curve.get(key)
        if not isinstance(values, list) or len(values) > n or not all(number(v) for v in values):
            return f"{where}.{key}: expected a list of at most {n} finite numbers (one per epoch)"
        if key in CURVE_EPOCHS and len(values) != n:
            return f"{where}.{key}: {len(values)} entries, but epoch_seconds has {n}"
        if key in CURVE_PERCENT and not all(0 <= v <= 100 for v in values):
            return f"{where}.{key}: expected percentages between 0 and 100"
        if key in CURVE_SECONDS and min(values, default=0) < 0:
            return f"{where}.{key}: a time cannot be negative"
    if len(curve["evaluation_seconds"]) != len(curve["test_accuracy"]):
        return (
            f"{where}.evaluation_seconds: {len(curve['evaluation_seconds'])} entries, "
            f"but test_accuracy has {len(curve['test_accuracy'])}"
        )
    if curve.get("seed") is not None and not _integer(curve["seed"]):
        return f"{where}.seed: expected an integer or null"
    return None


def _pooled_target_problem(target: dict[str, Any]) -> str | None:
    """What harness/time_to_target.py adds over rounds: reports format every one of these."""
    if target.get("best_accuracy") is not None and not number(target["best_accuracy"]):
        return "training.target.best_accuracy: expected a finite number"
    interval = target.get("seconds_interval")
    if interval is not None and not (
        isinstance(interval, list) and len(interval) == 2 and all(number(v) for v in interval)
    ):
        return "training.target.seconds_interval: expected two finite numbers"
    rounds = target.get("rounds")
    if rounds is None:
        return None
    if not isinstance(rounds, list) or not all(isinstance(r, dict) for r in rounds) or len(rounds) > MAX_SAMPLES:
        return "training.target.rounds: expected a list of objects"
    reached = target.get("reached_rounds")
    if not isinstance(reached, int) or isinstance(reached, bool) or not 0 <= reached <= len(rounds):
        return "training.target.reached_rounds: expected a whole number up to the number of rounds"
    return None


def validate(doc: Any, source: str) -> Result:
    problem = _problem(doc)
    if problem:
        raise InvalidResult(f"{plain(source)}: invalid result: {problem}")
    return cast(Result, doc)


def parse_json(data: bytes, source: str, error: type[HarnessError] = HarnessError) -> Any:
    """JSON from bytes read back from disk; every way it can be broken is one HarnessError line."""
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except RecursionError:
        raise error(f"{source}: nested too deeply to be a run file; the file is corrupt or hostile") from None
    except (UnicodeDecodeError, ValueError) as problem:
        message = plain(problem)[:200]
        raise error(f"{source}: not valid JSON ({message}); the file is truncated or corrupt") from None
    if depth(doc) > MAX_DEPTH:
        raise error(f"{source}: nested deeper than {MAX_DEPTH} levels; the file is corrupt or hostile")
    return doc


def load_result(path: Path) -> Result:
    try:
        data = read_bytes(path, MAX_RESULT_BYTES, what="result file")
    except MissingFile:
        raise InvalidResult(f"{path}: result file is missing") from None
    except UnsafeFile as problem:
        raise InvalidResult(str(problem)) from None
    return validate(parse_json(data, str(path), InvalidResult), str(path))


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number this harness accepts")


# -- summary.json ---------------------------------------------------------------------------


def summary_problem(doc: Any) -> str | None:
    """What is wrong with a run summary as a whole (bad job entries are reported one by one)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        return "expected an object with a jobs list"
    if not isinstance(doc.get("run_id"), str) or not RUN_ID.fullmatch(doc["run_id"]):
        return f"run_id: {_name(doc.get('run_id'))} is not a run id"
    names = suite_and_framework(doc.get("suite"), None)
    if names:
        return names
    baseline = doc.get("baseline")
    if baseline is not None and suite_and_framework(doc["suite"], baseline):
        return f"baseline: {_name(baseline)} is not a framework of suite {doc['suite']}"
    for key in ("backend", "harness_version", "started_at", "finished_at"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            return f"{key}: expected a string or null"
    for key in ("interrupted",):
        if doc.get(key) is not None and not isinstance(doc[key], bool):
            return f"{key}: expected true or false"
    if doc.get("rounds") is not None and not (_integer(doc["rounds"]) and doc["rounds"] >= 1):
        return "rounds: expected a whole number >= 1"
    command = doc.get("command")
    if command is not None and not (isinstance(command, list) and all(isinstance(a, str) for a in command)):
        return "command: expected a list of strings"
    if doc.get("code") is not None:
        return provenance.problem(doc["code"])
    return None


def job_entry_problem(entry: Any, suite: str) -> str | None:
    """Why one entry of summary.jobs cannot name a result file of this run, or None."""
    if not isinstance(entry, dict):
        return f"job entry {_name(entry)} is not an object"
    framework, name = entry.get("framework"), entry.get("file")
    if not isinstance(name, str) or not name or Path(name).name != name or not name.endswith(".json"):
        return f"job entry {_name(name)} has no plain result file name"
    if suite_and_framework(suite, framework):
        return f"job entry {_name(name)}: framework {_name(framework)} is not a framework of suite {suite}"
    if name != f"{framework}.json":
        return f"job entry {_name(name)} is not the result file of {framework} ({framework}.json)"
    return None


def load_summary(path: Path) -> dict[str, Any]:
    try:
        doc = parse_json(read_bytes(path, MAX_SUMMARY_BYTES, what="run summary"), str(path))
    except HarnessError as error:
        raise HarnessError(f"unreadable run summary: {error}") from None
    problem = summary_problem(doc)
    if problem:
        raise HarnessError(f"{path}: unreadable run summary ({problem}); the file was edited or is corrupt")
    return cast(dict[str, Any], doc)
