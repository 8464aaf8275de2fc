"""`docker compose up` from a fresh copy of the repository, end to end, and the gpu profile."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import load_result
from tests.conftest import REPO
from tests.integration.conftest import STACKS, find_links

pytestmark = pytest.mark.integration


def fresh_clone(dest: Path) -> Path:
    """The working tree as `git clone` would give it (tracked and new files, nothing ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def compose(
    clone: Path, project: str, *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", "compose", "-p", project, *args],
        cwd=clone, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_compose_up_runs_the_default_comparison(engine: Any, tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path / "clone")
    # The only machine-specific step on this machine: the CPU torch wheel is on no reachable index.
    for folder in find_links():
        for wheel in Path(folder).glob("torch-*.whl"):
            shutil.copy2(wheel, clone / "images/pytorch/wheelhouse" / wheel.name)
    project = f"fwh-test-{secrets.token_hex(3)}"
    try:
        up = compose(clone, project, "up", env={"XLA_MATRIX_SIZE": "64"}, timeout=3600)
        # A busy machine flags the run (report exit 3): `up` then exits 1 naming that code, by design.
        flagged = 'service "report" didn\'t complete successfully: exit 3' in up.stdout + up.stderr
        assert up.returncode == 0 or flagged, up.stdout[-6000:] + up.stderr[-6000:]
        runs = [p for p in (clone / "results").iterdir() if p.is_dir()]
        assert len(runs) == 1, runs
        run = runs[0]
        summary = json.loads((run / "summary.json").read_text())
        assert summary["backend"] == "compose" and [j["status"] for j in summary["jobs"]] == ["ok"] * 3
        for stack in STACKS:
            doc = load_result(run / f"{stack}.json")
            assert doc["status"] == "ok" and doc["params"]["matrix_size"] == 64
            assert doc["environment"]["machine"]["in_container"] is True
            assert (run / "logs" / f"{stack}.stdout.log").stat().st_size > 0
        # the report service printed the table
        assert "matmul GFLOP/s" in up.stdout and "numpy (baseline)" in up.stdout and "product_sum" in up.stdout
        # the job containers were isolated like the docker backend's
        for stack in STACKS:
            (cid,) = compose(clone, project, "ps", "-a", "-q", stack).stdout.split()
            info = engine.api.inspect_container(cid)
            assert info["HostConfig"]["NetworkMode"] == "none" and info["HostConfig"]["ReadonlyRootfs"] is True
            assert info["Config"]["User"] == "10001:10001" and info["State"]["ExitCode"] == 0
            mounts = {m["Destination"]: m for m in info["Mounts"]}
            assert mounts["/opt/harness/suites"]["RW"] is False and mounts["/data"]["RW"] is False
            # each job mounts only its own folder writable, never the run folder or ./results
            assert mounts["/results"]["Source"].endswith(f"/results/.compose-jobs/{stack}")
            assert info["HostConfig"]["Memory"] > 0 and "size=2g" in info["HostConfig"]["Tmpfs"]["/tmp"]
        # results belong to whoever owns ./results, not to the containers' user
        owner = (clone / "results").stat().st_uid
        assert all(p.stat().st_uid == owner for p in run.rglob("*"))
    finally:
        compose(clone, project, "down", "--remove-orphans")


def test_gpu_profile_reserves_nvidia_gpus_with_cuda12_images(tmp_path: Path) -> None:
    proc = compose(REPO, "fwh-config", "--profile", "gpu", "config", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    services = json.loads(proc.stdout)["services"]
    for name in ("gpu-jax", "gpu-pytorch"):
        service = services[name]
        (device,) = service["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        assert service["build"]["args"]["VARIANT"] == "cuda12" and ":cuda12-" in service["image"]
        assert service["network_mode"] == "none"
    default = json.loads(compose(REPO, "fwh-config", "config", "--format", "json").stdout)["services"]
    assert not any(name.startswith("gpu-") for name in default)
    assert all("deploy" not in default[name] for name in STACKS)
