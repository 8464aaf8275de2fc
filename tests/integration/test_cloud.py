"""Issue: reproduce on cloud GPUs -- doctor, reproduce, and the remote-engine (copy) path, for real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import load_result
from tests.conftest import finished, harness, read, run_folder

pytestmark = pytest.mark.integration

# What legitimately differs between two runs of the same job: time, identity and transport.
VOLATILE = {"run_id", "started_at", "finished_at", "duration_s", "metrics", "environment"}


def test_doctor_passes_the_engine_and_reports_the_missing_gpu(cpu_images: dict[str, Any]) -> None:
    cpu = harness("doctor")
    assert cpu.returncode == 0, cpu.stdout
    for line in ("PASS  docker engine", "PASS  compose v2", "PASS  disk for images", "PASS  jax image"):
        assert line in cpu.stdout
    gpu = harness("doctor", "--device", "gpu")
    assert gpu.returncode == 1
    assert "FAIL  gpu device request" in gpu.stdout and "NVIDIA Container Toolkit" in gpu.stdout


def test_copy_transfer_gives_the_same_result_files_as_bind_mounts(cpu_images: dict[str, Any], tmp_path: Path) -> None:
    runs = {}
    for mode in ("bind", "copy"):
        proc = harness("run", "--suite", "xla", "--frameworks", "numpy,pytorch", "--param", "matrix_size=32",
                       "--repeat", "3", "--backend", "docker", "--transfer", mode,
                       "--results-dir", str(tmp_path / mode))  # fmt: skip
        assert finished(proc), proc.stdout + proc.stderr
        runs[mode] = run_folder(proc.stdout)
    for fw in ("numpy", "pytorch"):
        bind, copy = load_result(runs["bind"] / f"{fw}.json"), load_result(runs["copy"] / f"{fw}.json")
        assert {k: v for k, v in bind.items() if k not in VOLATILE} == {
            k: v for k, v in copy.items() if k not in VOLATILE
        }
        assert [m["name"] for m in bind["metrics"]] == [m["name"] for m in copy["metrics"]]
        assert bind["image"]["id"] == copy["image"]["id"]
        assert copy["environment"]["launch"]["container"]["transfer"] == "copy"
        assert all(
            m["target"] != "/opt/harness/suites" or m["read_only"]
            for m in copy["environment"]["launch"]["container"]["mounts"]
        )
    assert not [v for v in _volumes() if "fw-harness" in v], "copy mode left volumes behind"


def _volumes() -> list[str]:
    import docker

    client = docker.from_env()
    try:
        return [v.name for v in client.volumes.list()]
    finally:
        client.close()


def test_reproduce_a_recorded_docker_run(cpu_images: dict[str, Any], tmp_path: Path) -> None:
    first = harness("run", "--suite", "xla", "--frameworks", "numpy,jax", "--param", "matrix_size=48", "--repeat", "5",
                    "--backend", "docker", "--results-dir", str(tmp_path))  # fmt: skip
    assert finished(first), first.stdout + first.stderr
    old = run_folder(first.stdout)
    again = harness("reproduce", str(old), "--results-dir", str(tmp_path), "-q")
    assert finished(again), again.stdout + again.stderr
    new = run_folder(again.stdout)
    assert new != old
    for fw in ("numpy", "jax"):
        before, after = read(old / f"{fw}.json"), read(new / f"{fw}.json")
        assert after["status"] == "ok" and after["backend"] == "docker"
        assert after["params"] == before["params"] and after["settings"]["repeat"] == 5
        assert after["image"]["tag"] == before["image"]["tag"]
    assert "B/A [interval]" in again.stdout and "geometric mean" in again.stdout
