"""Per-round gating: rounds are pooled by the real harness/rounds.pool and judged by the real
assessment, so every round's check value faces the gate, not round 1's alone; a check some round
left out fails (round 1's value never stands in for it); and what a round could not observe or ran
with differently survives the pooling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import InvalidResult, validate
from harness.execute.rounds import pool
from harness.judge.assessment import Assessment, assess
from harness.store.run_folder import load_run
from tests.factories import check, metric, result, write_run

PRODUCT_SUM = 3.3e7
OFF = PRODUCT_SUM * (1 + 1e-6)  # outside the xla suite's rtol 1e-9


def _round(fw: str, product_sum: float | None = PRODUCT_SUM) -> dict[str, Any]:
    checks = [check("residual", 1e-10, limit=1e-6)]
    if product_sum is not None:  # None: this round did not report it
        checks.append(check("product_sum", product_sum, rtol=1e-9))
    return result(fw, [metric("matmul", [1.0, 1.1, 0.9])], checks)


def _judge(tmp_path: Path, numpy: list[float | None], jax: list[float | None]) -> Assessment:
    """Both frameworks' rounds (one product_sum per round) pooled, written and read back, judged."""
    docs = [pool([_round(fw, v) for v in values], "r1") for fw, values in (("numpy", numpy), ("jax", jax))]
    return assess(load_run(write_run(tmp_path / "run", docs, "numpy")))


def _row(judged: Assessment, name: str = "product_sum") -> Any:
    return next(row for row in judged.checks if row.name == name)


def test_every_round_agreeing_passes(tmp_path: Path) -> None:
    judged = _judge(tmp_path, [PRODUCT_SUM] * 3, [PRODUCT_SUM] * 3)
    assert judged.gate_failed == frozenset() and judged.not_comparable == {}
    assert _row(judged).values["jax"] == [PRODUCT_SUM] * 3  # one value per round, in round order


@pytest.mark.parametrize("odd", [1, 2])  # round 1 agrees; a later round does not
def test_one_later_round_that_disagrees_fails_the_gate(tmp_path: Path, odd: int) -> None:
    jax = [PRODUCT_SUM] * 3
    jax[odd] = OFF
    judged = _judge(tmp_path, [PRODUCT_SUM] * 3, jax)
    row = _row(judged)
    assert row.passed == {"numpy": True, "jax": False}
    assert row.why["jax"].startswith("differs from numpy by")
    assert judged.gate_failed == frozenset({"jax"}) and judged.not_comparable == {"jax": "failed the agreement gate"}


def test_a_check_missing_from_round_2_fails_instead_of_keeping_round_1s_value(tmp_path: Path) -> None:
    judged = _judge(tmp_path, [PRODUCT_SUM] * 3, [PRODUCT_SUM, None, PRODUCT_SUM])
    row = _row(judged)
    assert row.passed == {"numpy": True, "jax": False}
    assert row.why["jax"] == "not reported in round 2 of 3"
    assert row.values["jax"] == [PRODUCT_SUM, PRODUCT_SUM]  # rounds 1 and 3: nothing stands in for round 2
    assert _row(judged, "residual").passed == {"numpy": True, "jax": True}
    assert judged.gate_failed == frozenset({"jax"})


def test_a_baseline_missing_a_round_fails_and_is_not_what_the_others_are_held_to(tmp_path: Path) -> None:
    judged = _judge(tmp_path, [None, PRODUCT_SUM, None], [PRODUCT_SUM] * 3)
    row = _row(judged)
    assert row.passed == {"numpy": False, "jax": True} and row.reference == "jax"
    assert row.why["numpy"] == "not reported in rounds 1, 3 of 3"


def test_a_check_only_a_later_round_reported_names_the_round_it_missed(tmp_path: Path) -> None:
    pooled = pool([_round("jax", None), _round("jax")], "r1")
    product_sum = next(c for c in pooled["checks"] if c["name"] == "product_sum")
    assert product_sum["value"] == [PRODUCT_SUM] and product_sum["missing_rounds"] == [1]
    validate(pooled, "pooled")


@pytest.mark.parametrize(
    ("missing", "value", "rounds"),
    [
        ([0], [1.0, 1.0], 3),  # rounds are numbered from 1
        ([4], [1.0, 1.0], 3),
        ([2, 2], [1.0], 3),
        ([3, 2], [1.0], 3),
        ([1, 2, 3], [1.0], 3),  # every round missing: the value came from nowhere
        ([], [1.0, 1.0, 1.0], 3),
        ("2", [1.0, 1.0], 3),
        ([True], [1.0, 1.0], 3),
        ([2], [1.0, 1.0, 1.0], 3),  # one value per round that reported it
        ([2], 1.0, 3),
        ([2], [1.0], None),  # not a pooled result
        ([1], [1.0], 1),
    ],
)
def test_a_hostile_missing_rounds_field_is_rejected(missing: Any, value: Any, rounds: Any) -> None:
    doc = _round("jax")
    doc["settings"]["rounds"] = rounds
    doc["checks"][1].update(value=value, missing_rounds=missing)
    with pytest.raises(InvalidResult, match="missing_rounds"):
        validate(doc, "pooled")


def _training_round(**training: Any) -> dict[str, Any]:
    doc = _round("jax")
    doc["training"] = {"data": "device", **training}
    return doc


def test_what_one_round_could_not_observe_is_what_the_pool_says() -> None:
    seen = {"memory": {"peak": 12.0}, "compilations": {"observable": True, "how": "XLA compilations"}}
    blind = {"memory": {"peak": "not observable", "why": "peak reached before training"},
             "compilations": {"observable": False, "why": "no compilation event"}}  # fmt: skip
    pooled = pool([_training_round(**seen), _training_round(**blind), _training_round(**seen)], "r1")
    assert pooled["training"]["memory"] == blind["memory"]
    assert pooled["training"]["compilations"] == blind["compilations"]
    pooled = pool([_training_round(**seen), _training_round(**seen)], "r1")
    assert pooled["training"]["memory"] == seen["memory"]


def test_a_setting_that_changed_between_rounds_is_mixed() -> None:
    first = {"conv_algorithm_search": True, "host_copy": "async", "compute_dtype": None}
    later = dict(first, conv_algorithm_search=False)
    pooled = pool([_training_round(fairness=first), _training_round(fairness=later)], "r1")
    assert pooled["training"]["fairness"] == dict(first, conv_algorithm_search="mixed")
    pooled = pool([_training_round(fairness=first), _training_round(fairness=dict(first))], "r1")
    assert pooled["training"]["fairness"] == first
    hostile = pool([_training_round(fairness=first), _training_round(fairness=["x"])], "r1")
    assert hostile["training"]["fairness"] == ["x"]  # kept, so the assessment names it
