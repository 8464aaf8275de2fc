"""Issue 23: what used to be found only after work had started (or never) is refused first.

Each check runs the real CLI: a dry run refuses what the run refuses; a framework without a GPU
variant is refused while planning, by every command that plans; `bisect --metric` is checked before
any environment is built; collecting an export no job ran from says so and fails; a poisoned
calibration cache is measured again instead of used; a resumed Slurm run cancels the job its
earlier attempt left queued or running instead of submitting a second copy beside it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core import cache_home
from harness.core.errors import HarnessError
from harness.execute.bisect.run import Request, _require_metric
from harness.store.calibration import cache_path, cache_problem, fingerprint, load_cache, parse, store
from harness.store.plan import PlanRequest, frameworks_for
from tests.conftest import REPO, finished, harness, read, run_folder
from tests.factories import metric, result


def one_line_refusal(proc: subprocess.CompletedProcess[str], message: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# -- 1. --dry-run runs the real run's checks ---------------------------------------------------------

EXE = sys.executable


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--backend", "slurm", "--python", f"numpy={EXE}"], {}, "--python picks local interpreters; the slurm"),
        (["--backend", "slurm"], {"HARNESS_SLURM_RUNTIME": "docker"}, "HARNESS_SLURM_RUNTIME 'docker' is not one of"),
        (["--backend", "slurm"], {"HARNESS_SLURM_OPTIONS": "--output=x"}, "--output is set by the harness itself"),
        (["--backend", "slurm"], {"HARNESS_SLURM_RUNTIME": "apptainer"}, "apptainer needs HARNESS_SLURM_IMAGES"),
        (["--backend", "slurm"], {"HARNESS_SLURM_PYTHON": "python 3"}, "is not an interpreter name or path"),
        (["--backend", "slurm", "-f", "jax", "--device", "gpu", "--gpus", "device=0"], {}, "with Slurm give a count"),
        (["--backend", "docker", "-f", "jax", "--device", "gpu", "--gpus", "many"], {}, "--gpus 'many' is not"),
        (["--backend", "local", "--python", "numpy=/no/such/python"], {}, "no executable interpreter at"),
        (["--backend", "local", "--python", f"numpie={EXE}"], {}, "'numpie' is not a stack; use one of jax,"),
        (["--backend", "local", "--python", f"numpy={EXE}", "--python", "numpy=python3"], {}, "numpy stack twice"),
    ],
)
def test_a_dry_run_refuses_what_the_run_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], message: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    results = tmp_path / "results"
    args = ["run", "--suite", "xla", *([] if "-f" in args else ["-f", "numpy"]), *args, "--results-dir", str(results)]
    dry = harness(*args, "--dry-run")
    one_line_refusal(dry, message)
    real = harness(*args)  # the same words, for the same reason, before anything starts
    one_line_refusal(real, message)
    assert dry.stderr == real.stderr and not results.exists()


def test_a_dry_run_of_a_slurm_run_needs_no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks are of the options, not of the machine: no sbatch here, and the plan still prints."""
    monkeypatch.delenv("HARNESS_SLURM_RUNTIME", raising=False)
    proc = harness("run", "--suite", "xla", "-f", "numpy", "--backend", "slurm", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["backend"] == "slurm"


# -- 2. --device gpu with a CPU-only framework: refused while planning --------------------------------

GPU_NUMPY = (
    "--device gpu: numpy runs on the cpu only and has no gpu variant; name the frameworks that do "
    "(--frameworks jax,pytorch) or use --device cpu"
)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--suite", "xla", "-f", "numpy", "--device", "gpu", "--backend", "local"],
        ["run", "--suite", "xla", "-f", "numpy,jax", "--device", "gpu", "--dry-run"],
        ["export", "k8s", "--suite", "xla", "-f", "jax,numpy", "--device", "gpu", "--variant", "cuda12"],
        ["export", "slurm", "--suite", "xla", "-f", "numpy", "--device", "gpu"],
        ["noise", "--suite", "xla", "-f", "numpy", "--device", "gpu", "--backend", "local"],
    ],
)
def test_a_framework_without_a_gpu_variant_is_refused_before_any_job(tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "out"
    extra = ["--out", str(out)] if args[0] == "export" else ["--results-dir", str(tmp_path / "results")]
    proc = harness(*args, *extra, timeout=120)
    one_line_refusal(proc, GPU_NUMPY)
    assert not out.exists() and not (tmp_path / "results").exists()


def test_the_compose_plan_step_refuses_it_too(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.backends.compose_steps", "--results", str(tmp_path),
         "plan", "--suite", "xla", "--frameworks", "numpy", "--device", "gpu"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    one_line_refusal(proc, GPU_NUMPY)
    assert not list(tmp_path.iterdir())


def test_gpu_frameworks_still_plan_and_commands_that_choose_frameworks_leave_numpy_out() -> None:
    proc = harness("run", "--suite", "xla", "-f", "jax,pytorch", "--device", "gpu", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert [job["framework"] for job in json.loads(proc.stdout)["jobs"]] == ["jax", "pytorch"]
    # No --frameworks: the suite's frameworks that have a GPU variant (numpy is left out, not refused).
    proc = harness("run", "--suite", "xla", "--device", "gpu", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert [job["framework"] for job in json.loads(proc.stdout)["jobs"]] == ["jax", "pytorch"]
    # `selftest` and `calibrate` pick the frameworks themselves: on a GPU, those with a GPU variant.
    assert frameworks_for("gpu", ["numpy", "jax", "flax", "pytorch"]) == ["jax", "flax", "pytorch"]
    assert frameworks_for("cpu", ["numpy", "jax"]) == ["numpy", "jax"]


# -- 3. bisect --metric: checked before anything is built ---------------------------------------------


def test_bisect_checks_the_metric_before_building_anything(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()  # an empty wheel folder: had the bisect gone on, the first download would fail
    results = tmp_path / "results"
    proc = harness(
        "bisect", "--suite", "xla", "--metric", "matmull", "--stack", "numpy", "--package", "threadpoolctl",
        "--versions", "3.7.0,3.8.0", "--find-links", str(wheels), "--no-index", "--results-dir", str(results),
    )  # fmt: skip
    one_line_refusal(proc, "--metric 'matmull': suite xla reports no such metric; choose one of: generate, mean_sum,")
    assert not results.exists() or not any(results.iterdir())  # no bisect folder, no lock written
    assert not (cache_home.home() / "bisect-venvs").exists()


def test_a_suite_that_declares_no_metric_names_is_checked_after_its_first_job(tmp_path: Path) -> None:
    """The jit suite's names carry its parameters: its first job's result is what is checked."""
    path = tmp_path / "numpy.json"
    path.write_text(json.dumps(result("numpy", [metric("eager L=1e3 K=10", [0.1, 0.1, 0.1])])))
    request = Request(plan=PlanRequest(suite="jit"), metric="eager L=1e4 K=10", stack="numpy", package="numpy",
                      versions=["2.0.0", "2.1.0"], results_dir=tmp_path)  # fmt: skip
    with pytest.raises(HarnessError, match=r"reported no such metric; choose one of: eager L=1e3 K=10"):
        _require_metric(request, path)
    _require_metric(replace(request, metric="eager L=1e3 K=10"), path)  # reported: no error


@pytest.mark.parametrize("suite", ["xla", "plant", "fault", "calibrate", "scipy", "autograd"])
def test_declared_metric_names_are_the_ones_the_implementations_report(
    suite: str, smoke_run: Callable[[str], subprocess.CompletedProcess[str]]
) -> None:
    """Every framework of a suite that declares `metrics`, at its smoke size: no undeclared name."""
    from suites.contract.registry import all_suites

    spec = all_suites()[suite]
    proc = smoke_run(suite)  # `run --smoke --backend local -q` on every framework: tests/test_conformance.py's run
    run = run_folder(proc.stdout + "\n" + proc.stderr)
    for framework in spec.frameworks:
        doc = read(run / f"{framework}.json")
        assert doc["status"] in ("ok", "skipped"), (framework, doc["reason"])
        undeclared = {m["name"] for m in doc["metrics"]} - set(spec.metrics)
        assert not undeclared, f"{suite}/{framework} reports metrics its spec does not declare: {undeclared}"


# -- 4. collect of an export no job ran from ----------------------------------------------------------


def test_collecting_a_slurm_export_that_was_never_submitted_fails(tmp_path: Path) -> None:
    out = tmp_path / "export"
    exported = harness("export", "slurm", "--suite", "xla", "-f", "numpy", "-p", "matrix_size=16", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    results = tmp_path / "results"
    proc = harness("collect", str(out), "--results-dir", str(results))
    one_line_refusal(proc, "has run (no Slurm output, no result): nothing to collect; submit it first (bash submit.sh")
    assert not results.exists()
    (out / "logs" / "numpy.stdout.log").write_text("")  # Slurm made the job's output file: it started
    assert harness("collect", str(out), "--results-dir", str(results)).returncode == 0


def test_collecting_a_k8s_export_whose_pods_left_no_log_fails(tmp_path: Path) -> None:
    out, logs = tmp_path / "k8s", tmp_path / "logs"
    exported = harness("export", "k8s", "--suite", "xla", "-f", "numpy", "-p", "matrix_size=16", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    logs.mkdir()
    results = tmp_path / "results"
    proc = harness("collect", str(out), "--logs", str(logs), "--results-dir", str(results))
    one_line_refusal(proc, "nothing to collect; apply it first (kubectl apply -f")
    assert not results.exists()


# -- 5. a poisoned calibration cache --------------------------------------------------------------------


def cache_doc(fp: str, frameworks: dict[str, dict[str, float]]) -> dict[str, object]:
    return {"format": "harness-calibration", "version": 2, "fingerprint": fp, "device": "cpu",
            "frameworks": {name: {**rates, "run_id": "planted"} for name, rates in frameworks.items()}}  # fmt: skip


def test_a_poisoned_calibration_cache_is_measured_again_not_used(tmp_path: Path) -> None:
    fp = fingerprint("cpu", None, None)  # as the run below computes it: same machine, no limits
    path = cache_path(fp)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cache_doc(fp, {"numpy": {"flops": {"float64/fp64": 1e30, "float32/fp32": 1e30},
                                                          "bandwidth": 1e9}})))  # fmt: skip
    proc = harness("run", "--suite", "fault", "-f", "numpy", "--repeat", "2", "--calibrate", "auto",
                   "--backend", "local", "--results-dir", str(tmp_path / "results"), "-q")  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    assert "warning: calibration cache" in proc.stderr and "1e+30 FLOP/s is beyond any machine's peak" in proc.stderr
    assert "calibrating this machine" in proc.stderr  # measured again
    used = parse(read(run_folder(proc.stdout) / "calibration.json"))
    assert used.flops_by_key["float64/fp64"] < 1e18 and read(path)["frameworks"]["numpy"]["run_id"] != "planted"


def test_a_cached_figure_above_the_devices_peak_is_dropped_and_never_merged_back() -> None:
    fp = "0123456789abcdef"
    path = cache_path(fp)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cache_doc(fp, {"numpy": {"flops": {"float64/fp64": 5e13}},
                                              "jax": {"flops": {"float64/fp64": 4e10}}})))  # fmt: skip
    limits = {"float64/fp64": (1e12, "8 cores x 3.00 GHz x 16 FLOP/cycle (avx2)")}
    assert load_cache(fp) is not None and set(load_cache(fp)["frameworks"]) == {"numpy", "jax"}  # type: ignore[index]
    kept = load_cache(fp, limits)
    assert kept is not None and set(kept["frameworks"]) == {"jax"}  # numpy is measured again
    problem = cache_problem(fp, limits) or ""
    assert "numpy float64/fp64 5e+13 FLOP/s is above the peak (8 cores" in problem
    assert "measuring numpy again" in problem
    stored = store(fp, "cpu", {"pytorch": {"flops": {"float64/fp64": 3e10}}}, limits)
    assert set(stored["frameworks"]) == {"jax", "pytorch"}  # the implausible figure is not written back


# -- 6. a resumed Slurm run and the job its earlier attempt left behind ----------------------------------

FAKE_SLURM = r'''#!{python}
"""sbatch/scontrol/squeue/scancel stand-ins sharing one state file: jobs stay RUNNING (or, for jobs
submitted while $FAKE_SLURM_NEW_STATE says so, end at once) until scancel."""
import json, os, re, sys
from pathlib import Path

root = Path(os.environ["FAKE_SLURM"])
state_file = root / "jobs.json"
jobs = json.loads(state_file.read_text()) if state_file.exists() else {{}}
command, args = Path(sys.argv[0]).name, sys.argv[1:]
with open(root / "calls.log", "a") as log:
    log.write(command + " " + " ".join(args) + "\n")
if command == "sbatch":
    text = Path(args[-1]).read_text()
    job_id = str(len(jobs) + 1)
    name = re.search(r"--job-name=(\S+)", text).group(1)
    comment = re.search(r"--comment=(\S+)", text).group(1)
    jobs[job_id] = {{"name": name, "comment": comment, "state": os.environ.get("FAKE_SLURM_NEW_STATE", "RUNNING")}}
    print(job_id)
elif command == "scontrol":
    job = jobs.get(args[-1])
    if job is None:
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
        sys.exit(1)
    print(f"JobId={{args[-1]}} JobName={{job['name']}} JobState={{job['state']}} Reason=None ExitCode=0:0 BatchHost=n1")
elif command == "scancel":
    jobs[args[-1]]["state"] = "CANCELLED"
elif command == "squeue":
    for job_id, job in jobs.items():
        if job["state"] in ("PENDING", "RUNNING"):
            print(f"{{job_id}}|{{job['name']}}|{{job['comment']}}|{{job['state']}}")
state_file.write_text(json.dumps(jobs))
'''


def test_a_resumed_slurm_run_cancels_the_job_its_killed_attempt_left_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, state = tmp_path / "bin", tmp_path / "slurm"
    bin_dir.mkdir()
    state.mkdir()
    for name in ("sbatch", "scontrol", "squeue", "scancel"):
        (bin_dir / name).write_text(FAKE_SLURM.format(python=sys.executable))
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM", str(state))
    monkeypatch.setenv("HARNESS_SLURM_RUNTIME", "podman")  # no venv to prepare: the fake never runs the script
    results = tmp_path / "results"
    # The first attempt: its job is running when the harness is killed (SIGKILL: nothing is cancelled).
    first = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--suite", "fault", "-f", "numpy", "-p", "mode=hang",
         "--backend", "slurm", "--results-dir", str(results), "-q"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "scontrol" not in ((state / "calls.log").read_text() if (state / "calls.log").exists() else ""):
            assert time.monotonic() < deadline and first.poll() is None, "the first attempt never submitted its job"
            time.sleep(0.1)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    (run,) = [folder for folder in results.iterdir() if (folder / "plan.json").is_file()]
    assert read(state / "jobs.json")["1"]["state"] == "RUNNING"  # orphaned
    monkeypatch.setenv("FAKE_SLURM_NEW_STATE", "COMPLETED")
    resumed = harness("run", "--resume", run.name, "--backend", "slurm", "--results-dir", str(results))
    calls = [line.split()[0] for line in (state / "calls.log").read_text().splitlines()]
    assert calls.count("sbatch") == 2 and "scancel" in calls, calls
    second_submission = len(calls) - 1 - calls[::-1].index("sbatch")
    assert calls.index("scancel") < second_submission  # cancelled before the job is submitted again
    jobs = read(state / "jobs.json")
    assert jobs["1"]["state"] == "CANCELLED" and jobs["2"]["state"] == "COMPLETED"
    assert "Slurm job 1 (numpy) from an earlier attempt of run" in resumed.stderr, resumed.stderr
    assert "was still RUNNING: cancelled it (scancel) before submitting again" in resumed.stderr
