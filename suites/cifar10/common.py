"""What both CIFAR-10 implementations share: data, augmentation parameters, constants, FLOPs.

Augmentation runs on the device inside the train step, but its random parameters (flip, crop
box) are drawn here with NumPy, once for all epochs, so both frameworks see the same crops.
A crop-and-resize is linear in the image: out = Ry @ img @ Rx^T per channel, with Ry, Rx the
(32 x 32) bilinear interpolation matrices of the crop box (a flip reverses Rx). Both
frameworks build those matrices from the same parameters and apply them with one einsum.
"""

from __future__ import annotations

import math
from typing import Any

from suites.contract.datasets import (
    SYNTHETIC,
    ImageData,
    epoch_orders,
    fetched_images,
    split_off,
    subset,
    synthetic_images,
)
from suites.contract.errors import JobError
from suites.runtime.context import Context
from suites.runtime.training import Layer, Recipe, dataset_name, use_data
from suites.runtime.training import recipe as make_recipe

SIZE = 32
SHAPE = (SIZE, SIZE, 3)
CLASSES = 10
TRAIN, VALIDATION, TEST = 45_000, 5_000, 10_000  # the seed's 45k/5k split of the 50k training images
MEANS = (0.49139968, 0.48215841, 0.44653091)  # the seed's per-channel normalisation
STDS = (0.24703223, 0.24348513, 0.26158784)
CROP_SCALE = (0.8, 1.0)
CROP_RATIO = (0.9, 1.1)
LAYERS = (
    Layer("conv1", (3, 3, 3, 32)),
    Layer("conv2", (3, 3, 32, 64)),
    Layer("fc1", (8 * 8 * 64, 256), flattened_from=(64, 8, 8)),
    Layer("fc2", (256, 10)),
)
TITLE = "cifar10 CNN: Conv32 3x3 SAME, ReLU, AvgPool 2, Conv64 3x3 SAME, ReLU, AvgPool 2, Dense 256, ReLU, Dense 10"


def flops_per_sample() -> float:
    """Training FLOPs per image: 3x the forward multiply-adds x 2 (augmentation not counted)."""
    conv1 = 32 * 32 * 32 * (3 * 3 * 3) * 2
    conv2 = 16 * 16 * 64 * (3 * 3 * 32) * 2
    dense = (4096 * 256 + 256 * 10) * 2
    return 3.0 * (conv1 + conv2 + dense)


def crop_params(rng: Any, n: int) -> Any:
    """(n, 5) float32 rows (top, height, left, width, flip), drawn like torchvision's
    RandomHorizontalFlip + RandomResizedCrop(scale=(0.8, 1), ratio=(0.9, 1.1)): ten tries for a
    box that fits, else the whole image."""
    import numpy as np

    tries = 10
    area = SIZE * SIZE * rng.uniform(*CROP_SCALE, size=(n, tries))
    ratio = np.exp(rng.uniform(math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1]), size=(n, tries)))
    w = np.round(np.sqrt(area * ratio))
    h = np.round(np.sqrt(area / ratio))
    fits = (w <= SIZE) & (h <= SIZE)
    pick = np.argmax(fits, axis=1)
    rows = np.arange(n)
    w = np.where(fits.any(axis=1), w[rows, pick], SIZE)
    h = np.where(fits.any(axis=1), h[rows, pick], SIZE)
    top = np.floor(rng.uniform(size=n) * (SIZE - h + 1))
    left = np.floor(rng.uniform(size=n) * (SIZE - w + 1))
    flip = (rng.uniform(size=n) < 0.5).astype(np.float64)
    return np.stack([top, h, left, w, flip], axis=1).astype(np.float32)


def load(ctx: Context) -> tuple[ImageData, Any, Any]:
    """Images, (epochs, n) sample orders and (epochs, n, 5) augmentation parameters."""
    import numpy as np

    p = ctx.params
    name = dataset_name(ctx)
    if name == SYNTHETIC:
        data = synthetic_images(
            SHAPE, CLASSES, p["train_samples"] or TRAIN, p["test_samples"] or TEST, p["seed"], "CIFAR-10"
        )
    else:
        full = fetched_images(ctx.data_dir, name, CLASSES)
        if full.shape != SHAPE:
            raise JobError(f"{name} images have shape {full.shape}, CIFAR-10's are {SHAPE}")
        # The seed's 45k/5k split of the 50k training images (a smaller stored set keeps 90 %).
        keep = TRAIN if len(full.train_y) >= TRAIN + VALIDATION else len(full.train_y) * 9 // 10
        train_x, train_y = split_off(full.train_x, full.train_y, keep, p["seed"])
        data = ImageData(
            train_x, train_y, full.test_x, full.test_y, CLASSES, full.source + f", {keep} of {len(full.train_y)} train",
            full.record,
        )  # fmt: skip
        data = subset(data, p["train_samples"], p["test_samples"])
    n = len(data.train_y)
    use_data(ctx, data)
    orders = epoch_orders(n, p["epochs"], p["seed"], shuffle=True)
    rng = np.random.default_rng(np.random.SeedSequence([p["seed"], 0xA06]))
    aux = np.stack([crop_params(rng, n) for _ in range(p["epochs"])])
    return data, orders, aux


def recipe(ctx: Context) -> Recipe:
    """This suite's model and the job's training parameters, as both frameworks' loops read them."""
    return make_recipe(ctx, layers=LAYERS, title=TITLE, flops_per_sample=flops_per_sample())
