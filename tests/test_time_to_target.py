"""Host side of time-to-accuracy and of the dataset record: seeds per round, pooling, report words,
and the schema's checks of the `dataset` and `training` fields a training job writes."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from harness.core.schema import InvalidResult, validate
from harness.execute.rounds import round_params
from harness.judge import time_to_target as ttt
from harness.judge.assessment import assess
from harness.report import training_text
from tests.factories import metric, result


def _doc(seed: int, target: dict[str, Any] | None, metrics: tuple[str, ...] = ()) -> dict[str, Any]:
    doc = result("flax", [metric(name, [1.0 + seed], first=None) for name in metrics])
    doc["suite"] = "mnist"
    doc["params"] = {"seed": seed, "target_accuracy": 98.0}
    if target is not None:
        doc["training"] = {"data": "device", "target": target}
    return doc


def _reached(seconds: float, epochs: int = 3) -> dict[str, Any]:
    return {"accuracy": 98.0, "status": "reached", "seconds": seconds, "wall_seconds": seconds + 1, "epochs": epochs,
            "best_accuracy": 98.4}  # fmt: skip


NOT_REACHED = {"accuracy": 98.0, "status": "not reached", "seconds": None, "wall_seconds": None, "epochs": None,
               "best_accuracy": 93.1}  # fmt: skip


def test_each_round_trains_from_its_own_seed_only_with_a_target() -> None:
    params = {"seed": 42, "target_accuracy": 98.0, "epochs": 10}
    assert [round_params(params, k)["seed"] for k in (1, 2, 3)] == [42, 43, 44]
    assert round_params({"seed": 42, "target_accuracy": 0.0}, 3)["seed"] == 42
    assert round_params({"seed": 42}, 2) == {"seed": 42}


def test_pooled_rounds_give_the_median_and_interval_over_seeds() -> None:
    docs = [_doc(s, _reached(t)) for s, t in ((42, 10.0), (43, 14.0), (44, 12.0))]
    pooled = ttt.pool(docs)
    assert pooled is not None and pooled["status"] == "reached" and pooled["seconds"] == 12.0
    low, high = pooled["seconds_interval"]
    assert 10.0 <= low <= 12.0 <= high <= 14.0
    assert [r["seed"] for r in pooled["rounds"]] == [42, 43, 44]
    cell = training_text.target_cell({"training": {"target": pooled}})
    assert cell is not None and cell.startswith("12 s (3 epochs) [") and "over 3 seeds" in cell
    validate(dict(_doc(42, None), training={"target": pooled}), "pooled")  # the schema accepts it


def _pooled(seconds: list[float]) -> dict[str, Any]:
    """pool() over one round per time, each a minimal ok result that reached its target."""
    docs = [
        {"status": "ok", "params": {"seed": 42 + i}, "training": {"target": _reached(t)}} for i, t in enumerate(seconds)
    ]
    pooled = ttt.pool(docs)
    assert pooled is not None and pooled["status"] == "reached"
    return pooled


def test_three_seeds_print_the_75_percent_their_range_covers_not_95() -> None:
    """At 3 seeds the interval of the median is [min, max], which holds it with probability 1 - 2 / 2**3:
    the cell says 75 % inside the brackets, as every interval below 95 % in a report does."""
    pooled = _pooled([10.0, 14.0, 12.0])
    assert pooled["seconds_interval"] == [10.0, 14.0] and pooled["seconds_interval_coverage"] == 0.75
    assert training_text.target_cell({"training": {"target": pooled}}) == "12 s (3 epochs) [10 s-14 s 75%] over 3 seeds"
    assert _pooled([10.0, 14.0, 12.0, 11.0])["seconds_interval_coverage"] == 0.875
    # A record written before the coverage was (a bootstrap that claimed 95 %): worked out again from its rounds.
    old = dict(pooled, seconds_interval=[10.4, 13.6])
    del old["seconds_interval_coverage"]
    assert training_text.target_cell({"training": {"target": old}}) == "12 s (3 epochs) [10 s-14 s 75%] over 3 seeds"
    one = _pooled([12.0])
    assert (
        "seconds_interval" not in one and training_text.target_cell({"training": {"target": one}}) == "12 s (3 epochs)"
    )


@pytest.mark.parametrize("seeds", [6, 9, 10, 20])
def test_enough_seeds_reach_95_percent_and_print_no_coverage(seeds: int) -> None:
    pooled = _pooled([10.0 + 0.37 * i for i in range(seeds)])
    assert pooled["seconds_interval_coverage"] >= 0.95
    cell = training_text.target_cell({"training": {"target": pooled}})
    assert cell is not None and cell.endswith(f"] over {seeds} seeds") and "%" not in cell
    validate(dict(_doc(42, None), training={"target": pooled}), "pooled")


def test_the_stated_coverage_is_the_coverage_achieved() -> None:
    """Seeds drawn from a skewed continuous distribution with a known median (lognormal, median 10 s):
    the share of pooled intervals holding it matches the coverage they state, at every seed count."""
    rng = random.Random(56)
    trials = 1500
    for seeds in (3, 4, 5, 6, 8):
        held, stated = 0, 0.0
        for _ in range(trials):
            pooled = _pooled([10.0 * math.exp(rng.gauss(0, 0.3)) for _ in range(seeds)])
            low, high = pooled["seconds_interval"]
            held += low <= 10.0 <= high
            stated += pooled["seconds_interval_coverage"]
        # 1500 trials: the binomial standard error is at most 1.1 %; 4 of them either way.
        assert abs(held / trials - stated / trials) < 0.045, (seeds, held / trials, stated / trials)


def test_a_round_that_did_not_reach_makes_the_pool_not_reached_never_a_median() -> None:
    docs = [
        _doc(42, _reached(10.0), ("time to target", "epoch")),
        _doc(43, NOT_REACHED, ("epoch",)),
        _doc(44, _reached(12.0), ("time to target", "epoch")),
    ]
    pooled = ttt.pool(docs)
    assert pooled is not None and pooled["status"] == "not reached" and pooled["reached_rounds"] == 2
    assert pooled["seconds"] is None and "seconds_interval" not in pooled
    assert training_text.target_cell({"training": {"target": pooled}}) == "not reached (in 1 of 3 rounds)"
    # The metric of the lucky rounds is dropped before pooling samples; the others stay.
    kept = ttt.drop_partial_metrics(docs)
    assert all([m["name"] for m in d["metrics"]] == ["epoch"] for d in kept)
    assert [m["name"] for m in docs[0]["metrics"]] == ["time to target", "epoch"]  # inputs untouched


def test_cells_and_labels() -> None:
    assert training_text.target_cell(_doc(1, NOT_REACHED)) == "not reached (best 93.1 %)"
    assert training_text.target_cell(_doc(1, _reached(3.25, 2))) == "3.25 s (2 epochs)"
    assert training_text.target_cell(_doc(1, None)) is None
    dataset = {"name": "mnist", "origin": "hub", "repo": "ylecun/mnist", "revision": "77f3279092a1c1579b2250db8eafed0ad422088c",
               "fingerprint": "ab" * 32}  # fmt: skip
    assert (
        training_text.dataset_label({"dataset": dataset})
        == "data mnist (ylecun/mnist@77f3279092a1, fingerprint abababababababab)"
    )
    assert (
        training_text.dataset_label({"dataset": {"name": "synthetic", "revision": "seed 3"}})
        == "data synthetic (seed 3)"
    )
    assert training_text.dataset_label({}) is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("dataset", "mnist", "dataset: expected an object"),
        ("dataset", {"name": "mnist", "revision": 7}, "dataset.revision"),
        ("dataset", {"name": "mnist", "train_samples": -1}, "dataset.train_samples"),
        ("training", [], "training: expected an object"),
        ("training", {"target": {"status": "almost", "accuracy": 98.0}}, "training.target.status"),
        ("training", {"target": dict(NOT_REACHED, seconds=12.0)}, "was not reached has no seconds"),
        ("training", {"target": dict(_reached(1.0), epochs=None)}, "a reached target needs a finite number"),
    ],
)
def test_the_schema_refuses_malformed_dataset_and_training_fields(field: str, value: Any, message: str) -> None:
    doc = _doc(1, None)
    doc[field] = value
    with pytest.raises(InvalidResult, match=message):
        validate(doc, "f.json")


def test_rounds_pool_a_partly_reached_target_and_the_table_says_so(tmp_path: Any) -> None:
    """The wiring: harness/rounds.pool drops the lucky rounds' metrics and pools the target; the
    table shows the outcome per framework and the dataset in its head."""
    from harness.execute import rounds
    from harness.report.table import render
    from harness.store.run_folder import load_run
    from tests.factories import write_run

    flax = [
        _doc(42, _reached(10.0), ("time to target", "epoch")),
        _doc(43, NOT_REACHED, ("epoch",)),
    ]
    torch = [
        _doc(42, _reached(9.0), ("time to target", "epoch")),
        _doc(43, _reached(11.0), ("time to target", "epoch")),
    ]
    for d in torch:
        d["framework"] = "pytorch"
    merged = [rounds.pool(flax, "r1"), rounds.pool(torch, "r1")]
    assert [m["name"] for m in merged[0]["metrics"]] == ["epoch"]
    assert [m["name"] for m in merged[1]["metrics"]] == ["time to target", "epoch"]
    assert merged[0]["training"]["target"]["status"] == "not reached"
    assert merged[1]["training"]["target"]["seconds"] == 10.0
    for doc in merged:
        doc["dataset"] = {"name": "mnist", "repo": "ylecun/mnist", "revision": "77f3279092a1ab", "fingerprint": "1a0c"}
        validate(doc, "merged")
    text = render(assess(load_run(write_run(tmp_path / "run", merged))))
    assert "data mnist (ylecun/mnist@77f3279092a1, fingerprint 1a0c)" in text
    assert "not reached (in 1 of 2 rounds)" in text and "10 s (3 epochs) [" in text


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ({"seconds_interval": ["1", 2]}, "seconds_interval"),
        ({"seconds_interval_coverage": 1.5}, "seconds_interval_coverage"),
        ({"seconds_interval_coverage": "95%"}, "seconds_interval_coverage"),
        ({"best_accuracy": "high"}, "best_accuracy"),
        ({"rounds": [{}], "reached_rounds": "1"}, "reached_rounds"),
        ({"rounds": [{}], "reached_rounds": 2}, "reached_rounds"),
    ],
)
def test_the_schema_refuses_hostile_pooled_targets(target: dict[str, Any], message: str) -> None:
    doc = _doc(42, dict(NOT_REACHED, **target))
    with pytest.raises(InvalidResult, match=message):
        validate(doc, "hostile")
