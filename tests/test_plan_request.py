"""One request reaches every path that plans (harness/store/plan.py: PlanRequest): `--precision bf16` given to
`export slurm`, `export k8s` or compose's plan step lands in the plan and in each job's spec, and every
command that plans refuses a precision its suite cannot take, which it could only do after planning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.store.plan import plan_from_record
from suites.contract import job_spec
from tests.conftest import REPO, harness, read

MLP = ("--suite", "mlp", "--param", "epochs=2", "--precision", "bf16")


def _planned_in_bf16(plan_file: Path) -> None:
    plan = plan_from_record(read(plan_file), str(plan_file))  # read back as `collect` and `run --resume` do
    assert [job.framework for job in plan.jobs] == ["flax", "pytorch"]
    assert {job.precision for job in plan.jobs} == {"bf16"}


def test_export_slurm_carries_the_precision_into_the_plan_and_each_jobs_spec(tmp_path: Path) -> None:
    out = tmp_path / "slurm"
    proc = harness("export", "slurm", *MLP, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    _planned_in_bf16(out / "plan.json")
    for fw in ("flax", "pytorch"):
        assert job_spec.read(out / "jobs" / fw / job_spec.JOB_FILE).precision == "bf16"


def test_export_k8s_carries_the_precision_into_the_plan_and_each_jobs_spec(tmp_path: Path) -> None:
    out = tmp_path / "k8s"
    proc = harness("export", "k8s", *MLP, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    _planned_in_bf16(out / "plan.json")
    docs = [d for path in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text())]
    (config,) = [d for d in docs if d["kind"] == "ConfigMap"]
    for fw in ("flax", "pytorch"):
        assert job_spec.parse(config["data"][f"job-{fw}.json"]).precision == "bf16"


def test_the_compose_plan_step_carries_the_precision(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.backends.compose_steps", "--results", str(tmp_path), "plan", *MLP],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (plan_file,) = tmp_path.glob("*/plan.json")
    _planned_in_bf16(plan_file)
    for fw in ("flax", "pytorch"):
        assert job_spec.read(tmp_path / ".compose-jobs" / fw / job_spec.JOB_FILE).precision == "bf16"


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--dry-run"],
        ["ab", "HEAD", "--dry-run"],
        ["noise"],
        ["export", "slurm", "--out", "OUT"],
        ["export", "k8s", "--out", "OUT"],
        ["bisect", "--metric", "matmul", "--stack", "numpy", "--package", "numpy", "--versions", "1.26.4,2.0.0"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_every_command_that_plans_hands_the_precision_to_the_plan(argv: list[str], tmp_path: Path) -> None:
    """xla has no float32 matmul/conv axis: only a plan that received --precision bf16 can refuse it."""
    if argv[0] == "export":
        argv = [str(tmp_path / "out") if arg == "OUT" else arg for arg in argv]
    else:
        argv = [*argv, "--results-dir", str(tmp_path / "results")]
    proc = harness(*argv, "--suite", "xla", "--precision", "bf16")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (
        "error: --precision bf16: suite xla has no float32 matmul/conv work to run at reduced precision; "
        "drop --precision"
    ), proc.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "results").exists()
