"""`--precision fp32|tf32|bf16`: planned, passed to the job, set the same way in JAX and PyTorch,
recorded, and checked by the precision probe (which on this CPU reads fp32 for fp32 and tf32: only
a GPU's tensor cores have TF32; bf16 operands read bf16 anywhere)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import HarnessError
from harness.judge.assessment import assess
from harness.store.plan import PlanRequest, make_plan, plan_from_record
from suites.contract import job_spec
from tests.conftest import REPO


def _plan(suite: str, frameworks: str, precision: str) -> Any:
    return make_plan(
        PlanRequest(suite=suite, frameworks=frameworks, device="gpu", precision=precision), backend="local"
    )


def test_the_precision_reaches_the_job_command_and_survives_plan_json() -> None:
    plan = _plan("mlp", "flax,pytorch", "tf32")
    assert [job.precision for job in plan.jobs] == ["tf32", "tf32"]
    spec = plan.jobs[1].spec(
        run_id=plan.run_id, backend="local", result_path="/tmp/out.json", data_dir=None, cache_dir=None
    )
    assert job_spec.parse(job_spec.dumps(spec)).precision == "tf32"  # job.json carries it to the job
    again = plan_from_record(json.loads(json.dumps(plan.as_record())), "plan.json")
    assert [job.precision for job in again.jobs] == ["tf32", "tf32"]
    assert _plan("mlp", "flax", "fp32").jobs[0].precision == "fp32"  # the default for comparisons


def test_a_suite_without_float32_matmul_work_refuses_a_reduced_precision() -> None:
    with pytest.raises(HarnessError, match="suite xla has no float32 matmul/conv work"):
        _plan("xla", "jax,pytorch", "bf16")  # float64 by its seed's definition
    with pytest.raises(HarnessError, match="--precision 'fp16' is not one of fp32, tf32, bf16"):
        _plan("mlp", "flax", "fp16")


def test_a_hostile_plan_json_cannot_smuggle_a_precision() -> None:
    record = _plan("mlp", "flax", "fp32").as_record()
    record["jobs"][0]["precision"] = "tf32; rm -rf /"
    with pytest.raises(HarnessError, match="not a plan this harness can run"):
        plan_from_record(record, "plan.json")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("precision", "jax_setting", "torch_setting", "allow_tf32", "float32_matmul", "compute_dtype"),
    [
        ("fp32", "highest", "highest", False, "float32", "float32"),
        ("tf32", "tensorfloat32", "high", True, "tf32", "float32"),
        # bf16 lives in the operands (autocast, dtype=bfloat16 layers): float32 matmuls stay float32.
        ("bf16", "highest", "highest", False, "float32", "bfloat16"),
    ],
)
def test_both_frameworks_are_set_the_same_way_and_record_it(
    precision: str, jax_setting: str, torch_setting: str, allow_tf32: bool, float32_matmul: str, compute_dtype: str
) -> None:
    # Each framework in a fresh interpreter: the settings are process-global.
    code = (
        "import json, sys; from suites.contract.settings import Settings; "
        "from suites.runtime import adapter_jax, adapter_pytorch; "
        f"s = Settings(device='cpu', threads=None, x64=False, precision={precision!r}); "
        "print(json.dumps([adapter_jax.configure(s), adapter_pytorch.configure(s)]))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    jax_rec, torch_rec = json.loads(out.stdout.strip().splitlines()[-1])
    assert jax_rec["requested"] == torch_rec["requested"] == precision
    assert jax_rec["jax_default_matmul_precision"] == jax_setting
    assert torch_rec["float32_matmul_precision"] == torch_setting
    assert torch_rec["cuda_matmul_allow_tf32"] is allow_tf32 and torch_rec["cudnn_allow_tf32"] is allow_tf32
    # The comparable pair the table's footer checks: the same words in both frameworks.
    assert jax_rec["float32_matmul"] == torch_rec["float32_matmul"] == float32_matmul
    assert jax_rec["compute_dtype"] == torch_rec["compute_dtype"] == compute_dtype
    assert torch_rec["cuda_matmul_allow_bf16_reduced_precision_reduction"] is False  # float32 accumulation


@pytest.mark.slow
def test_a_job_records_the_requested_and_the_measured_precision(tmp_path: Path) -> None:
    out = tmp_path / "mlp.json"
    params = ["train_samples=64", "test_samples=16", "epochs=2", "batch_size=32"]
    plan = make_plan(
        PlanRequest(suite="mlp", frameworks="pytorch", params=tuple(params), precision="tf32"), backend="local"
    )
    spec = plan.jobs[0].spec(run_id="adhoc", backend="local", result_path=str(out), data_dir=None, cache_dir=None)
    cmd = [sys.executable, "-m", "suites", "run", "--job", str(job_spec.write(tmp_path, spec))]
    subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True)
    doc = json.loads(out.read_text())
    assert doc["status"] == "ok" and doc["settings"]["precision"] == "tf32"
    recorded = doc["environment"]["precision"]
    assert recorded["requested"] == "tf32" and recorded["float32_matmul_precision"] == "high"
    # What really ran: on a CPU there is no TF32 unit, and the probe says so.
    assert recorded["measured"]["matmul"]["class"] == "fp32"


def test_the_table_says_what_was_requested_and_what_the_probe_measured(tmp_path: Path) -> None:
    from harness.report.table import render
    from harness.store.run_folder import load_run
    from tests.factories import metric, result, write_run

    docs = []
    for fw, measured in (("flax", "tf32"), ("pytorch", "fp32")):
        doc = result(fw, [metric("epoch", [1.0, 1.1, 1.2])], checks=[])
        doc["suite"], doc["params"] = "mlp", {}
        doc["settings"]["precision"] = "tf32"
        doc["environment"]["precision"] = {"measured": {"matmul": {"class": measured, "bits": 10}}}
        docs.append(doc)
    text = render(assess(load_run(write_run(tmp_path / "run", docs))))
    assert "| precision tf32 (requested)" in text.splitlines()[0]
    assert "pytorch: tf32 requested, the precision probe measured matmul fp32" in text
    assert "flax: tf32 requested" not in text  # it got what it asked for
