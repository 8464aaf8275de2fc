"""Data-parallel jobs on Kubernetes without a cluster: an Indexed Job of one pod per rank and the
headless Service that names rank 0, schema-valid and hardened as the single job's; collect reads rank 0."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from harness.backends import k8s
from harness.core.errors import HarnessError
from harness.core.schema import load_result
from harness.store.plan import Plan, PlanRequest, make_plan
from suites.contract.result import new_result
from tests.conftest import harness


def plan_of(devices: int, device: str = "cpu", frameworks: str = "numpy", run_id: str | None = None) -> Plan:
    plan = make_plan(
        PlanRequest(suite="xla", frameworks=frameworks, params=("matrix_size=16",), repeat=2, device=device),
        backend="kubernetes",
    )
    jobs = tuple(replace(job, params={**job.params, "devices": devices}) for job in plan.jobs)
    return replace(plan, jobs=jobs, run_id=run_id or plan.run_id)


def export(tmp_path: Path, plan: Plan, variant: str = "cpu", name: str = "manifests") -> Path:
    out = tmp_path / name
    k8s.export(plan, out, variant=variant, registry="registry.example/team", namespace="bench", data_claim="datasets")
    return out


def documents(path: Path) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(path.read_text()))


def by_name(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {item["name"]: item for item in items}


@pytest.mark.parametrize(("device", "frameworks", "variant"), [("cpu", "numpy", "cpu"), ("gpu", "pytorch", "cuda12")])
def test_an_indexed_job_and_its_headless_service_validate_against_the_schema(
    tmp_path: Path, device: str, frameworks: str, variant: str
) -> None:
    plan = plan_of(4, device, frameworks)
    out = export(tmp_path, plan, variant)
    service, job = documents(out / f"job-{frameworks}.yaml")
    for doc in (*documents(out / "00-suites-configmap.yaml"), service, job):
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    name = k8s.job_name(plan, plan.jobs[0])
    assert (service["kind"], service["metadata"]["name"], job["kind"], job["metadata"]["name"]) == (
        "Service", name, "Job", name
    )  # fmt: skip
    assert service["spec"] == {
        "clusterIP": "None",
        "selector": {"fw-harness/job": name},
        "publishNotReadyAddresses": True,
        "ports": [{"name": "coordinator", "port": 29500, "targetPort": 29500}],
    }
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (
        "Indexed", 4, 4, 0
    )  # fmt: skip
    assert spec["podFailurePolicy"] == {
        "rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "job", "operator": "NotIn", "values": [0]}},
            {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]
    }
    assert "successPolicy" not in spec  # the default: complete when every rank is
    template = spec["template"]
    assert template["metadata"]["labels"]["fw-harness/job"] == name  # what the Service selects
    pod = template["spec"]
    assert pod["subdomain"] == name and pod["restartPolicy"] == "Never"
    container = pod["containers"][0]
    env = by_name(container["env"])
    assert env["HARNESS_RANK"] == {
        "name": "HARNESS_RANK",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}},
    }
    assert env["HARNESS_LOCAL_RANK"]["value"] == "0" and env["HARNESS_WORLD_SIZE"]["value"] == "4"
    assert env["HARNESS_COORDINATOR"]["value"] == f"{name}-0.{name}:29500"
    assert "HARNESS_RANK_FAULT" not in env
    assert (container["resources"]["limits"].get("nvidia.com/gpu") == 1) == (device == "gpu")  # one GPU per pod
    # Hardened as the single job: the same pod and container settings, only the rank's additions differ.
    single = k8s.job_manifest(
        plan_of(0, device, frameworks), plan_of(0, device, frameworks).jobs[0], container["image"], "bench",
        pod["volumes"][0]["configMap"]["name"], "datasets",
    )  # fmt: skip
    single_pod = single["spec"]["template"]["spec"]
    assert {k: v for k, v in pod.items() if k not in ("subdomain", "containers")} == {
        k: v for k, v in single_pod.items() if k != "containers"
    }
    single_container = single_pod["containers"][0]
    assert container["securityContext"] == single_container["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["volumeMounts"] == single_container["volumeMounts"]
    assert container["env"][: len(single_container["env"])] == single_container["env"]
    assert {k: spec[k] for k in ("activeDeadlineSeconds", "ttlSecondsAfterFinished")} == {
        k: single["spec"][k] for k in ("activeDeadlineSeconds", "ttlSecondsAfterFinished")
    }


def test_a_job_of_one_process_keeps_the_single_manifest(tmp_path: Path) -> None:
    for devices in (0, 1):
        out = export(tmp_path, plan_of(devices), name=f"m{devices}")
        (job,) = documents(out / "job-numpy.yaml")
        assert job["kind"] == "Job" and "completionMode" not in job["spec"]
        assert "HARNESS_WORLD_SIZE" not in by_name(job["spec"]["template"]["spec"]["containers"][0]["env"])


def test_a_planted_fault_reaches_every_pod_and_a_malformed_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_RANK_FAULT", "slow:1:200")
    _, job = documents(export(tmp_path, plan_of(2)) / "job-numpy.yaml")
    assert (
        by_name(job["spec"]["template"]["spec"]["containers"][0]["env"])["HARNESS_RANK_FAULT"]["value"] == "slow:1:200"
    )
    monkeypatch.setenv("HARNESS_RANK_FAULT", "crash")
    with pytest.raises(HarnessError, match="expected slow:RANK:MS, crash:RANK or hang:RANK"):
        export(tmp_path, plan_of(2), name="bad")


def test_pod_host_names_stay_dns_labels_for_long_run_ids() -> None:
    plan = plan_of(128, run_id="20260101-000000-" + "x" * 60)
    name = k8s.job_name(plan, plan.jobs[0])
    assert len(f"{name}-127") <= 63 and not name.endswith("-")
    single = plan_of(0, run_id=plan.run_id)
    assert len(k8s.job_name(single, single.jobs[0])) == 63  # one pod: the name keeps its whole length


def test_only_rank_0_prints_the_result(tmp_path: Path) -> None:
    plan = plan_of(2)
    text = k8s.pod_script(plan, plan.jobs[0])
    command = "python3 -m suites run --job /job/job.json"
    assert text.startswith(command + "; code=$?; ")
    # The pod's own script, the job's command standing in by `exit 0`, the result file by one of ours.
    (tmp_path / "numpy.json").write_text('{"ok": 1}')
    probe = text.replace(command, "true").replace("/results/", f"{tmp_path}/")
    for rank, printed in (("0", True), ("1", False)):
        proc = subprocess.run(["sh", "-c", probe], capture_output=True, text=True, env={"HARNESS_RANK": rank})
        assert proc.returncode == 0
        assert (k8s.BEGIN in proc.stdout and '{"ok": 1}' in proc.stdout) is printed, proc.stdout


def test_collect_takes_rank_0s_result_and_fails_a_job_whose_rank_0_printed_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_of(2, frameworks="numpy,pytorch")
    out = export(tmp_path, plan)
    monkeypatch.setattr(k8s, "plan_from_record", lambda record, where: plan)  # xla has no `devices` of its own
    numpy, pytorch = plan.jobs
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / f"{k8s.job_name(plan, numpy)}.log").write_text("rank 0 started\nRuntimeError: the collective timed out\n")
    printed = new_result(run_id=plan.run_id, suite="xla", framework="pytorch", stack="pytorch", backend="kubernetes",
                         device="cpu", params=dict(pytorch.params), settings={})  # fmt: skip
    printed.update(finished_at=printed["started_at"], duration_s=1.0)
    (logs / f"{k8s.job_name(plan, pytorch)}.log").write_text(f"{k8s.BEGIN}\n{json.dumps(printed)}\n{k8s.END}\n")
    run = k8s.collect(out, tmp_path / "results", logs)
    doc = load_result(run / "numpy.json")
    name = k8s.job_name(plan, numpy)
    assert (doc["status"], doc["reason"]) == (
        "failed",
        f"no result in the log of rank 0 of job/{name}: a rank failed, or rank 0 did not finish "
        f"(`kubectl describe job/{name}` names a failed pod and its exit code)",
    )
    assert "the collective timed out" in (doc["stderr_tail"] or "")
    assert load_result(run / "pytorch.json")["status"] == "ok"  # rank 0 printed its result: the job's own


def test_collect_asks_kubectl_for_rank_0s_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def run(args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        return subprocess.CompletedProcess(args, 0, "log", "")

    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/kubectl")
    monkeypatch.setattr(subprocess, "run", run)
    assert k8s._kubectl_log("h-run-numpy", "bench", ranked=True) == "log"
    assert calls[-1] == [
        "kubectl", "logs", "-l", "fw-harness/job=h-run-numpy,batch.kubernetes.io/job-completion-index=0",
        "--tail=-1", "-n", "bench", "-c", "job",
    ]  # fmt: skip
    k8s._kubectl_log("h-run-numpy", "bench")
    assert calls[-1] == ["kubectl", "logs", "job/h-run-numpy", "-n", "bench", "-c", "job"]


def test_plan_json_of_a_data_parallel_export_names_its_devices(tmp_path: Path) -> None:
    out = export(tmp_path, plan_of(2))
    record = json.loads((out / "plan.json").read_text())
    assert record["jobs"][0]["params"]["devices"] == 2 and record["namespace"] == "bench"


def test_harness_export_k8s_of_a_data_parallel_suite(tmp_path: Path) -> None:
    """The CLI as a user runs it (mnist declares `devices` through its training spec)."""
    out = tmp_path / "manifests"
    proc = harness("export", "k8s", "--suite", "mnist", "--frameworks", "pytorch", "--param", "devices=2",
                   "--param", "dataset=synthetic", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    service, job = documents(out / "job-pytorch.yaml")
    for doc in (service, job):
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    assert (job["spec"]["completionMode"], job["spec"]["parallelism"]) == ("Indexed", 2)
    env = by_name(job["spec"]["template"]["spec"]["containers"][0]["env"])
    assert env["HARNESS_COORDINATOR"]["value"] == f"{job['metadata']['name']}-0.{service['metadata']['name']}:29500"
