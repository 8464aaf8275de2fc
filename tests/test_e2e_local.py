"""The real path: harness run -> subprocess jobs with real frameworks -> files -> table."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.core.schema import load_result
from tests.conftest import finished, harness, read, run_folder

pytestmark = pytest.mark.slow


def test_xla_on_three_frameworks(smoke_run: Callable[[str], subprocess.CompletedProcess[str]]) -> None:
    proc = smoke_run("xla")  # matrix_size=64, 3 samples (the smoke size), one thread: tests/test_conformance.py's run
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    summary = read(run / "summary.json")
    assert [j["status"] for j in summary["jobs"]] == ["ok", "ok", "ok"]
    for fw in ("numpy", "jax", "pytorch"):
        doc = load_result(run / f"{fw}.json")  # schema-valid
        assert doc["backend"] == "local" and doc["params"]["matrix_size"] == 64
        residual = next(c for c in doc["checks"] if c["name"] == "residual")["value"]
        assert residual < 1e-8
        names = [m["name"] for m in doc["metrics"]]
        assert names == ["generate", "mean_sum", "matmul", "inverse"]
        assert all(m["stats"]["n"] == 3 for m in doc["metrics"])
        # Every framework puts each timed operation but `generate` on the roofline (flops and bytes).
        assert all(m["flops"] and m["bytes"] for m in doc["metrics"] if m["name"] != "generate"), fw
        # Every timed second happened inside the job: first calls and samples fit in its wall time.
        timed = sum(m["first_call"] + sum(m["samples"]) for m in doc["metrics"])
        assert timed <= doc["duration_s"]
        assert (run / "logs" / f"{fw}.stdout.log").stat().st_size > 0
    jax_doc = read(run / "jax.json")
    assert jax_doc["environment"]["precision"]["jax_enable_x64"] is True
    table = proc.stdout
    assert "numpy (baseline)" in table and "matmul GFLOP/s" in table and "product_sum" in table
    assert "FAIL" not in table
    shown = harness("show", str(run))
    assert shown.returncode == 0
    assert "matmul GFLOP/s" in shown.stdout and shown.stdout.strip() in proc.stdout


def test_a_crashing_job_keeps_the_others(results: Path, tmp_path: Path) -> None:
    crash = tmp_path / "crash.sh"
    crash.write_text("#!/bin/sh\necho 'simulated framework crash' >&2\nkill -SEGV $$\n")
    crash.chmod(crash.stat().st_mode | stat.S_IEXEC)
    proc = harness(
        "run", "--suite", "xla", "--frameworks", "numpy,jax", "--param", "matrix_size=16", "--repeat", "2",
        "--python", f"jax={crash}", "--python", f"numpy={sys.executable}", "--results-dir", str(results),
    )  # fmt: skip
    assert proc.returncode == 1
    run = run_folder(proc.stdout)
    assert load_result(run / "numpy.json")["status"] == "ok"
    failed = load_result(run / "jax.json")
    assert failed["status"] == "failed"
    assert f"exited with code {-11 if os.name == 'posix' else 1}" in failed["reason"]
    assert "simulated framework crash" in failed["stderr_tail"]
    assert "FAILED: exited with code -11" in proc.stdout
