from __future__ import annotations

from pathlib import Path

from harness.judge.assessment import assess, evaluate
from harness.report.table import render
from harness.store.run_folder import load_run
from tests.factories import check, metric, result, write_run


def two_framework_run(tmp_path: Path, jax_sum: float) -> Path:
    numpy = result("numpy", [metric("matmul", [2.0, 2.0, 2.0], first=3.0, flops=4e9)],
                   [check("residual", 1e-12, limit=1e-6), check("product_sum", 100.0, rtol=1e-9)])  # fmt: skip
    jax = result("jax", [metric("matmul", [1.0, 1.0, 1.0], first=6.0, flops=4e9)],
                 [check("residual", 2e-12, limit=1e-6), check("product_sum", jax_sum, rtol=1e-9)])  # fmt: skip
    return write_run(tmp_path / "run", [numpy, jax])


def test_table_shows_medians_ratios_first_calls_and_rates(tmp_path: Path) -> None:
    text = render(assess(load_run(two_framework_run(tmp_path, 100.0))))
    assert "numpy (baseline)" in text
    matmul = next(line for line in text.splitlines() if line.startswith("matmul "))
    assert "2 s" in matmul and "(1.00x)" in matmul and "1 s" in matmul and "(0.500x [0.500-0.500 56%])" in matmul
    first = next(line for line in text.splitlines() if line.startswith("matmul (first call)"))
    assert "3 s" in first and "(2.00x)" in first
    rate = next(line for line in text.splitlines() if line.startswith("matmul GFLOP/s"))
    assert "2 (1.00x)" in rate and "4 (2.00x)" in rate
    assert "checks" in text and "FAIL" not in text


def test_gate_flags_a_disagreeing_framework(tmp_path: Path) -> None:
    run = load_run(two_framework_run(tmp_path, 100.0 * (1 + 1e-6)))
    rows = {row.name: row for row in evaluate(run)}
    assert rows["product_sum"].passed == {"numpy": True, "jax": False}
    assert rows["residual"].passed == {"numpy": True, "jax": True}
    text = render(assess(run))
    assert "FAIL: differs from numpy" in text and "jax †" in text
    assert not assess(run).gate_passed


def test_limit_check_fails_above_limit(tmp_path: Path) -> None:
    doc = result("numpy", [metric("m", [1.0])], [check("residual", 1e-3, limit=1e-6)])
    run = load_run(write_run(tmp_path / "r", [doc]))
    assert "FAIL: exceeds limit 1e-06" in render(assess(run))


def test_rejected_file_is_reported_and_the_rest_renders(tmp_path: Path) -> None:
    path = two_framework_run(tmp_path, 100.0)
    (path / "jax.json").write_text('{"schema_version": 1, "trunc')
    run = load_run(path)
    assert list(run.results) == ["numpy"]
    text = render(assess(run))
    assert "rejected files" in text and "jax.json: not valid JSON" in text
