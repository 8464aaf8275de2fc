"""`harness export k8s` / `harness collect`: the same jobs as Kubernetes Jobs on an existing cluster.

No scheduler of our own: one Job per (suite, framework) job, the stack image by its
lock-hash tag, the suites delivered in a ConfigMap (a tarball unpacked by an init
container into a read-only volume) with each job's job.json beside them (mounted into its own
pod only), and each pod printing its result between two
marker lines so `harness collect` can rebuild a normal run folder from the pod logs.

A data-parallel job (--param devices=N, suites/contract/ranks.py) is an Indexed Job of N pods, one per
rank (its completion index), and a headless Service that gives rank 0's pod a name the others reach:
`<job>-0.<service>` (an Indexed Job's pods are named `<job>-<index>`, and `subdomain` puts them under
the Service). Any rank's failure fails the Job at once (backoffLimit 0, and a podFailurePolicy whose
condition names the pod and its exit code); the Job is complete when every rank is. Only rank 0
prints the result.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import yaml

from harness.backends.base import Limits, job_command
from harness.backends.ranks import checked_fault
from harness.core.errors import HarnessError
from harness.core.result_types import Result
from harness.core.safe_files import MissingFile, UnsafeFile, read_tail, write_bytes_atomic
from harness.core.schema import MAX_RESULT_BYTES, InvalidResult, parse_json, validate
from harness.store.images import IMAGE_USER, stack_image
from harness.store.plan import K8S_NAME, Job, Plan, plan_from_record
from harness.store.run_folder import (
    PLAN_FILE,
    mismatch,
    placeholder_result,
    read_plan_record,
    within,
    write_collected,
)
from harness.text.escape import plain
from suites.contract import job_spec
from suites.contract.job_spec import JOB_FILE, JobSpec
from suites.contract.ranks import (
    COORDINATOR_PORT,
    COORDINATOR_VAR,
    FAULT_VAR,
    LOCAL_RANK_VAR,
    RANK_VAR,
    WORLD_VAR,
    processes,
)
from suites.contract.registry import SUITES_DIR

BACKEND = "kubernetes"

BEGIN, END = "==HARNESS-RESULT-BEGIN==", "==HARNESS-RESULT-END=="
SUITES_MOUNT, RESULTS_MOUNT, DATA_MOUNT, SPEC_MOUNT = "/harness", "/results", "/data", "/job"
# ConfigMaps are capped at 1 MiB; the suites tarball is far below that, but say so if it grows.
CONFIGMAP_LIMIT = 1_000_000
ARCHIVE = "suites.tar.gz"  # its key in the ConfigMap, beside each job's job-<framework>.json
LABEL = "fw-harness"
# Without --memory/--cpus a pod still requests and is limited to this much (requests = limits:
# the Guaranteed QoS class, so the kubelet neither throttles nor evicts it below its request).
DEFAULT_MEMORY = 8 * 2**30
DEFAULT_CPUS = 2.0
# emptyDir caps: the unpacked suites, the job's result and artefacts, and /tmp (torch.compile's
# C++ builds). A job filling its disk is evicted instead of filling the node's.
SIZE_LIMITS = {"suites": "64Mi", "results": "512Mi", "tmp": "2Gi"}
MAX_POD_LOG_BYTES = MAX_RESULT_BYTES * 2
# What Kubernetes writes on each pod of an Indexed Job: its index (the annotation), and, from 1.28, the
# same as a label (collect finds rank 0's pod by it).
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_LABEL = f"{LABEL}/job"  # a data-parallel job's pods, as its Service selects them


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
    """The Job's name (and a data-parallel job's Service's): short enough that its pods' host names,
    `<job>-<index>`, stay a DNS label (63 characters)."""
    name = _k8s_name(f"h-{plan.run_id}-{job.framework}")
    world = processes(job.params)
    return name if world == 1 else name[: 63 - len(f"-{world - 1}")].rstrip("-")


def coordinator(plan: Plan, job: Job) -> str:
    """Rank 0's host:port: its pod's name under the job's Service (pod `<job>-0`, `subdomain` the Service)."""
    name = job_name(plan, job)
    return f"{name}-0.{name}:{COORDINATOR_PORT}"


def suites_tarball() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(
            SUITES_DIR,
            arcname="suites",
            filter=lambda info: None if "__pycache__" in info.name or info.name.endswith(".pyc") else info,
        )
    if len(data := buffer.getvalue()) > CONFIGMAP_LIMIT:
        raise HarnessError(f"suites/ packs to {len(data)} bytes, over a ConfigMap's 1 MiB; bake it into an image")
    return data


def job_spec_for(plan: Plan, job: Job) -> JobSpec:
    """The job's job.json, locations as the pod sees them (caches stay cold: a pod keeps nothing)."""
    return job.spec(
        run_id=plan.run_id,
        backend=BACKEND,
        result_path=f"{RESULTS_MOUNT}/{job.result_file()}",
        data_dir=DATA_MOUNT if job.data_dir else None,
        cache_dir=None,
    )


def spec_key(job: Job) -> str:
    """The job's spec in the suites ConfigMap, mounted into its pod as SPEC_MOUNT/job.json."""
    return f"job-{job.framework}.json"


def pod_script(plan: Plan, job: Job) -> str:
    out = f"{RESULTS_MOUNT}/{job.result_file()}"
    cmd = shlex.join(job_command(f"{SPEC_MOUNT}/{JOB_FILE}", python="python3"))
    # The result goes to the pod log between markers: no shared volume or object store needed.
    show = f"echo '{BEGIN}'; cat {out} 2>/dev/null; echo; echo '{END}'"
    if processes(job.params) > 1:  # only rank 0 writes the result
        return f'{cmd}; code=$?; if [ "${RANK_VAR}" = 0 ]; then {show}; fi; exit $code'
    return f"{cmd}; code=$?; {show}; exit $code"


def _labels(plan: Plan, job: Job | None = None) -> dict[str, str]:
    labels = {f"{LABEL}/run-id": _k8s_name(plan.run_id), f"{LABEL}/suite": plan.suite}
    if job is not None:
        labels[f"{LABEL}/framework"] = job.framework
    return labels


def check_name(value: str | None, option: str) -> None:
    """Namespaces and claims are DNS-1123 names; anything else would be refused by the cluster."""
    if value is not None and (len(value) > 63 or not K8S_NAME.fullmatch(value) or "." in value):
        raise HarnessError(
            f"{option} {plain(value)!r} is not a Kubernetes name (lower-case letters, digits and '-', at most 63)"
        )


def rank_env(plan: Plan, job: Job, fault: str | None = None) -> list[dict[str, Any]]:
    """What each pod of a data-parallel job is told: its rank (its completion index, by the downward
    API), the world, rank 0's address; local rank 0, as each pod holds one rank (and one GPU)."""
    index = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}
    env: list[dict[str, Any]] = [
        {"name": RANK_VAR, "valueFrom": index},
        {"name": LOCAL_RANK_VAR, "value": "0"},
        {"name": WORLD_VAR, "value": str(processes(job.params))},
        {"name": COORDINATOR_VAR, "value": coordinator(plan, job)},
    ]
    if fault is not None:
        env.append({"name": FAULT_VAR, "value": fault})
    return env


def service_manifest(plan: Plan, job: Job, namespace: str) -> dict[str, Any]:
    """The headless Service under which rank 0's pod has the name in HARNESS_COORDINATOR."""
    name = job_name(plan, job)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": _labels(plan, job)},
        "spec": {
            "clusterIP": "None",  # headless: a DNS name per pod, no load-balanced address
            "selector": {JOB_LABEL: name},
            # The ranks look rank 0 up while it starts, before any readiness: its name must exist by then.
            "publishNotReadyAddresses": True,
            "ports": [{"name": "coordinator", "port": COORDINATOR_PORT, "targetPort": COORDINATOR_PORT}],
        },
    }


def _ranked(plan: Plan, job: Job, manifest: dict[str, Any], fault: str | None) -> dict[str, Any]:
    """The single job's manifest made an Indexed Job of one pod per rank."""
    world, name = processes(job.params), job_name(plan, job)
    ranks = {
        "completionMode": "Indexed",  # pod i gets completion index i: its rank
        "completions": world,  # complete when every rank has (the default success policy)
        "parallelism": world,  # every rank at once: they meet before the first step
        # A rank that fails leaves the others waiting in a collective: the Job fails at once, and its
        # condition names the pod and its exit code. A rank restarted alone could not rejoin them.
        "podFailurePolicy": {
            "rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "job", "operator": "NotIn", "values": [0]}},
                {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            ]
        },
    }
    manifest["spec"] = {**ranks, **manifest["spec"]}
    manifest["spec"]["template"]["metadata"]["labels"][JOB_LABEL] = name
    pod = manifest["spec"]["template"]["spec"]
    pod["subdomain"] = name  # pod <job>-<index> is <job>-<index>.<service>
    pod["containers"][0]["env"] += rank_env(plan, job, fault)
    return manifest


def resources_for(job: Job, limits: Limits) -> dict[str, Any]:
    memory = limits.memory_bytes or DEFAULT_MEMORY
    cpus = limits.cpus or DEFAULT_CPUS
    amount: dict[str, Any] = {"cpu": f"{round(cpus * 1000)}m", "memory": str(memory)}
    if job.device == "gpu":
        amount["nvidia.com/gpu"] = 1
    return {"requests": dict(amount), "limits": dict(amount)}


def job_manifest(
    plan: Plan,
    job: Job,
    image: str,
    namespace: str,
    configmap: str,
    data_claim: str | None,
    limits: Limits | None = None,
    fault: str | None = None,
) -> dict[str, Any]:
    """The job's Job; a data-parallel job's is an Indexed Job of one pod per rank (`fault`: FAULT_VAR
    handed on to its ranks)."""
    uid, gid = IMAGE_USER
    security = {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    mounts = [
        {"name": "suites", "mountPath": SUITES_MOUNT, "readOnly": True},
        {"name": "job-spec", "mountPath": SPEC_MOUNT, "readOnly": True},
        {"name": "results", "mountPath": RESULTS_MOUNT},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    spec_item = {"key": spec_key(job), "path": JOB_FILE}
    volumes: list[dict[str, Any]] = [
        {"name": "suites-archive", "configMap": {"name": configmap, "items": [{"key": ARCHIVE, "path": ARCHIVE}]}},
        {"name": "job-spec", "configMap": {"name": configmap, "items": [spec_item]}},
        {"name": "suites", "emptyDir": {"sizeLimit": SIZE_LIMITS["suites"]}},
        {"name": "results", "emptyDir": {"sizeLimit": SIZE_LIMITS["results"]}},
        {"name": "tmp", "emptyDir": {"sizeLimit": SIZE_LIMITS["tmp"]}},
    ]
    if data_claim:
        mounts.append({"name": "data", "mountPath": DATA_MOUNT, "readOnly": True})
        volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": data_claim, "readOnly": True}})
    # Our own archive from the ConfigMap, so no extraction filter (Debian's 3.11 may predate it).
    unpack = f"import tarfile; tarfile.open('/archive/{ARCHIVE}').extractall('{SUITES_MOUNT}')"
    manifest: dict[str, Any] = {
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
                    "securityContext": {
                        "runAsNonRoot": True,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "initContainers": [
                        {
                            "name": "unpack-suites",
                            "image": image,
                            "command": ["python3", "-c", unpack],
                            "securityContext": security,
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "128Mi"},
                                "limits": {"cpu": "1", "memory": "256Mi"},
                            },
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
                            "resources": resources_for(job, limits or Limits()),
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }
    return _ranked(plan, job, manifest, fault) if processes(job.params) > 1 else manifest


def export(
    plan: Plan,
    out: Path,
    *,
    variant: str,
    registry: str | None,
    namespace: str,
    data_claim: str | None,
    limits: Limits | None = None,
) -> list[Path]:
    """Write the manifests; everything is built (and so validated) before the first file is written."""
    check_name(namespace, "--namespace")
    check_name(data_claim, "--data-claim")
    if out.exists() and not out.is_dir():
        raise HarnessError(f"--out {out} is a file; give a folder for the manifests")
    configmap = _k8s_name(f"h-{plan.run_id}-suites")
    specs = {spec_key(job): job_spec.dumps(job_spec_for(plan, job)) for job in plan.jobs if job.skip_reason is None}
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": configmap, "namespace": namespace, "labels": _labels(plan)},
        "data": specs,
        "binaryData": {ARCHIVE: base64.b64encode(suites_tarball()).decode()},
    }
    documents = {"00-suites-configmap.yaml": dump(cm)}
    fault = checked_fault(os.environ.get(FAULT_VAR))  # a testing aid handed on to every rank, checked
    for job in plan.jobs:
        if job.skip_reason is not None:
            continue
        tag = stack_image(job.stack, variant).tag
        image = f"{registry.rstrip('/')}/{tag}" if registry else tag
        manifest = job_manifest(plan, job, image, namespace, configmap, data_claim, limits, fault)
        text = dump(manifest)
        if processes(job.params) > 1:  # its Service first: rank 0's name exists before the pods look for it
            text = dump(service_manifest(plan, job, namespace)) + "---\n" + text
        documents[f"job-{job.framework}.yaml"] = text
    plan_text = json.dumps(dict(plan.as_record(), namespace=namespace), indent=2, allow_nan=False) + "\n"
    try:
        written = []
        for name, text in documents.items():
            write_bytes_atomic(out / name, text.encode("utf-8"), out)
            written.append(out / name)
        write_bytes_atomic(out / PLAN_FILE, plan_text.encode("utf-8"), out)
    except (UnsafeFile, OSError) as error:
        why = error.reason if isinstance(error, UnsafeFile) else error.strerror
        raise HarnessError(f"--out {out}: cannot write the manifests ({why}); choose another folder") from None
    return written


def extract_result(log: str) -> dict[str, Any] | None:
    """The JSON between the markers of a pod log, or None if the pod never printed it."""
    if BEGIN not in log:
        return None
    if not (body := log.split(BEGIN, 1)[1].split(END, 1)[0].strip()):
        return None
    try:
        doc = parse_json(body.encode("utf-8", "replace"), "the pod log")
    except HarnessError:
        return {"_unparseable": body[:200]}
    return doc if isinstance(doc, dict) else {"_unparseable": body[:200]}


def _kubectl_log(name: str, namespace: str, ranked: bool = False) -> str:
    """The job's pod log (a data-parallel job: rank 0's pod, by the completion-index label of Kubernetes 1.28+)."""
    if shutil.which("kubectl") is None:
        raise HarnessError("kubectl is not on PATH; save the pod logs and pass --logs DIR (see README)")
    which = ["-l", f"{JOB_LABEL}={name},{COMPLETION_INDEX}=0", "--tail=-1"] if ranked else [f"job/{name}"]
    proc = subprocess.run(["kubectl", "logs", *which, "-n", namespace, "-c", "job"], capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else ""


def _saved_log(logs: Path, name: str) -> str:
    """A pod log saved by the user: a regular file (no link followed), its last part if huge."""
    try:
        return read_tail(logs / f"{name}.log", MAX_POD_LOG_BYTES).decode("utf-8", "replace")
    except UnsafeFile as error:
        return f"harness: the saved log was not read: {error}"


def collect(manifests: Path, results_dir: Path, logs: Path | None) -> Path:
    """Turn the pods' logs into a normal run folder that show, report and compare understand."""
    try:
        record = read_plan_record(manifests)
    except (MissingFile, UnsafeFile) as error:
        raise HarnessError(str(error)) from None
    plan = plan_from_record(record, str(manifests / PLAN_FILE))
    namespace = record.get("namespace", "default") if isinstance(record, dict) else "default"
    check_name(namespace if isinstance(namespace, str) else plain(namespace), "namespace in plan.json")
    # Every pod's log first: an export never applied (or not yet started) leaves none, and is no run.
    texts = {
        job.framework: _saved_log(logs, job_name(plan, job))
        if logs
        else _kubectl_log(job_name(plan, job), namespace, processes(job.params) > 1)
        for job in plan.jobs
        if job.skip_reason is None
    }
    if texts and not any(text.strip() for text in texts.values()):  # (every job skipped: a run of skips)
        where = f"no saved log in {logs}" if logs else f"kubectl logs has none in namespace {namespace}"
        raise HarnessError(
            f"{manifests}: no job of run {plan.run_id} has run ({where}): nothing to collect; "
            f"apply it first (kubectl apply -f {manifests}) and collect when its jobs are complete"
        )
    command = ["harness", "collect", str(manifests)]
    return write_collected(
        results_dir, plan, BACKEND, command, lambda job, run_dir: _collect(plan, job, run_dir, texts)
    )


def _collect(plan: Plan, job: Job, run_dir: Path, texts: dict[str, str]) -> Result:
    name = job_name(plan, job)
    if job.skip_reason is not None:
        return placeholder_result(plan.run_id, job, BACKEND, "skipped", job.skip_reason)
    text = texts[job.framework]
    write_bytes_atomic(run_dir / "logs" / f"{job.framework}.pod.log", text.encode("utf-8"), within(run_dir))
    if (doc := extract_result(text)) is None:
        ranked = processes(job.params) > 1  # rank 0 was stopped (a rank failed), or never printed
        why = (
            f"no result in the log of rank 0 of job/{name}: a rank failed, or rank 0 did not finish "
            f"(`kubectl describe job/{name}` names a failed pod and its exit code)"
            if ranked
            else f"no result in the log of job/{name}"
        )
        result = placeholder_result(plan.run_id, job, BACKEND, "failed" if ranked else "invalid-output", why)
        result["stderr_tail"] = "\n".join(text.splitlines()[-30:])[-4000:] or None
        return result
    try:
        result = validate(doc, f"job/{name}")
        if wrong := mismatch(result, job.framework, plan.suite, plan.run_id):
            raise InvalidResult(f"job/{name}: the printed result {wrong}")
    except InvalidResult as error:
        return placeholder_result(plan.run_id, job, BACKEND, "invalid-output", str(error))
    return result
