"""Real Docker: an engine must answer. Under CI=true a missing engine fails the run loudly
instead of skipping these tests into green."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.store.images import connect, engine_problem, stack_image
from tests.conftest import harness

STACKS = ("numpy", "jax", "pytorch")


@pytest.fixture(scope="session")
def engine() -> Iterator[Any]:
    problem = engine_problem()
    if problem is not None:
        message = f"no Docker engine answers ({problem}); start it with `bash ../shared/ci/docker-engine.sh`"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true: " + message, pytrace=False)
        pytest.skip(message)
    with connect() as connected:
        yield connected.client


def find_links() -> list[str]:
    """Folders of wheels no index has (here: the CPU torch wheel in /opt/wheels)."""
    return [p for p in os.environ.get("HARNESS_FIND_LINKS", "").split(os.pathsep) if p]


@pytest.fixture(scope="session")
def wheelhouse(engine: Any) -> Path:
    """Every wheel the CPU locks pin, downloaded once: the builds then use no index at all."""
    folder = Path(os.environ.get("HARNESS_TEST_WHEELHOUSE") or Path.home() / ".cache/fw-harness/wheelhouse-cpu")
    args = ["wheelhouse", str(folder)]
    for links in find_links():
        args += ["--find-links", links]
    proc = harness(*args, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder


@pytest.fixture(scope="session")
def cpu_images(engine: Any, wheelhouse: Path) -> dict[str, Any]:
    """`harness build` of the three CPU images from the wheelhouse (reused when already built)."""
    started = time.perf_counter()
    proc = harness("build", "--variant", "cpu", "--wheelhouse", str(wheelhouse), timeout=3600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    return {
        "output": proc.stdout,
        "seconds": time.perf_counter() - started,
        "ids": {stack: engine.images.get(stack_image(stack).tag).id for stack in STACKS},
    }
