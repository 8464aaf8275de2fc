"""What both predictive coding implementations share: data, initial weights, checks, metrics.

The algorithm (seed 003, pcax 0.5.0 "Tutorial 0"), in the notation both implementations use:
weights W_l are stored (fan_in, fan_out) so a batch of row vectors computes x @ W + b.

    x_0 = pixels / 255 (fixed), x_1 .. x_H free value nodes, x_L = one-hot label (clamped)
    u_l = tanh(x_{l-1} W_l + b_l) for l <= H,  u_L = x_H W_L + b_L   (each layer reads x, not u)
    E   = sum over the batch of sum_l 0.5 * ||x_l - u_l||^2
    per batch: forward initialisation x_l := u_l (l <= H); T steps x_l -= x_lr * dE/dx_l;
               one Adam step on all W_l, b_l with dE/dW

Everything here runs on NumPy arrays (every stack ships NumPy) so both frameworks receive the
same bytes and their results are summarised by the same float64 code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from suites.contract.datasets import SYNTHETIC, epoch_orders, fetched_images, subset, synthetic_images
from suites.contract.errors import JobError
from suites.runtime.context import Context

SHAPE = (28, 28, 1)
CLASSES = 10
TRAIN, TEST = 60_000, 10_000
ADAM_B1 = 0.9  # optax.adam and torch.optim.Adam defaults: b1 0.9, b2 0.999, eps 1e-8
ADAM_B2 = 0.999
ADAM_EPS = 1e-8
SAMPLES_PER_TENSOR = 8


@dataclass
class Data:
    """float32 (N, 784) pixels in [0, 1], float32 (N, 10) one-hot targets, int32 (N,) labels."""

    train_x: Any
    train_t: Any
    train_y: Any
    test_x: Any
    test_y: Any
    orders: Any  # (epochs, n) int32: the same shuffled order per epoch in every framework and variant
    starts: list[int]  # first sample of every full batch (drop_last, as pcax requires)
    batch: int


def sizes(params: dict[str, Any]) -> list[int]:
    return [SHAPE[0] * SHAPE[1] * SHAPE[2]] + [int(params["hidden"])] * int(params["layers"]) + [CLASSES]


def variants(params: dict[str, Any]) -> list[str]:
    chosen = str(params["variants"])
    return ["per-batch", "low-overhead"] if chosen == "both" else [chosen]


def load(ctx: Context) -> Data:
    import numpy as np

    p = ctx.params
    if p["dataset"] == SYNTHETIC:
        images = synthetic_images(
            SHAPE, CLASSES, p["train_samples"] or TRAIN, p["test_samples"] or TEST, p["seed"], "MNIST"
        )
    else:
        images = subset(fetched_images(ctx.data_dir, p["dataset"], CLASSES), p["train_samples"], p["test_samples"])
    n = len(images.train_y)
    batch = int(p["batch_size"])
    if n < batch:
        raise JobError(f"batch_size={batch} is larger than the {n} training samples: lower batch_size")
    ctx.note(f"data: {images.source}; {n} train, {len(images.test_y)} test samples; pixels / 255, no normalisation")

    def flat(x: Any) -> Any:
        return x.reshape(len(x), -1).astype(np.float32) / np.float32(255.0)

    onehot = (images.train_y[:, None] == np.arange(CLASSES)[None, :]).astype(np.float32)
    orders = epoch_orders(n, int(p["epochs"]), int(p["seed"]), shuffle=True)
    starts = [i * batch for i in range(n // batch)]
    ctx.note(f"{len(starts)} batches of {batch} per epoch (last partial batch of {n % batch} dropped)")
    return Data(
        flat(images.train_x),
        onehot,
        images.train_y.astype(np.int32),
        flat(images.test_x),
        images.test_y.astype(np.int32),
        orders,
        starts,
        batch,
    )


def init_weights(params: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Equinox's nn.Linear initialisation (what pcax wraps): W, b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).

    Drawn once from a NumPy seed and loaded into both frameworks, so they start identical.
    """
    import numpy as np

    rng = np.random.default_rng(np.random.SeedSequence([int(params["seed"]), 0x9C]))
    dims = sizes(params)
    weights = []
    for fan_in, fan_out in zip(dims[:-1], dims[1:], strict=True):
        bound = 1.0 / np.sqrt(fan_in)
        w = rng.uniform(-bound, bound, size=(fan_in, fan_out)).astype(np.float32)
        b = rng.uniform(-bound, bound, size=(fan_out,)).astype(np.float32)
        weights.append((w, b))
    return weights


def first_batch(data: Data) -> Any:
    """The sample indices of the first batch of epoch 1: the batch of the agreement checks."""
    return data.orders[0][: data.batch]


@dataclass
class FirstStep:
    """One framework's (or variant's) results on the first batch, from the initial weights."""

    energies: list[float]  # after forward initialisation, then after each of the T x-steps
    grads: list[Any]  # dE/dW1, dE/db1, ... at the w-step (NumPy)
    weights: list[Any]  # W1, b1, ... after the w-step (NumPy)


def _sample_rows(size: int, seed: int) -> Any:
    import numpy as np

    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5A]))
    return rng.choice(size, size=min(SAMPLES_PER_TENSOR, size), replace=False)


def weight_summary(weights: list[Any], initial: list[Any], w_lr: float) -> list[float]:
    """Per tensor: ||W|| after the w-step, then ||W - W0|| / w_lr (the size of Adam's first step).

    Not single entries: Adam's first step is w_lr * g / (|g| + eps), which flips for entries
    whose gradient is within rounding of zero (measured: 63 of 100 352 entries of W1 differ by
    up to 3e-4 between the frameworks). Norms stay within ~1e-5 of each other.
    """
    import numpy as np

    out: list[float] = []
    for w, w0 in zip(weights, initial, strict=True):
        a = np.asarray(w, dtype=np.float64)
        out.append(float(np.linalg.norm(a)))
        out.append(float(np.linalg.norm(a - np.asarray(w0, dtype=np.float64)) / w_lr))
    return out


def grad_norms(grads: list[Any]) -> list[float]:
    import numpy as np

    return [float(np.linalg.norm(np.asarray(g, dtype=np.float64))) for g in grads]


def grad_samples(grads: list[Any], seed: int) -> list[float]:
    """Per tensor: 8 entries at fixed positions, divided by the tensor's largest |entry|.

    Norms cannot see a transposed or permuted gradient; these entries can. Scaling makes one
    absolute tolerance fit every layer.
    """
    import numpy as np

    out: list[float] = []
    for i, g in enumerate(grads):
        a = np.asarray(g, dtype=np.float64).reshape(-1)
        scale = float(np.max(np.abs(a))) or 1.0
        out.extend(float(v) / scale for v in a[_sample_rows(a.size, seed + i)])
    return out


def energy_ratio(energies: list[float]) -> float:
    return max(b / a for a, b in zip(energies[:-1], energies[1:], strict=True))


def max_rel_diff(a: FirstStep, b: FirstStep, initial: list[Any], w_lr: float) -> float:
    """Largest |a - b| / |b| over the energies, the gradient norms and the weight summary."""
    pairs = list(zip(a.energies, b.energies, strict=True))
    pairs += list(zip(grad_norms(a.grads), grad_norms(b.grads), strict=True))
    pairs += list(zip(weight_summary(a.weights, initial, w_lr), weight_summary(b.weights, initial, w_lr), strict=True))
    return max(abs(x - y) / (abs(y) if y else 1.0) for x, y in pairs)


def record_first_step(ctx: Context, steps: dict[str, FirstStep]) -> None:
    """The agreement checks: from the per-batch variant when it ran, else the one that did."""
    p = ctx.params
    initial = [a for layer in init_weights(p) for a in layer]
    w_lr = float(p["w_lr"]) or 1.0
    ref = steps.get("per-batch") or next(iter(steps.values()))
    ctx.check("energy_x_steps", ref.energies)
    ctx.check("w_grad_norms", grad_norms(ref.grads))
    ctx.check("w_grad_samples", grad_samples(ref.grads, int(p["seed"])))
    ctx.check("weights_after_w_step", weight_summary(ref.weights, initial, w_lr))
    ctx.check("x_step_energy_ratio", energy_ratio(ref.energies))
    ctx.progress("first batch energies: " + ", ".join(f"{e:.6g}" for e in ref.energies))
    if len(steps) == 2:
        diff = max_rel_diff(steps["low-overhead"], steps["per-batch"], initial, w_lr)
        ctx.check("variants_agree", diff)
        ctx.progress(f"low-overhead vs per-batch on the first step: max relative difference {diff:.2g}")


def record_variant(ctx: Context, label: str, history: Any, accuracy: float, how: str) -> None:
    """One variant's metrics, under names the other framework uses too (so they sit side by side)."""
    first, steady = history.first, history.steady
    ctx.record_time(
        f"epoch [{label}]",
        first_call=first.seconds,
        samples=[e.seconds for e in steady],
        description=f"one training epoch ({how}); first call = epoch 1 with compilation, samples = later epochs",
        probes=[e.probe for e in steady],
        first_probe=first.probe,
        **history.guarded(),
    )
    ctx.value(
        f"energy after x-steps, epoch 1 [{label}]",
        first.loss,
        unit="",
        better="lower",
        description="mean over the epoch's samples of the energy after the T x-steps (before the w-step)",
    )
    ctx.value(
        f"energy after x-steps, last epoch [{label}]",
        steady[-1].loss,
        unit="",
        better="lower",
        description="mean over the last epoch's samples of the energy after the T x-steps",
    )
    ctx.value(f"test accuracy [{label}]", accuracy, unit="%", description="argmax of u_L on the test split")
    ctx.note(f"{label}: {how}")
    ctx.note(f"{label}: energy after x-steps per epoch: " + " ".join(f"{e.loss:.5g}" for e in history.epochs))
    ctx.note(f"{label}: train accuracy per epoch (%): " + " ".join(f"{e.accuracy:.2f}" for e in history.epochs))
    ctx.note(f"{label}: compilations per epoch: " + " ".join(str(e.compilations) for e in history.epochs))
    ctx.progress(f"{label}: test accuracy {accuracy:.2f} %")


def record_speedup(ctx: Context, histories: dict[str, Any]) -> None:
    if len(histories) != 2:
        return
    import statistics

    slow = statistics.median(e.seconds for e in histories["per-batch"].steady)
    fast = statistics.median(e.seconds for e in histories["low-overhead"].steady)
    ctx.value(
        "speed-up low-overhead vs per-batch",
        slow / fast,
        unit="x",
        description="median steady epoch of the per-batch variant / that of the low-overhead variant",
        derived_from=["epoch [per-batch]", "epoch [low-overhead]"],
    )
    ctx.progress(f"low-overhead variant is {slow / fast:.2f}x the speed of the per-batch one")
