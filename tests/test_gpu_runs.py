"""The run folders the GPU sessions brought back (docs/gpu-runs/h100-2026-11-27, an H100 80GB HBM3,
and docs/gpu-runs/h200-2026-11-28, an H200; torch 2.11 and jax 0.11): real GPU results, kept so
that the host's GPU paths (the datasheet row, the calibrated ceilings, the selftest's checks, the
renderers) are tested on what a GPU really wrote, on a machine without one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.execute.selftest import check_result
from harness.judge.assessment import assess
from harness.store.run_folder import load_run
from tests.conftest import REPO, harness

SESSION = REPO / "docs" / "gpu-runs" / "h100-2026-11-27"
RUNS = sorted(p for p in SESSION.iterdir() if p.is_dir())
FINISHED = ("autograd", "cifar10", "gpt-ee7f", "jit", "mlp", "mnist", "pc", "scipy")
H200 = REPO / "docs" / "gpu-runs" / "h200-2026-11-28"
H200_RUNS = sorted(p for p in H200.iterdir() if p.is_dir())


def test_the_session_folder_holds_the_runs_the_docs_describe() -> None:
    assert len(RUNS) == 11
    assert {r.name.split("-", 2)[2] for r in RUNS} >= {"gpt-811a", "resnet18-147b", "xla-97c1"}


@pytest.mark.parametrize("run_dir", [r for r in RUNS if any(r.name.endswith(f) or f"-{f}-" in r.name for f in FINISHED)]
                         + [r for r in H200_RUNS if not r.name.endswith("gpt-de87")], ids=lambda p: p.name)  # fmt: skip
def test_every_finished_suite_passes_every_selftest_check(run_dir: Path) -> None:
    run = load_run(run_dir)
    judged = assess(run)
    assert run.results and all(r["status"] == "ok" for r in run.results.values())
    for fw, result in run.results.items():
        checks = list(check_result(result["suite"], fw, result, judged))
        failed = [c.line() for c in checks if c.passed is False]
        assert not failed, failed
        assert {"finished", "sync", "precision"} <= {c.name for c in checks}


def test_an_h100_rate_is_held_against_the_h100_datasheet_and_the_calibrated_ceiling() -> None:
    proc = harness("show", "20261127-194838-cifar10-0085", "--results-dir", str(SESSION))
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("epoch GFLOP/s"))
    assert "% of peak" in line and "% of achievable" in line, line
    assert "no datasheet peak" not in proc.stdout


def test_runs_the_session_cut_short_say_so() -> None:
    for name, says in (("20261127-195315-resnet18-147b", "INTERRUPTED"), ("20261127-195600-gpt-811a", "INTERRUPTED")):
        proc = harness("show", name, "--results-dir", str(SESSION))
        assert says in proc.stdout, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr


def test_the_h200_session_holds_gpt2_small_in_both_frameworks_and_the_cut_run_says_so() -> None:
    """flax's gpt2-small finished in the first call (its pytorch job was cut by the budget); pytorch's
    ran alone in the second. Both trained from the same weights on the same batches: their float32
    probes' first-step losses agree, and the interrupted job is a row that says so."""
    assert {r.name for r in H200_RUNS} >= {"20261128-064454-gpt-de87", "20261128-065015-gpt-c9e3"}
    flax_run, torch_run = load_run(H200 / "20261128-064454-gpt-de87"), load_run(H200 / "20261128-065015-gpt-c9e3")
    assert flax_run.results["flax"]["status"] == "ok" and flax_run.results["pytorch"]["status"] == "interrupted"
    assert torch_run.results["pytorch"]["status"] == "ok"

    def first_step(run: Any, fw: str) -> list[float]:
        return next(c["value"] for c in run.results[fw]["checks"] if c["name"] == "first_step_loss")

    assert first_step(flax_run, "flax") == pytest.approx(first_step(torch_run, "pytorch"), rel=1e-5)
    proc = harness("show", "20261128-064454-gpt-de87", "--results-dir", str(H200))
    assert "INTERRUPTED" in proc.stdout and "Traceback" not in proc.stderr
