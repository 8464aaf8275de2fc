"""The cluster path without a cluster: schema-valid manifests, and pod logs turned into a run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from harness.core.schema import load_result
from tests.conftest import REPO, harness, read


def export(tmp_path: Path, *extra: str, frameworks: str = "numpy,pytorch") -> Path:
    out = tmp_path / "manifests"
    proc = harness("export", "k8s", "--suite", "xla", "--frameworks", frameworks, "--param", "matrix_size=16",
                   "--repeat", "2", "--out", str(out), *extra)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def documents(folder: Path) -> list[dict[str, Any]]:
    return [d for path in sorted(folder.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text())]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_manifests_validate_against_the_kubernetes_schema(tmp_path: Path, device: str) -> None:
    out = export(
        tmp_path,
        "--device",
        device,
        "--registry",
        "registry.example/team",
        "--data-claim",
        "datasets",
        frameworks="numpy,pytorch" if device == "cpu" else "jax,pytorch",
    )  # numpy has no GPU variant
    docs = documents(out)
    assert [d["kind"] for d in docs] == ["ConfigMap", "Job", "Job"]
    for doc in docs:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    job = docs[2]["spec"]["template"]["spec"]
    container = job["containers"][0]
    assert container["image"].startswith("registry.example/team/fw-harness/pytorch:cpu-")
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "data", "mountPath": "/data", "readOnly": True} in container["volumeMounts"]
    limits = container["resources"].get("limits", {})
    assert (limits.get("nvidia.com/gpu") == 1) == (device == "gpu")


def test_pod_logs_become_a_normal_run_folder(tmp_path: Path) -> None:
    out = export(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    # Run each pod's own command here, as the container would, and keep what it prints.
    docs = documents(out)
    configmap = docs[0]
    for doc in docs[1:]:
        pod = doc["spec"]["template"]["spec"]
        container = pod["containers"][0]
        script = container["command"][2]
        results = tmp_path / "pod-results" / doc["metadata"]["name"]
        results.mkdir(parents=True)
        # The pod's job.json, as its ConfigMap volume would show it.
        (item,) = next(v for v in pod["volumes"] if v["name"] == "job-spec")["configMap"]["items"]
        mount = next(m for m in container["volumeMounts"] if m["name"] == "job-spec")
        assert mount["readOnly"] is True and item["path"] == "job.json"
        spec_dir = tmp_path / "pod-spec" / doc["metadata"]["name"]
        spec_dir.mkdir(parents=True)
        spec = json.loads(configmap["data"][item["key"]])
        assert spec["backend"] == "kubernetes" and spec["result_path"].startswith("/results/")
        spec["result_path"] = spec["result_path"].replace("/results/", f"{results}/")
        (spec_dir / item["path"]).write_text(json.dumps(spec))
        script = script.replace("/results/", f"{results}/").replace("python3 -m", "python -m")
        script = script.replace(f"{mount['mountPath']}/", f"{spec_dir}/")
        env = dict(os.environ, PYTHONPATH=str(REPO), PATH=f"{Path(os.sys.executable).parent}:{os.environ['PATH']}")
        proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, cwd=REPO)
        assert proc.returncode == 0, proc.stderr
        (logs / f"{doc['metadata']['name']}.log").write_text(proc.stdout)
    collected = harness("collect", str(out), "--logs", str(logs), "--results-dir", str(tmp_path / "results"))
    assert collected.returncode == 0, collected.stderr
    run = Path(collected.stdout.split("run folder: ")[1].strip())
    for fw in ("numpy", "pytorch"):
        doc = load_result(run / f"{fw}.json")
        assert doc["status"] == "ok" and doc["backend"] == "kubernetes"
    shown = harness("show", str(run))
    assert shown.returncode == 0 and "matmul GFLOP/s" in shown.stdout
    # A pod whose log never got the result is invalid-output, not a lost run.
    next(logs.glob("*numpy.log")).write_text("Traceback: the pod died\n")
    again = harness("collect", str(out), "--logs", str(logs), "--results-dir", str(tmp_path / "again"))
    rerun = Path(again.stdout.split("run folder: ")[1].strip())
    assert read(rerun / "numpy.json")["status"] == "invalid-output"
    assert "the pod died" in read(rerun / "numpy.json")["stderr_tail"]
