"""The resnet18 suite (seed 004): the architecture's bookkeeping, both frameworks at tiny sizes
through the real CLI, and the imported cats-vs-dogs path."""

from __future__ import annotations

import statistics
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.core.schema import load_result
from suites.resnet18 import common
from tests.conftest import finished, harness, run_folder

PARAMS = 11_177_025  # torchvision's resnet18 (11 689 512) with a 512 -> 1 head instead of 512 -> 1000


def metrics(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in doc["metrics"]}


def checks(doc: dict[str, Any]) -> dict[str, Any]:
    return {c["name"]: c["value"] for c in doc["checks"]}


def test_parameter_list_and_flops_are_resnet18s() -> None:
    assert common.expected_param_count() == PARAMS
    assert common.expected_param_count() - 513 + 513_000 == 11_689_512  # the 1000-class original
    assert common.flops_per_sample(224) / 6 == pytest.approx(1.8136e9, rel=1e-3)  # 1.81 GMACs at 224
    weights = common.init_weights(0)
    conv = weights["layer2.0.conv1.weight"]
    assert conv.shape == (128, 64, 3, 3) and conv.std() == pytest.approx(np.sqrt(2 / (128 * 9)), rel=0.05)
    assert np.all(weights["bn1.weight"] == 1) and np.all(weights["layer4.1.bn2.bias"] == 0)


@pytest.mark.slow
def test_resnet18_flax_and_pytorch_cold_warm_split_and_agreement(
    smoke_run: Callable[[str], subprocess.CompletedProcess[str]],
) -> None:
    # The smoke size, one thread (the run tests/test_conformance.py reads too): 512 samples in batches of
    # 16 for 3 epochs, because BatchNorm's running statistics (momentum 0.1) must settle before eval-mode
    # accuracy means anything; after ~20 steps it still sits near chance while batch statistics give 95 %.
    proc = smoke_run("resnet18")
    assert finished(proc), proc.stdout + proc.stderr  # includes the agreement gate
    run = run_folder(proc.stdout)
    docs = {fw: load_result(run / f"{fw}.json") for fw in ("flax", "pytorch")}
    for fw, doc in docs.items():
        assert doc["status"] == "ok"
        m, c = metrics(doc), checks(doc)
        assert c["param_count"] == PARAMS
        assert m["test accuracy"]["samples"][0] > 75.0, fw  # two classes: chance is 50 %
        epoch = m["epoch"]
        cold, compile_s = epoch["first_call"], m["cold epoch: compilation"]["samples"][0]
        compute = m["cold epoch: compute"]["samples"][0]
        assert cold == pytest.approx(compile_s + compute)
        assert m["cold epoch / warm epoch"]["samples"][0] == pytest.approx(cold / epoch["stats"]["median"])
        transfer = m["data to device"]
        assert transfer["first_call"] > 0 and len(transfer["samples"]) == 2  # 3 transfers: first + 2 timed
        # MiB above the baseline just before training (CPU: RSS after resetting the peak counter there).
        # At this tiny size training may reuse pages freed before the baseline, so 0 is a true answer.
        peak = m["peak memory above baseline"]
        assert peak["samples"][0] >= 0 and "VmHWM after a reset just before training" in peak["description"]
        assert m["memory before training"]["samples"][0] > 50
        assert {"first_step_loss", "first_step_weights"} <= set(c)
        assert any(note.startswith("cold epoch 1 ") for note in doc["notes"])
    # XLA compiles the train step inside epoch 1; eager PyTorch compiles nothing.
    flax_m = metrics(docs["flax"])
    assert 0 < flax_m["cold epoch: compilation"]["samples"][0] < flax_m["epoch"]["first_call"]
    assert flax_m["compilations (first epoch)"]["samples"] == [1]
    assert metrics(docs["pytorch"])["cold epoch: compilation"]["samples"] == [0.0]
    np.testing.assert_allclose(checks(docs["flax"])["initial_logits"], checks(docs["pytorch"])["initial_logits"],
                               rtol=1e-3, atol=1e-4)  # fmt: skip
    assert "FAIL" not in proc.stdout and "cold epoch: compilation" in proc.stdout


def _image_folders(root: Path, per_class: int = 40) -> Path:
    """Cats (0/) reddish with a bright top half, dogs (1/) bluish with a bright bottom half."""
    from PIL import Image

    rng = np.random.default_rng(5)
    for label in (0, 1):
        folder = root / str(label)
        folder.mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.integers(0, 60, (40, 48, 3)).astype(np.uint8)
            half = slice(0, 20) if label == 0 else slice(20, 40)
            pixels[half, :, 0 if label == 0 else 2] += 180
            Image.fromarray(pixels).save(folder / f"{'cat' if label == 0 else 'dog'}.{i}.png")
    return root


@pytest.mark.slow
def test_imported_catsdogs_feeds_the_suite(results: Path, tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    data = tmp_path / "data"
    imported = harness("data", "import", "catsdogs", str(_image_folders(tmp_path / "images")), "--size", "16",
                       "--data-dir", str(data))  # fmt: skip
    assert imported.returncode == 0, imported.stdout + imported.stderr
    proc = harness("run", "--suite", "resnet18", "--frameworks", "pytorch", "--backend", "local", "--threads", "1",
                   "--param", "dataset=catsdogs", "--param", "image_size=16", "--param", "epochs=2",
                   "--param", "batch_size=16", "--data-dir", str(data), "--results-dir", str(results))  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    doc = load_result(run_folder(proc.stdout) / "pytorch.json")
    assert any("catsdogs from the data folder" in note for note in doc["notes"])
    assert statistics.median(metrics(doc)["epoch"]["samples"]) > 0

    # Asking for another size than was imported names both ways out.
    wrong = harness("run", "--suite", "resnet18", "--frameworks", "pytorch", "--backend", "local",
                    "--param", "dataset=catsdogs", "--param", "image_size=32", "--data-dir", str(data),
                    "--results-dir", str(results))  # fmt: skip
    assert wrong.returncode == 1
    reason = load_result(run_folder(wrong.stdout) / "pytorch.json")["reason"]
    assert "image_size=16" in reason and "--size 32" in reason
    assert load_result(run_folder(proc.stdout) / "pytorch.json")["dataset"]["origin"] == "folder"
