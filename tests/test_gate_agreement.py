"""The agreement gate: reference choice, missing values, the test-only perturbation, exit status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.gate import evaluate, reference_framework
from harness.runs import load_run
from harness.schema import load_result
from harness.table import gate_passed, render
from suites.runtime import perturb
from suites.runtime.context import Context
from suites.runtime.spec import CheckSpec, SuiteSpec
from tests.conftest import harness, run_folder
from tests.factories import check, metric, result, write_run


def skipped(framework: str, reason: str) -> dict[str, Any]:
    doc = result(framework, [])
    doc["status"], doc["reason"] = "skipped", reason
    return doc


def test_a_skipped_baseline_hands_the_comparison_to_the_first_framework_that_ran(tmp_path: Path) -> None:
    docs = [
        skipped("numpy", "no automatic differentiation"),
        result("jax", [metric("m", [1.0])], [check("g", [1.0, 2.0], rtol=1e-6)]),
        result("pytorch", [metric("m", [1.0])], [check("g", [1.0, 2.1], rtol=1e-6)]),
    ]
    run = load_run(write_run(tmp_path / "run", docs, baseline="numpy"))
    assert reference_framework(run) == "jax"
    (row,) = evaluate(run)
    assert row.reference == "jax" and row.passed == {"jax": True, "pytorch": False}
    assert "differs from jax" in row.why["pytorch"]
    text = render(run)
    assert "vs jax" in text and "pytorch †" in text
    assert not gate_passed(run)


def test_a_framework_that_omits_a_comparative_check_fails(tmp_path: Path) -> None:
    docs = [
        result("numpy", [metric("m", [1.0])], [check("x", 1.0, rtol=1e-6), check("r", 0.0, limit=1.0)]),
        result("jax", [metric("m", [1.0])], [check("r", 0.0, limit=1.0)]),  # no "x"
    ]
    run = load_run(write_run(tmp_path / "run", docs))
    rows = {row.name: row for row in evaluate(run)}
    assert rows["x"].passed == {"numpy": True, "jax": False}
    assert rows["r"].passed == {"numpy": True, "jax": True}  # limit-only checks are per framework
    assert "- (FAIL: no value, but numpy reported one)" in render(run)
    assert not gate_passed(run)


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
