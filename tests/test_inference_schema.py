"""The `inference` block read back from disk is hostile like the rest of a result: its shape is checked
strictly and every name it gives must be a metric of the right kind, derived from the right one
(harness/core/schema.py inference_problem). Real results of this machine (tests/data/inference/) are
the starting point; each case plants one defect and expects one line naming it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import InvalidResult, inference_problem, validate

DATA = Path(__file__).parent / "data" / "inference"


def doc(case: str, framework: str = "pytorch") -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / case / f"{framework}.json").read_text())
    return loaded


@pytest.mark.parametrize("case", ["resnet18-infer", "gpt-infer", "gpt-generate"])
@pytest.mark.parametrize("framework", ["flax", "pytorch"])
def test_the_recorded_results_are_valid(case: str, framework: str) -> None:
    found = validate(doc(case, framework), f"{case}/{framework}.json")
    assert found["inference"]["mode"] == found["params"]["mode"]  # type: ignore[typeddict-item]


def _drop_metric(d: dict[str, Any], name: str) -> None:
    d["metrics"] = [m for m in d["metrics"] if m["name"] != name]


PLANTS: dict[str, tuple[str, Callable[[dict[str, Any]], None], str]] = {
    "no block": ("gpt-infer", lambda d: d.pop("inference"), "inference: missing, but the job ran mode=infer"),
    "unknown key": ("gpt-infer", lambda d: d["inference"].update(extra=1), "inference.extra: not a field"),
    "mode mismatch": ("gpt-infer", lambda d: d["params"].update(mode="generate"), "inference.mode: infer, but"),
    "missing metric": (
        "resnet18-infer",
        lambda d: d["inference"]["latency"]["percentiles"].update(p99="latency p999 (batch 1)"),
        "inference.latency.percentiles.p99: 'latency p999 (batch 1)' is not a metric",
    ),
    "wrong kind": (
        "resnet18-infer",
        lambda d: d["inference"]["latency"].update(metric="throughput (batch 1)"),
        "inference.latency.metric: 'throughput (batch 1)' is a value metric, expected a time metric",
    ),
    "wrong source": (
        "resnet18-infer",
        lambda d: d["inference"]["sweep"][1].update(throughput="throughput (batch 1)"),
        "inference.sweep[1].throughput: 'throughput (batch 1)' is not derived from 'inference (batch 8)' alone",
    ),
    "unordered sweep": (
        "gpt-infer",
        lambda d: d["inference"]["sweep"].reverse(),
        "inference.sweep: expected batch sizes in increasing order",
    ),
    "empty sweep": ("gpt-infer", lambda d: d["inference"].update(sweep=[]), "inference.sweep: expected batch sizes"),
    "generate without its block": (
        "gpt-generate",
        lambda d: d["inference"].update(generate=None),
        "inference.generate: expected an object for mode=generate",
    ),
    "generate with a sweep": (
        "gpt-generate",
        lambda d: d["inference"].update(sweep=doc("gpt-infer")["inference"]["sweep"]),
        "inference.sweep: expected empty for mode=generate",
    ),
    "prefill dropped": (
        "gpt-generate",
        lambda d: _drop_metric(d, "time to first token"),
        "inference.generate.prefill: 'time to first token' is not a metric",
    ),
    "a batch of zero": (
        "gpt-generate",
        lambda d: d["inference"]["generate"].update(batch=0),
        "inference.generate.batch",
    ),
    "a name too long": (
        "gpt-infer",
        lambda d: d["inference"]["latency"].update(metric="x" * 500),
        "inference.latency.metric",
    ),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_defect_is_one_line_naming_it(plant: str) -> None:
    case, edit, expected = PLANTS[plant]
    planted = copy.deepcopy(doc(case))
    edit(planted)
    problem = inference_problem(planted)
    assert problem is not None and expected in problem, problem
    assert "\n" not in problem
    with pytest.raises(InvalidResult):
        validate(planted, "planted.json")


def test_a_failed_inference_job_needs_no_block() -> None:
    failed = copy.deepcopy(doc("gpt-infer"))
    failed.pop("inference")
    failed["status"], failed["reason"] = "failed", "boom"
    assert inference_problem(failed) is None
