"""The first-call and rate ratios to the baseline are the assessment's (`Assessment.plain_ratio`),
with the same rules the table applied when it worked them out itself: none against a framework or
baseline that is not comparable, none against an excluded baseline metric, and for a rate none
from an excluded metric (its first call still has one: exclusion is about the steady samples)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.judge.assessment import assess
from harness.report.table import render
from harness.store.run_folder import load_run
from tests.factories import check, metric, result, write_run

FLOPS = 2 * 64**3


def _doc(framework: str, median: float, first: float, **changes: Any) -> dict[str, Any]:
    doc = result(framework, [metric("matmul", [median] * 5, first=first, flops=FLOPS)])
    doc["metrics"][0].update(changes)
    return doc


def _judged(tmp_path: Path, *docs: dict[str, Any]) -> Any:
    return assess(load_run(write_run(tmp_path / "r", list(docs), baseline="numpy")))


def test_the_first_call_and_rate_ratios_are_the_quotients_against_the_baseline(tmp_path: Path) -> None:
    judged = _judged(tmp_path, _doc("numpy", 0.004, 0.5), _doc("pytorch", 0.002, 2.0))
    assert judged.plain_ratio("pytorch", "matmul", "first_call") == pytest.approx(4.0)
    assert judged.plain_ratio("pytorch", "matmul", "flops") == pytest.approx(2.0)  # twice the FLOP/s
    assert judged.plain_ratio("numpy", "matmul", "first_call") == pytest.approx(1.0)
    rows = {line.split("  ")[0]: line for line in render(judged).splitlines()}
    assert rows["matmul (first call)"].endswith("2 s (4.00x)"), rows
    assert rows["matmul GFLOP/s"].rstrip().endswith("(2.00x)"), rows


def test_no_ratio_against_an_excluded_baseline_or_from_an_excluded_rate(tmp_path: Path) -> None:
    escaped = {"sync": {"state": "escaped", "excess_median_s": 0.03, "sample_median_s": 0.1}}
    base_out = _judged(tmp_path / "a", _doc("numpy", 0.004, 0.5, **escaped), _doc("pytorch", 0.002, 2.0))
    assert base_out.plain_ratio("pytorch", "matmul", "first_call") is None
    assert base_out.plain_ratio("pytorch", "matmul", "flops") is None
    own_out = _judged(tmp_path / "b", _doc("numpy", 0.004, 0.5), _doc("pytorch", 0.002, 2.0, **escaped))
    assert own_out.plain_ratio("pytorch", "matmul", "flops") is None
    assert own_out.plain_ratio("pytorch", "matmul", "first_call") == pytest.approx(4.0)


def test_no_ratio_for_a_framework_that_is_not_comparable_or_against_a_zero(tmp_path: Path) -> None:
    failing = _doc("pytorch", 0.002, 2.0)
    failing["checks"] = [check("residual", 1.0, limit=1e-6), check("product_sum", 3.3e7, rtol=1e-9)]
    judged = _judged(tmp_path / "a", _doc("numpy", 0.004, 0.5), failing)
    assert "pytorch" in judged.not_comparable
    assert judged.plain_ratio("pytorch", "matmul", "first_call") is None
    zero = _judged(tmp_path / "b", _doc("numpy", 0.004, 0.0), _doc("pytorch", 0.002, 2.0))
    assert zero.plain_ratio("pytorch", "matmul", "first_call") is None
