"""The scipy suite at a small n through the real CLI."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import numpy as np
import pytest

from harness.core.schema import load_result
from tests.conftest import finished, run_folder

pytestmark = pytest.mark.slow


def test_bfgs_agrees_and_pytorch_is_skipped(smoke_run: Callable[[str], subprocess.CompletedProcess[str]]) -> None:
    proc = smoke_run("scipy")  # n=1000 (the smoke size) on numpy, jax and pytorch: tests/test_conformance.py's run
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    torch_doc = load_result(run / "pytorch.json")
    assert torch_doc["status"] == "skipped" and "no BFGS" in torch_doc["reason"]

    docs = {fw: load_result(run / f"{fw}.json") for fw in ("numpy", "jax")}
    assert all(d["params"]["n"] == 1000 for d in docs.values())
    checks = {fw: {c["name"]: c["value"] for c in d["checks"]} for fw, d in docs.items()}
    for values in checks.values():
        # The seed's re-run reports RMSE about 0.45 at x about [1.53, 2.79] (n = 10 000).
        slope, offset = values["x_opt"]
        assert abs(slope - 1.53) < 0.05 and abs(offset - 2.8) < 0.1
        assert 0.40 < values["loss_opt"] < 0.50
        assert values["grad_at_opt"] <= 1e-4
    assert np.allclose(checks["jax"]["x_opt"], checks["numpy"]["x_opt"], rtol=1e-4)
    assert checks["jax"]["loss_opt"] == pytest.approx(checks["numpy"]["loss_opt"], rel=1e-9)

    assert docs["jax"]["environment"]["precision"]["jax_enable_x64"] is True  # float64 in both
    jax_metrics = {m["name"]: m for m in docs["jax"]["metrics"]}
    assert jax_metrics["jit cache before new shape"]["samples"] == [1.0]
    assert jax_metrics["jit cache after new shape"]["samples"] == [2.0]
    retrace = jax_metrics["loss, new input shape"]
    assert retrace["first_call"] > 10 * retrace["stats"]["median"]  # the retrace is a compile
    for fw, doc in docs.items():
        names = {m["name"] for m in doc["metrics"]}
        assert {"loss", "minimise", "iterations", "function evaluations", "gradient evaluations"} <= names, fw
    assert "minimise, retraced every call (seed)" in jax_metrics and "minimise compile" in jax_metrics
    # The compared "minimise" is the compiled one: its steady samples are far below its first call
    # (which compiles), while the seed's retraced variant pays compilation in every sample.
    compiled, retraced = jax_metrics["minimise"], jax_metrics["minimise, retraced every call (seed)"]
    assert compiled["stats"]["median"] * 10 < compiled["first_call"]
    assert retraced["stats"]["median"] > 10 * compiled["stats"]["median"]
    assert "FAIL" not in proc.stdout
