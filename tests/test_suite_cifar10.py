"""cifar10: the on-device augmentation against a reference, and both frameworks at a small size."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from suites.cifar10.common import crop_params
from tests.conftest import finished, read, run_folder

pytestmark = pytest.mark.slow


def metric(doc: dict[str, Any], name: str) -> list[float]:
    return next(m for m in doc["metrics"] if m["name"] == name)["samples"]  # type: ignore[no-any-return]


def test_augmentation_matches_crop_then_resize_and_both_frameworks_agree() -> None:
    """Ry @ img @ Rx^T == torch's bilinear resize (align_corners=False) of the cropped (flipped) box."""
    import jax.numpy as jnp
    import torch
    import torch.nn.functional as F

    from suites.cifar10 import models_flax, models_torch

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (16, 32, 32, 3)).astype(np.uint8)
    aux = crop_params(rng, 16)
    aux[0] = [0, 32, 0, 32, 0]  # identity
    aux[1] = [0, 32, 0, 32, 1]  # pure flip
    aux[2] = [3, 27, 2, 29, 1]  # crop and flip
    ours = models_torch.make_prepare("cpu")(torch.from_numpy(images).permute(0, 3, 1, 2), torch.from_numpy(aux))
    for b in range(16):
        top, h, left, w, flip = (int(v) for v in aux[b])
        img = torch.from_numpy(images[b]).permute(2, 0, 1).float()[None]
        if flip:
            img = img.flip(3)
        box = img[:, :, top : top + h, left : left + w]
        ref = F.interpolate(box, size=(32, 32), mode="bilinear", align_corners=False, antialias=False)
        mean = torch.tensor(models_torch.MEANS).view(1, 3, 1, 1)
        std = torch.tensor(models_torch.STDS).view(1, 3, 1, 1)
        np.testing.assert_allclose(ours[b : b + 1].numpy(), ((ref / 255 - mean) / std).numpy(), atol=1e-4)
    np.testing.assert_allclose(
        ours[0].permute(1, 2, 0).numpy(), ((images[0] / 255 - models_torch.MEANS) / models_torch.STDS), atol=1e-5
    )
    flax = np.asarray(models_flax.prepare(jnp.asarray(images), jnp.asarray(aux)))
    np.testing.assert_allclose(flax, ours.permute(0, 2, 3, 1).numpy(), atol=1e-4)
    # The crop boxes follow RandomResizedCrop(scale=(0.8, 1), ratio=(0.9, 1.1)).
    boxes = crop_params(rng, 5000)
    area = boxes[:, 1] * boxes[:, 3] / 1024
    assert area.min() >= 0.74 and area.max() <= 1.0 and 0.4 < boxes[:, 4].mean() < 0.6
    assert ((boxes[:, 0] + boxes[:, 1]) <= 32).all() and ((boxes[:, 2] + boxes[:, 3]) <= 32).all()


def test_cifar10_trains_identically_in_flax_and_pytorch(
    smoke_run: Callable[[str], subprocess.CompletedProcess[str]],
) -> None:
    proc = smoke_run("cifar10")  # the smoke size with artifacts=true, one thread: tests/test_conformance.py's run
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    docs = {fw: read(run / f"{fw}.json") for fw in ("flax", "pytorch")}
    for doc in docs.values():
        sizes = {k: doc["params"][k] for k in ("dataset", "train_samples", "test_samples", "epochs", "batch_size",
                                               "lr", "artifacts")}  # fmt: skip
        assert sizes == {"dataset": "synthetic", "train_samples": 512, "test_samples": 200, "epochs": 2,
                         "batch_size": 64, "lr": 0.002, "artifacts": True}  # fmt: skip
        assert metric(doc, "train loss (last epoch)")[0] < metric(doc, "train loss (first epoch)")[0]
        assert metric(doc, "test accuracy")[0] > 30.0  # chance is 10 %
        assert next(c for c in doc["checks"] if c["name"] == "param_count")["value"] == 1_070_794
    assert metric(docs["flax"], "compilations (first epoch)") == [1]  # drop_last is the default here
    # No dropout, shared weights, shared crops and orders: the losses agree to float32 noise.
    first = [metric(d, "train loss (first epoch)")[0] for d in docs.values()]
    assert abs(first[0] - first[1]) < 1e-3 * first[0]
    assert "SAME" in (run / "pytorch-artifacts" / "model_summary.txt").read_text()
