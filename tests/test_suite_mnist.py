"""mnist on both frameworks at a small size through the real CLI, plus the missing-data paths."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.data.npz import NpzWriter
from harness.data.store import write_dataset
from harness.schema import load_result
from tests.conftest import REPO, harness, read, run_folder

pytestmark = pytest.mark.slow

PARAMS = 2_380_938  # Conv 320 + Conv 18 496 + Dense 9216*256+256 + Dense 2 570 (VALID padding)


def metric(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in doc["metrics"] if m["name"] == name)


def check(doc: dict[str, Any], name: str) -> Any:
    return next(c for c in doc["checks"] if c["name"] == name)["value"]


def test_mnist_trains_the_same_model_in_flax_and_pytorch(results: Path) -> None:
    # 100 steps: enough to reach the plateau, so the two frameworks' accuracies (which differ only
    # by their dropout streams) land inside the suite's 5-point band instead of mid-climb.
    proc = harness(
        "run", "--suite", "mnist", "--frameworks", "flax,pytorch", "--backend", "local",
        "--param", "train_samples=1600", "--param", "test_samples=500", "--param", "epochs=2",
        "--param", "batch_size=32", "--param", "drop_last=true",
        "--param", "artifacts=true", "--results-dir", str(results),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    for fw in ("flax", "pytorch"):
        doc = load_result(run / f"{fw}.json")  # schema-valid
        assert doc["status"] == "ok"
        epoch = metric(doc, "epoch")
        assert epoch["kind"] == "time" and epoch["first_call"] > 0 and epoch["stats"]["n"] == 1
        first, last = metric(doc, "train loss (first epoch)"), metric(doc, "train loss (last epoch)")
        assert last["samples"][0] < first["samples"][0]
        assert metric(doc, "test accuracy")["samples"][0] > 60.0  # chance is 10 %
        assert check(doc, "param_count") == PARAMS
        assert metric(doc, "throughput")["unit"] == "samples/s"
        assert metric(doc, "peak memory")["samples"][0] > 50  # MiB of resident memory
        assert (run / f"{fw}-artifacts" / "model_summary.txt").read_text().rstrip().endswith(f"{PARAMS:,}")
        log = (run / "logs" / f"{fw}.stdout.log").read_text()
        assert "epoch 1/2: loss" in log and "epoch 2/2: loss" in log  # the live progress lines
    # drop_last with 1600 = 50 x 32: one shape, one compilation; none after epoch 1.
    flax = read(run / "flax.json")
    assert metric(flax, "compilations (first epoch)")["samples"] == [1]
    assert metric(flax, "compilations (later epochs)")["samples"] == [0]
    assert metric(read(run / "pytorch.json"), "compilations (first epoch)")["samples"] == [0]
    for name in ("train_step.jaxpr.txt", "train_step.stablehlo.txt", "train_step.hlo.txt"):
        assert (run / "flax-artifacts" / name).stat().st_size > 1000
    assert "conv_general_dilated" in (run / "flax-artifacts" / "train_step.jaxpr.txt").read_text()
    # The same initial weights give the same logits: the two models are one function.
    np.testing.assert_allclose(check(flax, "initial_logits"), check(read(run / "pytorch.json"), "initial_logits"),
                               rtol=1e-3, atol=1e-5)  # fmt: skip
    assert "FAIL" not in proc.stdout and "epoch (first call)" in proc.stdout


def test_missing_dataset_is_one_line_naming_the_fetch_command(results: Path, tmp_path: Path) -> None:
    proc = harness(
        "run", "--suite", "mnist", "--param", "dataset=mnist", "--data-dir", str(tmp_path / "empty"),
        "--backend", "local", "--results-dir", str(results),
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "`harness data fetch mnist`" in proc.stderr
    assert not results.exists()  # nothing was started


def test_the_job_itself_refuses_a_missing_dataset(tmp_path: Path) -> None:
    """A job started without the host's check (e.g. by another backend) fails with the same message."""
    out = tmp_path / "pytorch.json"
    proc = subprocess.run(
        [sys.executable, "-m", "suites", "run", "--suite", "mnist", "--framework", "pytorch",
         "--params", '{"dataset": "mnist"}', "--data-dir", str(tmp_path), "--out", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1
    doc = load_result(out)
    assert doc["status"] == "failed" and "harness data fetch mnist" in doc["reason"]
    assert "Traceback" not in proc.stderr


def test_fetched_data_is_read_from_the_data_folder(results: Path, tmp_path: Path) -> None:
    """A dataset in the folder's format (as `harness data fetch` writes it) feeds the job."""
    rng = np.random.default_rng(1)
    arrays = {
        "train_images": rng.integers(0, 256, (96, 28, 28, 1), dtype=np.uint8),
        "train_labels": rng.integers(0, 10, 96, dtype=np.uint8),
        "test_images": rng.integers(0, 256, (40, 28, 28, 1), dtype=np.uint8),
        "test_labels": rng.integers(0, 10, 40, dtype=np.uint8),
    }

    def fill(writer: NpzWriter) -> dict[str, Any]:
        for key, array in arrays.items():
            writer.add(key, array.shape, "uint8", array.tobytes())
        return {}

    write_dataset(tmp_path, "mnist", fill, classes=[str(i) for i in range(10)], source={"kind": "test"}, command="t")
    proc = harness(
        "run", "--suite", "mnist", "--frameworks", "pytorch", "--param", "dataset=mnist", "--param", "epochs=2",
        "--param", "batch_size=32", "--data-dir", str(tmp_path), "--backend", "local", "--results-dir", str(results),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = read(run_folder(proc.stdout) / "pytorch.json")
    assert metric(doc, "throughput")["samples"] and any("mnist from the data folder" in n for n in doc["notes"])
    assert any("96 train, 40 test" in n for n in doc["notes"])
