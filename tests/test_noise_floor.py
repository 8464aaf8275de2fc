"""The machine's noise floor (harness/judge/noise_floor.py): stored, read back, and what compare and --detect make of it."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import HarnessError
from harness.judge import noise_floor
from harness.store.plan import PlanRequest, make_plan
from harness.store.run_folder import load_run
from suites.contract import machine
from tests.conftest import harness
from tests.factories import metric, result, write_run


def test_the_detectable_change_shrinks_with_rounds_and_grows_with_the_family() -> None:
    assert noise_floor.detectable(0.01, 3, 1) is None  # 3 a side: p >= 0.1, nothing is ever detected
    assert noise_floor.detectable(0.01, 4, 6) is None  # 4 a side cannot pass 0.05 / 6
    four, eight = noise_floor.detectable(0.01, 4, 1), noise_floor.detectable(0.01, 8, 1)
    assert four is not None and eight is not None and eight < four
    # About 2.9 sigma at 4 a side (a t-test would need about 2.2 sigma at 80 % power).
    assert 0.025 < four < 0.035
    wide = noise_floor.detectable(0.01, 8, 20)
    assert wide is not None and wide > eight
    assert noise_floor.rounds_for([0.01, 0.005], 0.03, 2) == 5
    assert noise_floor.rounds_for([0.5], 0.01, 1) is None


def _params() -> dict[str, Any]:
    plan = make_plan(PlanRequest(suite="xla", frameworks="numpy,jax", params=("matrix_size=8",)), backend="local")
    return dict(plan.jobs[0].params)


def rounds_run(path: Path, spread: float, seed: int, rounds: int = 6, scale: float = 1.0) -> Path:
    rng = random.Random(seed)
    docs = []
    for fw, level in (("numpy", 0.1 * scale), ("jax", 0.05 * scale)):
        m = metric("matmul", [level] * 12)
        m["round_medians"] = [level * (1 + rng.gauss(0, spread)) for _ in range(rounds)]
        d = result(fw, [m])
        d["environment"]["machine"] = machine.describe()  # measured here: the floor is this machine's
        d["params"] = _params()
        d["settings"]["rounds"] = rounds
        d["duration_s"] = 3.0
        docs.append(d)
    return write_run(path, docs)


def test_harness_noise_stores_the_floor_and_compare_and_detect_read_it(tmp_path: Path) -> None:
    a = rounds_run(tmp_path / "a", 0.01, 1)
    before = harness("compare", str(a), str(rounds_run(tmp_path / "b", 0.01, 2)))
    assert "no noise floor for this machine at matrix_size=8" in before.stdout
    assert "`harness noise --suite xla --param matrix_size=8" in before.stdout
    proc = harness("noise", str(a))
    assert proc.returncode == 0, proc.stderr
    assert "numpy matmul:" in proc.stdout and "between processes" in proc.stdout
    machine = noise_floor.host_fingerprint("cpu", None)
    [entry] = noise_floor.load(machine).values()
    sigma = entry["noise"]["numpy"]["matmul"]
    assert 0.002 < sigma < 0.03 and entry["rounds"] == 6 and entry["seconds_per_round"] == pytest.approx(1.0)
    after = harness("compare", str(a), str(rounds_run(tmp_path / "c", 0.01, 3)))
    assert "smallest change a verdict here detects" in after.stdout and "numpy matmul" in after.stdout
    dry = harness("run", "--suite", "xla", "-f", "numpy,jax", "-p", "matrix_size=8", "--detect", "5%", "--dry-run",
                  "--backend", "local")  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "--detect 5.0%: " in dry.stderr and " rounds (about " in dry.stderr
    for bad, words in (
        ("0", "not a percentage"),
        ("x%", "not a percentage"),
        ("0.001%", "whole runs drift apart so far"),
    ):
        proc = harness("run", "--suite", "xla", "-f", "numpy", "-p", "matrix_size=8", "--detect", bad, "--dry-run",
                       "--backend", "local")  # fmt: skip
        assert proc.returncode == 2 and words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    other = harness(
        "run", "--suite", "xla", "-p", "matrix_size=64", "--detect", "5%", "--dry-run", "--backend", "local"
    )
    assert other.returncode == 2 and "harness noise --suite xla" in other.stderr


def test_a_run_without_rounds_is_no_noise_floor_and_a_tampered_file_is_refused(tmp_path: Path) -> None:
    single = write_run(tmp_path / "s", [result("numpy", [metric("matmul", [0.1, 0.1, 0.1])])])
    proc = harness("noise", str(single))
    assert proc.returncode == 2 and "a noise floor needs 3 or more" in proc.stderr
    assert harness("noise").returncode == 2
    machine = noise_floor.host_fingerprint("cpu", None)
    path = noise_floor.file_for(machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": "harness-noise", "version": 1, "workloads": {"x": {"label": 1}}}))
    with pytest.raises(HarnessError, match="delete it and run `harness noise` again"):
        noise_floor.load(machine)
    entry = {"label": "x", "rounds": 6, "seconds_per_round": 1.0, "noise": {"numpy": {"m": 0.01}}, "sessions": "x"}
    path.write_text(json.dumps({"format": "harness-noise", "version": 1, "workloads": {"x": entry}}))
    with pytest.raises(HarnessError, match=r"\.sessions: expected framework -> metric -> a number"):
        noise_floor.load(machine)
    assert noise_floor.between_processes(load_run(rounds_run(tmp_path / "r", 0.01, 4)))["jax"]["matmul"] > 0


def test_runs_that_drift_apart_set_a_gate_no_verdict_passes_below(tmp_path: Path) -> None:
    """Three A/A runs whose levels differ by several % (a drifting machine): their spread is the
    run-to-run noise, and a 4 % "change" between two later runs is within it; 40 % is not."""
    drifted = [rounds_run(tmp_path / f"s{i}", 0.005, i, scale=f) for i, f in enumerate((0.95, 1.0, 1.05))]
    proc = harness("noise", *map(str, drifted))
    assert proc.returncode == 0 and "run to run" in proc.stdout, proc.stdout + proc.stderr
    [entry] = noise_floor.load(noise_floor.host_fingerprint("cpu", None)).values()
    assert 0.02 < entry["sessions"]["numpy"]["matmul"] < 0.08 and entry["sessions_measured"] == 3
    a = rounds_run(tmp_path / "a", 0.005, 10)
    small = harness("compare", str(a), str(rounds_run(tmp_path / "b", 0.005, 11, scale=1.04)))
    assert "not significant (within run-to-run noise" in small.stdout, small.stdout
    assert "within this machine's run-to-run noise" in small.stdout
    large = harness("compare", str(a), str(rounds_run(tmp_path / "c", 0.005, 12, scale=1.4)), "--fail-above", "10")
    assert large.returncode == 1 and "% slower" in large.stdout
