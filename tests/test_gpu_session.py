"""The GPU session's rehearsal (issue 35): benchmarks/gpu_session.py end to end, here, on the CPU.

A Python 3.12 environment holds nothing the GPU machine's Python lacks (benchmarks/gpu_machine_packages.txt:
its frameworks' CPU builds and the host packages it carries; no torch: PyPI has no CPU build of it for
3.12), the host wheels are downloaded as the session's first step does, and the script runs every step
at its tiny size on the CPU. It fails where the GPU machine would: a host dependency missing from the
wheels stops the session before any step, in one line naming it.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from benchmarks import gpu_session
from harness.store.run_folder import load_run
from tests.conftest import REPO

BUILD = REPO / "build" / "gpu-rehearsal"  # ignored; kept between runs (the environment takes a minute)
MACHINE = REPO / "benchmarks" / "gpu_machine_packages.txt"
# Installed from PyPI into the rehearsal environment: the frameworks' CPU builds and the host packages the
# machine has (no torch: PyPI has no CPU build of it for 3.12). Whatever they pull in that the machine
# does not have (pydantic, which a newer typer needs) is removed again.
INSTALL = ("numpy", "scipy", "jax", "flax", "optax", "typer", "rich", "pyyaml", "tabulate", "packaging",
           "nvidia-ml-py", "requests", "urllib3", "typing-extensions", "threadpoolctl")  # fmt: skip


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).hexdigest()[:12]


def machine_packages() -> set[str]:
    lines = MACHINE.read_text(encoding="utf-8").splitlines()
    return {gpu_session.canonical(line.strip()) for line in lines if line.strip() and not line.startswith("#")}


def python312() -> str:
    """The GPU machine's Python: python3.12 on PATH, or pyenv's (its shim answers only when selected)."""
    candidates = [
        shutil.which("python3.12"),
        *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12"))),
    ]
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
                               capture_output=True, text=True)  # fmt: skip
        if probe.stdout.strip() == "True":
            return candidate
    raise AssertionError("the rehearsal needs Python 3.12 (the GPU machine's): `pyenv install 3.12` here")


@pytest.fixture(scope="module")
def machine_python() -> Path:
    """A Python 3.12 venv holding INSTALL, less whatever the GPU machine does not have."""
    venv = BUILD / f"venv-{_key(INSTALL, MACHINE.read_text())}"
    python = venv / "bin" / "python"
    if not (venv / "ready").is_file():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([python312(), "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *INSTALL], check=True, timeout=1200)
        listed = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], check=True,
                                capture_output=True, text=True).stdout  # fmt: skip
        have = machine_packages()
        extra = sorted(p["name"] for p in json.loads(listed) if gpu_session.canonical(p["name"]) not in have)
        if extra:
            subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", *extra], check=True)
        (venv / "ready").write_text("removed: " + " ".join(extra))
    return python


@pytest.fixture(scope="module")
def wheels() -> Path:
    folder = BUILD / f"wheels-{_key(gpu_session.host_requirements())}"
    if not (folder / "ready").is_file():
        shutil.rmtree(folder, ignore_errors=True)
        proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_session.py"), "wheels", str(folder)],
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        (folder / "ready").write_text("")
    return folder


def session(python: Path, wheels: Path, out: Path, *more: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(python), str(REPO / "benchmarks" / "gpu_session.py"), "run", str(out), "--wheels", str(wheels)]
    return subprocess.run([*cmd, *more], capture_output=True, text=True, timeout=1200)


@pytest.mark.slow
def test_a_wheel_folder_without_a_host_dependency_stops_the_session_in_one_line(
    machine_python: Path, wheels: Path, tmp_path: Path
) -> None:
    """What docs/gpu.md's old wheel list would have done on the GPU machine: no pydantic."""
    pruned = tmp_path / "wheels"
    pruned.mkdir()
    for wheel in wheels.glob("*.whl"):
        if gpu_session.wheel_name(wheel) != "pydantic":
            shutil.copy(wheel, pruned)
    proc = session(machine_python, pruned, tmp_path / "out", "--device", "cpu", "--size", "tiny")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "pydantic" in proc.stderr, proc.stderr
    assert not list((tmp_path / "out").glob("*.tar.gz"))  # nothing ran


@pytest.mark.slow
def test_the_rehearsal_runs_every_step_and_brings_back_valid_runs(
    machine_python: Path, wheels: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = session(machine_python, wheels, out, "--device", "cpu", "--size", "tiny", "--budget", "1200")
    summary = json.loads((out / "session.json").read_text())
    assert proc.returncode == 0, json.dumps(summary["steps"], indent=1) + proc.stderr[-3000:]
    # what the machine lacks came from the wheels; what it has (its frameworks' dependencies) was left alone
    assert {"pydantic", "docker"} <= set(summary["installed"]), summary["installed"]
    assert not set(summary["installed"]) & {"numpy", "jax", "typer", "typing-extensions"}, summary["installed"]
    assert [s["step"] for s in summary["steps"]] == [name for name, _, _ in gpu_session.STEPS]
    came_back = sorted(p.name for p in out.iterdir())
    assert len(came_back) <= 8 and all(p.stat().st_size < gpu_session.PART for p in out.iterdir()), came_back
    unpacked = tmp_path / "unpacked"
    runs = 0
    for step in summary["steps"]:
        assert step["exit_codes"] and all(code in (0, 3) for code in step["exit_codes"]), step
        with tarfile.open(out / step["archive"]) as tar:
            tar.extractall(unpacked, filter="data")
        for plan in (unpacked / step["archive"].removesuffix(".tar.gz")).rglob("plan.json"):
            run = load_run(plan.parent)  # validated as `harness show` reads it
            assert run.results and all(r["status"] == "ok" for r in run.results.values()), plan.parent
            runs += 1
    # selftest's 2 suites, xla, mnist fp32 and bf16, gpt, resnet18, gpt generate, resnet18 infer, jit, pc
    assert runs >= 10
    # The ceilings come first, and the selftest judges against them instead of calibrating again.
    logs = {step["step"]: (unpacked / step["archive"].removesuffix(".tar.gz") / "step.log").read_text()
            for step in summary["steps"]}  # fmt: skip
    assert "calibrating this machine" in logs["calibrate"], logs["calibrate"][-2000:]
    assert "calibrating this machine" not in logs["selftest"], logs["selftest"][-2000:]
    log = (out / "session.log").read_text()
    assert "nvidia-smi" in log and "build info jax" in log and "session:" in log


def test_a_step_past_its_time_is_interrupted_as_ctrl_c_and_keeps_what_it_wrote(tmp_path: Path) -> None:
    """The budget's guard: SIGINT first (the harness stops and keeps what finished), exit code kept."""
    script = (
        "import signal, sys, time\n"
        "def stop(*_):\n    print('interrupted: stopping', flush=True); sys.exit(130)\n"
        "signal.signal(signal.SIGINT, stop)\nprint('started', flush=True)\ntime.sleep(60)\n"
    )
    log = tmp_path / "step.log"
    code, cut = gpu_session.run_timed([sys.executable, "-c", script], dict(os.environ), log, 2.0)
    assert (code, cut) == (130, True)
    assert "started" in log.read_text() and "interrupted: stopping" in log.read_text()
    code, cut = gpu_session.run_timed([sys.executable, "-c", "print('quick')"], dict(os.environ), log, 30.0)
    assert (code, cut) == (0, False)


def test_an_archive_keeps_the_results_whole_and_the_end_of_a_long_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = tmp_path / "steps" / "03-xla"
    (step / "results" / "run-1" / "logs").mkdir(parents=True)
    (step / "results" / "run-1" / "jax.json").write_text('{"a": 1}')
    (step / "results" / "run-1" / "logs" / "jax.stdout.log").write_bytes(b"x" * 5000 + b"THE END")
    monkeypatch.setattr(gpu_session, "KEPT_LOG", 1000)
    size = gpu_session.pack(step, tmp_path / "03-xla.tar.gz")
    with tarfile.open(tmp_path / "03-xla.tar.gz") as tar:
        names = tar.getnames()
        tail = tar.extractfile("03-xla/results/run-1/logs/jax.stdout.log.tail")
        assert tail is not None and tail.read() == (b"x" * 5000 + b"THE END")[-1000:]
        assert "03-xla/results/run-1/jax.json" in names
    assert size == (tmp_path / "03-xla.tar.gz").stat().st_size
    monkeypatch.setattr(gpu_session, "PART", size - 1)  # too large even so: the logs go, the results stay
    gpu_session.pack(step, tmp_path / "again.tar.gz")
    with tarfile.open(tmp_path / "again.tar.gz") as tar:
        assert tar.getnames() == ["03-xla/results/run-1/jax.json"]


def test_a_budget_out_of_range_and_a_missing_wheel_folder_are_one_line(tmp_path: Path) -> None:
    for args, says in (
        (["run", str(tmp_path / "out"), "--wheels", str(tmp_path), "--budget", "5"], "--budget 5 is outside"),
        (["run", str(tmp_path / "out"), "--wheels", str(tmp_path / "none")], "no wheels in"),
        (["run", str(tmp_path / "out"), "--wheels", str(tmp_path), "--steps", "xla,nope"], "name each step once"),
        (["run", str(tmp_path / "out"), "--wheels", str(tmp_path), "--steps", "xla,xla"], "name each step once"),
    ):
        proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_session.py"), *args],
                              capture_output=True, text=True)  # fmt: skip
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr


@pytest.mark.parametrize("size", gpu_session.SIZES)
def test_every_run_step_is_a_plan_the_harness_accepts_on_a_gpu(size: str, tmp_path: Path) -> None:
    """A typo in a step's parameters must cost nothing on the GPU machine: each `run` plans here."""
    for name, wants, sizes in gpu_session.STEPS:
        frameworks = [fw for fw in wants if fw != "numpy"]
        for args in sizes[size]:
            if args[0] != "run":
                continue
            cmd = gpu_session.command(args, "gpu", frameworks, tmp_path / "results")
            proc = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True, cwd=REPO)
            assert proc.returncode == 0, (name, proc.stderr[-2000:])


def test_the_data_parallel_runs_are_not_applicable_on_a_one_gpu_machine(tmp_path: Path) -> None:
    """The machine the GPU sessions get is often one GPU: a 2-GPU run says so instead of failing; the
    runs ride in an existing step, since at most 8 files come back from the device machine."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-x)'\n")
    fake.chmod(0o755)
    gpus = gpu_session.gpu_count({**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert gpus == 1
    ranked = next(args for args in gpu_session.STEPS[3][2]["full"] if "devices=2" in args)
    assert "needs 2" in (gpu_session.not_applicable(ranked, "gpu", gpus) or "")
    assert gpu_session.not_applicable(ranked, "gpu", 8) is None
    assert gpu_session.not_applicable(ranked, "cpu", 0) is None  # the CPU rehearsal runs it on two processes
    assert gpu_session.not_applicable(["run", "--suite", "xla"], "gpu", 1) is None
    assert gpu_session.gpu_count({**os.environ, "PATH": str(tmp_path / "none")}) == 0
    assert len(gpu_session.STEPS) + 2 <= 8  # one archive a step, session.json, session.log
