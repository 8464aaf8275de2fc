"""`docker compose up`'s steps without Docker: the report step exits with the run's status, a run that
`up` left unfinished (Ctrl-C) is ended by the next plan step with its finished results kept, and
`show`, `compare` and `report` never read an unfinished or empty run as fine.

The plan and report steps run here as the compose services run them (`python -m
harness.backends.compose_steps`), on a real results folder; what each job service would leave in its
folder (images/compose/job.sh: stdout.log when it starts, the result, then `exit`) is written by hand.
The same through the real engine: tests/integration/test_compose_outcome.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.judge.assessment import DISTURBED, FAILED, INTERRUPTED
from tests.conftest import REPO, harness
from tests.factories import result
from tests.test_contention import _timed

FRAMEWORKS = ("numpy", "jax", "pytorch")
PLAN = ("plan", "--suite", "xla", "--frameworks", ",".join(FRAMEWORKS), "--param", "matrix_size=64")


def step(results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.backends.compose_steps", "--results", str(results), *args],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip


def planned(results: Path) -> str:
    proc = step(results, *PLAN)
    assert proc.returncode == 0, proc.stderr
    return (results / ".compose-run").read_text().strip()


def job_ran(results: Path, run_id: str, framework: str, *, code: int = 0, contended: bool = False) -> dict[str, Any]:
    """What job.sh leaves after a job that ended: its log, its result (when it exited 0) and its exit code."""
    work = results / ".compose-jobs" / framework
    (work / "stdout.log").write_text(f"[xla/{framework}] done\n")
    (work / "stderr.log").write_text("" if code == 0 else "Traceback: boom\n")
    doc = result(framework, [_timed("matmul", list(range(10)) if contended else [])])
    doc.update(run_id=run_id, params=json.loads((results / run_id / "plan.json").read_text())["jobs"][0]["params"])
    if code == 0:
        (work / f"{framework}.json").write_text(json.dumps(doc))
    (work / "exit").write_text(f"{code}\n")
    return doc


def summary(results: Path, run_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((results / run_id / "summary.json").read_text())
    return doc


@pytest.mark.parametrize(
    ("failing", "contended", "expected"),
    [((), False, 0), (("jax",), False, FAILED), ((), True, DISTURBED)],
    ids=["all-ok", "a-job-failed", "flagged-contended"],
)
def test_the_report_step_exits_with_the_runs_status(
    tmp_path: Path, failing: tuple[str, ...], contended: bool, expected: int
) -> None:
    """Before: the report exited 0 for a flagged run (and `up` 0 for every run); now `harness run`'s code."""
    run_id = planned(tmp_path)
    for fw in FRAMEWORKS:
        job_ran(tmp_path, run_id, fw, code=1 if fw in failing else 0, contended=contended)
    proc = step(tmp_path, "finish")
    assert proc.returncode == expected, proc.stdout[-3000:] + proc.stderr
    statuses = [job["status"] for job in summary(tmp_path, run_id)["jobs"]]
    assert statuses == ["failed" if fw in failing else "ok" for fw in FRAMEWORKS]
    assert "numpy (baseline)" in proc.stdout  # the table was printed all the same


def test_the_next_plan_step_ends_a_run_that_up_left_unfinished(tmp_path: Path) -> None:
    """Ctrl-C during jax: numpy's result sat in its job folder, the run had no jobs and finished_at null.
    Before: the next plan step wiped the job folders and left that run as it was; now it ends it first."""
    stopped = planned(tmp_path)
    numpy_doc = job_ran(tmp_path, stopped, "numpy")
    (tmp_path / ".compose-jobs" / "jax" / "stdout.log").write_text("jax started\n")  # stopped mid-job: no exit
    started_at = summary(tmp_path, stopped)["started_at"]

    proc = step(tmp_path, *PLAN)
    assert proc.returncode == 0, proc.stderr
    assert f"compose run {stopped} stopped before its report; ended it now: numpy ok, jax interrupted, " in proc.stdout
    ended = summary(tmp_path, stopped)
    assert ended["finished_at"] is not None and ended["interrupted"] is True and ended["started_at"] == started_at
    assert [(j["framework"], j["status"]) for j in ended["jobs"]] == [
        ("numpy", "ok"), ("jax", "interrupted"), ("pytorch", "interrupted")
    ]  # fmt: skip
    reasons = {j["framework"]: j["reason"] for j in ended["jobs"]}
    assert "while running" in reasons["jax"] and "before this job started" in reasons["pytorch"]
    kept = json.loads((tmp_path / stopped / "numpy.json").read_text())
    assert kept["metrics"] == numpy_doc["metrics"] and kept["run_id"] == stopped
    assert (tmp_path / stopped / "logs" / "numpy.stdout.log").read_text() == "[xla/numpy] done\n"
    assert not (tmp_path / stopped / ".reserve").exists()
    # the new run is the pointer's now, with fresh job folders holding nothing of the old one
    new = (tmp_path / ".compose-run").read_text().strip()
    assert new != stopped and sorted(p.name for p in (tmp_path / ".compose-jobs" / "numpy").iterdir()) == [
        "job.args", "job.json"
    ]  # fmt: skip
    # the ended run reads like `harness run`'s interrupted one: shown, and 130 from the report step
    shown = harness("show", str(tmp_path / stopped))
    assert shown.returncode == 0 and "INTERRUPTED" in shown.stdout, shown.stderr
    (tmp_path / ".compose-run").write_text(stopped + "\n")
    again = step(tmp_path, "finish")
    assert again.returncode == INTERRUPTED, again.stderr
    assert "showing it again" in again.stdout and summary(tmp_path, stopped)["jobs"] == ended["jobs"]


def test_a_report_without_the_jobs_ends_the_run_as_interrupted(tmp_path: Path) -> None:
    """`docker compose run --rm --no-deps report` after a Ctrl-C: the finished job kept, 130."""
    run_id = planned(tmp_path)
    job_ran(tmp_path, run_id, "numpy")
    proc = step(tmp_path, "finish")
    assert proc.returncode == INTERRUPTED, proc.stderr
    assert [j["status"] for j in summary(tmp_path, run_id)["jobs"]] == ["ok", "interrupted", "interrupted"]


def test_a_second_report_shows_the_run_and_never_collects_again(tmp_path: Path) -> None:
    """Before: a second report collected from the removed job folders and overwrote every result as failed."""
    run_id = planned(tmp_path)
    for fw in FRAMEWORKS:
        job_ran(tmp_path, run_id, fw)
    assert step(tmp_path, "finish").returncode == 0
    first = summary(tmp_path, run_id)
    again = step(tmp_path, "finish")
    assert again.returncode == 0, again.stderr
    assert summary(tmp_path, run_id) == first and "numpy (baseline)" in again.stdout


def test_a_job_that_crashed_before_the_stop_is_failed_not_interrupted(tmp_path: Path) -> None:
    """The exit code job.sh wrote says the job ended: only a job with neither code nor result was cut short."""
    stopped = planned(tmp_path)
    job_ran(tmp_path, stopped, "numpy", code=1)
    assert step(tmp_path, *PLAN).returncode == 0
    jobs = summary(tmp_path, stopped)["jobs"]
    assert [j["status"] for j in jobs] == ["failed", "interrupted", "interrupted"]
    assert "exited with code 1" in jobs[0]["reason"]


def test_a_planted_link_in_a_job_folder_is_not_followed(tmp_path: Path) -> None:
    """The job folders are the jobs' own: links there are refused, whether the run ends by report or by plan."""
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")
    stopped = planned(tmp_path)
    work = tmp_path / ".compose-jobs" / "numpy"
    (work / "stdout.log").symlink_to(secret)
    (work / "numpy.json").symlink_to(secret)
    assert step(tmp_path, *PLAN).returncode == 0
    assert "host secret" not in (tmp_path / stopped / "logs" / "numpy.stdout.log").read_text()
    (numpy,) = [j for j in summary(tmp_path, stopped)["jobs"] if j["framework"] == "numpy"]
    assert numpy["status"] == "invalid-output" and "symbolic link" in numpy["reason"]


def test_show_report_and_compare_refuse_an_unfinished_or_empty_run(tmp_path: Path) -> None:
    """Before: `show` of a run with no jobs printed an empty table and exited 0."""
    results = tmp_path / "results"
    results.mkdir()
    run_id = planned(results)  # a plan step and nothing after it: no jobs, finished_at null
    shown = harness("show", run_id, "--results-dir", str(results))
    assert shown.returncode == INTERRUPTED and shown.stdout == ""
    assert shown.stderr.count("\n") == 1 and f"run {run_id} has not finished (0 jobs ended so far" in shown.stderr
    assert "the next `docker compose up` ends it" in shown.stderr
    assert harness("report", run_id, "--results-dir", str(results)).returncode == INTERRUPTED
    assert not (results / run_id / "report").exists()
    # a run with finished jobs that never ended: its table, then the line, and still not 0
    doc = job_ran(results, run_id, "numpy")
    (results / run_id / "numpy.json").write_text(json.dumps(doc))
    record = summary(results, run_id)
    record["jobs"] = [{"framework": "numpy", "status": "ok", "reason": None, "file": "numpy.json"}]
    (results / run_id / "summary.json").write_text(json.dumps(record))
    partial = harness("show", run_id, "--results-dir", str(results))
    assert partial.returncode == INTERRUPTED and "numpy" in partial.stdout
    assert "has not finished (1 job ended so far" in partial.stderr
    # ended, but with no job at all (edited): nothing to show, 1
    record.update(jobs=[], finished_at="2026-01-01T00:00:00.000+00:00")
    (results / run_id / "summary.json").write_text(json.dumps(record))
    empty = harness("show", run_id, "--results-dir", str(results))
    assert empty.returncode == FAILED and empty.stdout == "" and "has no jobs: nothing to show" in empty.stderr
    compared = harness("compare", run_id, run_id, "--results-dir", str(results))
    assert compared.returncode == FAILED and "has no jobs" in compared.stderr


def test_every_report_has_an_outcome_service_that_makes_up_fail_with_it() -> None:
    """`up` exits non-zero only when a service's dependency condition fails (measured on compose 2.40.3:
    `up` is 0 whatever its services exit with): each report, default and gpu, needs a service after it."""
    services = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
    for report, outcome in (("report", "outcome"), ("gpu-report", "gpu-outcome")):
        after = services[outcome]
        assert after["depends_on"] == {report: {"condition": "service_completed_successfully"}}
        assert services[report].get("profiles") == after.get("profiles")  # started by the same `up`
        # it runs nothing and can touch nothing: no mounts, no capabilities, not root, no network
        assert after["command"] == ["true"] and after["volumes"] == [] and after["cap_add"] == []
        assert after["user"] != "0:0" and after["network_mode"] == "none"
    # the jobs never fail their service, so one crashed job stops neither the next nor the report
    assert (REPO / "images/compose/job.sh").read_text().rstrip().endswith("exit 0")
