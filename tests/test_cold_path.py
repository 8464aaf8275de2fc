"""The cold path apart (import, device init, probe), and compiler caches cold or warm by choice."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.store.images import stack_image
from tests.conftest import finished, harness, read, run_folder

pytestmark = pytest.mark.slow


def test_every_result_carries_the_cold_path_and_the_table_shows_it(
    smoke_run: Callable[[str], subprocess.CompletedProcess[str]],
) -> None:
    proc = smoke_run("xla")  # `run --smoke`, caches cold by default: tests/test_conformance.py's run
    assert finished(proc), proc.stdout + proc.stderr
    for fw in ("numpy", "jax"):
        cold = read(run_folder(proc.stdout) / f"{fw}.json")["environment"]["cold_path"]
        assert set(cold) == {"import_s", "device_init_s", "precision_probe_s", "workload_s"}
        assert sum(cold.values()) <= read(run_folder(proc.stdout) / f"{fw}.json")["duration_s"]
    jax_cold = read(run_folder(proc.stdout) / "jax.json")["environment"]["cold_path"]
    assert jax_cold["import_s"] > jax_cold["device_init_s"]  # importing jax dwarfs a CPU client start
    assert "cold path" in proc.stdout and "jax: import" in proc.stdout and "compiler caches cold" in proc.stdout


def test_warm_caches_persist_between_jobs_and_cold_ones_never_do(results: Path, own_cache_home: Path) -> None:
    warm = harness("run", "--suite", "xla", "--frameworks", "jax", "--smoke", "--cache", "warm",
                   "--results-dir", str(results))  # fmt: skip
    assert finished(warm), warm.stdout + warm.stderr
    doc = read(run_folder(warm.stdout) / "jax.json")
    assert doc["settings"]["cache"] == "warm"
    jax_cache = Path(doc["environment"]["caches"]["JAX_COMPILATION_CACHE_DIR"])
    key = f"jax-cpu-{stack_image('jax', 'cpu').lock_hash[:12]}"  # the cache home's, per stack and lock
    assert jax_cache == own_cache_home / "compile" / key / "jax" / "jax"
    assert any(jax_cache.iterdir()), "the persistent compilation cache stayed empty"

    # Cold, even with a user's JAX cache folder in the environment: a fresh, empty folder per job.
    cold = harness("run", "--suite", "xla", "--frameworks", "jax", "--smoke", "--results-dir", str(results),
                   env={"JAX_COMPILATION_CACHE_DIR": str(jax_cache)}, timeout=600)  # fmt: skip
    assert finished(cold), cold.stdout + cold.stderr
    caches = read(run_folder(cold.stdout) / "jax.json")["environment"]["caches"]
    assert caches["mode"] == "cold" and caches["JAX_COMPILATION_CACHE_DIR"] is None
    assert not Path(caches["TORCHINDUCTOR_CACHE_DIR"]).exists()  # removed when the job ended


def test_an_unknown_cache_mode_is_one_line(results: Path) -> None:
    proc = harness("run", "--suite", "xla", "--cache", "tepid", "--results-dir", str(results))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--cache 'tepid'" in proc.stderr
