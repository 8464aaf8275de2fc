"""Real jobs: interleaved rounds, and the lint catching an unsynchronised JAX timing on this CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import finished, harness, read, run_folder

pytestmark = pytest.mark.slow


def test_unsynchronised_jax_is_flagged_and_synchronised_is_not(results: Path) -> None:
    proc = harness(
        "run", "--suite", "xla", "--frameworks", "numpy,jax", "--param", "matrix_size=512",
        "--param", "synchronise=false", "--repeat", "5", "--results-dir", str(results), "-q",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "jax matmul:" in proc.stdout and "GFLOP/s exceeds the limit" in proc.stdout
    assert "jax matmul: a barrier after the clock" in proc.stdout  # the sync-escape check agrees
    # numpy has nothing to synchronise: still honest. (A busy test machine may list contended samples
    # of it, "numpy matmul: 1 of 5 samples", or most of them under the CONTENDED guard, "5 of 5 samples
    # disturbed": that is the machine, not a flag the code earned.)
    flagged = [
        line for line in proc.stdout.splitlines()
        if line.strip().startswith("numpy matmul:") and not line.strip().endswith(" samples")
        and " samples disturbed;" not in line
    ]  # fmt: skip
    assert flagged == [], flagged
    honest = harness(
        "run", "--suite", "xla", "--frameworks", "jax", "--param", "matrix_size=512", "--repeat", "5",
        "--results-dir", str(results), "-q",
    )  # fmt: skip
    assert finished(honest) and "IMPLAUSIBLE" not in honest.stdout and "ESCAPED" not in honest.stdout
    if honest.returncode == 0:  # on a busy machine (3) a rate left out as contended gets no "% of peak"
        assert "of peak" in honest.stdout, honest.stdout


def test_rounds_interleave_and_pool(results: Path) -> None:
    proc = harness(
        "run", "--suite", "xla", "--frameworks", "numpy,pytorch", "--param", "matrix_size=32",
        "--repeat", "3", "--rounds", "2", "--results-dir", str(results),
    )  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    order = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("-> ")]
    assert order == ["xla/numpy", "xla/pytorch", "xla/numpy", "xla/pytorch"]
    run = run_folder(proc.stdout)
    doc = read(run / "pytorch.json")
    matmul = next(m for m in doc["metrics"] if m["name"] == "matmul")
    assert matmul["stats"]["n"] == 6 and len(matmul["first_calls"]) == 2
    assert doc["settings"]["rounds"] == 2
    assert (run / "rounds" / "round-2" / "numpy.json").is_file()
