"""What both MNIST implementations share: data (the same NumPy arrays), constants, FLOP count."""

from __future__ import annotations

from typing import Any

from suites.contract.datasets import SYNTHETIC, ImageData, epoch_orders, fetched_images, subset, synthetic_images
from suites.contract.errors import JobError
from suites.runtime.context import Context
from suites.runtime.training import Layer, Recipe, dataset_name, use_data
from suites.runtime.training import recipe as make_recipe

SHAPE = (28, 28, 1)
CLASSES = 10
TRAIN, TEST = 60_000, 10_000
MEAN, STD = 0.1307, 0.3081  # the seed's normalisation: (x / 255 - mean) / std
MOMENTUM = 0.9
# Weights in Flax's layout; fc1 flattens the (64, 12, 12) feature map after the pool.
LAYERS = (
    Layer("conv1", (3, 3, 1, 32)),
    Layer("conv2", (3, 3, 32, 64)),
    Layer("fc1", (12 * 12 * 64, 256), flattened_from=(64, 12, 12)),
    Layer("fc2", (256, 10)),
)
TITLE = "mnist CNN: Conv32 3x3 VALID, Conv64 3x3 VALID, MaxPool 2, Dropout .25, Dense 256, Dropout .5, Dense 10"


def flops_per_sample() -> float:
    """Training FLOPs per image: 3x the forward multiply-adds x 2 (the usual estimate)."""
    conv1 = 26 * 26 * 32 * (3 * 3 * 1) * 2
    conv2 = 24 * 24 * 64 * (3 * 3 * 32) * 2
    dense = (9216 * 256 + 256 * 10) * 2
    return 3.0 * (conv1 + conv2 + dense)


def load(ctx: Context) -> tuple[ImageData, Any]:
    """The images and the (epochs, n) sample orders every framework uses."""
    p = ctx.params
    name = dataset_name(ctx)
    if name == SYNTHETIC:
        data = synthetic_images(
            SHAPE, CLASSES, p["train_samples"] or TRAIN, p["test_samples"] or TEST, p["seed"], "MNIST"
        )
    else:
        data = subset(fetched_images(ctx.data_dir, name, CLASSES), p["train_samples"], p["test_samples"])
        if data.shape != SHAPE:
            raise JobError(f"{name} images have shape {data.shape}, MNIST's are {SHAPE}")
    use_data(ctx, data)
    orders = epoch_orders(len(data.train_y), p["epochs"], p["seed"], shuffle=True)
    return data, orders


def recipe(ctx: Context) -> Recipe:
    """This suite's model and the job's training parameters, as both frameworks' loops read them."""
    return make_recipe(ctx, layers=LAYERS, title=TITLE, flops_per_sample=flops_per_sample())
