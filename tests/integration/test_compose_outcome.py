"""`docker compose up` through the real engine: its exit status carries the run's outcome, and a Ctrl-C
loses no finished result (the next `up` ends the stopped run as `harness run` ends an interrupted one).

Tiny sizes (XLA_MATRIX_SIZE=64); the images are the ones compose.yaml names, built once and reused.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from harness.judge.assessment import FAILED, INTERRUPTED, assess, run_exit_code
from harness.store.run_folder import load_run
from tests.conftest import harness
from tests.integration.conftest import STACKS, find_links
from tests.integration.test_compose import compose, fresh_clone

pytestmark = pytest.mark.integration
TINY = {"XLA_MATRIX_SIZE": "64"}


def clone_for_compose(tmp_path: Path) -> Path:
    clone = fresh_clone(tmp_path / "clone")
    for folder in find_links():  # the CPU torch wheel, should the pytorch image need building
        for wheel in Path(folder).glob("torch-*.whl"):
            shutil.copy2(wheel, clone / "images/pytorch/wheelhouse" / wheel.name)
    return clone


def exit_code(engine: Any, clone: Path, project: str, service: str) -> int:
    (cid,) = compose(clone, project, "ps", "-a", "-q", service).stdout.split()
    return int(engine.api.inspect_container(cid)["State"]["ExitCode"])


def summary(run: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((run / "summary.json").read_text())
    return doc


def test_up_fails_when_a_job_fails_and_the_other_jobs_keep_their_results(engine: Any, tmp_path: Path) -> None:
    """150 MiB kills pytorch's import (exit 137). Before: `up` exited 0; now 1, naming the report's code."""
    clone = clone_for_compose(tmp_path)
    project = f"fwh-outcome-{secrets.token_hex(3)}"
    try:
        up = compose(clone, project, "up", env={**TINY, "HARNESS_MEMORY": "150m"}, timeout=1800)
        output = up.stdout + up.stderr
        assert up.returncode == 1, output[-6000:]
        assert 'service "report" didn\'t complete successfully: exit 1' in output
        run = clone / "results" / (clone / "results/.compose-run").read_text().strip()
        jobs = {job["framework"]: job for job in summary(run)["jobs"]}
        assert jobs["numpy"]["status"] == "ok" and jobs["pytorch"]["status"] == "failed", jobs
        assert "137" in jobs["pytorch"]["reason"]
        # every job service exited 0 (job.sh), so the killed job stopped none of the others
        assert [exit_code(engine, clone, project, stack) for stack in STACKS] == [0, 0, 0]
        assert exit_code(engine, clone, project, "report") == FAILED
        # the report's exact code, for a script: `docker compose run` exits with it (here: shown again)
        again = compose(clone, project, "run", "--rm", "--no-deps", "report", timeout=600)
        assert again.returncode == FAILED and "showing it again" in again.stdout, again.stdout[-3000:] + again.stderr
    finally:
        compose(clone, project, "down", "--remove-orphans")


def test_ctrl_c_keeps_the_finished_job_and_the_next_up_ends_the_run_as_interrupted(engine: Any, tmp_path: Path) -> None:
    """Before: the stopped run stayed with no jobs, finished_at null and a 1 MiB .reserve, numpy's result
    was wiped by the next plan step, and `harness show` printed an empty table with exit 0."""
    clone = clone_for_compose(tmp_path)
    project = f"fwh-ctrlc-{secrets.token_hex(3)}"
    # jax's log exists once job.sh runs: a Ctrl-C between two services lets compose 2.40.3 start the
    # next ones all the same (it stops only what runs), so it must land while jax runs.
    numpy_exit, jax_started = clone / "results/.compose-jobs/numpy/exit", clone / "results/.compose-jobs/jax/stdout.log"
    log = (tmp_path / "up.log").open("w")
    try:
        up = subprocess.Popen(
            ["docker", "compose", "-p", project, "up"], cwd=clone, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, **TINY},
        )  # fmt: skip
        deadline = time.monotonic() + 1200
        while not jax_started.exists() and up.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert numpy_exit.exists() and jax_started.exists(), (tmp_path / "up.log").read_text()[-4000:]
        up.send_signal(signal.SIGINT)  # Ctrl-C while jax runs
        assert up.wait(timeout=300) == INTERRUPTED
        stopped = clone / "results" / (clone / "results/.compose-run").read_text().strip()
        assert summary(stopped)["finished_at"] is None and summary(stopped)["jobs"] == []
        assert exit_code(engine, clone, project, "jax") != 0  # stopped, so nothing after it ran
        shown = harness("show", str(stopped))
        assert shown.returncode == INTERRUPTED and "has not finished" in shown.stderr and shown.stdout == ""

        again = compose(clone, project, "up", env=TINY, timeout=1800)
        assert f"compose run {stopped.name} stopped before its report; ended it now: numpy ok" in again.stdout
        ended = summary(stopped)
        assert ended["finished_at"] is not None and ended["interrupted"] is True
        assert [(j["framework"], j["status"]) for j in ended["jobs"]] == [
            ("numpy", "ok"), ("jax", "interrupted"), ("pytorch", "interrupted")
        ]  # fmt: skip
        assert load_run(stopped).results["numpy"]["metrics"] and not (stopped / ".reserve").exists()
        assert run_exit_code(assess(load_run(stopped))) == INTERRUPTED
        # the new run: `up` says what its report says (0, or 1 for a failed or flagged run)
        new = clone / "results" / (clone / "results/.compose-run").read_text().strip()
        code = run_exit_code(assess(load_run(new)))
        assert exit_code(engine, clone, project, "report") == code
        assert again.returncode == (0 if code == 0 else 1), again.stdout[-4000:] + again.stderr
    finally:
        log.close()
        compose(clone, project, "down", "--remove-orphans")
