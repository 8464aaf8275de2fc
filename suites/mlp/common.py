"""Seed 002's toy set, built once in NumPy and handed to every framework."""

from __future__ import annotations

from typing import Any

from suites.contract.datasets import ImageData, epoch_orders, subset, synthetic_record, toy_set
from suites.runtime.context import Context
from suites.runtime.training import Layer, Recipe, use_data
from suites.runtime.training import recipe as make_recipe

SIZE = 10_000  # the seed's ToyDataset(size=10000)
TRAIN_FRACTION = 0.8
HIDDEN = 10
LAYERS = (Layer("hidden", (2, HIDDEN)), Layer("out", (HIDDEN, 2)))
TITLE = "mlp: Dense 10, ReLU, Dense 2 (inputs: 2 features)"


def load(ctx: Context) -> tuple[ImageData, Any]:
    """(train, test) of the toy set and the (epochs, n) orders: no shuffle, like the seed's loader."""
    import numpy as np

    p = ctx.params
    x, y = toy_set(SIZE, p["seed"])
    # The seed split with torch.utils.data.random_split (torch's RNG); here one NumPy permutation,
    # so both frameworks get the same 80/20 split.
    rows = np.random.default_rng(p["seed"]).permutation(SIZE)
    n_train = int(TRAIN_FRACTION * SIZE)
    train, test = rows[:n_train], rows[n_train:]
    what = f"toy set of seed 002 ({SIZE} points, seed {p['seed']})"
    data = ImageData(x[train], y[train], x[test], y[test], 2, what, synthetic_record(what, p["seed"]))
    data = subset(data, p["train_samples"], p["test_samples"])
    use_data(ctx, data, unit="points")
    return data, epoch_orders(len(data.train_y), p["epochs"], p["seed"], shuffle=False)


def recipe(ctx: Context) -> Recipe:
    """This suite's model and the job's training parameters, as both frameworks' loops read them."""
    return make_recipe(ctx, layers=LAYERS, title=TITLE, flops_per_sample=None)
