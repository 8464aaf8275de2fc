"""Lint and type-check as part of the one test command."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_ruff() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "harness", "suites", "tests", "benchmarks"],
                          cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
