"""The slurm path without a cluster: batch script text, Slurm states -> statuses, the wait loop, export."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from harness.backends.base import CHOICES, FACTORIES, BackendOptions, Limits, make_backend
from harness.backends.slurm import backend as slurm_backend
from harness.backends.slurm import control
from harness.backends.slurm.export import ended_by
from harness.backends.slurm.script import (
    Layout,
    Stack,
    batch_script,
    job_spec_for,
    prepare_script,
    time_minutes,
)
from harness.backends.slurm.settings import SlurmSettings, from_environment, parse_sbatch_options
from harness.cli.options import BackendName
from harness.core.errors import HarnessError
from harness.core.schema import load_result
from harness.execute.runner import execute
from harness.store.images import variant_for
from harness.store.plan import BACKENDS, Job, PlanRequest, make_plan
from suites.contract.result import STATUSES
from tests.conftest import harness, read

RUN_ID = "20260101-000000-xla-abcd"
# What this machine's Slurm 22.05 printed for a finished job (`scontrol show job -o 1`), shortened.
SCONTROL = (
    "JobId=1 JobName=t.sh UserId=root(0) GroupId=root(0) JobState=COMPLETED Reason=None Dependency=(null) "
    "Requeue=1 Restarts=0 BatchFlag=1 ExitCode=0:0 RunTime=00:00:02 TimeLimit=00:01:00 NodeList=vm BatchHost=vm "
    "NumNodes=1 NumCPUs=2 NumTasks=1 TRES=cpu=2,node=1,billing=2 Command=/tmp/t.sh StdErr=/tmp/t.out"
)


def job(**changes: object) -> Job:
    plan = make_plan(
        PlanRequest(suite="xla", frameworks="numpy", params=("matrix_size=64",), repeat=3, timeout_s=5), backend="slurm"
    )
    return replace(plan.jobs[0], **changes)  # type: ignore[arg-type]


def layout(data: str | None = None) -> Layout:
    return Layout(code="/repo", out="'/runs/r 1/.jobs/numpy-1'", lock="/repo/lock.txt", envs="/envs", data=data)


def script(runtime: str = "venv", the_job: Job | None = None, **settings: object) -> str:
    chosen = SlurmSettings(runtime=runtime, **settings)  # type: ignore[arg-type]
    the_job = the_job or job()
    stack = Stack.of("numpy", variant_for(the_job.device))
    return batch_script(the_job, RUN_ID, stack, layout(the_job.data_dir), chosen, Limits())


def bash_parses(text: str) -> None:
    proc = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def sbatch_lines(text: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH ")]


# -- the batch script ----------------------------------------------------------------------------


def test_venv_script_owns_a_node_for_the_job_time_limit_and_runs_the_common_job_command() -> None:
    text = script()
    bash_parses(text)
    assert sbatch_lines(text) == [
        "--job-name=fw-harness-numpy",
        f"--comment=fw-harness:{RUN_ID}",
        "--nodes=1",
        "--ntasks=1",
        "--exclusive",
        "--mem=0",
        "--time=2",  # 5 s + the 60 s margin, rounded up to whole minutes
        "--export=PATH",
    ]
    lock_hash = Stack.of("numpy", "cpu").lock_hash
    assert f'echo "{lock_hash}  $lock" | sha256sum -c --status' in text  # the lock is checked, not trusted
    assert 'pip install --require-hashes --only-binary=:all: -r "$lock"' in text
    assert f"env_dir=/envs/numpy-cpu-{lock_hash[:12]}" in text
    command = text.splitlines()[-1]
    assert command.startswith('env -i PATH="$PATH" HOME="$scratch" TMPDIR="$scratch" PYTHONPATH="$code" ')
    assert command.endswith('"$env_dir/bin/python" -m suites run --job job.json')  # job.json in "$out"
    assert "out='/runs/r 1/.jobs/numpy-1'" in text and 'cd "$out" || exit 1' in text
    spec = job_spec_for(job(), RUN_ID, "venv", layout("/data/sets"))
    assert (spec.run_id, spec.backend, spec.result_path, spec.data_dir) == (RUN_ID, "slurm", "numpy.json", "/data/sets")
    assert (spec.suite, spec.framework, spec.params["matrix_size"], spec.repeat) == ("xla", "numpy", 64, 3)


@pytest.mark.parametrize(("timeout", "minutes"), [(0.5, 2), (5, 2), (1800, 31), (7 * 24 * 3600.0, 10081)])
def test_time_limit_is_the_job_timeout_rounded_up_to_minutes_plus_a_margin(timeout: float, minutes: int) -> None:
    assert time_minutes(timeout) == minutes


def test_gpus_memory_cpus_and_extra_options_become_sbatch_options() -> None:
    gpu = job(device="gpu")
    assert "--gres=gpu:1" in sbatch_lines(script(the_job=gpu))  # all: --exclusive then gives every GPU
    assert "--gpus=2" in sbatch_lines(script(the_job=gpu, gpus="2"))
    assert not any("gpu" in line for line in sbatch_lines(script()))
    extra = parse_sbatch_options("--partition=gpu '--comment=my proj'", "--sbatch")
    text = batch_script(job(), RUN_ID, Stack.of("numpy", "cpu"), layout(), SlurmSettings(sbatch_options=extra),
                        Limits(memory_bytes=3 * 2**30, cpus=1.5))  # fmt: skip
    lines = sbatch_lines(text)
    assert "--mem=3072M" in lines and "--cpus-per-task=2" in lines
    assert lines[-2:] == ["--partition=gpu", "'--comment=my proj'"]  # sbatch reads the quotes (tried here)
    bash_parses(text)


@pytest.mark.parametrize("bad", ["--output=x", "-o x", "--wrap=ls", "partition=gpu", "--array=1-3", "'--x", "-A a"])
def test_options_the_harness_owns_or_that_are_not_options_are_refused(bad: str) -> None:
    with pytest.raises(HarnessError):
        parse_sbatch_options(bad, "HARNESS_SLURM_OPTIONS")


def test_apptainer_runs_the_stack_image_contained_with_only_three_folders_bound() -> None:
    gpu = job(device="gpu")
    text = script("apptainer", the_job=gpu, images="/shared/sif")
    bash_parses(text)
    stack = Stack("numpy", "cuda12", Stack.of("numpy", "cuda12").lock_hash)
    assert f"image=/shared/sif/{stack.name}.sif" in text
    assert '[ -f "$image" ]' in text
    command = text.splitlines()[-1]
    assert command.startswith('"$cli" exec --containall --no-home --cleanenv --pwd /opt/harness ')
    assert '--bind "$code/suites:/opt/harness/suites:ro" --bind "$out:/results"' in command
    assert "--env PYTHONPATH=/opt/harness --env PYTHONUNBUFFERED=1 --nv" in command
    # Slurm's GPU list reaches the --cleanenv container through APPTAINERENV_ (--env would split "0,1" at the comma).
    assert text.splitlines()[-2] == (
        '[ -z "${CUDA_VISIBLE_DEVICES+x}" ] || export APPTAINERENV_CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES" '
        'SINGULARITYENV_CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"'
    )
    assert "--env CUDA_VISIBLE_DEVICES" not in command and '--env "CUDA_VISIBLE_DEVICES' not in command
    assert command.endswith('"$image" python -m suites run --job /results/job.json')
    spec = job_spec_for(gpu, RUN_ID, "apptainer", layout())
    assert (spec.result_path, spec.data_dir, spec.cache_dir) == ("/results/numpy.json", None, None)  # no data folder
    registry = script("apptainer", images="docker://registry.example/team")
    assert f"image=docker://registry.example/team/{Stack.of('numpy', 'cpu').tag}" in registry
    assert '[ -f "$image" ]' not in registry and "--nv" not in registry


def test_apptainer_without_images_is_refused() -> None:
    with pytest.raises(HarnessError, match="HARNESS_SLURM_IMAGES"):
        script("apptainer")


def test_podman_gets_the_docker_backends_isolation() -> None:
    text = script("podman", the_job=job(device="gpu", data_dir="/data/sets"))
    bash_parses(text)
    command = text.splitlines()[-1]
    for part in ("run --rm", "--pull=never", "--network=none", "--read-only", "--cap-drop=all",
                 "--security-opt=no-new-privileges", "--pids-limit=4096", "--init", '"$userns"',
                 '-v "$code/suites:/opt/harness/suites:ro" -v "$out:/results" -v "$data:/data:ro"',
                 "-w /opt/harness", "--device nvidia.com/gpu=all",
                 f"{Stack.of('numpy', 'cuda12').tag} python -m suites run --job /results/job.json"):  # fmt: skip
        assert part in command, part
    assert "data=/data/sets" in text
    assert job_spec_for(job(data_dir="/data/sets"), RUN_ID, "podman", layout("/data/sets")).data_dir == "/data"
    pulled = script("podman", images="registry.example/x")
    assert "--pull=missing" in pulled and f"registry.example/x/{Stack.of('numpy', 'cpu').tag} python" in pulled


def test_prepare_script_builds_the_venv_only_from_the_given_wheels() -> None:
    settings = SlurmSettings(wheelhouse="/media/wheels", find_links=("/opt/wheels",), python="/usr/bin/python3.11")
    text = prepare_script(Stack.of("pytorch", "cpu"), layout(), settings)
    bash_parses(text)
    assert text.rstrip().endswith("ensure_env")
    assert '--no-index --find-links /media/wheels --find-links /opt/wheels -r "$lock"' in text
    assert "/usr/bin/python3.11 -m venv" in text


def test_settings_come_from_the_environment_and_default_to_a_venv() -> None:
    settings = from_environment({"HARNESS_SLURM_OPTIONS": "--partition=debug", "HARNESS_FIND_LINKS": "/opt/wheels"})
    assert settings.runtime == "venv" and settings.sbatch_options == ("--partition=debug",)
    assert settings.find_links == ("/opt/wheels",)
    with pytest.raises(HarnessError, match="HARNESS_SLURM_RUNTIME"):
        from_environment({"HARNESS_SLURM_RUNTIME": "docker"})
    with pytest.raises(HarnessError, match="--gpus"):
        from_environment({}, gpus="device=0,1")


# -- Slurm's states -> statuses ------------------------------------------------------------------


def test_scontrol_and_sacct_lines_are_read() -> None:
    assert control.parse_scontrol(SCONTROL) == control.JobState("COMPLETED", 0, 0, "", "vm")
    assert control.parse_scontrol("slurm_load_jobs error: Invalid job id specified") is None
    assert control.parse_sacct("CANCELLED by 0|0:15|None|vm\n") == control.JobState("CANCELLED", 0, 15, "", "vm")
    assert control.parse_sacct("") is None


@pytest.mark.parametrize(
    ("state", "stopped", "expected"),
    [
        (control.JobState("COMPLETED", 0, 0), False, control.Ending(0)),
        (control.JobState("FAILED", 1, 0), False, control.Ending(1)),
        (control.JobState("FAILED", 0, 6), False, control.Ending(-6)),
        (control.JobState("CANCELLED", 0, 15), True, control.Ending(-15, timed_out=True)),
        (control.JobState("OUT_OF_MEMORY", 0, 9), False, control.Ending(-9, oom=True)),
        (control.JobState("CANCELLED", 143, 0), False,
         control.Ending(143, status="cancelled", reason="Slurm job 7 was cancelled (scancel) while it ran")),
        (control.JobState("TIMEOUT", 0, 15), False,
         control.Ending(-15, status="timeout", reason="Slurm ended job 7 at its time limit (sbatch --time)")),
        (control.JobState("NODE_FAIL", 0, 0, "NodeDown"), False,
         control.Ending(0, status="failed", reason="Slurm ended job 7 as NODE_FAIL (NodeDown)")),
    ],
)  # fmt: skip
def test_a_final_state_means_one_status(state: control.JobState, stopped: bool, expected: control.Ending) -> None:
    assert control.ending("7", state, stopped_for_timeout=stopped) == expected


def test_cancelled_is_a_status_everywhere() -> None:
    assert "cancelled" in STATUSES
    assert "slurm" in BACKENDS and "slurm" in FACTORIES and "slurm" in CHOICES
    assert BackendName("slurm").value == "slurm"


def test_slurmstepd_lines_in_an_exported_jobs_stderr_name_what_ended_it() -> None:
    # Both lines as this machine's slurmstepd wrote them.
    timeout = "slurmstepd-vm: error: *** JOB 7 ON vm CANCELLED AT 2026-11-23T18:51:18 DUE TO TIME LIMIT ***\n"
    cancel = "slurmstepd-vm: error: *** JOB 5 ON vm CANCELLED AT 2026-11-23T18:49:47 ***\nTerminated\n"
    assert ended_by(timeout) == ("timeout", "Slurm ended job 7 at its time limit (sbatch --time)")
    assert ended_by(cancel) == ("cancelled", "Slurm job 5 was cancelled (scancel) while it ran")
    assert ended_by("*** JOB 9 ON n1 CANCELLED AT 2026-01-01T00:00:00 DUE TO NODE FAILURE ***")[0] == "failed"  # type: ignore[index]
    assert ended_by("Traceback ...") is None


# -- the wait loop, against a scripted scheduler ---------------------------------------------------


class FakeSlurm:
    """sbatch/scontrol/scancel stand-ins: the job runs until cancelled, or ends as `final`."""

    def __init__(self, final: control.JobState | None = None, polls_running: int = 1000, unanswered: int = 0) -> None:
        self.final, self.polls_running, self.cancelled, self.unanswered = final, polls_running, False, unanswered
        self.scripts: list[str] = []

    def submit(self, script: str, args: list[str]) -> str:
        self.scripts.append(Path(script).read_text())
        return "42"

    def query(self, job_id: str) -> control.JobState:
        if self.unanswered > 0:  # slurmctld busy: scontrol fails, the job runs on
            self.unanswered -= 1
            raise HarnessError("scontrol show job 42 failed: Socket timed out on send/recv operation")
        if self.cancelled:
            return control.JobState("CANCELLED", 0, 15, "", "n1")
        self.polls_running -= 1
        if self.polls_running < 0 and self.final is not None:
            return self.final
        return (
            control.JobState("PENDING", reason="Resources") if self.polls_running > 998 else control.JobState("RUNNING")
        )

    def cancel(self, job_id: str) -> None:
        self.cancelled = True


def fake_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake: FakeSlurm, timeout: float) -> dict[str, object]:
    monkeypatch.setattr(control, "require_slurm", lambda: None)
    for name in ("submit", "query", "cancel"):
        monkeypatch.setattr(control, name, getattr(fake, name))
    monkeypatch.setattr(slurm_backend, "POLL_FIRST_S", 0.01)
    monkeypatch.setattr(slurm_backend, "POLL_MAX_S", 0.01)
    plan = make_plan(
        PlanRequest(suite="fault", frameworks="numpy", params=("mode=hang",), timeout_s=timeout), backend="slurm"
    )
    # podman: no venv to prepare; the fake never runs the script anyway.
    backend = slurm_backend.SlurmBackend(SlurmSettings(runtime="podman"), echo=False)
    run_dir = execute(plan, backend, tmp_path / "results")
    doc = load_result(run_dir / "numpy.json")
    assert (run_dir / "logs" / "numpy.sbatch.sh").read_text() == fake.scripts[0]
    assert not (run_dir / ".jobs").exists()
    return dict(doc)


def test_the_harness_cancels_a_job_that_runs_past_its_timeout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeSlurm()
    doc = fake_run(monkeypatch, tmp_path, fake, timeout=0.2)
    assert fake.cancelled and doc["status"] == "timeout"
    launch = doc["environment"]["launch"]  # type: ignore[index]
    assert launch["slurm"] == {"runtime": "podman", "job_id": "42", "state": "CANCELLED", "node": "n1"}
    assert doc["image"]["lock_hash"] == Stack.of("numpy", "cpu").lock_hash  # type: ignore[index]


def test_a_job_cancelled_by_someone_else_is_cancelled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeSlurm(final=control.JobState("CANCELLED", 0, 15), polls_running=3)
    doc = fake_run(monkeypatch, tmp_path, fake, timeout=60)
    assert not fake.cancelled
    assert (doc["status"], doc["reason"]) == ("cancelled", "Slurm job 42 was cancelled (scancel) while it ran")


def test_unanswered_polls_are_waited_out_not_taken_for_an_end(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeSlurm(final=control.JobState("FAILED", 3, 0), polls_running=2, unanswered=3)
    doc = fake_run(monkeypatch, tmp_path, fake, timeout=60)
    assert (doc["status"], doc["reason"]) == ("failed", "exited with code 3 without writing a result")


def test_make_backend_refuses_local_interpreters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "require_slurm", lambda: None)
    with pytest.raises(HarnessError, match="--python"):
        make_backend("slurm", BackendOptions(pythons={"numpy": "/usr/bin/python3"}))


def test_without_sbatch_the_backend_says_where_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(HarnessError, match="sbatch, scontrol, scancel not on PATH"):
        control.require_slurm()


# -- export slurm ----------------------------------------------------------------------------------


def export(tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "export"
    proc = harness("export", "slurm", "--suite", "xla", "--frameworks", "numpy,pytorch", "--param", "matrix_size=16",
                   "--repeat", "2", "--out", str(out), *extra)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def test_export_writes_a_self_contained_folder(tmp_path: Path) -> None:
    out = export(tmp_path, "--sbatch", "--partition=cpu", "--find-links", "/opt/wheels")
    names = sorted(p.name for p in out.iterdir())
    assert names == ["code", "job-numpy.sh", "job-pytorch.sh", "jobs", "locks", "logs", "plan.json",
                     "prepare-numpy-cpu.sh", "prepare-pytorch-cpu.sh", "submit.sh"]  # fmt: skip
    for name in names:
        if name.endswith(".sh"):
            bash_parses((out / name).read_text())
    numpy = (out / "job-numpy.sh").read_text()
    assert "--output=logs/numpy.stdout.log" in sbatch_lines(numpy) and "--partition=cpu" in sbatch_lines(numpy)
    assert 'root="${SLURM_SUBMIT_DIR:?' in numpy and 'out="$root"/jobs/numpy' in numpy
    spec = read(out / "jobs" / "numpy" / "job.json")  # the job's whole spec, waiting in its folder
    assert (spec["framework"], spec["repeat"], spec["result_path"], spec["backend"]) == (
        "numpy",
        2,
        "numpy.json",
        "slurm",
    )
    assert "--find-links /opt/wheels" in (out / "prepare-pytorch-cpu.sh").read_text()
    assert (out / "code" / "suites" / "__main__.py").is_file() and not list(out.rglob("__pycache__"))
    assert (out / "locks" / "numpy-cpu.txt").read_bytes() == Stack.of("numpy", "cpu").lock_file.read_bytes()
    plan = read(out / "plan.json")
    assert plan["backend"] == "slurm" and plan["slurm"]["runtime"] == "venv"
    assert "sbatch --parsable ${previous:+--dependency=afterany:$previous}" in (out / "submit.sh").read_text()
    again = harness("export", "slurm", "--suite", "xla", "--out", str(out))
    assert again.returncode == 2 and "not an empty folder" in again.stderr


def test_export_refuses_bad_options_in_one_line(tmp_path: Path) -> None:
    for args in (["--runtime", "docker"], ["--gpus", "2"], ["--sbatch", "--output=x"], ["--data-dir", "rel"]):
        proc = harness("export", "slurm", "--suite", "xla", "--out", str(tmp_path / "x"), *args)
        assert proc.returncode == 2, args
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_collect_names_what_slurm_did_to_exported_jobs(tmp_path: Path) -> None:
    out = export(tmp_path)
    # As a cluster leaves it: numpy hit its time limit, pytorch was cancelled; neither wrote a result.
    (out / "logs" / "numpy.stderr.log").write_text(
        "*** JOB 3 ON n1 CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME LIMIT ***\n"
    )
    (out / "logs" / "pytorch.stderr.log").write_text("*** JOB 4 ON n1 CANCELLED AT 2026-01-01T00:00:09 ***\n")
    proc = harness("collect", str(out), "--results-dir", str(tmp_path / "results"))
    assert proc.returncode == 0, proc.stderr
    run = next((tmp_path / "results").iterdir())
    summary = read(run / "summary.json")
    assert summary["backend"] == "slurm"
    assert [(j["framework"], j["status"]) for j in summary["jobs"]] == [("numpy", "timeout"), ("pytorch", "cancelled")]
    numpy = load_result(run / "numpy.json")
    assert numpy["image"]["lock_hash"] == Stack.of("numpy", "cpu").lock_hash  # type: ignore[index]
    assert "TIME LIMIT" in (numpy["stderr_tail"] or "")
    assert json.loads((run / "plan.json").read_text())["backend"] == "slurm"


def test_collect_never_rewrites_an_existing_run(tmp_path: Path) -> None:
    """An export whose plan names a run id that exists (a second collect, or a planted plan.json)
    is refused, naming the run; the existing run's files are untouched."""
    out = export(tmp_path)
    (out / "logs" / "numpy.stderr.log").write_text("Traceback: the job died\n")  # a job ran: there is a run to collect
    results = tmp_path / "results"
    assert harness("collect", str(out), "--results-dir", str(results)).returncode == 0
    run = next(results.iterdir())
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    again = harness("collect", str(out), "--results-dir", str(results))
    assert again.returncode == 2 and f"run {run.name} already exists" in again.stderr, again.stderr
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
