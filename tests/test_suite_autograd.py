"""The autograd suite at tiny sizes through the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.schema import load_result
from suites.autograd.common import (
    GRAD_OF_SUM,
    JIT_SCALAR_LOOP,
    JIT_VMAP_GRAD,
    SCALAR_LOOP,
    SEED_F_AT_3,
    SEED_GRAD_20,
    SEED_GRAD_AT_3,
    VMAP_GRAD,
)
from tests.conftest import finished, harness, run_folder

pytestmark = pytest.mark.slow

FLOAT32_EPS = 1.1920929e-07


def test_autograd_matches_the_seed_and_numpy_is_skipped(results: Path) -> None:
    proc = harness("run", "--backend", "local", "--suite", "autograd", "--frameworks", "numpy,jax,pytorch", "--param", "points=20",
                   "--repeat", "1", "--warmup", "0", "-q", "--results-dir", str(results))  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    numpy_doc = load_result(run / "numpy.json")
    assert numpy_doc["status"] == "skipped" and numpy_doc["reason"] == "no automatic differentiation"
    assert "SKIPPED: no automatic differentiation" in proc.stdout

    expected_metrics = {
        "jax": {VMAP_GRAD, JIT_VMAP_GRAD, GRAD_OF_SUM, SCALAR_LOOP, JIT_SCALAR_LOOP},
        "pytorch": {VMAP_GRAD, GRAD_OF_SUM, SCALAR_LOOP},
    }
    for fw, names in expected_metrics.items():
        doc = load_result(run / f"{fw}.json")
        assert doc["status"] == "ok"
        assert {m["name"] for m in doc["metrics"]} == names
        checks = {c["name"]: c["value"] for c in doc["checks"]}
        # float32 results: within two ulp of the seed's printed float32 values.
        assert abs(checks["f_at_3"] - SEED_F_AT_3) <= 2 * FLOAT32_EPS * abs(SEED_F_AT_3)
        assert abs(checks["grad_at_3"] - SEED_GRAD_AT_3) <= 2 * FLOAT32_EPS
        assert max(abs(v - s) for v, s in zip(checks["grad_at_20"], SEED_GRAD_20, strict=True)) < 2e-5
        assert checks["methods_agree"] <= 1e-5
    # numpy (the default baseline) was skipped: the gate compares against jax instead.
    assert "vs jax" in proc.stdout and "FAIL" not in proc.stdout
