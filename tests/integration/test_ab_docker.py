"""`harness ab` on the docker backend: each side's containers mount that side's suites read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.store.run_folder import REPO, load_run, suites_digest
from tests.conftest import harness
from tests.test_ab import checkout

pytestmark = pytest.mark.integration


def test_each_side_mounts_its_own_suites(cpu_images: dict[str, Any], tmp_path: Path) -> None:
    candidate = checkout(tmp_path / "candidate", plant=True)
    proc = harness("ab", str(REPO), str(candidate), "--suite", "fault", "-f", "numpy", "-p", "work=100",
                   "--rounds", "4", "--repeat", "3", "--backend", "docker", "--results-dir",
                   str(tmp_path / "results"))  # fmt: skip
    assert proc.returncode == 1 and "failed in B: round 1: planted in the candidate" in proc.stdout, (
        proc.stdout[-3000:] + proc.stderr
    )
    runs = {
        line.split(" ", 1)[0]: load_run(Path(line.split(": ", 1)[1]))
        for line in proc.stdout.splitlines()
        if line.startswith(("baseline run: ", "candidate run: "))
    }
    before, after = runs["baseline"].results["numpy"], runs["candidate"].results["numpy"]
    assert before["status"] == "ok" and before["backend"] == "docker"
    assert after["status"] == "failed" and "planted in the candidate" in after["reason"]
    assert runs["candidate"].summary["code"]["suites_sha256"] == suites_digest(candidate / "suites")
