"""mlp (seed 002's toy set): compilations per epoch for jit, scan, eager and torch.compile."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import load_result
from tests.conftest import finished, harness, read, run_folder

pytestmark = pytest.mark.slow


def metric(doc: dict[str, Any], name: str) -> list[float]:
    return next(m for m in doc["metrics"] if m["name"] == name)["samples"]  # type: ignore[no-any-return]


def check(doc: dict[str, Any], name: str) -> Any:
    return next(c for c in doc["checks"] if c["name"] == name)["value"]


def run_mlp(results: Path, *params: str, frameworks: str = "flax,pytorch") -> tuple[Path, str]:
    args = [a for p in params for a in ("--param", p)]
    proc = harness("run", "--suite", "mlp", "--frameworks", frameworks, "--backend", "local",
                   "--results-dir", str(results), *args)  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    return run_folder(proc.stdout), proc.stdout


def test_default_variant_learns_and_the_partial_batch_compiles_twice(
    smoke_run: Callable[[str], subprocess.CompletedProcess[str]],
) -> None:
    proc = smoke_run("mlp")  # epochs=3 (the smoke size), one thread: the run tests/test_conformance.py reads
    assert finished(proc), proc.stdout + proc.stderr
    run, table = run_folder(proc.stdout), proc.stdout
    docs = {fw: load_result(run / f"{fw}.json") for fw in ("flax", "pytorch")}
    for doc in docs.values():
        sizes = {k: doc["params"][k] for k in ("epochs", "variant", "train_samples", "batch_size")}
        assert sizes == {"epochs": 3, "variant": "default", "train_samples": 0, "batch_size": 128}  # all 8000 points
        loss_first, loss_last = metric(doc, "train loss (first epoch)")[0], metric(doc, "train loss (last epoch)")[0]
        assert loss_last < loss_first
        assert metric(doc, "test accuracy")[0] > 80.0  # chance is 50 %
        assert check(doc, "param_count") == 52
        assert any(n.startswith("train loss per epoch: ") for n in doc["notes"])
    # 8000 training points = 62 batches of 128 + one of 64: the seed's "cache size 2".
    assert metric(docs["flax"], "compilations (first epoch)") == [2]
    assert metric(docs["flax"], "compilations (later epochs)") == [0]
    assert metric(docs["pytorch"], "compilations (first epoch)") == [0]  # eager: nothing compiled
    # Same data, same initial weights, no dropout, no shuffle: the two trainings track each other.
    assert (
        abs(metric(docs["flax"], "train loss (last epoch)")[0] - metric(docs["pytorch"], "train loss (last epoch)")[0])
        < 1e-3
    )
    assert "compilations (first epoch)" in table and "FAIL" not in table


def test_compiled_variant_with_drop_last_compiles_once(results: Path) -> None:
    """The one torch.compile in the test set (inductor compiles C++ on the CPU: tens of seconds)."""
    run, _ = run_mlp(results, "epochs=2", "variant=compiled", "drop_last=true", "train_samples=2048")
    for fw in ("flax", "pytorch"):
        doc = read(run / f"{fw}.json")
        assert metric(doc, "compilations (first epoch)") == [1], fw
        assert metric(doc, "compilations (later epochs)") == [0], fw
        assert any(f"{fw} variant {'compiled' if fw == 'pytorch' else 'jit'}" in n for n in doc["notes"])


def test_eager_jax_compiles_every_primitive_and_scan_skips_pytorch(results: Path) -> None:
    run, _ = run_mlp(results, "epochs=2", "variant=eager", "train_samples=512", frameworks="flax")
    eager = read(run / "flax.json")
    assert metric(eager, "compilations (first epoch)")[0] > 10  # one per primitive and shape
    assert metric(eager, "compilations (later epochs)") == [0]
    run, table = run_mlp(results, "epochs=2", "variant=scan", "train_samples=512")
    scan = read(run / "flax.json")
    assert metric(scan, "compilations (first epoch)") == [1]  # 512 = 4 x 128: one scanned epoch
    skipped = read(run / "pytorch.json")
    assert skipped["status"] == "skipped" and "lax.scan" in skipped["reason"]
    # Same data, same weights, same updates: scan and per-step jit learn the same model.
    assert abs(metric(eager, "train loss (last epoch)")[0] - metric(scan, "train loss (last epoch)")[0]) < 1e-4


def test_a_target_no_run_reaches_is_a_status_never_a_number(results: Path) -> None:
    run, table = run_mlp(results, "epochs=2", "train_samples=512", "target_accuracy=100")
    for fw in ("flax", "pytorch"):
        doc = load_result(run / f"{fw}.json")
        assert doc["status"] == "ok"
        target = doc["training"]["target"]
        assert target["status"] == "not reached" and target["seconds"] is None and target["epochs"] is None
        assert target["epochs_run"] == 2 and len(target["accuracy_per_epoch"]) == 2
        names = {m["name"] for m in doc["metrics"]}
        assert not names & {"time to target", "wall time to target", "epochs to target"}
        assert "evaluation time" in names
        assert any(n.startswith("time to target: not reached") for n in doc["notes"])
    assert not any(line.startswith("time to target") for line in table.splitlines())  # no row, no number


def test_learning_curves_hold_every_epoch_and_an_evaluation_after_each(results: Path) -> None:
    run, _ = run_mlp(results, "epochs=3", "train_samples=256", "test_samples=64")
    for fw in ("flax", "pytorch"):
        doc = load_result(run / f"{fw}.json")  # schema-valid curves
        epoch = next(m for m in doc["metrics"] if m["name"] == "epoch")
        (curve,) = doc["training"]["curves"]
        assert curve["epoch_seconds"] == [epoch["first_call"], *epoch["samples"]], fw
        assert len(curve["train_loss"]) == len(curve["train_accuracy"]) == 3
        assert curve["train_loss"][0] == metric(doc, "train loss (first epoch)")[0]
        assert len(curve["test_accuracy"]) == len(curve["evaluation_seconds"]) == 3
        assert curve["test_accuracy"][-1] == metric(doc, "test accuracy")[0]  # the last evaluation is the final one
        assert curve["seed"] == doc["params"]["seed"] and "target" not in doc["training"]
    run, _ = run_mlp(results, "epochs=2", "train_samples=256", "test_samples=64", "curve=false", frameworks="pytorch")
    (curve,) = load_result(run / "pytorch.json")["training"]["curves"]
    assert len(curve["epoch_seconds"]) == 2 and curve["test_accuracy"] == [] and curve["evaluation_seconds"] == []


def test_host_data_pipeline_trains_the_same_model(results: Path) -> None:
    """data=host feeds the same batches from the host: the same losses as data=device, to float32 noise."""
    device, _ = run_mlp(results, "epochs=2", "train_samples=512")
    host, _ = run_mlp(results, "epochs=2", "train_samples=512", "data=host")
    for fw in ("flax", "pytorch"):
        a, b = read(device / f"{fw}.json"), read(host / f"{fw}.json")
        assert b["training"]["data"] == "host" and any("data=host" in n for n in b["notes"])
        assert metric(a, "train loss (last epoch)")[0] == pytest.approx(
            metric(b, "train loss (last epoch)")[0], rel=1e-5
        )
