"""Fairness settings: --threads reaches every framework, and differing settings are listed."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.core.schema import load_result
from harness.judge.assessment import assess
from harness.report.table import render
from harness.store.run_folder import load_run
from tests.conftest import finished, run_folder
from tests.factories import metric, result, write_run


def test_footer_lists_settings_that_differ(tmp_path: Path) -> None:
    numpy = result("numpy", [metric("m", [1.0])])
    jax = result("jax", [metric("m", [1.0])])
    numpy["environment"] = {"precision": {"compute_threads": 1, "float32_matmul": "float32"}}
    jax["environment"] = {"precision": {"compute_threads": 2, "float32_matmul": "float32"}}
    text = render(assess(load_run(write_run(tmp_path / "run", [numpy, jax]))))
    footer = text.split("settings that differ between frameworks", 1)[1]
    assert "compute threads: numpy=1, jax=2" in footer
    assert "float32 matmul" not in footer  # the same everywhere: not listed


@pytest.mark.slow
def test_threads_reach_every_framework(smoke_run: Callable[[str], subprocess.CompletedProcess[str]]) -> None:
    proc = smoke_run("xla")  # numpy, jax and pytorch under --threads 1: tests/test_conformance.py's run
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    for fw in ("numpy", "jax", "pytorch"):
        doc = load_result(run / f"{fw}.json")
        env = doc["environment"]
        assert doc["settings"]["threads"] == 1
        assert env["precision"]["compute_threads"] == 1, fw
        assert env["variables"]["OMP_NUM_THREADS"] == "1" and env["variables"]["OPENBLAS_NUM_THREADS"] == "1"
        assert "--xla_cpu_multi_thread_eigen=false" in env["variables"]["XLA_FLAGS"]
        if hasattr(os, "sched_setaffinity"):
            assert env["machine"]["cpu"]["usable_cores"] == 1, fw  # pinned: what XLA obeys
    numpy_env = load_result(run / "numpy.json")["environment"]["precision"]
    assert numpy_env["blas_threads"] and all(p["threads"] == 1 for p in numpy_env["blas_threads"])
    torch_env = load_result(run / "pytorch.json")["environment"]["precision"]
    assert torch_env["torch_num_threads"] == 1
    assert "settings that differ" not in proc.stdout  # the same for all three


@pytest.mark.slow
def test_a_blas_pool_the_work_loaded_is_recorded_after_it(
    smoke_run: Callable[[str], subprocess.CompletedProcess[str]],
) -> None:
    """NumPy's job no longer imports SciPy's linear algebra up front (a third of its time): the pools
    are read again after the work, so a suite that used SciPy records SciPy's OpenBLAS too, and one
    that did not records only NumPy's."""
    pools = {}
    for suite in ("scipy", "xla"):
        proc = smoke_run(suite)  # --smoke --threads 1, never calibrating: tests/test_conformance.py's runs
        assert finished(proc), proc.stdout + proc.stderr
        pools[suite] = load_result(run_folder(proc.stdout) / "numpy.json")["environment"]["precision"]["blas_threads"]
    files = {suite: sorted(p["library"] for p in found) for suite, found in pools.items()}
    assert len(pools["scipy"]) == len(pools["xla"]) + 1, files  # SciPy ships its own OpenBLAS
    assert all(p["threads"] == 1 for found in pools.values() for p in found), pools
