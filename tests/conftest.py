from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent

# `harness run` defaults to --backend auto (docker when an engine answers). Tests run jobs
# locally unless they say otherwise; the Docker tests (tests/integration) pass --backend docker.
os.environ.setdefault("HARNESS_BACKEND", "local")
# Each test has its own cache home (below), so automatic calibration (once per machine fingerprint
# and cache home) would run in every test; tests/test_calibration.py covers it on purpose.
os.environ.setdefault("HARNESS_CALIBRATE", "never")
# Never the real ~/.cache/harness, not even in session fixtures (which start before the per-test
# home below is set): one throw-away home for them, replaced by a fresh one in every test.
_SESSION_CACHE_HOME = tempfile.mkdtemp(prefix="harness-test-cache-home-")
atexit.register(shutil.rmtree, _SESSION_CACHE_HOME, ignore_errors=True)
os.environ["HARNESS_CACHE_HOME"] = _SESSION_CACHE_HOME
# A shell without job control starts a background command (`... &`, nohup) with SIGINT ignored, and
# every CLI started under test would inherit that: the Ctrl-C tests would then measure the shell, not
# the harness. A handler (unlike an ignore) is reset to the default in an exec'd child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def own_cache_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Machine-wide state (calibration, venvs, compile caches) of every test in a folder of its own:
    the suite never reads or writes the real ~/.cache/harness (the CLI in a subprocess inherits it)."""
    home = tmp_path_factory.mktemp("cache-home")
    monkeypatch.setenv("HARNESS_CACHE_HOME", str(home))
    return home


def harness(
    *args: str, cwd: Path | None = None, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess, as a user runs it; `env`: variables set on top of this environment."""
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def finished(proc: subprocess.CompletedProcess[str]) -> bool:
    """A `run` (or `reproduce`) that finished as it should: exit 0, or DISTURBED (3): measured, but
    this test machine was busy, and nothing else was wrong. A failed job or gate is 1 and never
    passes here, however busy the machine was. Callers check the jobs' statuses."""
    from harness.judge.assessment import DISTURBED  # imported late: the cache home above is set first

    return proc.returncode in (0, DISTURBED)


def run_folder(stdout: str) -> Path:
    for line in stdout.splitlines():
        if line.startswith("run folder: "):
            return Path(line.removeprefix("run folder: ").strip())
    raise AssertionError(f"no run folder printed in:\n{stdout}")


# What a suite's own test reads from the shared smoke run beyond the smoke size: written after training,
# so the conformance test's timed metrics and checks are the plain smoke run's.
SMOKE_EXTRA: dict[str, tuple[str, ...]] = {
    "mnist": ("--param", "artifacts=true"),  # tests/test_suite_mnist.py: the model summary and the step's IR
    "cifar10": ("--param", "artifacts=true"),  # tests/test_suite_cifar10.py: the model summary
}


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], subprocess.CompletedProcess[str]]:
    """`harness run --smoke` of a suite on all its frameworks (one thread, local), run once per test session:
    the conformance test and a suite's own test read the same run instead of training the same model twice."""
    folder = tmp_path_factory.mktemp("smoke-runs")
    done: dict[str, subprocess.CompletedProcess[str]] = {}

    def run(name: str) -> subprocess.CompletedProcess[str]:
        if name not in done:
            from suites.contract.registry import all_suites

            frameworks = ",".join(all_suites()[name].all_frameworks)
            # --profile: every suite's profiles too, checked by tests/test_conformance.py (taken after the
            # samples, so the timed numbers the other tests read are the plain smoke run's).
            done[name] = harness("run", "--suite", name, "--frameworks", frameworks, "--smoke", "--backend", "local",
                                 "--threads", "1", "-q", "--profile", *SMOKE_EXTRA.get(name, ()),
                                 "--results-dir", str(folder / name))  # fmt: skip
        return done[name]

    return run


@dataclass(frozen=True)
class Calibrated:
    home: Path  # a cache home holding this machine's calibration of numpy, jax and pytorch
    proc: subprocess.CompletedProcess[str]  # the `harness calibrate` that measured it


@pytest.fixture(scope="session")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> Calibrated:
    """One real `harness calibrate --smoke` (every CPU stack, local) a test session: the full size spends
    50 s of CI's 2 cores, most of it on PyTorch's bfloat16 products at N = 1024, the smoke size 10 s.
    tests/test_calibration.py checks it; a test that needs ceilings copies its calibration into its own
    cache home (`seed_calibration`) instead of measuring the same machine again."""
    home = tmp_path_factory.mktemp("calibrated-home")
    proc = harness("calibrate", "--backend", "local", "-q", "--smoke", env={"HARNESS_CACHE_HOME": str(home)})
    return Calibrated(home, proc)


def seed_calibration(calibrated: Calibrated, home: Path) -> None:
    """The session's calibration, copied into a test's cache home (the CLI then finds it cached)."""
    assert calibrated.proc.returncode == 0, calibrated.proc.stdout + calibrated.proc.stderr
    shutil.copytree(calibrated.home / "calibration", home / "calibration", dirs_exist_ok=True)


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def interrupt_at(marker: str, *args: str) -> tuple[int, str, str]:
    """The real CLI, sent Ctrl-C (SIGINT) as soon as a line of its output starts with `marker`:
    (exit code, stdout, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(marker):
            proc.send_signal(signal.SIGINT)
            break
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return tmp_path / "results"
