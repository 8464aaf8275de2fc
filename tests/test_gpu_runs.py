"""The run folders the first GPU session brought back (docs/gpu-runs/h100-2026-11-27, an H100 80GB
HBM3 with torch 2.11 and jax 0.11): real GPU results, kept so that the host's GPU paths (the
datasheet row, the calibrated ceilings, the selftest's checks, the renderers) are tested on what a
GPU really wrote, on a machine without one."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.execute.selftest import check_result
from harness.judge.assessment import assess
from harness.store.run_folder import load_run
from tests.conftest import REPO, harness

SESSION = REPO / "docs" / "gpu-runs" / "h100-2026-11-27"
RUNS = sorted(p for p in SESSION.iterdir() if p.is_dir())
FINISHED = ("autograd", "cifar10", "gpt-ee7f", "jit", "mlp", "mnist", "pc", "scipy")


def test_the_session_folder_holds_the_runs_the_docs_describe() -> None:
    assert len(RUNS) == 11
    assert {r.name.split("-", 2)[2] for r in RUNS} >= {"gpt-811a", "resnet18-147b", "xla-97c1"}


@pytest.mark.parametrize("run_dir", [r for r in RUNS if any(r.name.endswith(f) or f"-{f}-" in r.name for f in FINISHED)],
                         ids=lambda p: p.name)  # fmt: skip
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
