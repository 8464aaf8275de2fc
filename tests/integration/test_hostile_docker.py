"""A hostile job in a real container: it sees only its own folder, and its planted links lead nowhere.

The job command of one framework is swapped for a shell script (the container, image, mounts
and hardening are the docker backend's own); run as root here, this is the case where a link
followed by the harness would cross from the container's user to host root.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.backends import docker_backend
from harness.core.schema import load_result
from harness.execute.runner import execute
from harness.store.images import connect
from harness.store.plan import Job, PlanRequest, make_plan
from tests.conftest import REPO, read, run_folder

pytestmark = pytest.mark.integration

SECRET = "TOP-SECRET-CANARY"

# What the hostile job does inside its container ($1: the result path it was given).
SCRIPT = """
out="$1"; dir=$(dirname "$out")
echo "seen: $(ls -A "$dir" | tr '\\n' ' ')"
echo "memory-limit: $(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
df -k /tmp | tail -n 1 | awk '{print "tmp-kb: " $2}'
ln -s "$SECRET_PATH" "$out"
mkdir -p "$dir/pytorch-artifacts"
ln -s "$SECRET_PATH" "$dir/pytorch-artifacts/secret"
echo real > "$dir/pytorch-artifacts/real.txt"
touch /results/../planted 2>/dev/null && echo "wrote outside its folder"
exit 0
"""


def hostile_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transfer: str) -> tuple[Path, Path]:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(SECRET)
    secret.chmod(0o600)

    original = docker_backend.DockerBackend.create_kwargs

    def swapped(self: docker_backend.DockerBackend, job: Job, run_id: str, *args: Any) -> dict[str, Any]:
        kwargs = original(self, job, run_id, *args)
        if job.framework == "pytorch":
            out = self.job_spec(job, run_id).result_path
            kwargs["command"] = ["sh", "-c", f"SECRET_PATH={secret} && export SECRET_PATH && {SCRIPT}", "sh", out]
        return kwargs

    monkeypatch.setattr(docker_backend.DockerBackend, "create_kwargs", swapped)
    plan = make_plan(PlanRequest(suite="fault", frameworks="numpy,pytorch", repeat=2, timeout_s=120), backend="docker")
    with connect() as engine:
        backend = docker_backend.DockerBackend(engine, echo=False, transfer=transfer)
        run = execute(plan, backend, tmp_path / "results")
    return run, secret


@pytest.mark.parametrize("transfer", ["bind", "copy"])
def test_hostile_container_gets_nothing_out(
    cpu_images: dict[str, Any], engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transfer: str
) -> None:
    run, secret = hostile_run(tmp_path, monkeypatch, transfer)
    assert load_result(run / "numpy.json")["status"] == "ok"
    bad = load_result(run / "pytorch.json")
    assert bad["status"] == "invalid-output", bad["reason"]
    assert "refused its result file pytorch.json" in bad["reason"]
    stdout = (run / "logs" / "pytorch.stdout.log").read_text()
    seen = next(line for line in stdout.splitlines() if line.startswith("seen:")).split()[1:]
    # A folder of its own, holding only its job.json (copy: beside it): no run files, logs or other results.
    assert seen == (["job.json"] if transfer == "bind" else []), seen
    assert "wrote outside its folder" not in stdout
    limit = next(line for line in stdout.splitlines() if line.startswith("memory-limit:")).split()[1]
    assert abs(int(limit) - engine.info()["MemTotal"] * 0.8) < 2**20  # a default limit without --memory
    assert int(next(line for line in stdout.splitlines() if line.startswith("tmp-kb:")).split()[1]) == 2 * 2**20
    for path in run.rglob("*"):
        assert not path.is_file() or path.is_symlink() or SECRET not in path.read_text(errors="replace"), path
        assert path.lstat().st_uid == run.stat().st_uid  # nothing in the run folder was handed to the job user
    assert (run / "pytorch-artifacts" / "real.txt").read_text() == "real\n"
    assert not (run / "pytorch-artifacts" / "secret").exists()
    assert not (run / ".jobs").exists()
    assert secret.read_text() == SECRET
    assert read(run / "numpy.json")["environment"]["launch"]["container"]["mem_limit"] == int(limit)
    assert not engine.containers.list(all=True, filters={"label": f"org.fw-harness.run-id={run.name}"})


def test_sighup_removes_the_container(cpu_images: dict[str, Any], engine: Any, results: Path) -> None:
    cmd = [sys.executable, "-m", "harness.cli", "run", "--suite", "fault", "--frameworks", "numpy,pytorch",
           "--backend", "docker", "--param", "mode=hang", "--param", "target=pytorch", "--results-dir", str(results)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "hanging on purpose" in line:
            break
    proc.send_signal(signal.SIGHUP)
    started = time.monotonic()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.monotonic() - started < 15, "".join(seen) + out + err
    run = run_folder("".join(seen) + out)
    assert [j["status"] for j in read(run / "summary.json")["jobs"]] == ["ok", "interrupted"]
    assert not engine.containers.list(all=True, filters={"label": f"org.fw-harness.run-id={run.name}"})


def test_a_sigkilled_harness_leaves_no_container(cpu_images: dict[str, Any], engine: Any, results: Path) -> None:
    cmd = [sys.executable, "-m", "harness.cli", "run", "--suite", "fault", "--frameworks", "numpy",
           "--backend", "docker", "--param", "mode=hang", "--results-dir", str(results)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "hanging on purpose" in line:
            break
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    label = {"label": f"org.fw-harness.run-id={run.name}"}
    assert engine.containers.list(filters=label)  # the job's container is running
    proc.kill()  # no handler runs: only the reaper, told of the container before it existed, is left
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 30
    while engine.containers.list(all=True, filters=label) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not engine.containers.list(all=True, filters=label), "the container outlived its harness"
    assert read(run / "summary.json")["jobs"] == []  # the summary was written before the first job
