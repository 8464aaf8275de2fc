"""A job that writes more than its `/results` may hold, in a real container, in both transfer modes.

`/results` is a tmpfs of a stated size (docker_transfer.RESULTS_CAP_BYTES): past it the job's own
writes fail with ENOSPC inside the container, so the engine's disk never holds more than the cap,
and the result says the cap was hit. As in test_hostile_docker.py, the job commands are swapped
for shell scripts; the container, image, mounts and hardening are the docker backend's own.

- pytorch: the real job first (a valid result), then one artefact of 400 MiB (past the cap);
- jax: 400 MiB of junk first, then the real job, which finds no room for its result;
- numpy: the real job, untouched, in the same run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.backends import docker_backend, docker_transfer
from harness.core.schema import load_result
from harness.execute.runner import execute
from harness.store.images import connect
from harness.store.plan import Job, PlanRequest, make_plan
from tests.conftest import read

pytestmark = pytest.mark.integration

CAP = getattr(docker_transfer, "RESULTS_CAP_BYTES", 328 * 2**20)  # the stated cap (default when absent)
FILL_MIB = 400  # past the cap: a job's attempt to keep 400 MiB, as the issue saw

# $1: the result path the job was given; $2: the job's own command line (job.json in /results).
AFTER = f"""
out="$1"; dir=$(dirname "$out")
$2 || exit $?
mkdir -p "$dir/pytorch-artifacts"
echo kept > "$dir/pytorch-artifacts/small.txt"
df -B1 /results | tail -n 1 | awk '{{print "results-bytes: " $2}}'
dd if=/dev/zero of="$dir/pytorch-artifacts/big.bin" bs=1M count={FILL_MIB} 2>/tmp/dd.err
echo "dd-exit: $?"
cat /tmp/dd.err
exit 0
"""
BEFORE = f"""
out="$1"; dir=$(dirname "$out")
dd if=/dev/zero of="$dir/junk.bin" bs=1M count={FILL_MIB} 2>/tmp/dd.err
echo "dd-exit: $?"
cat /tmp/dd.err
exec $2
"""


def capped_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transfer: str) -> Path:
    original = docker_backend.DockerBackend.create_kwargs

    def swapped(self: docker_backend.DockerBackend, job: Job, run_id: str, *args: Any) -> dict[str, Any]:
        kwargs = original(self, job, run_id, *args)
        script = {"pytorch": AFTER, "jax": BEFORE}.get(job.framework)
        if script is not None:
            out = self.job_spec(job, run_id).result_path
            kwargs["command"] = ["sh", "-c", script, "sh", out, " ".join(kwargs["command"])]
        return kwargs

    monkeypatch.setattr(docker_backend.DockerBackend, "create_kwargs", swapped)
    plan = make_plan(
        PlanRequest(suite="fault", frameworks="numpy,jax,pytorch", repeat=2, timeout_s=180), backend="docker"
    )
    with connect() as engine:
        backend = docker_backend.DockerBackend(engine, echo=False, transfer=transfer)
        return execute(plan, backend, tmp_path / "results")


def _stdout(run: Path, framework: str) -> str:
    return (run / "logs" / f"{framework}.stdout.log").read_text()


def _value(stdout: str, key: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith(f"{key}:")).split(":", 1)[1].strip()


@pytest.mark.parametrize("transfer", ["bind", "copy"])
def test_results_past_the_cap_are_cut_in_the_container_and_said(
    cpu_images: dict[str, Any], engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transfer: str
) -> None:
    run = capped_run(tmp_path, monkeypatch, transfer)

    # Another framework's job in the same run is intact.
    numpy = load_result(run / "numpy.json")
    assert numpy["status"] == "ok", numpy["reason"]
    assert "results_full" not in numpy["environment"]["launch"]

    # The cap is enforced inside the container: /results is that big, and the write past it failed.
    stdout = _stdout(run, "pytorch")
    assert int(_value(stdout, "results-bytes")) == CAP, stdout
    assert _value(stdout, "dd-exit") != "0" and "No space left on device" in stdout, stdout

    # Its result, written before, is whole; the cut is recorded, and what fit came back.
    torch = load_result(run / "pytorch.json")
    assert torch["status"] == "ok", torch["reason"]
    launch = torch["environment"]["launch"]
    assert "cap" in launch["results_full"] and str(CAP // 2**20) in launch["results_full"], launch
    assert launch["container"]["results_cap_bytes"] == CAP
    assert any(s.startswith("big.bin") for s in launch["artifacts_skipped"]), launch["artifacts_skipped"]
    assert (run / "pytorch-artifacts" / "small.txt").read_text() == "kept\n"
    assert not (run / "pytorch-artifacts" / "big.bin").exists()

    # A job whose result found no room says why, in its result and in the run's summary.
    jax_out = _stdout(run, "jax")
    assert _value(jax_out, "dd-exit") != "0" and "No space left on device" in jax_out, jax_out
    jax = load_result(run / "jax.json")
    assert jax["status"] != "ok" and "cap" in jax["reason"], jax["reason"]
    assert "results_full" in jax["environment"]["launch"]
    summary = {j["framework"]: j for j in read(run / "summary.json")["jobs"]}
    assert "cap" in summary["jax"]["reason"] and summary["numpy"]["status"] == "ok", summary

    # The host kept no more than the cap: the run folder is small, no job folder is left.
    kept = sum(p.stat().st_size for p in run.rglob("*") if p.is_file() and not p.is_symlink())
    assert kept <= CAP + 2**20, kept
    assert not (run / ".jobs").exists()
    label = {"label": f"org.fw-harness.run-id={run.name}"}
    assert not engine.containers.list(all=True, filters=label)
    assert not engine.volumes.list(filters=label), "a results volume outlived its job"
