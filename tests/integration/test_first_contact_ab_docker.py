"""`harness ab` and rounds on a real Docker engine, as typed on first contact (issue 57): a relative
results folder, an engine that refuses a container, and round containers labelled with their run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from docker.types import Mount

from harness.backends import docker_backend
from harness.execute.rounds import execute_rounds
from harness.store.images import LABEL, connect
from harness.store.plan import Job, PlanRequest, make_plan
from harness.store.run_folder import load_run
from tests.conftest import finished, harness

pytestmark = pytest.mark.integration


def test_ab_of_a_revision_into_a_relative_results_folder_runs(cpu_images: dict[str, Any], tmp_path: Path) -> None:
    """Before: the revision's suites were exported below `results/...`, a relative bind the engine
    refused ("mount path must be absolute"): a 96-line traceback, exit 1, two empty run folders."""
    proc = harness("ab", "HEAD", "--suite", "fault", "-f", "numpy", "-p", "work=100", "--rounds", "4",
                   "--repeat", "3", "--backend", "docker", "--results-dir", "r", cwd=tmp_path)  # fmt: skip
    assert finished(proc), proc.stdout[-3000:] + proc.stderr
    assert "Traceback" not in proc.stderr
    runs = sorted((tmp_path / "r").iterdir())
    assert len(runs) == 2
    for run in runs:
        loaded = load_run(run)
        assert loaded.summary["rounds"] == 4 and loaded.results["numpy"]["status"] == "ok"


def test_an_engine_that_refuses_a_container_fails_that_job_in_one_line(
    cpu_images: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's refusal (here a relative bind mount, as the old relative results folder made) is
    the job's failure with the engine's reason; the run goes on and ends normally, no traceback."""
    original = docker_backend.DockerBackend.create_kwargs
    seen: list[dict[str, Any]] = []

    def refused_first(self: docker_backend.DockerBackend, job: Job, run_id: str, *args: Any) -> dict[str, Any]:
        kwargs = original(self, job, run_id, *args)
        if not seen:
            kwargs["mounts"] = [*kwargs["mounts"], Mount("/extra", "relative/folder", type="bind", read_only=True)]
        seen.append(kwargs)
        return kwargs

    monkeypatch.setattr(docker_backend.DockerBackend, "create_kwargs", refused_first)
    plan = make_plan(PlanRequest(suite="fault", frameworks="numpy", repeat=2, params=("work=100",)), backend="docker")
    with connect() as engine:
        backend = docker_backend.DockerBackend(engine, echo=False)
        run = execute_rounds(plan, backend, tmp_path / "results", 2)
    loaded = load_run(run)
    first = load_run(run / "rounds" / "round-1").results["numpy"]
    assert first["status"] == "failed" and "could not be started" in first["reason"], first["reason"]
    assert "the Docker engine failed it" in (first["stderr_tail"] or ""), first["stderr_tail"]
    assert load_run(run / "rounds" / "round-2").results["numpy"]["status"] == "ok"
    assert loaded.summary["rounds"] == 2
    # Round containers carry the run's own id (what `harness clean --run ID` selects) and their round.
    assert [k["labels"][f"{LABEL}.run-id"] for k in seen] == [plan.run_id, plan.run_id]
    assert [k["labels"][f"{LABEL}.round"] for k in seen] == ["1", "2"]
