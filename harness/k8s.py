"""`harness export k8s` / `harness collect`: the same jobs as Kubernetes Jobs on an existing cluster.

No scheduler of our own: one Job per (suite, framework) job, the stack image by its
lock-hash tag, the suites delivered in a ConfigMap (a tarball unpacked by an init
container into a read-only volume), and each pod printing its result between two
marker lines so `harness collect` can rebuild a normal run folder from the pod logs.
"""

from __future__ import annotations

import base64
import io
import json
import re
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import yaml

from harness.backends.base import job_command
from harness.errors import HarnessError
from harness.images import IMAGE_USER, stack_image
from harness.plan import Job, Plan
from harness.runner import load_plan, new_summary, placeholder_result, prepare_results_dir, summary_entry
from harness.schema import InvalidResult, validate
from suites.runtime.files import write_json_atomic, write_text_atomic
from suites.runtime.registry import SUITES_DIR
from suites.runtime.result import utc_now

BEGIN, END = "==HARNESS-RESULT-BEGIN==", "==HARNESS-RESULT-END=="
SUITES_MOUNT, RESULTS_MOUNT, DATA_MOUNT = "/harness", "/results", "/data"
# ConfigMaps are capped at 1 MiB; the suites tarball is far below that, but say so if it grows.
CONFIGMAP_LIMIT = 1_000_000
LABEL = "fw-harness"


def _k8s_name(text: str) -> str:
    """DNS-1123 label: lower-case alphanumerics and '-', at most 63 characters."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:63].rstrip("-")


class _PlainDumper(yaml.SafeDumper):
    """No YAML anchors: manifests are read by people and by tools that dislike aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump(document: dict[str, Any]) -> str:
    return yaml.dump(document, Dumper=_PlainDumper, sort_keys=False)


def job_name(plan: Plan, job: Job) -> str:
    return _k8s_name(f"h-{plan.run_id}-{job.framework}")


def suites_tarball() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(
            SUITES_DIR,
            arcname="suites",
            filter=lambda info: None if "__pycache__" in info.name or info.name.endswith(".pyc") else info,
        )
    data = buffer.getvalue()
    if len(data) > CONFIGMAP_LIMIT:
        raise HarnessError(f"suites/ packs to {len(data)} bytes, over a ConfigMap's 1 MiB; bake it into an image")
    return data


def pod_script(plan: Plan, job: Job) -> str:
    out = f"{RESULTS_MOUNT}/{job.result_file()}"
    data = DATA_MOUNT if job.data_dir else None
    cmd = shlex.join(job_command(job, plan.run_id, "kubernetes", out, python="python3", data_dir=data))
    # The result goes to the pod log between markers: no shared volume or object store needed.
    return f"{cmd}; code=$?; echo '{BEGIN}'; cat {out} 2>/dev/null; echo; echo '{END}'; exit $code"


def _labels(plan: Plan, job: Job | None = None) -> dict[str, str]:
    labels = {f"{LABEL}/run-id": _k8s_name(plan.run_id), f"{LABEL}/suite": plan.suite}
    if job is not None:
        labels[f"{LABEL}/framework"] = job.framework
    return labels


def job_manifest(
    plan: Plan, job: Job, image: str, namespace: str, configmap: str, data_claim: str | None
) -> dict[str, Any]:
    uid, gid = IMAGE_USER
    security = {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    resources: dict[str, Any] = {"limits": {"nvidia.com/gpu": 1}} if job.device == "gpu" else {}
    mounts = [
        {"name": "suites", "mountPath": SUITES_MOUNT, "readOnly": True},
        {"name": "results", "mountPath": RESULTS_MOUNT},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "suites-archive", "configMap": {"name": configmap}},
        {"name": "suites", "emptyDir": {}},
        {"name": "results", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {}},
    ]
    if data_claim:
        mounts.append({"name": "data", "mountPath": DATA_MOUNT, "readOnly": True})
        volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": data_claim, "readOnly": True}})
    # Our own archive from the ConfigMap, so no extraction filter (Debian's 3.11 may predate it).
    unpack = "import tarfile; tarfile.open('/archive/suites.tar.gz').extractall('/harness')"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(plan, job), "namespace": namespace, "labels": _labels(plan, job)},
        "spec": {
            "backoffLimit": 0,  # a failed benchmark is a result, not something to retry silently
            "activeDeadlineSeconds": int(job.timeout_s),
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {"labels": _labels(plan, job)},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "initContainers": [
                        {
                            "name": "unpack-suites",
                            "image": image,
                            "command": ["python3", "-c", unpack],
                            "securityContext": security,
                            "volumeMounts": [
                                {"name": "suites-archive", "mountPath": "/archive", "readOnly": True},
                                {"name": "suites", "mountPath": SUITES_MOUNT},
                            ],
                        }
                    ],
                    "containers": [
                        {
                            "name": "job",
                            "image": image,
                            "command": ["sh", "-c", pod_script(plan, job)],
                            "workingDir": SUITES_MOUNT,
                            "env": [
                                {"name": "PYTHONPATH", "value": SUITES_MOUNT},
                                {"name": "HOME", "value": "/tmp"},
                                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                            ],
                            "securityContext": security,
                            "resources": resources,
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }


def export(
    plan: Plan,
    out: Path,
    *,
    variant: str,
    registry: str | None,
    namespace: str,
    data_claim: str | None,
) -> list[Path]:
    if out.exists() and not out.is_dir():
        raise HarnessError(f"--out {out} is a file; give a folder for the manifests")
    out.mkdir(parents=True, exist_ok=True)
    configmap = _k8s_name(f"h-{plan.run_id}-suites")
    written = []
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": configmap, "namespace": namespace, "labels": _labels(plan)},
        "binaryData": {"suites.tar.gz": base64.b64encode(suites_tarball()).decode()},
    }
    path = out / "00-suites-configmap.yaml"
    write_text_atomic(path, dump(cm))
    written.append(path)
    for job in plan.jobs:
        if job.skip_reason is not None:
            continue
        tag = stack_image(job.stack, variant).tag
        image = f"{registry.rstrip('/')}/{tag}" if registry else tag
        path = out / f"job-{job.framework}.yaml"
        manifest = job_manifest(plan, job, image, namespace, configmap, data_claim)
        write_text_atomic(path, dump(manifest))
        written.append(path)
    write_json_atomic(out / "plan.json", dict(plan.as_record(), namespace=namespace))
    return written


def extract_result(log: str) -> dict[str, Any] | None:
    """The JSON between the markers of a pod log, or None if the pod never printed it."""
    if BEGIN not in log:
        return None
    body = log.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    if not body:
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        return {"_unparseable": body[:200]}
    return doc if isinstance(doc, dict) else {"_unparseable": body[:200]}


def _kubectl_log(name: str, namespace: str) -> str:
    if shutil.which("kubectl") is None:
        raise HarnessError("kubectl is not on PATH; save the pod logs and pass --logs DIR (see README)")
    proc = subprocess.run(
        ["kubectl", "logs", f"job/{name}", "-n", namespace, "-c", "job"], capture_output=True, text=True
    )
    return proc.stdout if proc.returncode == 0 else ""


def collect(manifests: Path, results_dir: Path, logs: Path | None) -> Path:
    """Turn the pods' logs into a normal run folder that show, report and compare understand."""
    plan = load_plan(manifests)
    namespace = json.loads((manifests / "plan.json").read_text()).get("namespace", "default")
    prepare_results_dir(results_dir)
    run_dir = results_dir / plan.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / "plan.json", plan.as_record())
    summary = new_summary(plan, "kubernetes", ["harness", "collect", str(manifests)])
    for job in plan.jobs:
        name = job_name(plan, job)
        if job.skip_reason is not None:
            result = placeholder_result(plan.run_id, job, "kubernetes", "skipped", job.skip_reason)
        else:
            log_file = logs / f"{name}.log" if logs else None
            text = (
                (log_file.read_text(errors="replace") if log_file and log_file.is_file() else "")
                if logs
                else (_kubectl_log(name, namespace))
            )
            (run_dir / "logs").mkdir(exist_ok=True)
            write_text_atomic(run_dir / "logs" / f"{job.framework}.pod.log", text)
            doc = extract_result(text)
            if doc is None:
                result = placeholder_result(
                    plan.run_id, job, "kubernetes", "invalid-output", f"no result in the log of job/{name}"
                )
                result["stderr_tail"] = "\n".join(text.splitlines()[-30:]) or None
            else:
                try:
                    result = validate(doc, f"job/{name}")
                except InvalidResult as error:
                    result = placeholder_result(plan.run_id, job, "kubernetes", "invalid-output", str(error))
        write_json_atomic(run_dir / job.result_file(), result)
        summary["jobs"].append(summary_entry(job, result))
    summary["finished_at"] = utc_now()
    write_json_atomic(run_dir / "summary.json", summary)
    return run_dir
