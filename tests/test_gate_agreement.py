"""The agreement gate: reference choice, missing values, the test-only perturbation, exit status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import load_result
from harness.judge.assessment import assess, evaluate, reference_framework
from harness.report.table import render
from harness.store.run_folder import load_run
from suites.contract.spec import CheckSpec, SuiteSpec
from suites.runtime import perturb
from suites.runtime.context import Context
from tests.conftest import harness, run_folder
from tests.factories import check, metric, result, write_run


def skipped(framework: str, reason: str) -> dict[str, Any]:
    doc = result(framework, [])
    doc["status"], doc["reason"] = "skipped", reason
    return doc


def test_a_skipped_baseline_hands_the_comparison_to_the_first_framework_that_ran(tmp_path: Path) -> None:
    docs = [
        skipped("numpy", "no automatic differentiation"),
        result("jax", [metric("m", [1.0])], [check("product_sum", [1.0, 2.0]), check("residual", 0.0)]),
        result("pytorch", [metric("m", [1.0])], [check("product_sum", [1.0, 2.1]), check("residual", 0.0)]),
    ]
    run = load_run(write_run(tmp_path / "run", docs, baseline="numpy"))
    assert reference_framework(run) == "jax"
    row = next(r for r in evaluate(run) if r.name == "product_sum")
    assert row.reference == "jax" and row.passed == {"jax": True, "pytorch": False}
    assert "differs from jax" in row.why["pytorch"]
    text = render(assess(run))
    assert "vs jax" in text and "pytorch †" in text
    assert not assess(run).gate_passed


def test_a_framework_that_omits_a_declared_check_fails(tmp_path: Path) -> None:
    docs = [
        result("numpy", [metric("m", [1.0])], [check("product_sum", 1.0), check("residual", 0.0)]),
        result("jax", [metric("m", [1.0])], [check("residual", 0.0)]),  # no "product_sum"
    ]
    run = load_run(write_run(tmp_path / "run", docs))
    rows = {row.name: row for row in evaluate(run)}
    assert rows["product_sum"].passed == {"numpy": True, "jax": False}
    assert rows["residual"].passed == {"numpy": True, "jax": True}
    assert "- (FAIL: declared check not reported)" in render(assess(run))
    assert not assess(run).gate_passed


def test_a_reference_that_reports_no_checks_fails_instead_of_passing_everyone(tmp_path: Path) -> None:
    docs = [result("numpy", [metric("m", [1.0])], []), result("jax", [metric("m", [1.0])])]
    run = load_run(write_run(tmp_path / "run", docs))
    rows = {row.name: row for row in evaluate(run)}
    assert rows["product_sum"].passed["numpy"] is False and rows["residual"].passed["numpy"] is False
    assert not assess(run).gate_passed


def test_with_three_frameworks_a_wrong_baseline_is_the_one_marked(tmp_path: Path) -> None:
    docs = [
        result("numpy", [metric("m", [1.0])], [check("product_sum", 2.0), check("residual", 0.0)]),  # wrong
        result("jax", [metric("m", [1.0])], [check("product_sum", 1.0), check("residual", 0.0)]),
        result("pytorch", [metric("m", [1.0])], [check("product_sum", 1.0), check("residual", 0.0)]),
    ]
    run = load_run(write_run(tmp_path / "run", docs, baseline="numpy"))
    row = next(r for r in evaluate(run) if r.name == "product_sum")
    assert row.reference == "jax" and row.passed == {"numpy": False, "jax": True, "pytorch": True}
    assert "jax (majority)" in row.tolerance
    text = render(assess(run))
    assert "numpy (baseline) †" in text and "jax †" not in text and "pytorch †" not in text


def test_with_three_frameworks_one_wrong_non_baseline_is_marked_alone(tmp_path: Path) -> None:
    docs = [
        result("numpy", [metric("m", [1.0])], [check("product_sum", 1.0), check("residual", 0.0)]),
        result("jax", [metric("m", [1.0])], [check("product_sum", 1.5), check("residual", 0.0)]),  # wrong
        result("pytorch", [metric("m", [1.0])], [check("product_sum", 1.0), check("residual", 0.0)]),
    ]
    row = next(r for r in evaluate(load_run(write_run(tmp_path / "run", docs))) if r.name == "product_sum")
    assert row.reference == "numpy" and row.passed == {"numpy": True, "jax": False, "pytorch": True}


def test_tolerances_come_from_the_suite_not_from_the_result_file(tmp_path: Path) -> None:
    # A result claiming rtol 1e9 for itself does not loosen the suite's declared 1e-9.
    loose = check("product_sum", 2.0, rtol=1e9)
    docs = [
        result("numpy", [metric("m", [1.0])], [check("product_sum", 1.0), check("residual", 0.0)]),
        result("jax", [metric("m", [1.0])], [loose, check("residual", 0.0)]),
    ]
    row = next(r for r in evaluate(load_run(write_run(tmp_path / "run", docs))) if r.name == "product_sum")
    assert row.passed["jax"] is False and "rtol 1e-09" in row.tolerance


def _context(framework: str, amount: float, target: str) -> Context:
    spec = SuiteSpec("t", "test", ("numpy", "jax"), checks=(CheckSpec("c", "a check", rtol=1e-6),))
    params = {"perturb": amount, "perturb_framework": target}
    return Context(spec, framework, params, repeat=1, warmup=0, device="cpu", device_kind="cpu", sync=lambda o: None)


def test_perturbation_touches_only_the_named_framework() -> None:
    hit = _context("jax", 1e-3, "jax")
    perturb.check(hit, "c", [2.0, 0.0])
    assert hit.checks[0]["value"] == pytest.approx([2.0 + 2e-3, 1e-3])
    assert any("TEST ONLY" in n for n in hit.notes)
    missed = _context("numpy", 1e-3, "jax")
    perturb.check(missed, "c", 5.0)
    assert missed.checks[0]["value"] == 5.0 and not missed.notes
    default = _context("jax", 0.0, "none")
    perturb.check(default, "c", 5.0)
    assert default.checks[0]["value"] == 5.0


@pytest.mark.slow
def test_a_perturbed_framework_fails_the_gate_and_keeps_its_timings(results: Path) -> None:
    proc = harness(
        "run", "--backend", "local", "--suite", "jit", "--frameworks", "numpy,jax", "--param", "min_length=1000",
        "--param", "max_length=1000", "--param", "total=10000", "--param", "perturb=1e-3",
        "--param", "perturb_framework=jax", "--repeat", "2", "--warmup", "0", "-q", "--results-dir", str(results),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the gate failed: exit status says so
    run = run_folder(proc.stdout)
    jax_doc = load_result(run / "jax.json")
    assert jax_doc["status"] == "ok" and jax_doc["metrics"]  # timings kept in the JSON
    assert "jax †" in proc.stdout and "FAIL: differs from numpy" in proc.stdout
    assert "not comparable" in proc.stdout
    assert load_result(run / "numpy.json")["status"] == "ok"


def test_compare_gives_no_verdict_for_a_framework_that_failed_the_gate(tmp_path: Path) -> None:
    from harness.judge.compare import compare_runs

    def run_with(jax_sum: float, jax_time: float, name: str) -> Path:
        docs = [
            result("numpy", [metric("m", [1.0, 1.01, 0.99, 1.0])]),
            result("jax", [metric("m", [jax_time] * 4)], [check("product_sum", jax_sum), check("residual", 0.0)]),
        ]
        docs[0]["checks"] = [check("product_sum", 1.0), check("residual", 0.0)]
        return write_run(tmp_path / name, docs)

    a = load_run(run_with(1.0, 1.0, "a"))
    wrong_and_fast = load_run(run_with(7.0, 0.5, "b"))  # "50 % faster" by computing something else
    comparison = compare_runs(assess(a), assess(wrong_and_fast))
    jax_change = next(c for c in comparison.changes if c.framework == "jax")
    assert jax_change.excluded is not None and "not comparable in run B" in jax_change.excluded
    assert jax_change.verdict.startswith("excluded") and not jax_change.significant
    assert comparison.geomean() == comparison.geomean("numpy")  # jax's 0.5x is in no summary figure
    assert comparison.worst_significant_slowdown() is None
