from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from harness.schema import InvalidResult, load_result, validate
from tests.factories import check, metric, result


def good() -> dict[str, Any]:
    return result("numpy", [metric("matmul", [1.0, 2.0, 3.0], flops=10.0)], [check("residual", 1e-12, limit=1e-6)])


def test_good_result_validates(tmp_path: Path) -> None:
    path = tmp_path / "numpy.json"
    path.write_text(json.dumps(good()))
    assert load_result(path)["framework"] == "numpy"


def mutate(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    target: Any = doc
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    if value is KeyError:
        del target[last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("schema_version", 2, "this harness reads version 1"),
        ("status", "great", "status: 'great' is not one of"),
        ("metrics", KeyError, "missing field(s): metrics"),
        ("metrics.0.samples", [], "non-empty list of finite numbers"),
        ("metrics.0.samples", [1.0, "2"], "non-empty list of finite numbers"),
        ("metrics.0.stats.n", 7, "stats.n is 7 but there are 3 samples"),
        ("metrics.0.kind", "speed", "expected 'time' or 'value'"),
        ("checks.0.value", "x", "expected a finite number"),
        ("suite", "", "suite: expected a non-empty string"),
        ("params", [], "params: expected an object"),
    ],
)
def test_bad_results_are_rejected_with_the_field(path: str, value: Any, message: str) -> None:
    with pytest.raises(InvalidResult) as info:
        validate(mutate(good(), path, value), "f.json")
    assert message in str(info.value) and str(info.value).startswith("f.json: invalid result")


def test_failed_result_must_give_a_reason() -> None:
    doc = mutate(good(), "status", "failed")
    with pytest.raises(InvalidResult, match="must say why"):
        validate(doc, "f.json")


def test_nan_and_truncation_are_rejected_on_read(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    text = json.dumps(good())
    path.write_text(text.replace('"samples": [\n', '"samples": [NaN, ').replace('"samples": [1.0', '"samples": [NaN'))
    with pytest.raises(InvalidResult, match="not valid JSON"):
        load_result(path)
    path.write_text(text[: len(text) // 2])
    with pytest.raises(InvalidResult, match="truncated or corrupt"):
        load_result(path)
    with pytest.raises(InvalidResult, match="missing"):
        load_result(tmp_path / "absent.json")
