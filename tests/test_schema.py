from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import InvalidResult, load_result, validate
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
        ("schema_version", 3, "schema_version is 3, newer than this harness reads (1 to 2); upgrade the harness"),
        ("schema_version", "2", "schema_version is '2'; this harness reads versions 1 to 2"),
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


# --- per-sample marks, pooled round sizes, learning curves (what the pictures read) -----------


def with_marks(marks: Any = None, round_sizes: Any = None) -> dict[str, Any]:
    doc = good()
    if marks is not None:
        doc["metrics"][0]["marks"] = marks
    if round_sizes is not None:
        doc["metrics"][0]["round_sizes"] = round_sizes
    return doc


def test_marks_and_round_sizes_that_fit_the_samples_validate() -> None:
    validate(with_marks({"escaped": [0, 2]}, [2, 1]), "f.json")
    validate(with_marks({}, [3]), "f.json")


@pytest.mark.parametrize(
    ("marks", "round_sizes", "message"),
    [
        ({"escaped": [3]}, None, "marks.escaped: expected indices of the 3 samples (0 to 2)"),
        ({"escaped": [-1]}, None, "marks.escaped: expected indices of the 3 samples"),
        (
            {"throttled?": [0]},
            None,
            "marks: 'throttled?' is not a mark reason (one of escaped, contended, throttled, compiled)",
        ),
        ({"escaped": [2, 0]}, None, "marks.escaped: expected distinct indices in ascending order"),
        ({"escaped": [1, 1]}, None, "marks.escaped: expected distinct indices in ascending order"),
        ({"escaped": [0.0]}, None, "marks.escaped: expected a list of sample indices"),
        ({"escaped": [True]}, None, "marks.escaped: expected a list of sample indices"),
        ({"escaped": 1}, None, "marks.escaped: expected a list of sample indices"),
        ({"escaped": list(range(10**5))}, None, "marks.escaped: expected indices of the 3 samples"),
        ([0, 1], None, "marks: expected an object of mark reason -> sample indices"),
        (None, [2, 2], "round_sizes: expected whole numbers >= 1 that add up to the 3 samples"),
        (None, [3, 0], "round_sizes: expected whole numbers >= 1"),
        (None, [1.5, 1.5], "round_sizes: expected whole numbers >= 1"),
        (None, "3", "round_sizes: expected whole numbers >= 1"),
        (None, [1] * 10**5, "round_sizes: expected whole numbers >= 1"),
    ],
)
def test_bad_marks_and_round_sizes_are_refused_with_the_field(marks: Any, round_sizes: Any, message: str) -> None:
    with pytest.raises(InvalidResult) as info:
        validate(with_marks(marks, round_sizes), "f.json")
    assert f"metrics[0] ('matmul').{message}" in str(info.value) and "\n" not in str(info.value)


def curve(**changes: Any) -> dict[str, Any]:
    doc = {
        "epoch_seconds": [3.0, 1.0, 1.0],
        "train_loss": [0.9, 0.5, 0.4],
        "train_accuracy": [70.0, 85.0, 90.0],
        "test_accuracy": [80.0, 88.0, 91.0],
        "evaluation_seconds": [0.4, 0.1, 0.1],
        "seed": 42,
    }
    doc.update(changes)
    return doc


def with_curves(curves: Any) -> dict[str, Any]:
    doc = good()
    doc["training"] = {"data": "device", "curves": curves}
    return doc


def test_learning_curves_validate() -> None:
    validate(with_curves([curve(), curve(test_accuracy=[], evaluation_seconds=[], seed=None)]), "f.json")
    validate(with_curves([]), "f.json")


@pytest.mark.parametrize(
    ("curves", "message"),
    [
        ({}, "training.curves: expected a list of objects or null"),
        ([curve()] * 1_001, "training.curves: 1001 curves is more than the 1000 a result may hold"),
        (
            [curve(**{k: [1.0] * 1000 for k in ("epoch_seconds", "train_loss", "train_accuracy")})] * 51,
            "training.curves: 51000 epochs in all is more than the 50000 a result may hold",
        ),
        ([curve(), 3], "training.curves[1]: expected an object"),
        (
            [curve(epoch_seconds=[])],
            "training.curves[0].epoch_seconds: expected a non-empty list of finite numbers >= 0",
        ),
        ([curve(epoch_seconds=[1.0] * 1001)], "epoch_seconds: 1001 epoch_seconds is more than the 1000 a result may"),
        (
            [curve(train_loss=[0.9, float("nan"), 0.4])],
            "training.curves[0].train_loss: expected a list of finite numbers",
        ),
        ([curve(train_loss=[0.9, "0.5", 0.4])], "training.curves[0].train_loss: expected a list of finite numbers"),
        ([curve(train_loss=[0.9, 0.5])], "training.curves[0].train_loss: 2 entries, but epoch_seconds has 3"),
        ([curve(train_accuracy=[70.0, 85.0, 101.0])], "train_accuracy: expected a list of percentages (0 to 100)"),
        ([curve(test_accuracy=[80.0, 101.0, 91.0])], "test_accuracy: expected a list of percentages (0 to 100)"),
        ([curve(test_accuracy=[-1.0, 88.0, 91.0])], "test_accuracy: expected a list of percentages (0 to 100)"),
        (
            [curve(epoch_seconds=[3.0, -1.0, 1.0])],
            "training.curves[0].epoch_seconds: expected a non-empty list of finite numbers >= 0",
        ),
        ([curve(evaluation_seconds=[0.4, -0.1, 0.1])], "evaluation_seconds: expected a list of finite numbers >= 0"),
        ([curve(test_accuracy=[1.0] * 4, evaluation_seconds=[1.0] * 4)], "test_accuracy: expected a list of at most 3"),
        ([curve(evaluation_seconds=[0.4])], "evaluation_seconds: 1 entries, but test_accuracy has 3"),
        (
            [curve(evaluation_seconds=None)],
            "training.curves[0].evaluation_seconds: expected a list of finite numbers >= 0",
        ),
        ([curve(seed="42")], "training.curves[0].seed: expected an integer or null"),
        ([curve(seed=4.2)], "training.curves[0].seed: expected an integer or null"),
    ],
)
def test_bad_learning_curves_are_refused_with_the_field(curves: Any, message: str) -> None:
    with pytest.raises(InvalidResult) as info:
        validate(with_curves(curves), "f.json")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_curves_are_checked_beside_a_time_to_target_record() -> None:
    doc = with_curves([curve(train_accuracy=[70.0, 85.0, 101.0])])
    doc["training"]["target"] = {"accuracy": 90.0, "status": "reached", "seconds": 5.0, "wall_seconds": 5.6,
                                 "epochs": 3}  # fmt: skip
    with pytest.raises(InvalidResult, match="train_accuracy"):
        validate(doc, "f.json")


def test_first_calls_are_capped_like_samples() -> None:
    doc = good()
    doc["metrics"][0]["first_calls"] = [1.0] * 10_001
    with pytest.raises(InvalidResult, match="first_calls: 10001 first_calls is more than the 10000 a result may hold"):
        validate(doc, "f.json")


def test_check_values_are_capped_over_all_checks_of_a_result() -> None:
    """They are compared pairwise across frameworks: bulk data there would make `show` crawl."""
    doc = good()
    doc["checks"] = [check("residual", [1.0] * 6_000, limit=1e-6), check("other", [[2.0] * 2_000] * 2, limit=1e-6)]
    validate(copy.deepcopy(doc), "f.json")  # 10,000 in all: the cap itself
    doc["checks"][1]["value"][1].append(3.0)
    with pytest.raises(
        InvalidResult, match="checks: more than the 10000 numbers all check values of a result may hold"
    ):
        validate(doc, "f.json")
