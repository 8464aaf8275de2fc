"""Like-for-like settings (harness/judge/assessment.py): two frameworks that ran with different settings
of a knob that changes speed (`training.fairness`: a convolution algorithm search, how batches are
copied from the host) are not comparable, and every medium says which knob; a setting that does
not apply on one side (null) compares with anything; a field that is not what a job writes is
ignored and named, never trusted and never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.judge.assessment import assess, run_exit_code
from harness.report.exports import Format, render_run
from harness.store.run_folder import Run, load_run
from suites.contract.registry import all_suites
from tests.factories import check, metric, result, write_run

UNFAIR = "unfair: conv_algorithm_search true in flax, false in pytorch (XLA autotuning vs cuDNN benchmark)"


def _mnist(fw: str, fairness: Any) -> dict[str, Any]:
    """An ok mnist job that passes the agreement gate (every declared check, all at 0)."""
    doc = result(fw, [metric("epoch", [1.0, 1.1, 0.9])], [check(c.name, 0.0) for c in all_suites()["mnist"].checks])
    doc["suite"], doc["params"] = "mnist", {}
    doc["training"] = {"data": "device", "fairness": fairness}
    return doc


def _run(tmp_path: Path, flax: Any, pytorch: Any) -> Run:
    return load_run(write_run(tmp_path / "run", [_mnist("pytorch", pytorch), _mnist("flax", flax)], "pytorch"))


SEARCHED = {"conv_algorithm_search": True, "host_copy": None, "compute_dtype": "float32"}
NOT_SEARCHED = dict(SEARCHED, conv_algorithm_search=False)


def test_the_same_settings_are_comparable(tmp_path: Path) -> None:
    run = _run(tmp_path, SEARCHED, dict(SEARCHED))
    judged = assess(run)
    assert judged.not_comparable == {} and judged.fairness_mismatches == {}
    assert run_exit_code(judged) == 0 and not run.problems


def test_a_differing_setting_makes_the_framework_not_comparable_and_every_medium_says_why(tmp_path: Path) -> None:
    run = _run(tmp_path, SEARCHED, NOT_SEARCHED)
    judged = assess(run)
    assert judged.not_comparable == {"flax": UNFAIR}  # the baseline is what the others are held to
    assert judged.gate_failed == frozenset() and run_exit_code(judged) == 1
    assert f"flax: {UNFAIR}; timings kept in the JSON" in render_run(judged, Format.table)
    assert UNFAIR in render_run(judged, Format.markdown)
    assert json.loads(render_run(judged, Format.json))["not_comparable"] == {"flax": UNFAIR}
    assert UNFAIR in render_run(judged, Format.csv)


def test_every_differing_setting_is_named_beside_a_gate_failure(tmp_path: Path) -> None:
    flax = _mnist("flax", {"host_copy": "async", "conv_algorithm_search": True})
    flax["checks"] = [c for c in flax["checks"] if c["name"] != "param_count"]
    pytorch = _mnist("pytorch", {"host_copy": "blocking", "conv_algorithm_search": False})
    run = load_run(write_run(tmp_path / "run", [pytorch, flax], "pytorch"))
    assert assess(run).not_comparable["flax"] == (
        "failed the agreement gate; "
        "unfair: conv_algorithm_search true in flax, false in pytorch (XLA autotuning vs cuDNN benchmark); "
        "host_copy async in flax, blocking in pytorch"
    )


@pytest.mark.parametrize(
    ("flax", "pytorch"),
    [
        ({"conv_algorithm_search": None}, {"conv_algorithm_search": False}),  # does not apply to flax here
        ({"conv_algorithm_search": True}, {"conv_algorithm_search": None}),
        ({"host_copy": "async"}, {"conv_algorithm_search": False}),  # no setting in both
        (None, NOT_SEARCHED),  # a job that records none (an older suite)
        ({}, {}),
    ],
)
def test_a_setting_null_or_missing_on_one_side_compares_with_anything(tmp_path: Path, flax: Any, pytorch: Any) -> None:
    run = _run(tmp_path, flax, pytorch)
    judged = assess(run)
    assert judged.not_comparable == {} and run_exit_code(judged) == 0


@pytest.mark.parametrize(
    "hostile",
    [
        ["conv_algorithm_search", True],
        "conv_algorithm_search=true",
        12,
        {f"setting_{k}": True for k in range(33)},
        {"Conv": True},
        {"\x1b[2Jconv": True},
        {"": True},
        {"conv_algorithm_search": 1},
        {"conv_algorithm_search": 0.5},
        {"conv_algorithm_search": {"nested": True}},
        {"conv_algorithm_search": [True]},
        {"host_copy": "async\x1b[31m"},
        {"host_copy": "<script>alert(1)</script>"},
        {"host_copy": "a" * 41},
        {"host_copy": ""},
    ],
)
def test_a_hostile_field_is_ignored_named_and_fails_the_run(tmp_path: Path, hostile: Any) -> None:
    run = _run(tmp_path, hostile, NOT_SEARCHED)
    judged = assess(run)
    assert "flax" not in judged.not_comparable  # nothing read from it
    assert [p for p in run.problems if p.startswith("flax: training.fairness ignored (")], run.problems
    assert run_exit_code(judged) == 1  # an unreadable claim of fairness is not a clean run
    for fmt in Format:
        text = render_run(judged, fmt)
        assert "\x1b" not in text and "<script>" not in text
    assess(run)
    assert len(run.problems) == 1  # assessing twice says it once


def test_a_fairness_field_on_a_failed_job_is_not_read(tmp_path: Path) -> None:
    flax = dict(_mnist("flax", "not an object"), status="failed", reason="CUDA out of memory")
    run = load_run(write_run(tmp_path / "run", [_mnist("pytorch", NOT_SEARCHED), flax], "pytorch"))
    judged = assess(run)
    assert judged.fairness_mismatches == {} and not run.problems
