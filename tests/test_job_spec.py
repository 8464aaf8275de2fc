"""job.json: one spec, declared once (suites/contract/job_spec.py), carried from the plan to the job untouched."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from harness.store.plan import Job, PlanRequest, make_plan, plan_from_record
from suites.contract import job_spec
from suites.contract.job_spec import JobOptions, JobSpec, JobSpecError
from tests.conftest import REPO


def _job() -> Job:
    plan = make_plan(
        PlanRequest(
            suite="xla", frameworks="numpy", params=("matrix_size=16",), repeat=2, warmup=0, threads=1, timeout_s=60
        ),
        backend="local",
    )
    return plan.jobs[0]


def _spec(**changes: object) -> dict[str, object]:
    spec = _job().spec(run_id="r-1", backend="local", result_path="numpy.json", data_dir=None, cache_dir=None)
    return dict(json.loads(job_spec.dumps(spec)), **changes)


def test_every_option_of_the_plan_reaches_job_json_untouched() -> None:
    job = _job()
    spec = job.spec(run_id="r-1", backend="docker", result_path="/results/numpy.json", data_dir="/data", cache_dir=None)
    for f in fields(JobOptions):
        if f.name not in ("data_dir", "cache_dir"):  # locations: the backend's to map
            assert getattr(spec, f.name) == getattr(job, f.name), f.name
    assert job_spec.parse(job_spec.dumps(spec)) == spec
    record = plan_from_record(json.loads(json.dumps(make_plan_record())), "plan.json")
    assert {f.name for f in fields(JobOptions)} <= set(vars(record.jobs[0]))
    assert [f.name for f in fields(JobSpec)][-3:] == ["run_id", "backend", "result_path"]


def make_plan_record() -> dict[str, object]:
    plan = make_plan(PlanRequest(suite="xla", frameworks="numpy"), backend="local")
    return plan.as_record()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"repeat": 0}, "repeat: 0 is less than 1"),
        ({"repeat": "3"}, "repeat: '3' is not a whole number"),
        ({"warmup": True}, "warmup: true is not a whole number"),
        ({"device": "tpu"}, "device: 'tpu' is not one of cpu, gpu"),
        ({"precision": "fp8"}, "precision: 'fp8' is not one of fp32, tf32, bf16"),
        ({"timeout_s": 0}, "timeout_s: 0 is not above 0"),
        ({"params": []}, "params: [] is not an object"),
        ({"result_path": ""}, "result_path: '' is not a non-empty string"),
        ({"out": "x.json"}, "unknown field 'out'"),
    ],
)
def test_a_malformed_spec_is_named_by_its_field(changes: dict[str, object], message: str) -> None:
    with pytest.raises(JobSpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        job_spec.parse(json.dumps(_spec(**changes)))


def test_missing_fields_non_objects_and_nan_are_refused() -> None:
    spec = _spec()
    del spec["framework"]
    for text, message in ((json.dumps(spec), "field 'framework' is missing"), ("[]", "not a JSON object"),
                          (job_spec.dumps(job_spec.parse(json.dumps(_spec()))).replace("60.0", "NaN"), "not JSON")):  # fmt: skip
        with pytest.raises(JobSpecError, match=message):
            job_spec.parse(text)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"suite": "nope"}, "suite: 'nope' is not a suite here"),
        ({"framework": "tensorflow"}, "framework: 'tensorflow' is not a framework of suite xla"),
        ({"params": {"matrix_size": -1}}, "params: parameter matrix_size=-1 is out of range"),
        ({"params": {"size": 3}}, "params: unknown parameter 'size'"),
    ],
)
def test_the_registry_checks_suite_framework_and_params(changes: dict[str, object], message: str) -> None:
    with pytest.raises(JobSpecError, match=message):
        job_spec.resolve(job_spec.parse(json.dumps(_spec(**changes))))


@pytest.mark.parametrize("text", ["{not json", json.dumps(_spec(repeat=-2)), json.dumps(_spec(suite="nope"))])
def test_the_job_refuses_a_malformed_spec_in_one_line_with_exit_code_2(tmp_path: Path, text: str) -> None:
    path = tmp_path / "job.json"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "suites", "run", "--job", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith(f"error: {path}: ")
    assert not (tmp_path / "numpy.json").exists()


def test_the_job_reads_job_json_and_nothing_else(tmp_path: Path) -> None:
    missing = subprocess.run([sys.executable, "-m", "suites", "run", "--job", str(tmp_path / "none.json")], cwd=REPO,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert missing.returncode == 2 and "cannot read it" in missing.stderr
    old = subprocess.run([sys.executable, "-m", "suites", "run", "--suite", "xla", "--framework", "numpy"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert old.returncode == 2  # the old options are gone: argparse refuses them
    out = tmp_path / "numpy.json"
    path = job_spec.write(tmp_path, JobSpec(**dict(_spec(), result_path=str(out))))  # type: ignore[arg-type]
    ran = subprocess.run([sys.executable, "-m", "suites", "run", "--job", str(path)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    doc = json.loads(out.read_text())
    assert (doc["status"], doc["run_id"], doc["backend"]) == ("ok", "r-1", "local")
    assert doc["settings"]["repeat"] == 2 and doc["settings"]["threads"] == 1 and doc["params"]["matrix_size"] == 16


def test_the_job_process_ends_without_teardown_yet_keeps_its_output_and_exit_code() -> None:
    # The job skips the interpreter's teardown (0.24-0.48 s a round for jax and torch): a teardown
    # hook must not run, while what the job printed into a pipe's buffer and its exit code must arrive.
    code = (
        "import atexit; from suites.__main__ import exit_now; "
        "atexit.register(lambda: print('teardown ran')); print('kept', end=''); exit_now(3)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (3, "kept"), proc.stderr
    assert "exit_now(main())" in (REPO / "suites" / "__main__.py").read_text()  # the entry point uses it
