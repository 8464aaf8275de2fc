"""Validation of what a run folder holds: results (harness/core/result_types.py, docs/result-schema.md)
and summaries.

A result's shape is checked against the TypedDicts of result_types.py (pydantic, strict); rules
that relate fields to each other or to the registry are code here. Every message names the file,
the field and what was wrong in one line, so a hostile file is rejected here instead of crashing
a renderer; names that become paths (suite, framework, run id) must be names the registry knows.
Older versions are migrated first (`migrate`, at the end of this module).
"""

from __future__ import annotations

import functools
import json
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, cast, get_args, get_origin, get_type_hints

import pydantic
from annotated_types import Ge, MaxLen, MinLen
from typing_extensions import NotRequired, Required, is_typeddict

from harness.core.errors import HarnessError
from harness.core.inference_types import Inference
from harness.core.parallel_types import Parallel
from harness.core.result_types import (
    MAX_CURVE_EPOCHS,
    MAX_CURVES,
    MAX_MAGNITUDE,
    MAX_SAMPLES,
    MAX_TOTAL_SAMPLES,
    Describe,
    Result,
)
from harness.core.safe_files import MissingFile, UnsafeFile, read_bytes
from harness.core.statistics import ALPHA
from harness.text.escape import plain
from suites.contract.marks import MARKS
from suites.contract.ranks import PARALLEL_CHECKS, devices_of
from suites.contract.registry import all_suites
from suites.contract.result import SCHEMA_VERSION, STATUSES

__all__ = ["MAX_CURVE_EPOCHS", "MAX_CURVES", "MAX_MAGNITUDE", "MAX_SAMPLES", "MAX_TOTAL_SAMPLES"]

# A result is metadata and samples, never bulk data: one at every count cap below is about 8 MiB
# (benchmarks/readers.py). Twice that bounds what `show` and `compare` parse (they must stay fast
# on a folder at every cap), and what a job can make the harness read.
MAX_RESULT_BYTES = 16 * 1024 * 1024
# Check values are compared pairwise across frameworks (assessment.py): a few to a few hundred
# numbers in every suite (logits of 4 samples, a fitted vector); more would be bulk data.
MAX_CHECK_NUMBERS = 10_000  # per result, all checks together
MAX_SUMMARY_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 32  # deeper JSON is hostile: renderers and json.dumps recurse
# Epochs over all curves of a result: every one is a point in three pictures, so the cap keeps
# `show --plot`, `report` and the site fast on a result within every other cap.
MAX_CURVE_POINTS = MAX_TOTAL_SAMPLES
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,59}")


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


def _count(value: Any) -> int:
    return sum(_count(v) for v in value) if isinstance(value, list) else 1


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_MAGNITUDE


# A container holding only these holds nothing deeper: its children's types are checked in C
# (`issuperset(map(type, ...))`), so the samples of a result at the caps are not visited one by one
# in Python.
_LEAVES = frozenset({str, int, float, bool, type(None)})


def depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 1), without recursion."""
    if not isinstance(value, (dict, list)):
        return 1
    deepest, stack = 1, [(value, 1)]
    while stack and deepest <= MAX_DEPTH:
        node, level = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if children:  # whatever a non-empty container holds sits one level down
            deepest = max(deepest, level + 1)
        if not _LEAVES.issuperset(map(type, children)):
            stack.extend((v, level + 1) for v in children if isinstance(v, (dict, list)))
    return deepest


def suite_and_framework(suite: Any, framework: Any) -> str | None:
    """Why (suite, framework) are not names the registry knows, or None."""
    suites = all_suites()
    if not isinstance(suite, str) or suite not in suites:
        return f"suite {_name(suite)} is not a suite this harness knows"
    if framework is not None and (not isinstance(framework, str) or framework not in suites[suite].all_frameworks):
        return f"framework {_name(framework)} is not a framework of suite {suite}"
    return None


# -- shape: the TypedDicts of result_types.py, and a one-line message for the first error -----


@functools.cache
def _adapter(tp: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(tp)


def _strip(tp: Any) -> tuple[Any, list[Any], bool]:
    """(type, its Annotated metadata, whether null is allowed) with Annotated and `| None` removed."""
    meta: list[Any] = []
    nullable = False
    while True:
        if get_origin(tp) in (NotRequired, Required):
            tp = get_args(tp)[0]
            continue
        if get_origin(tp) is Annotated:
            meta += tp.__metadata__
            tp = tp.__origin__
            continue
        args = get_args(tp)
        if get_origin(tp) in (Union, UnionType) and type(None) in args and len(args) == 2:
            nullable, tp = True, next(a for a in args if a is not type(None))
            continue
        return tp, meta, nullable


def _bound(meta: list[Any], kind: type) -> Any:
    return next((getattr(m, _BOUND[kind]) for m in meta if isinstance(m, kind)), None)


_BOUND: dict[type, str] = {Ge: "ge", MinLen: "min_length", MaxLen: "max_length"}


def describe(tp: Any, plural: bool = False) -> str:
    """What a value of `tp` is, for "expected ...": 'a finite number >= 0 or null'."""
    base, meta, nullable = _strip(tp)
    text = next(((m.plural if plural else m.text) for m in meta if isinstance(m, Describe)), None)
    if text is None:
        text = _describe(base, meta, plural)
    return text + (" or null" if nullable and not plural else "")


def _describe(base: Any, meta: list[Any], plural: bool) -> str:
    low = _bound(meta, Ge)
    low = low if low is not None and low >= 0 else None  # the magnitude cap goes without saying
    if base is float or base is int:
        many, one = ("finite numbers", "a finite number") if base is float else ("integers", "an integer")
        return (many if plural else one) + (f" >= {low}" if low is not None else "")
    if base is str:
        return "strings" if plural else ("a non-empty string" if _bound(meta, MinLen) else "a string")
    if base is bool:
        return "true or false values" if plural else "true or false"
    if get_origin(base) is Literal:
        return " or ".join(repr(a) for a in get_args(base))
    if get_origin(base) is list:
        least, most = _bound(meta, MinLen), _bound(meta, MaxLen)
        items = describe(get_args(base)[0], plural=True)
        if least is not None and least == most:
            return f"a list of {least} {items}"
        return f"a {'non-empty ' if least else ''}list of {items}"
    if get_origin(base) is dict or is_typeddict(base):
        return "objects" if plural else "an object"
    return "values" if plural else "a value"


def _step(tp: Any, node: Any, key: Any) -> tuple[Any, Any] | None:
    """(type, value) one step down from `tp` along a pydantic error location, or None at a leaf."""
    base = _strip(tp)[0]
    if is_typeddict(base) and isinstance(key, str):
        child = get_type_hints(base, include_extras=True).get(key)
    elif get_origin(base) is list and isinstance(key, int):
        child = get_args(base)[0]
    elif get_origin(base) is dict and isinstance(key, str):
        child = get_args(base)[1]
    else:
        return None
    if child is None:
        return None
    inner = _strip(child)[0]
    container = get_origin(inner) in (list, dict) or is_typeddict(inner)
    if get_origin(base) is list and not container:
        return None  # a list of numbers or strings is one field in a message
    value = node.get(key) if isinstance(node, dict) else node[key] if isinstance(node, list) else None
    return child, value


def _shape_message(error: Any, doc: Any, root: Any = Result, where: str = "") -> str:
    """`root`, `where`: the type `doc` is checked against and where it sits (a block checked on its own)."""
    tp: Any = root
    node, field = doc, ""
    for key in error["loc"]:
        if (step := _step(tp, node, key)) is None:
            break
        tp, node = step
        if isinstance(key, int):
            name = node.get("name") if isinstance(node, dict) else None
            where += f"[{key}]" + (f" ({_name(name)})" if isinstance(name, str) and name else "")
        else:
            field = key
            shown = key if _KEY.fullmatch(key) else _name(key)
            where = f"{where}.{shown}" if where else shown
    base, meta, _ = _strip(tp)
    if error["type"] == "missing":
        return f"{where}: missing field"
    if error["type"] == "too_long" and isinstance(node, list):
        return f"{where}: {len(node)} {field} is more than the {_bound(meta, MaxLen)} a result may hold"
    choices = get_args(base) if get_origin(base) is Literal else ()
    if len(choices) > 2:
        return f"{where}: {_name(node)} is not one of {', '.join(choices)}"
    return f"{where}: expected {describe(tp)}"


def _shape_problem(doc: dict[str, Any]) -> str | None:
    try:
        _adapter(Result).validate_python(doc)
    except pydantic.ValidationError as invalid:
        errors = invalid.errors(include_url=False, include_context=False)
        if missing := [str(e["loc"][0]) for e in errors if e["type"] == "missing" and len(e["loc"]) == 1]:
            return "missing field(s): " + ", ".join(missing)
        return _shape_message(errors[0], doc)
    return None


# -- rules between fields ------------------------------------------------------------------


def _metric_problem(i: int, metric: dict[str, Any], seen: set[str]) -> str | None:
    where = f"metrics[{i}] ({_name(metric['name'])})"
    if metric["name"] in seen:
        return f"{where}: duplicate metric name"
    seen.add(metric["name"])
    samples, stats = metric["samples"], metric["stats"]
    if metric["kind"] == "time" and min(samples) < 0:
        return f"{where}.samples: a time cannot be negative"
    problem = _marks_problem(metric.get("marks"), len(samples), f"{where}.marks")
    problem = problem or _round_sizes_problem(metric.get("round_sizes"), len(samples), f"{where}.round_sizes")
    problem = problem or _contention_problem(metric.get("contention"), len(samples), f"{where}.contention")
    if problem:
        return problem
    if stats["n"] != len(samples):
        return f"{where}.stats.n is {stats['n']} but there are {len(samples)} samples"
    if (metric.get("flops") or metric.get("bytes")) and stats["median"] <= 0:
        return f"{where}.stats.median: a metric with a FLOP or byte count needs a median above 0"
    return None


def _marks_problem(marks: dict[str, list[int]] | None, n: int, where: str) -> str | None:
    """Per-sample marks (suites/contract/marks.py): a picture indexes `samples` with them."""
    for reason, indices in (marks or {}).items():
        if reason not in MARKS:
            return f"{where}: {_name(reason)} is not a mark reason (one of {', '.join(MARKS)})"
        if len(indices) > n or not _within(indices, n):
            return f"{where}.{reason}: expected indices of the {n} samples (0 to {n - 1})"
        if not _ascending(indices):
            return f"{where}.{reason}: expected distinct indices in ascending order"
    return None


# The two rules on sample indices, over whole lists in C (min, max, map): a result at the caps
# holds 25 lists of 10,000 indices.
def _within(indices: list[int], n: int) -> bool:
    return not indices or (min(indices) >= 0 and max(indices) < n)


def _ascending(indices: list[int]) -> bool:
    """Strictly ascending: distinct and in order."""
    return not any(map(operator.ge, indices, islice(indices, 1, None)))


# The per-sample lists of a metric's `contention` (suites/runtime/contention.py), in one place for
# the schema and the pooling of rounds.
PER_SAMPLE = (
    "cpu_s", "wall_s", "involuntary_switches", "run_delay_s", "others_cores", "steal_cores", "runnable", "sm_clock_mhz",
    "clock_event_reasons",
)  # fmt: skip


def _contention_problem(seen: dict[str, Any] | None, n: int, where: str) -> str | None:
    """Per-sample contention (suites/runtime/contention.py): one entry per sample, indices within them."""
    if seen is None:
        return None
    for key in PER_SAMPLE:
        if (values := seen.get(key)) is not None and len(values) != n:
            return f"{where}.{key}: expected one value per sample ({n}), got {len(values)}"
    for key in ("contended", "throttled"):
        indices = seen.get(key) or []
        if not (_within(indices, n) and _ascending(indices)):
            return f"{where}.{key}: expected distinct ascending indices of the {n} samples"
    cpus = seen.get("cpus")  # optional: results before per-CPU counting have none
    if cpus is not None and (len(cpus) != seen["cores"] or not _ascending(cpus)):
        return f"{where}.cpus: expected the {seen['cores']} CPUs counted (cores), distinct and ascending"
    return None


def derived_sources(metric: Mapping[str, Any]) -> list[str]:
    """The time metrics a value metric was computed from (`derived_from`, one name or a list), [] for none."""
    found = metric.get("derived_from")
    return [found] if isinstance(found, str) else list(found or [])


def _derived_problem(metrics: list[Any]) -> str | None:
    """A value metric computed from time metrics' samples names them (`derived_from`): the host keeps it out
    of ratios whenever it keeps one of them out, so each name must be a time metric of this same result."""
    timed = {m["name"] for m in metrics if m["kind"] == "time"}
    for i, metric in enumerate(metrics):
        if not (sources := derived_sources(metric)):
            continue
        where = f"metrics[{i}] ({_name(metric['name'])}).derived_from"
        if metric["kind"] != "value":
            return f"{where}: only a value metric is derived from a time metric"
        if len(set(sources)) != len(sources):
            return f"{where}: expected distinct names"
        if (missing := next((name for name in sources if name not in timed), None)) is not None:
            return f"{where}: {_name(missing)} is not a time metric of this result"
    return None


# Pooled rounds (harness/execute/rounds.py): the rounds (1-based) a check was left out of. Its value then
# holds the other rounds' values, and the agreement gate fails the framework for that check.
MISSING_ROUNDS = "missing_rounds"


def missing_rounds(check: Mapping[str, Any]) -> list[int]:
    """The rounds a pooled check was not reported in ([] when every round reported it)."""
    return check.get(MISSING_ROUNDS) or []


def _missing_rounds_problem(check: Mapping[str, Any], rounds: Any) -> str | None:
    if (missing := check.get(MISSING_ROUNDS)) is None:
        return None
    if not _integer(rounds) or rounds < 2:
        return "only a result pooled from several rounds can miss a round"
    if not (isinstance(missing, list) and 0 < len(missing) < rounds and all(_integer(r) for r in missing)):
        return f"expected a list of fewer than {rounds} round numbers"
    if not (_within([r - 1 for r in missing], rounds) and _ascending(missing)):
        return f"expected distinct ascending round numbers from 1 to {rounds}"
    value = check["value"]
    if not isinstance(value, list) or len(value) != rounds - len(missing):
        return f"the value must hold one entry per round that reported it ({rounds - len(missing)})"
    return None


def _round_sizes_problem(sizes: list[int] | None, n: int, where: str) -> str | None:
    """Samples per pooled round (harness/execute/rounds.py): together they must cover `samples` exactly."""
    if sizes is not None and (len(sizes) > n or sum(sizes) != n):
        return f"{where}: expected whole numbers >= 1 that add up to the {n} samples"
    return None


def _problem(doc: Any, nesting_checked: bool = False) -> str | None:
    """The first thing wrong with a parsed (and migrated) result document, or None."""
    if not nesting_checked and depth(doc) > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if problem := _shape_problem(doc):
        return problem
    if not RUN_ID.fullmatch(doc["run_id"]):
        return f"run_id: {_name(doc['run_id'])} is not a run id (letters, digits, '.', '_', '-')"
    if problem := suite_and_framework(doc["suite"], doc["framework"]):
        return problem
    if doc["status"] != "ok" and doc["reason"] is None:
        return f"reason: a {doc['status']} result must say why"
    if (total := sum(len(m["samples"]) for m in doc["metrics"])) > MAX_TOTAL_SAMPLES:
        return f"metrics: {total} samples in all is more than the {MAX_TOTAL_SAMPLES} a result may hold"
    seen: set[str] = set()
    for i, metric in enumerate(doc["metrics"]):
        if problem := _metric_problem(i, metric, seen):
            return problem
    if problem := _derived_problem(doc["metrics"]):
        return problem
    numbers = 0
    for i, check in enumerate(doc["checks"]):
        if not _numbers(check["value"]):
            return f"checks[{i}] ({_name(check['name'])}).value: expected a finite number or list of them"
        if problem := _missing_rounds_problem(check, doc["settings"].get("rounds")):
            return f"checks[{i}] ({_name(check['name'])}).{MISSING_ROUNDS}: {problem}"
        numbers += _count(check["value"])
        if numbers > MAX_CHECK_NUMBERS:
            return f"checks: more than the {MAX_CHECK_NUMBERS} numbers all check values of a result may hold"
    training = doc["training"] or {}
    curves, target = training.get("curves") or [], training.get("target")
    problem = _curves_problem(curves) or _target_problem(target) or _measures_problem(curves, target)
    return problem or parallel_problem(doc) or inference_problem(doc)


# What a learning curve evaluates, and the target of the same measure: an accuracy suite's test
# accuracy (percent, higher is better) or a language model's validation loss (lower is better).
CURVE_MEASURES = ("test_accuracy", "val_loss")
TARGET_MEASURES = {"test_accuracy": "accuracy", "val_loss": "loss"}


def _one_of(found: Mapping[str, Any], keys: Sequence[str], where: str) -> str | None:
    """Why `found` does not hold exactly one of `keys`, or None."""
    present = [k for k in keys if k in found]
    if len(present) == 1:
        return None
    got = " and ".join(present) if present else "neither"
    return f"{where}: expected exactly one of {' or '.join(keys)}, got {got}"


def _curves_problem(curves: list[dict[str, Any]]) -> str | None:
    """Learning curves (runtime/training.py), one per process: a picture plots every number."""
    for k, curve in enumerate(curves):
        where, n = f"training.curves[{k}]", len(curve["epoch_seconds"])
        if problem := _one_of(curve, CURVE_MEASURES, where):
            return problem
        measure = next(key for key in CURVE_MEASURES if key in curve)
        if measure == "test_accuracy" and "train_accuracy" not in curve:  # accuracy suites always wrote it
            return f"{where}.train_accuracy: missing field"
        for key in ("train_loss", "train_accuracy"):
            if key in curve and len(curve[key]) != n:
                return f"{where}.{key}: {len(curve[key])} entries, but epoch_seconds has {n}"
        for key in (measure, "evaluation_seconds"):  # one per evaluated epoch
            if len(curve[key]) > n:
                return f"{where}.{key}: expected a list of at most {n} finite numbers (one per epoch)"
        if len(curve["evaluation_seconds"]) != len(curve[measure]):
            return (
                f"{where}.evaluation_seconds: {len(curve['evaluation_seconds'])} entries, "
                f"but {measure} has {len(curve[measure])}"
            )
    if (points := sum(len(c["epoch_seconds"]) for c in curves)) > MAX_CURVE_POINTS:
        return f"training.curves: {points} epochs in all is more than the {MAX_CURVE_POINTS} a result may hold"
    return None


def _target_problem(target: dict[str, Any] | None) -> str | None:
    """A reached target has its numbers, one not reached has none; pooled rounds add up."""
    if target is None:
        return None
    if problem := _one_of(target, ("accuracy", "loss"), "training.target"):
        return problem
    # The other measure's record would be drawn against this target's line.
    other = ("best_loss", "loss_per_epoch") if "accuracy" in target else ("best_accuracy", "accuracy_per_epoch")
    if wrong := next((key for key in other if target.get(key) is not None), None):
        return f"training.target.{wrong}: a target of {'accuracy' if 'accuracy' in target else 'loss'} has no {wrong}"
    for key in ("seconds", "wall_seconds", "epochs"):
        if target["status"] == "reached" and target.get(key) is None:
            return f"training.target.{key}: a reached target needs a finite number"
        if target["status"] == "not reached" and target.get(key) is not None:
            return f"training.target.{key}: a target that was not reached has no {key}"
    rounds = target.get("rounds")
    reached = target.get("reached_rounds")
    if rounds is not None and (reached is None or reached > len(rounds)):
        return "training.target.reached_rounds: expected a whole number up to the number of rounds"
    return None


def _measures_problem(curves: list[dict[str, Any]], target: dict[str, Any] | None) -> str | None:
    """One job's curves and target measure one thing: a picture draws them on one axis."""
    measures = [next(key for key in CURVE_MEASURES if key in c) for c in curves]
    for k, measure in enumerate(measures):
        if measure != measures[0]:
            return f"training.curves[{k}]: expected {measures[0]} like training.curves[0] (one measure per result)"
    if measures and target is not None and TARGET_MEASURES[measures[0]] not in target:
        wanted = TARGET_MEASURES[measures[0]]
        return f"training.target: expected a target of {wanted}, what the curves ({measures[0]}) measure"
    return None


# -- the `parallel` block of a data-parallel job (suites/contract/ranks.py; judged in judge/parallel.py) ----


def _path(where: str, loc: Sequence[Any]) -> str:
    for key in loc:
        where += f"[{key}]" if isinstance(key, int) else f".{key if _KEY.fullmatch(str(key)) else _name(key)}"
    return where


def parallel_problem(doc: Mapping[str, Any]) -> str | None:
    """What is wrong with a result's `parallel` block, or None (also when it has none: only a
    data-parallel job's rank 0 writes one). Its shape is parallel_types.py's; the rules here tie its
    figures to each other and to the job's params, so every medium can divide by them unguarded."""
    if (block := doc.get("parallel")) is None:
        return None
    problem = _block_shape_problem(block, Parallel, "parallel", "data-parallel block (suites/contract/ranks.py)")
    return problem or _parallel_rules(cast(Parallel, block), devices_of(doc["params"]))


def _block_shape_problem(block: Any, tp: Any, name: str, what: str) -> str | None:
    """The first shape error of a block with its own TypedDict (`what`: how a misspelt key's message names it)."""
    try:
        _adapter(tp).validate_python(block)
    except pydantic.ValidationError as invalid:
        error = invalid.errors(include_url=False, include_context=False)[0]
        if error["type"] == "extra_forbidden":
            return f"{_path(name, error['loc'])}: not a field of the {what}"
        return _shape_message(error, block, tp, name)
    return None


def _parallel_rules(block: Parallel, asked: int) -> str | None:
    if (devices := block["devices"]) != asked:
        return f"parallel.devices: {devices}, but the job's params ask for devices={asked}"
    if block["global_batch"] != devices * block["per_device_batch"]:
        return (
            f"parallel.global_batch: {block['global_batch']} is not devices x per_device_batch "
            f"({devices} x {block['per_device_batch']})"
        )
    if block["unit"] == "samples" and block["items_per_row"] != 1:
        return "parallel.items_per_row: a batch counted in samples has 1 item per row"
    one_way = ("single_step_s", "single_batch", "single_throughput", "efficiency")
    fields = cast(Mapping[str, Any], block)
    for key in one_way:  # the 1-way step exists only beside an N-way one with N >= 2
        if (fields[key] is None) != (devices == 1):
            return f"parallel.{key}: expected null when devices is 1, a number when it is more"
    wanted = block["global_batch"] if block["scaling"] == "strong" else block["per_device_batch"]
    if block["single_batch"] is not None and block["single_batch"] != wanted:
        return (
            f"parallel.single_batch: {block['single_batch']}, but {block['scaling']} scaling runs the 1-way step "
            f"on {wanted} rows"
        )
    for i, rank in enumerate(block["ranks"]):
        if rank["rank"] != i:
            return f"parallel.ranks[{i}].rank: expected {i} (one entry per rank, in rank order)"
    if len(block["ranks"]) != devices:
        return f"parallel.ranks: {len(block['ranks'])} entries, but devices is {devices} (one per rank)"
    if (straggler := block["straggler"]) is not None and straggler["rank"] >= devices:
        return f"parallel.straggler.rank: {straggler['rank']} is not a rank of {devices}"
    return _single_problem(block["single"], block["global_batch"])


def _single_problem(single: Any, global_batch: int) -> str | None:
    if single is None:
        return None
    if single["global_batch"] != global_batch:
        return (
            f"parallel.single.global_batch: {single['global_batch']}, but the 1-way checks are taken at the "
            f"N-way global batch ({global_batch})"
        )
    seen: set[str] = set()
    numbers = 0
    for i, check in enumerate(single["checks"]):
        where = f"parallel.single.checks[{i}] ({_name(check['name'])})"
        if check["name"] not in PARALLEL_CHECKS:
            return f"{where}.name: not a data-parallel check (one of {', '.join(PARALLEL_CHECKS)})"
        if check["name"] in seen:
            return f"{where}.name: duplicate check name"
        seen.add(check["name"])
        if not _numbers(check["value"]):
            return f"{where}.value: expected a finite number or list of them"
        numbers += _count(check["value"])
        if numbers > MAX_CHECK_NUMBERS:
            return f"parallel.single.checks: more than the {MAX_CHECK_NUMBERS} numbers a result's checks may hold"
    return None


# -- the `inference` block of an inference job (suites/contract/inference.py; judged in judge/inference.py) ----


def inference_problem(doc: Mapping[str, Any]) -> str | None:
    """What is wrong with a result's `inference` block, or None. Only an ok job of `mode=infer` has one,
    and it must: the block is how every medium finds the latency, its percentiles and the sweep, so
    each name it gives must be a metric of this result of the right kind, derived from the right one."""
    block = doc.get("inference")
    mode = (doc.get("params") or {}).get("mode", "train")
    if block is None:
        if mode in ("infer", "generate") and doc.get("status") == "ok":
            return f"inference: missing, but the job ran mode={mode} (its latency metrics are unnamed)"
        return None
    if problem := _block_shape_problem(block, Inference, "inference", "inference block (suites/contract/inference.py)"):
        return problem
    if block["mode"] != mode:
        return f"inference.mode: {block['mode']}, but the job's params say mode={_name(str(mode))}"
    metrics = {m["name"]: m for m in doc["metrics"]}
    latency = block["latency"]

    def kind_problem(where: str, name: str, kind: str, source: str | None) -> str | None:
        if (metric := metrics.get(name)) is None:
            return f"{where}: {_name(name)} is not a metric of this result"
        if metric["kind"] != kind:
            return f"{where}: {_name(name)} is a {metric['kind']} metric, expected a {kind} metric"
        if source is not None and derived_sources(metric) != [source]:
            return f"{where}: {_name(name)} is not derived from {_name(source)} alone"
        return None

    problem = kind_problem("inference.latency.metric", latency["metric"], "time", None)
    if latency["percentiles"]["p50"] != latency["metric"]:
        problem = problem or "inference.latency.percentiles.p50: expected the latency metric itself (its median)"
    for label, name in latency["percentiles"].items():
        if label != "p50":
            problem = problem or kind_problem(
                f"inference.latency.percentiles.{label}", name, "value", latency["metric"]
            )
    if problem:
        return problem
    generate = block["generate"]
    if (generate is None) != (block["mode"] == "infer"):
        return f"inference.generate: expected {'null' if block['mode'] == 'infer' else 'an object'} for mode={block['mode']}"
    if generate is not None:
        if block["sweep"]:
            return "inference.sweep: expected empty for mode=generate (it sweeps no batch sizes)"
        problem = kind_problem("inference.generate.prefill", generate["prefill"], "time", None)
        return problem or kind_problem(
            "inference.generate.decode_rate", generate["decode_rate"], "value", latency["metric"]
        )
    batches = [point["batch"] for point in block["sweep"]]
    if not batches or batches != sorted(set(batches)):
        return "inference.sweep: expected batch sizes in increasing order, each once"
    if batches[0] != 1 or block["sweep"][0]["time"] != latency["metric"]:
        return "inference.sweep[0]: expected batch 1, timed by the latency metric"
    for i, point in enumerate(block["sweep"]):
        where = f"inference.sweep[{i}]"
        problem = problem or kind_problem(f"{where}.time", point["time"], "time", None)
        problem = problem or kind_problem(f"{where}.throughput", point["throughput"], "value", point["time"])
    return problem


def validate(doc: Any, source: str, *, nesting_checked: bool = False) -> Result:
    """`doc` migrated to the current version and checked; raises one InvalidResult line.

    `nesting_checked`: `doc` comes from `parse_json`, which has measured its depth (a walk over
    every value: not twice for a file at the caps)."""
    problem = version_problem(doc.get("schema_version")) if isinstance(doc, dict) else "top level is not a JSON object"
    if problem is None:
        doc = migrate(doc)
        problem = _problem(doc, nesting_checked)
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
        raise error(f"{source}: not valid JSON ({plain(problem)[:200]}); the file is truncated or corrupt") from None
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
    return validate(parse_json(data, str(path), InvalidResult), str(path), nesting_checked=True)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number this harness accepts")


# -- summary.json ---------------------------------------------------------------------------


def summary_problem(doc: Any) -> str | None:
    """What is wrong with a run summary as a whole (bad job entries are reported one by one)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        return "expected an object with a jobs list"
    if not isinstance(doc.get("run_id"), str) or not RUN_ID.fullmatch(doc["run_id"]):
        return f"run_id: {_name(doc.get('run_id'))} is not a run id"
    if names := suite_and_framework(doc.get("suite"), None):
        return names
    if (baseline := doc.get("baseline")) is not None and suite_and_framework(doc["suite"], baseline):
        return f"baseline: {_name(baseline)} is not a framework of suite {doc['suite']}"
    for key in ("backend", "harness_version", "started_at", "finished_at"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            return f"{key}: expected a string or null"
    if doc.get("interrupted") is not None and not isinstance(doc["interrupted"], bool):
        return "interrupted: expected true or false"
    if doc.get("rounds") is not None and not (_integer(doc["rounds"]) and doc["rounds"] >= 1):
        return "rounds: expected a whole number >= 1"
    command = doc.get("command")
    if command is not None and not (isinstance(command, list) and all(isinstance(a, str) for a in command)):
        return "command: expected a list of strings"
    for key, check in (
        ("interleaved", interleaved_problem),
        ("budget", budget_problem),
        ("sequential", sequential_problem),
        ("code", code_problem),
    ):
        if doc.get(key) is not None and (found := check(doc[key])):
            return found
    return None


def budget_problem(value: Any) -> str | None:
    """Why a summary's `budget` field (rounds run until a time budget was spent) is malformed, or None."""
    if not isinstance(value, dict) or set(value) != {"budget_s", "spent_s", "over"}:
        return "budget: expected an object with budget_s, spent_s and over"
    if not (number(value["budget_s"]) and value["budget_s"] > 0 and number(value["spent_s"]) and value["spent_s"] >= 0):
        return "budget: budget_s and spent_s must be seconds"
    if not isinstance(value["over"], bool):
        return "budget.over: expected true or false"
    return None


SEQUENTIAL_STOPS = ("a change was called", "the budget was spent", "it was interrupted")  # judge/sequential.py
# The smallest alpha a session's record may hold other than 0. The looks spend their shares of ALPHA
# by the clock (judge/sequential.py): a share under a millionth of it takes a stall that pushes a look
# into the budget's last millionth, and such a session records 0 (nothing left to call) instead. A
# tinier alpha read from disk is an edited file: it would silence every verdict, and ALPHA / alpha
# (the family the noise floor plans with, sequential.family_at) overflowed at 5e-324.
MIN_SEQUENTIAL_ALPHA = ALPHA * 1e-6


def sequential_problem(value: Any) -> str | None:
    """Why a summary's `sequential` field (the looks of `ab --budget`) is malformed, or None. Its alpha
    decides verdicts: one above the family-wise ALPHA would make a later compare call more than it may."""
    if not isinstance(value, dict) or set(value) != {"alpha", "looks", "rounds", "stopped"}:
        return "sequential: expected an object with alpha, looks, rounds and stopped"
    alpha = value["alpha"]
    if not (number(alpha) and (alpha == 0 or MIN_SEQUENTIAL_ALPHA <= alpha <= ALPHA)):
        return (
            f"sequential.alpha: expected a number from 0 to {ALPHA:g}, either 0 or at least {MIN_SEQUENTIAL_ALPHA:g} "
            "(a session's looks never spend more than the family-wise rate, nor a sliver of it)"
        )
    if not (_integer(value["looks"]) and value["looks"] >= 0 and _integer(value["rounds"]) and value["rounds"] >= 0):
        return "sequential: looks and rounds must be whole numbers >= 0"
    if value["stopped"] not in SEQUENTIAL_STOPS:
        return f"sequential.stopped: expected one of {', '.join(SEQUENTIAL_STOPS)}"
    return None


GIT_COMMIT = re.compile(r"[0-9a-f]{40}")
AB_SIDES = ("baseline", "candidate")  # `harness ab`: run_folder.partners
# The smallest change `harness ab` calls, as a fraction (judge/compare.py, docs/method.md "The
# margin"): two copies of one code tree in two folders differ by up to 0.7 % on this project's
# machines, a difference no number of rounds can pin on the code.
AB_MARGIN = 0.01
# A recorded margin decides which verdicts a later compare may call: a planted summary must not
# widen it until a real regression passes a gate unseen.
MAX_AB_MARGIN = 0.2


def interleaved_problem(value: Any) -> str | None:
    """Why a summary's `interleaved` field (one side of an A/B session) is malformed, or None. Its
    margin is absent in the summaries of sessions made before the margin existed (judged without)."""
    if not isinstance(value, dict) or set(value) not in ({"side", "partner"}, {"side", "partner", "margin"}):
        return "interleaved: expected an object with side, partner and margin"
    if value["side"] not in AB_SIDES:
        return f"interleaved.side: expected one of {', '.join(AB_SIDES)}"
    if not isinstance(value["partner"], str) or not RUN_ID.fullmatch(value["partner"]):
        return "interleaved.partner: expected a run id"
    if "margin" in value and not (number(value["margin"]) and 0 <= value["margin"] <= MAX_AB_MARGIN):
        return f"interleaved.margin: expected a number from 0 to {MAX_AB_MARGIN:g}"
    return None


def code_problem(code: Any) -> str | None:
    """Why a summary's `code` record (which code produced the run, run_folder.describe_code) is malformed, or None."""
    if not isinstance(code, dict):
        return "code: expected an object"
    digest, commit, dirty = code.get("suites_sha256"), code.get("git_commit"), code.get("git_dirty")
    if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        return "code.suites_sha256: expected 64 hex digits"
    if commit is not None and not (isinstance(commit, str) and GIT_COMMIT.fullmatch(commit)):
        return "code.git_commit: expected 40 hex digits or null"
    if dirty is not None and not isinstance(dirty, bool):
        return "code.git_dirty: expected true, false or null"
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
    # The status decides what `--resume` runs again and what `show` counts: only the known ones.
    if entry.get("status") not in STATUSES:
        return f"job entry {_name(name)}: status {_name(entry.get('status'))} is not one of {', '.join(STATUSES)}"
    if entry.get("reason") is not None and not isinstance(entry["reason"], str):
        return f"job entry {_name(name)}: reason must be text or null"
    return None


def load_summary(path: Path) -> dict[str, Any]:
    try:
        doc = parse_json(read_bytes(path, MAX_SUMMARY_BYTES, what="run summary"), str(path))
    except HarnessError as error:
        raise HarnessError(f"unreadable run summary: {error}") from None
    if problem := summary_problem(doc):
        raise HarnessError(f"{path}: unreadable run summary ({problem}); the file was edited or is corrupt")
    return cast(dict[str, Any], doc)


# Older result versions, brought up to the current one before validation.
#
# One function per version step; `migrate` chains them, so a reader (and every renderer behind
# it) only ever sees the current version. The job side writes the current version
# (suites/contract/result.py): a harness reads its own and every older version, never a newer one.
OLDEST = 1


def v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    """Version 1 left `dataset` and `training` out where they do not apply, the only top-level
    fields that could be absent; version 2 writes every field, null where it does not apply, so a
    missing field is always a broken file."""
    return {**doc, "dataset": doc.get("dataset"), "training": doc.get("training"), "schema_version": 2}


STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: v1_to_v2}


def version_problem(version: Any) -> str | None:
    """Why a document of this schema_version cannot be read, or None."""
    if isinstance(version, int) and not isinstance(version, bool) and OLDEST <= version <= SCHEMA_VERSION:
        return None
    shown = repr(version)[:40] if isinstance(version, (int, str)) and not isinstance(version, bool) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        return (
            f"schema_version is {version}, newer than this harness reads ({OLDEST} to {SCHEMA_VERSION}); "
            "upgrade the harness to read it"
        )
    return f"schema_version is {shown or 'missing or not a whole number'}; this harness reads versions {OLDEST} to {SCHEMA_VERSION}"


def migrate(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` at the current version (a new dict where anything changed; the input is left alone).
    The caller has checked `version_problem(doc["schema_version"])`."""
    while doc["schema_version"] < SCHEMA_VERSION:
        doc = STEPS[doc["schema_version"]](doc)
    return doc
