"""One home for machine-wide state (harness/core/cache_home.py): calibration, Slurm venvs, warm compile caches.

tests/conftest.py gives every test a cache home of its own (HARNESS_CACHE_HOME, a tmp folder),
so nothing here reads or writes the real ~/.cache/harness.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.backends.base import BackendOptions, JobOutcome, make_backend
from harness.backends.slurm.settings import from_environment
from harness.core import cache_home
from harness.core.errors import HarnessError
from harness.execute.runner import calibrate
from harness.store.calibration import attach, cache_lock, cache_path, fingerprint, parse
from harness.store.images import stack_image
from harness.store.plan import Job
from tests.conftest import finished, harness, read, run_folder


class Counting:
    """The real local backend, counting the jobs it was asked to run."""

    def __init__(self) -> None:
        self.inner = make_backend("local", BackendOptions(echo=False))
        self.name = self.inner.name
        self.jobs: list[str] = []
        self.lock = threading.Lock()

    def run_job(self, job: Job, run_id: str, run_dir: Path) -> JobOutcome:
        with self.lock:
            self.jobs.append(job.framework)
        return self.inner.run_job(job, run_id, run_dir)


def _calibrate(backend: Counting) -> dict[str, Any] | None:
    return calibrate(["numpy"], device="cpu", threads=1, cpus=None, backend=backend)


# -- where the home is ------------------------------------------------------------------------------


def test_the_default_follows_xdg_and_the_variable_overrides_it(tmp_path: Path) -> None:
    assert cache_home.home({"XDG_CACHE_HOME": "/x/cache", "HOME": "/h"}) == Path("/x/cache/harness")
    assert cache_home.home({"HOME": "/h"}) == Path("/h/.cache/harness")
    assert cache_home.home({"XDG_CACHE_HOME": "relative", "HOME": "/h"}) == Path("/h/.cache/harness")  # XDG: ignored
    chosen = tmp_path / "mine"
    env = {"HARNESS_CACHE_HOME": str(chosen), "XDG_CACHE_HOME": "/x/cache", "HOME": "/h"}
    assert cache_home.home(env) == chosen
    assert cache_home.folder("calibration", environ=env) == chosen / "calibration"
    assert (chosen / "calibration").is_dir() and (chosen.stat().st_mode & 0o777) == 0o700


def test_the_conftest_keeps_the_suite_out_of_the_real_home(own_cache_home: Path) -> None:
    assert cache_home.home() == own_cache_home
    assert cache_path("abc123").parent == own_cache_home / "calibration"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("relative/cache", "is not an absolute path"),
        ("/tmp/a/../b", "goes up with '..'"),
        ("LINK", "is a symbolic link"),
        ("FILE", "is not a folder"),
    ],
)
def test_a_bad_home_is_one_line_naming_the_fix(value: str, problem: str, tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "file").write_text("")
    value = {"LINK": str(tmp_path / "link"), "FILE": str(tmp_path / "file")}.get(value, value)
    with pytest.raises(HarnessError, match=problem) as caught:
        cache_home.home({"HARNESS_CACHE_HOME": value})
    message = str(caught.value)
    assert "\n" not in message and "HARNESS_CACHE_HOME" in message
    if value.endswith("link"):
        assert f"HARNESS_CACHE_HOME={tmp_path / 'real'}" in message  # the fix: the folder itself


def test_a_link_planted_inside_the_home_is_refused(own_cache_home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (own_cache_home / "calibration").symlink_to(elsewhere)
    with pytest.raises(HarnessError, match="not a plain folder"):
        cache_path("abc123")
    assert not any(elsewhere.iterdir())


@pytest.mark.parametrize(
    "args",
    [
        ("calibrate", "--frameworks", "numpy", "--backend", "local"),
        ("run", "--suite", "xla", "--frameworks", "numpy", "--smoke", "--cache", "warm", "--dry-run"),
    ],
)
def test_a_bad_home_through_the_cli_is_exit_code_2(args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE_HOME", "relative/cache")
    proc = harness(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: HARNESS_CACHE_HOME='relative/cache' is not an absolute path")
    assert "Traceback" not in proc.stderr


# -- calibration: once per machine, for every results folder ----------------------------------------


@pytest.mark.slow
def test_two_results_folders_share_one_calibration(own_cache_home: Path, tmp_path: Path) -> None:
    backend = Counting()
    first = _calibrate(backend)
    assert first is not None and backend.jobs == ["numpy"]
    fp = fingerprint("cpu", 1, None)
    assert parse(read(own_cache_home / "calibration" / f"{fp}.json")).frameworks == ("numpy",)
    (run,) = (own_cache_home / "calibration" / "runs").iterdir()  # the run the ceilings came from
    assert first["frameworks"]["numpy"]["run_id"] == run.name

    second = _calibrate(backend)  # another `harness run --results-dir`: nothing measured again
    assert backend.jobs == ["numpy"] and second == first
    for results in (tmp_path / "a", tmp_path / "b"):  # each run still carries the ceilings it used
        (results / "run").mkdir(parents=True)
        attach(results / "run", second)
        assert read(results / "run" / "calibration.json") == first


@pytest.mark.slow
def test_a_second_results_dir_does_not_recalibrate_through_the_cli(own_cache_home: Path, tmp_path: Path) -> None:
    args = ("run", "--suite", "xla", "--frameworks", "numpy", "--smoke", "--calibrate", "auto", "--threads", "1")
    first = harness(*args, "--results-dir", str(tmp_path / "a"))
    assert finished(first), first.stdout + first.stderr
    assert "calibrating this machine" in first.stderr
    second = harness(*args, "--results-dir", str(tmp_path / "b"))
    assert finished(second), second.stdout + second.stderr
    assert "calibrating" not in second.stderr
    copies = [read(run_folder(proc.stdout) / "calibration.json") for proc in (first, second)]
    assert copies[0] == copies[1]
    assert not (tmp_path / "a" / ".calibration").exists() and not (tmp_path / "b" / ".calibration").exists()
    assert len(list((own_cache_home / "calibration").glob("*.json"))) == 1


@pytest.mark.slow
def test_concurrent_calibrations_measure_once() -> None:
    backend = Counting()
    docs: list[dict[str, Any] | None] = []
    threads = [threading.Thread(target=lambda: docs.append(_calibrate(backend))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert backend.jobs == ["numpy"]  # the others waited on the fingerprint's lock, then read the cache
    assert len(docs) == 3 and docs[0] is not None and docs.count(docs[0]) == 3


def test_a_cache_from_another_fingerprint_or_tampered_is_not_used(own_cache_home: Path) -> None:
    from harness.store.calibration import load_cache

    fp = fingerprint("cpu", 1, None)
    path = cache_path(fp)
    path.write_text(
        json.dumps({"format": "harness-calibration", "version": 2, "fingerprint": "other", "frameworks": {}})
    )
    assert load_cache(fp) is None
    path.write_text("{not json")
    assert load_cache(fp) is None


# -- concurrency of the home itself ------------------------------------------------------------------


def test_concurrent_creation_and_locking_are_safe(own_cache_home: Path) -> None:
    errors: list[BaseException] = []
    inside: list[int] = []
    overlaps: list[int] = []
    lock_file = cache_lock("abc123")

    def work(index: int) -> None:
        try:
            cache_home.folder("compile", f"numpy-cpu-{index % 2:012d}")
            with cache_home.locked(lock_file, "test"):
                inside.append(index)
                if len(inside) > 1:
                    overlaps.append(index)
                time.sleep(0.01)
                inside.remove(index)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and not overlaps
    assert sorted(p.name for p in (own_cache_home / "compile").iterdir()) == [
        "numpy-cpu-000000000000",
        "numpy-cpu-000000000001",
    ]


def test_a_lock_file_planted_as_a_link_is_refused(own_cache_home: Path, tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.write_text("keep")
    link = own_cache_home / "x.lock"
    link.symlink_to(target)
    with pytest.raises(HarnessError, match="cannot lock"), cache_home.locked(link, "test"):
        pass
    assert target.read_text() == "keep"


# -- stack venvs and compile caches: keyed by stack and lock -------------------------------------------


def test_slurm_venvs_default_to_the_cache_home(tmp_path: Path) -> None:
    env = {"HARNESS_CACHE_HOME": str(tmp_path / "home")}
    assert from_environment(env).envs == str(tmp_path / "home" / "venvs")
    assert from_environment({**env, "HARNESS_SLURM_ENVS": "/shared/envs"}).envs == "/shared/envs"
    with pytest.raises(HarnessError, match="HARNESS_CACHE_HOME"):
        from_environment({"HARNESS_CACHE_HOME": "relative"})


def test_warm_caches_are_keyed_by_stack_and_lock_whatever_the_results_dir(own_cache_home: Path, tmp_path: Path) -> None:
    dirs = []
    for results in ("a", "b"):
        proc = harness("run", "--suite", "xla", "--frameworks", "numpy,jax", "--smoke", "--cache", "warm", "--dry-run",
                       "--results-dir", str(tmp_path / results))  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        dirs.append({job["framework"]: job["cache_dir"] for job in json.loads(proc.stdout)["jobs"]})
    assert dirs[0] == dirs[1]
    for stack in ("numpy", "jax"):
        lock = stack_image(stack, "cpu").lock_hash[:12]
        assert dirs[0][stack] == str(own_cache_home / "compile" / f"{stack}-cpu-{lock}")
    cold = harness("run", "--suite", "xla", "--frameworks", "numpy", "--smoke", "--dry-run")
    assert cold.returncode == 0 and json.loads(cold.stdout)["jobs"][0]["cache_dir"] is None
