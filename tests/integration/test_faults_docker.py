"""Faults through the docker backend: right status, other job intact, no container left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import load_result
from tests.conftest import REPO, harness, read, run_folder

pytestmark = pytest.mark.integration

RUN_LABEL = "org.fw-harness.run-id"


def leftovers(engine: Any, run_id: str) -> list[Any]:
    return engine.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run_id}"})


@pytest.mark.parametrize(
    ("mode", "extra", "status", "reason"),
    [
        ("hang", ("--timeout", "8"), "timeout", "killed after 8 s"),
        ("oom", ("--memory", "300m"), "oom", "exceeding its memory limit"),
        ("garbage-output", (), "invalid-output", "not valid JSON"),
        ("no-output", (), "invalid-output", "exited 0 without writing a result file"),
        ("slow-start", ("--timeout", "8", "--param", "delay_s=30"), "timeout", "killed after 8 s"),
    ],
)
def test_fault_mode_in_a_container(
    cpu_images: dict[str, Any], engine: Any, results: Path, mode: str, extra: tuple[str, ...], status: str, reason: str
) -> None:
    proc = harness("run", "--suite", "fault", "--frameworks", "numpy,pytorch", "--backend", "docker",
                   "--param", f"mode={mode}", "--param", "target=pytorch", "--results-dir", str(results), *extra)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    assert load_result(run / "numpy.json")["status"] == "ok"
    bad = load_result(run / "pytorch.json")
    assert bad["status"] == status and reason in bad["reason"], bad["reason"]
    assert not leftovers(engine, run.name)


def test_sigint_stops_the_container_and_keeps_finished_jobs(
    cpu_images: dict[str, Any], engine: Any, results: Path
) -> None:
    cmd = [sys.executable, "-m", "harness.cli", "run", "--suite", "fault", "--frameworks", "numpy,pytorch,jax",
           "--backend", "docker", "--param", "mode=hang", "--param", "target=pytorch", "--results-dir", str(results)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "hanging on purpose" in line:
            break
    # Hardening, read off the live container of the hanging job.
    live = [
        c
        for c in engine.containers.list(filters={"label": RUN_LABEL})
        if c.labels.get("org.fw-harness.framework") == "pytorch"
    ]
    assert len(live) == 1
    attrs = live[0].attrs
    host, config = attrs["HostConfig"], attrs["Config"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"]
    assert "no-new-privileges" in host["SecurityOpt"] and host["PidsLimit"] and host["Privileged"] is False
    assert config["User"] and not config["User"].startswith("0")
    mounts = {m["Destination"]: m for m in attrs["Mounts"]}
    assert mounts["/opt/harness/suites"]["RW"] is False
    assert not any("docker.sock" in (m.get("Source") or "") for m in attrs["Mounts"])
    names = {entry.split("=", 1)[0] for entry in config["Env"]}
    assert names <= {"HOME", "PYTHONPATH", "PYTHONUNBUFFERED", "PATH", "LANG", "PIP_NO_CACHE_DIR", "PYTHONDONTWRITEBYTECODE",
                     "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE",
                     "VIRTUAL_ENV", "GPG_KEY", "PYTHON_VERSION", "PYTHON_SHA256", "MPLCONFIGDIR", "XDG_CACHE_HOME"}, names  # fmt: skip
    run_label = live[0].labels[RUN_LABEL]
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - started < 10
    assert proc.returncode == 130, "".join(seen) + out + err
    run = run_folder("".join(seen) + out)
    assert [j["status"] for j in read(run / "summary.json")["jobs"]] == ["ok", "interrupted", "interrupted"]
    assert not leftovers(engine, run_label)


def test_clean_removes_what_a_killed_harness_left(cpu_images: dict[str, Any], engine: Any, results: Path) -> None:
    cmd = [sys.executable, "-m", "harness.cli", "run", "--suite", "fault", "--frameworks", "numpy",
           "--backend", "docker", "--param", "mode=hang", "--results-dir", str(results)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "hanging on purpose" in line:
            break
    # SIGKILL of the harness and of its reaper (as when the whole session is OOM-killed): no chance to clean up
    reapers = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "harness.backends.reaper"], capture_output=True,
                             text=True).stdout.split()  # fmt: skip
    assert reapers, "the docker backend runs a reaper beside each harness"
    for pid in reapers:
        os.kill(int(pid), signal.SIGKILL)
    proc.kill()
    proc.wait()
    stranded = [c for c in engine.containers.list(all=True, filters={"label": RUN_LABEL})]
    assert stranded
    cleaned = harness("clean")
    assert cleaned.returncode == 0 and "removed container" in cleaned.stdout
    assert not engine.containers.list(all=True, filters={"label": RUN_LABEL})


def test_clean_keeps_a_live_runs_container(cpu_images: dict[str, Any], engine: Any, results: Path) -> None:
    """`harness clean` beside a running harness: its container is kept (the job is not killed), and
    once that harness is gone, clean removes what it left."""
    cmd = [sys.executable, "-m", "harness.cli", "run", "--suite", "fault", "--frameworks", "numpy", "--backend",
           "docker", "--param", "mode=hang", "--timeout", "120", "--results-dir", str(results)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "hanging on purpose" in line:
            break
    try:
        cleaned = harness("clean")
        assert cleaned.returncode == 0 and "kept fw-harness-" in cleaned.stdout, cleaned.stdout
        assert "removed container" not in cleaned.stdout
        assert proc.poll() is None and engine.containers.list(filters={"label": RUN_LABEL})
    finally:
        reapers = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "harness.backends.reaper"],
                                 capture_output=True, text=True).stdout.split()  # fmt: skip
        for pid in reapers:
            os.kill(int(pid), signal.SIGKILL)
        proc.kill()
        proc.wait()
    cleaned = harness("clean")
    assert cleaned.returncode == 0 and "removed container" in cleaned.stdout
    assert not engine.containers.list(all=True, filters={"label": RUN_LABEL})
