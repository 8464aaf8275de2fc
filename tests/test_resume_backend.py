"""`run --resume` continues on the backend the run was started on (issue 23: a local run's resume ran on docker)."""

from __future__ import annotations

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
