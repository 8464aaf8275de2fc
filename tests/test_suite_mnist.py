"""mnist on both frameworks at a small size through the real CLI, plus the missing-data paths."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.core.schema import load_result
from harness.store.data.npz import NpzWriter
from harness.store.data.store import write_dataset
from harness.store.plan import PlanRequest, make_plan
from suites.contract import job_spec
from tests.conftest import REPO, finished, harness, read, run_folder

pytestmark = pytest.mark.slow

PARAMS = 2_380_938  # Conv 320 + Conv 18 496 + Dense 9216*256+256 + Dense 2 570 (VALID padding)


def metric(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in doc["metrics"] if m["name"] == name)


def check(doc: dict[str, Any], name: str) -> Any:
    return next(c for c in doc["checks"] if c["name"] == name)["value"]


def test_mnist_trains_the_same_model_in_flax_and_pytorch(
    smoke_run: Callable[[str], subprocess.CompletedProcess[str]],
) -> None:
    # The smoke size with artifacts=true, one thread: the run tests/test_conformance.py reads too
    # (tests/conftest.py). 100 steps: enough to reach the plateau, so the two frameworks' accuracies
    # (which differ only by their dropout streams) land inside the suite's 5-point band instead of mid-climb.
    proc = smoke_run("mnist")
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    for fw in ("flax", "pytorch"):
        doc = load_result(run / f"{fw}.json")  # schema-valid
        assert doc["status"] == "ok"
        sizes = ("dataset", "train_samples", "epochs", "batch_size", "drop_last", "artifacts")
        assert {k: doc["params"][k] for k in sizes} == {"dataset": "synthetic", "train_samples": 1600, "epochs": 2,
                                                        "batch_size": 32, "drop_last": True, "artifacts": True}  # fmt: skip
        epoch = metric(doc, "epoch")
        assert epoch["kind"] == "time" and epoch["first_call"] > 0 and epoch["stats"]["n"] == 1
        first, last = metric(doc, "train loss (first epoch)"), metric(doc, "train loss (last epoch)")
        assert last["samples"][0] < first["samples"][0]
        assert metric(doc, "test accuracy")["samples"][0] > 60.0  # chance is 10 %
        assert check(doc, "param_count") == PARAMS
        assert metric(doc, "throughput")["unit"] == "samples/s"
        assert metric(doc, "peak memory above baseline")["samples"][0] > 0  # MiB, baseline: just before training
        assert metric(doc, "memory before training")["samples"][0] > 50  # the framework, model and data
        assert doc["dataset"]["name"] == "synthetic" and doc["dataset"]["train_samples"] == 1600
        assert doc["training"]["data"] == "device"
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
    # Both trained on the same bytes: the fingerprint of the arrays each job really used.
    assert flax["dataset"]["used_fingerprint"] == read(run / "pytorch.json")["dataset"]["used_fingerprint"]
    assert read(run / "pytorch.json")["training"]["cudnn_benchmark"] is False
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
    plan = make_plan(PlanRequest(suite="mnist", frameworks="pytorch", params=("dataset=mnist",)), backend="local")
    spec = plan.jobs[0].spec(run_id="adhoc", backend="local", result_path=str(out), data_dir=str(tmp_path),
                             cache_dir=None)  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "suites", "run", "--job", str(job_spec.write(tmp_path, spec))],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1
    doc = load_result(out)
    assert doc["status"] == "failed" and "harness data fetch mnist" in doc["reason"]
    assert "Traceback" not in proc.stderr


def test_default_auto_dataset_refuses_before_any_job_when_mnist_is_absent(results: Path, tmp_path: Path) -> None:
    """`dataset=auto` (the default) on an empty data folder: one line naming both ways out, exit 2."""
    proc = harness("run", "--suite", "mnist", "--data-dir", str(tmp_path / "empty"), "--backend", "local",
                   "--results-dir", str(results))  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "`harness data fetch mnist`" in proc.stderr and "--param dataset=synthetic" in proc.stderr
    assert not results.exists()


def test_fetched_data_is_read_from_the_data_folder(results: Path, tmp_path: Path) -> None:
    """A dataset in the folder's format (as `harness data fetch` writes it) feeds the job; `auto` picks it."""
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

    written = write_dataset(tmp_path, "mnist", fill, classes=[str(i) for i in range(10)], source={"kind": "test"},
                            command="t", revision="test-revision-1")  # fmt: skip
    proc = harness(
        "run", "--suite", "mnist", "--frameworks", "pytorch", "--param", "epochs=2",
        "--param", "batch_size=32", "--data-dir", str(tmp_path), "--backend", "local", "--results-dir", str(results),
    )  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    doc = read(run_folder(proc.stdout) / "pytorch.json")
    assert doc["params"]["dataset"] == "auto"
    assert metric(doc, "throughput")["samples"] and any("mnist from the data folder" in n for n in doc["notes"])
    assert any("96 train, 40 test" in n for n in doc["notes"])
    # The result names the data: the manifest's fingerprint and revision travel into it.
    dataset = doc["dataset"]
    assert dataset["name"] == "mnist" and dataset["fingerprint"] == written.manifest["fingerprint"]
    assert dataset["revision"] == "test-revision-1" and dataset["sha256"] == written.manifest["sha256"]


def test_time_to_target_on_mnist_in_both_frameworks(results: Path) -> None:
    """target_accuracy stops at the first epoch reaching it, and reports training time, wall time, epochs."""
    proc = harness(
        "run", "--suite", "mnist", "--frameworks", "flax,pytorch", "--backend", "local", "--param", "dataset=synthetic",
        "--param", "train_samples=640", "--param", "test_samples=200", "--param", "epochs=6",
        "--param", "batch_size=32", "--param", "target_accuracy=50", "--results-dir", str(results),
    )  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    for fw in ("flax", "pytorch"):
        doc = load_result(run / f"{fw}.json")
        target = doc["training"]["target"]
        assert target["status"] == "reached" and target["accuracy"] == 50.0
        k = target["epochs"]
        assert len(target["accuracy_per_epoch"]) == k < 6  # stopped at the first epoch reaching it
        assert target["accuracy_per_epoch"][-1] >= 50.0 and all(a < 50.0 for a in target["accuracy_per_epoch"][:-1])
        assert metric(doc, "epochs to target")["samples"] == [k]
        train_s, wall_s = metric(doc, "time to target")["samples"][0], metric(doc, "wall time to target")["samples"][0]
        # Training time excludes the evaluations, which have their own clock; wall time includes them.
        assert 0 < train_s < wall_s
        # The first evaluation (it compiles) is the evaluation clock's first call; the later ones its samples.
        evaluations = [m for m in doc["metrics"] if m["name"] == "evaluation time"]
        assert [len(m["samples"]) for m in evaluations] == ([k - 1] if k > 1 else [])
        assert metric(doc, "test accuracy")["samples"] == [target["accuracy_per_epoch"][-1]]
    assert "time to target" in proc.stdout
