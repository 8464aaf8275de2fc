"""harness/rounds.pool keeps what the pictures read: per-round sample counts, marks re-based onto the
pooled samples, and every round's learning curve."""

from __future__ import annotations

from typing import Any

from harness.core.schema import validate
from harness.execute import rounds
from tests.factories import metric, result


def _round(samples: list[float], marks: dict[str, list[int]] | None) -> dict[str, Any]:
    m = metric("matmul", samples)
    if marks is not None:
        m["marks"] = marks
    return result("numpy", [m, metric("inverse", [1.0])])


def _curve(seed: int, epochs: int = 3) -> dict[str, Any]:
    return {
        "epoch_seconds": [2.0] + [1.0] * (epochs - 1),
        "train_loss": [0.5] * epochs,
        "train_accuracy": [80.0] * epochs,
        "test_accuracy": [85.0] * epochs,
        "evaluation_seconds": [0.1] * epochs,
        "seed": seed,
    }


def test_pool_rebases_each_rounds_marks_onto_the_concatenated_samples() -> None:
    docs = [
        _round([1.0, 1.0, 1.0], {"escaped": [2]}),
        _round([1.0, 1.0], None),  # no marks field (an older job): contributes none
        _round([1.0, 1.0, 1.0, 1.0], {"escaped": [0, 3]}),
        _round([1.0], {}),
    ]
    pooled = rounds.pool(docs, "r1")
    matmul, inverse = pooled["metrics"]
    assert matmul["round_sizes"] == [3, 2, 4, 1] and len(matmul["samples"]) == 10
    assert matmul["marks"] == {"escaped": [2, 5, 8]}  # 2; 0 + 3 + 2; 3 + 3 + 2
    assert inverse["round_sizes"] == [1, 1, 1, 1] and "marks" not in inverse  # no round had marks
    validate(pooled, "pooled")


def test_pool_merges_the_same_reason_across_rounds_sorted_and_drops_empty_reasons() -> None:
    pooled = rounds.pool([_round([1.0, 1.0], {"escaped": [1]}), _round([1.0, 1.0], {"escaped": [0, 1]})], "r1")
    assert pooled["metrics"][0]["marks"] == {"escaped": [1, 2, 3]}
    pooled = rounds.pool([_round([1.0, 1.0], {}), _round([1.0, 1.0], {})], "r1")
    assert pooled["metrics"][0]["marks"] == {}


def test_pool_concatenates_every_rounds_learning_curves_beside_the_target() -> None:
    docs = [_round([1.0], None) for _ in range(3)]
    for number, doc in enumerate(docs):
        doc["suite"], doc["framework"], doc["stack"] = "mnist", "flax", "jax"
        doc["params"] = {"seed": 42 + number, "target_accuracy": 80.0}
        target = {"accuracy": 80.0, "status": "reached", "seconds": 2.0, "wall_seconds": 2.1, "epochs": 1}
        doc["training"] = {"data": "device", "target": target, "curves": [_curve(42 + number, epochs=2 + number)]}
    pooled = rounds.pool(docs, "r1")
    training = pooled["training"]
    assert [c["seed"] for c in training["curves"]] == [42, 43, 44]  # one per process, in round order
    assert [len(c["epoch_seconds"]) for c in training["curves"]] == [2, 3, 4]
    assert training["target"]["status"] == "reached" and len(training["target"]["rounds"]) == 3
    assert training["data"] == "device"
    validate(pooled, "pooled")


def test_pool_adds_no_curves_where_no_round_had_any() -> None:
    pooled = rounds.pool([_round([1.0], None), _round([1.0], None)], "r1")
    assert pooled.get("training") is None  # null since result version 2, absent before
