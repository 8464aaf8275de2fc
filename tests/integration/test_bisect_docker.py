"""`harness bisect --backend docker`: one stack image per version, built from its generated lock
(offline: the CPU wheelhouse plus the planted package's wheels), and the planted slowdown found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.execute.bisect import record
from harness.judge.assessment import DISTURBED
from harness.store.images import locked_packages, sha256_file, stack_image
from tests.conftest import finished, harness
from tests.test_bisect import WORK, build_wheel

pytestmark = pytest.mark.integration


def test_bisect_builds_an_image_per_version_and_finds_the_planted_slowdown(
    engine: Any, wheelhouse: Path, tmp_path: Path
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in ("1.1", "2.0"):
        build_wheel(wheels, "fwh_plant", version, WORK[version])
    proc = harness(
        "bisect", "--suite", "plant", "--metric", "work", "--stack", "numpy", "--package", "fwh_plant",
        "--versions", "1.1,2.0", "--find-links", str(wheels), "--no-index", "--backend", "docker",
        "--wheelhouse", str(wheelhouse), "--rounds", "4", "--repeat", "3", "--results-dir", str(tmp_path / "r"),
        "-q", timeout=3600,
    )  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    folder = Path(proc.stdout.rsplit("bisect folder: ", 1)[1].strip())
    try:
        _check_the_bisect(engine, proc.stdout, proc.returncode, folder)
    finally:
        # The planted wheels hash anew on every run, so each run's two images are new: 1.3 GB that
        # nothing reuses, on the CI disk `doctor` is asked to find room on later.
        for lock in (folder / "locks").glob("*.txt"):
            engine.images.remove(stack_image("numpy", lock=lock).tag, force=True)


def _check_the_bisect(engine: Any, stdout: str, returncode: int, folder: Path) -> None:
    found = "first significant change: 2.0 (" in stdout
    if returncode == DISTURBED:  # a busy machine: the pair may be left unjudged, never "no change"
        assert found or "no verdict: 1.1 -> 2.0 could not be judged" in stdout, stdout
    else:
        assert found, stdout
    doc = record.load(folder / "bisect.json")
    tags = set()
    for version in ("1.1", "2.0"):
        lock = folder / "locks" / f"{version}.txt"
        assert locked_packages(lock.read_text())["fwh-plant"] == version
        image = stack_image("numpy", lock=lock)
        assert doc["locks"][version]["image"] == image.tag  # the tag names the generated lock's hash
        labels = engine.images.get(image.tag).labels
        assert labels["org.fw-harness.lock-hash"] == sha256_file(lock)
        result = json.loads((folder / version / "round-3" / "numpy.json").read_text())
        assert result["backend"] == "docker" and result["image"]["tag"] == image.tag
        assert result["image"]["lock_hash"] == sha256_file(lock)
        tags.add(image.tag)
    assert len(tags) == 2
