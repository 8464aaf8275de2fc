from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent

# `harness run` defaults to --backend auto (docker when an engine answers). Tests run jobs
# locally unless they say otherwise; the Docker tests (tests/integration) pass --backend docker.
os.environ.setdefault("HARNESS_BACKEND", "local")
# Each test has its own results folder, so automatic calibration (once per machine and results
# folder) would run in every test; tests/test_calibration.py covers it on purpose.
os.environ.setdefault("HARNESS_CALIBRATE", "never")


def harness(*args: str, cwd: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        timeout=timeout,
    )


def run_folder(stdout: str) -> Path:
    for line in stdout.splitlines():
        if line.startswith("run folder: "):
            return Path(line.removeprefix("run folder: ").strip())
    raise AssertionError(f"no run folder printed in:\n{stdout}")


def read(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return tmp_path / "results"
