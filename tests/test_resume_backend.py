"""`run --resume` continues on the backend the run was started on (issue 23: a local run's resume ran on docker)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import harness, read, run_folder


def test_resume_keeps_the_runs_backend_and_refuses_another(tmp_path: Path) -> None:
    results = tmp_path / "results"
    first = harness("run", "--suite", "fault", "-f", "numpy", "-p", "mode=crash", "--backend", "local",
                    "--results-dir", str(results))  # fmt: skip
    assert first.returncode == 1, first.stderr
    run = run_folder(first.stdout)
    other = harness("run", "--resume", run.name, "--backend", "docker", "--results-dir", str(results))
    assert other.returncode == 2 and "ran on the local backend; resume it there" in other.stderr, other.stderr
    again = harness("run", "--resume", run.name, "--backend", "auto", "--results-dir", str(results))
    assert again.returncode == 1 and "(numpy stack, local)" in again.stdout + again.stderr, again.stdout
    assert read(run / "numpy.json")["backend"] == "local"


def test_resume_refuses_to_mix_results_of_two_versions_of_the_suites(tmp_path: Path) -> None:
    results = tmp_path / "results"
    first = harness("run", "--suite", "fault", "-f", "numpy", "-p", "mode=crash", "--backend", "local",
                    "--results-dir", str(results))  # fmt: skip
    run = run_folder(first.stdout)
    summary = read(run / "summary.json")
    summary["code"]["suites_sha256"] = "0" * 64  # as if the suites changed since the run began
    (run / "summary.json").write_text(json.dumps(summary))
    again = harness("run", "--resume", run.name, "--results-dir", str(results))
    assert again.returncode == 2 and "was measured with suites 000000000000" in again.stderr, again.stderr
    assert read(run / "numpy.json")["status"] == "failed"  # nothing re-ran
