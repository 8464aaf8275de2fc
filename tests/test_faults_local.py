"""Every fault mode through the local backend: the right status, the other job intact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.schema import load_result
from tests.conftest import REPO, finished, harness, read, run_folder

pytestmark = pytest.mark.slow


def fault_run(
    results: Path, mode: str, *extra: str, delay_s: float = 30
) -> tuple[subprocess.CompletedProcess[str], Path]:
    proc = harness(
        "run", "--suite", "fault", "--frameworks", "numpy,pytorch", "--param", f"mode={mode}",
        "--param", "target=pytorch", "--param", f"delay_s={delay_s:g}", "--results-dir", str(results), *extra,
    )  # fmt: skip
    return proc, run_folder(proc.stdout)


@pytest.mark.parametrize(
    ("mode", "extra", "status", "reason"),
    [
        ("crash", (), "failed", "exited with code -6"),
        ("hang", ("--timeout", "4"), "timeout", "killed after 4 s"),
        ("oom", ("--memory", "1500m"), "oom", "out of memory"),
        ("garbage-output", (), "invalid-output", "not valid JSON"),
        ("no-output", (), "invalid-output", "exited 0 without writing a result file"),
        ("slow-start", ("--timeout", "3"), "timeout", "killed after 3 s"),
    ],
)
def test_fault_mode(results: Path, mode: str, extra: tuple[str, ...], status: str, reason: str) -> None:
    proc, run = fault_run(results, mode, *extra)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert load_result(run / "numpy.json")["status"] == "ok"  # the other job is intact and valid
    bad = load_result(run / "pytorch.json")
    assert bad["status"] == status and reason in bad["reason"]
    assert f"{status.upper()}: " in proc.stdout
    assert [j["status"] for j in read(run / "summary.json")["jobs"]] == ["ok", status]
    if mode == "crash":
        assert "crashing on purpose" in bad["stderr_tail"]
    if mode == "garbage-output":
        assert (run / "pytorch.invalid.json").is_file()


def test_a_job_killed_at_its_timeout_leaves_no_scratch_behind(results: Path, tmp_path: Path) -> None:
    # The job makes a folder for its cold caches before its work; killed, it cannot remove it. It
    # lives in the job's own folder, which the harness removes, never in the temporary folder.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = harness("run", "--suite", "fault", "--frameworks", "numpy", "--param", "mode=hang", "--timeout", "3",
                   "--results-dir", str(results), timeout=300, env={"TMPDIR": str(tmp)})  # fmt: skip
    run = run_folder(proc.stdout)
    assert load_result(run / "numpy.json")["status"] == "timeout", proc.stdout + proc.stderr
    assert list(tmp.iterdir()) == []
    assert not (run / ".jobs").exists()


def test_slow_start_within_its_timeout_is_ok(results: Path) -> None:
    proc = harness("run", "--suite", "fault", "--frameworks", "numpy", "--param", "mode=slow-start",
                   "--param", "delay_s=1", "--results-dir", str(results))  # fmt: skip
    assert finished(proc) and load_result(run_folder(proc.stdout) / "numpy.json")["status"] == "ok"


def test_resume_reruns_only_jobs_that_are_not_ok(results: Path) -> None:
    # The plan keeps delay_s, so the resumed job sleeps it again: 6 s is past the first run's 3 s
    # timeout (the sleep starts after the job's own start-up) without sitting out 30 s a second time.
    proc, run = fault_run(results, "slow-start", "--timeout", "3", delay_s=6)
    first_numpy = read(run / "numpy.json")
    assert read(run / "pytorch.json")["status"] == "timeout"
    again = harness("run", "--resume", str(run), "--timeout", "120", "--results-dir", str(results))
    assert finished(again), again.stdout + again.stderr
    assert "-> fault/numpy" not in again.stdout and "-> fault/pytorch" in again.stdout
    assert read(run / "numpy.json") == first_numpy  # untouched
    assert read(run / "pytorch.json")["status"] == "ok"
    assert read(run / "pytorch.previous.json")["status"] == "timeout"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_keeps_finished_jobs_and_kills_the_running_one(results: Path, sig: signal.Signals) -> None:
    cmd = [sys.executable, "-m", "harness.cli", "run", "--suite", "fault", "--frameworks", "numpy,pytorch,jax",
           "--param", "mode=hang", "--param", "target=pytorch", "--results-dir", str(results)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        seen.append(line)
        if "hanging on purpose" in line or time.monotonic() > deadline:
            break
    started = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    elapsed = time.monotonic() - started
    assert proc.returncode == 130, "".join(seen) + out + err
    assert elapsed < 5
    run = run_folder("".join(seen) + out)
    summary = read(run / "summary.json")
    assert summary["interrupted"] is True
    assert [j["status"] for j in summary["jobs"]] == ["ok", "interrupted", "interrupted"]
    assert load_result(run / "numpy.json")["status"] == "ok"
    assert "Traceback" not in err
    # A local job's command line names its job.json, inside its folder in the run folder.
    leftover = subprocess.run(["pgrep", "-f", f"suites run --job .*/{run.name}/"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", "a job process outlived the interrupt"
    assert os.path.isdir(run)
