"""What both ResNet18 implementations share: the architecture's parameter list, the initial
weights (drawn once in NumPy, loaded into both), the data, FLOPs, and the cold/warm metrics.

The seed (004) did not record image size, batch size, optimiser or epochs; the defaults here
are choices, documented in spec.py. Parameters are named and shaped as in PyTorch
(torchvision's ResNet18: conv weights (out, in, kh, kw)); the Flax model maps its own names
and layouts onto these (see models_flax.py).
"""

from __future__ import annotations

import math
from typing import Any

from suites.contract.datasets import (
    SYNTHETIC,
    ImageData,
    ManifestError,
    epoch_orders,
    fetched_images,
    read_manifest,
    subset,
    synthetic_images,
)
from suites.contract.errors import JobError
from suites.runtime.context import Context, Readings
from suites.runtime.training import dataset_name, use_data

CLASSES = 2  # folder 0/ cats, folder 1/ dogs; one logit, sigmoid + binary cross-entropy
STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))  # (channels, stride of the first block)
BLOCKS = 2  # BasicBlocks per stage: ResNet18 = [2, 2, 2, 2]
SYNTHETIC_TRAIN, SYNTHETIC_TEST = 2000, 500
# ImageNet statistics (the usual choice for natural photographs); the same in both frameworks.
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
BN_MOMENTUM = 0.1  # PyTorch's convention (new = 0.9 old + 0.1 batch); Flax's momentum 0.9 is the same
BN_EPS = 1e-5
SGD_MOMENTUM = 0.9
TITLE = "ResNet18 (BasicBlock [2, 2, 2, 2], BatchNorm), binary head (512 -> 1 logit)"


def param_shapes() -> list[tuple[str, tuple[int, ...]]]:
    """Every trainable tensor of ResNet18 with a one-logit head, in PyTorch's names and layouts."""
    shapes: list[tuple[str, tuple[int, ...]]] = [("conv1.weight", (64, 3, 7, 7))]
    shapes += [("bn1.weight", (64,)), ("bn1.bias", (64,))]
    cin = 64
    for s, (cout, stride) in enumerate(STAGES, start=1):
        for b in range(BLOCKS):
            pre = f"layer{s}.{b}"
            first_in = cin if b == 0 else cout
            shapes.append((f"{pre}.conv1.weight", (cout, first_in, 3, 3)))
            shapes += [(f"{pre}.bn1.weight", (cout,)), (f"{pre}.bn1.bias", (cout,))]
            shapes.append((f"{pre}.conv2.weight", (cout, cout, 3, 3)))
            shapes += [(f"{pre}.bn2.weight", (cout,)), (f"{pre}.bn2.bias", (cout,))]
            if b == 0 and (stride != 1 or first_in != cout):
                shapes.append((f"{pre}.downsample.0.weight", (cout, first_in, 1, 1)))
                shapes += [(f"{pre}.downsample.1.weight", (cout,)), (f"{pre}.downsample.1.bias", (cout,))]
        cin = cout
    shapes += [("fc.weight", (1, 512)), ("fc.bias", (1,))]
    return shapes


def expected_param_count() -> int:
    return sum(math.prod(shape) for _, shape in param_shapes())


def init_weights(seed: int) -> dict[str, Any]:
    """torchvision's ResNet initialisation, drawn once in NumPy so both frameworks start identical.

    Convolutions: Kaiming normal, fan_out, ReLU gain (std = sqrt(2 / (out * kh * kw)));
    BatchNorm: scale 1, bias 0; the head: PyTorch's Linear default U(-1/sqrt(512), 1/sqrt(512)).
    """
    import numpy as np

    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7E5]))
    weights: dict[str, Any] = {}
    for name, shape in param_shapes():
        if len(shape) == 4:
            fan_out = shape[0] * shape[2] * shape[3]
            weights[name] = rng.normal(0.0, math.sqrt(2.0 / fan_out), size=shape).astype(np.float32)
        elif name.startswith("fc."):
            bound = 1.0 / math.sqrt(512)
            weights[name] = rng.uniform(-bound, bound, size=shape).astype(np.float32)
        elif name.endswith(".weight"):
            weights[name] = np.ones(shape, np.float32)
        else:
            weights[name] = np.zeros(shape, np.float32)
    return weights


def flops_per_sample(size: int) -> float:
    """Training FLOPs per image: 3 x forward multiply-adds x 2 (convolutions and the head)."""
    macs = 0
    spatial = (size + 2 * 3 - 7) // 2 + 1  # stem conv 7x7 stride 2 pad 3
    macs += spatial * spatial * 64 * 3 * 49
    spatial = (spatial + 2 - 3) // 2 + 1  # max pool 3x3 stride 2 pad 1
    cin = 64
    for cout, stride in STAGES:
        for b in range(BLOCKS):
            s = stride if b == 0 else 1
            out = (spatial + 2 - 3) // s + 1
            macs += out * out * cout * cin * 9 + out * out * cout * cout * 9
            if b == 0 and (s != 1 or cin != cout):
                macs += out * out * cout * cin
            spatial, cin = out, cout
    macs += 512
    return 3.0 * 2.0 * macs


def load(ctx: Context) -> tuple[ImageData, Any]:
    """uint8 NHWC images, int32 labels, and the (epochs, n) sample orders every framework uses."""
    p = ctx.params
    size = int(p["image_size"])
    name = dataset_name(ctx)
    if name == SYNTHETIC:
        data = synthetic_images(
            (size, size, 3),
            CLASSES,
            p["train_samples"] or SYNTHETIC_TRAIN,
            p["test_samples"] or SYNTHETIC_TEST,
            p["seed"],
            "cats-vs-dogs",
        )
    else:
        try:
            manifest = read_manifest(ctx.data_dir, name) if ctx.data_dir is not None else None
        except ManifestError as error:
            raise JobError(f"{error}: run `harness data fetch {name} --force` on the host") from None
        stored = (manifest or {}).get("image_size")
        if stored is not None and int(stored) != size:
            raise JobError(
                f"the stored {name} images are {stored}x{stored}, not image_size={size}: pass "
                f"--param image_size={stored}, or store them again with `harness data fetch {name} --size {size} "
                f"--force` (or `harness data import {name} PATH --size {size} --force`)"
            )
        data = subset(fetched_images(ctx.data_dir, name, CLASSES), p["train_samples"], p["test_samples"])
        if data.shape != (size, size, 3):
            raise JobError(f"{name} images have shape {data.shape}, expected ({size}, {size}, 3)")
    use_data(ctx, data, unit=f"images of {size}x{size}")
    orders = epoch_orders(len(data.train_y), p["epochs"], p["seed"], shuffle=True)
    return data, orders


def inference_flops(size: int) -> float:
    """Inference FLOPs per image: one forward pass, a third of a training step's."""
    return flops_per_sample(size) / 3.0


def inference_images(data: ImageData, batch: int) -> Any:
    """`batch` uint8 NHWC test images (the test set repeated where it is shorter): every framework's
    request at a batch size holds the same images."""
    import numpy as np

    rows = np.arange(batch) % len(data.test_x)
    return np.ascontiguousarray(data.test_x[rows])


def infer(ctx: Context, request: Any, how: str) -> None:
    """The inference loop (runtime/inference.py) over a framework's `request(batch)`: images of image_size,
    one forward pass's FLOPs each, in the job's compute dtype."""
    from suites.contract.settings import compute_dtype
    from suites.runtime import inference

    size = int(ctx.params["image_size"])
    model = inference.Model(
        request=request,
        unit="images",
        flops_per_row=inference_flops(size),
        dtype=compute_dtype(ctx.precision),
        description=f"ResNet18 forward on {size}x{size} images, evaluation mode, {how}",
    )
    inference.run(ctx, model)


def probe_batch(data: ImageData, n: int = 8) -> Any:
    """The first n test images: the initial-logits check runs both models on exactly these."""
    return data.test_x[:n]


# ---------------------------------------------------------------------------------------------
# The cold/warm split and the memory figures, recorded under the same names by both frameworks.


def record_transfer(
    ctx: Context, seconds: list[float], nbytes: int, probes: list[Any], readings: Readings | None = None
) -> None:
    """`probes`: the sync-escape probe after each copy (runtime/syncguard.py), first copy included;
    `readings`: the contention readings around each copy's clock (runtime/context.py), first copy included."""
    later = None
    if readings is not None:  # the cold first copy is the first call: its readings only widen the windows
        later = Readings(
            readings.before[1:], readings.after[1:], readings.gpu[1:], [*readings.before[:1], *readings.after[:1]]
        )
    ctx.record_time(
        "data to device",
        first_call=seconds[0],
        samples=seconds[1:],
        description=f"host -> device copy of the train and test images ({nbytes / 2**20:.1f} MiB), synchronised; "
        "first call = the cold first copy, samples = repeated copies",
        probes=probes[1:],
        first_probe=probes[0],
        readings=later,
    )


def record_cold_split(
    ctx: Context, first_epoch: float, compile_s: float | None, warm: list[float], transfer: float, why: str = ""
) -> None:
    """Epoch 1 = compilation + the rest (compute and first-run costs); the warm epochs for scale.

    `compile_s` None: compilation time not observable (`why`): neither split row is recorded, since
    a zero would move the compilation into "compute".
    """
    import statistics

    warm_median = statistics.median(warm)
    if compile_s is None:
        why = why or "no compilation timer"
        ctx.training["cold_split"] = {"compilation": "not observable", "why": why}
        split = f"compilation not observable ({why})"
    else:
        compute = max(first_epoch - compile_s, 0.0)
        split = f"= compilation {compile_s:.3f} s + compute {compute:.3f} s"
        ctx.value(
            "cold epoch: compilation",
            compile_s,
            unit="s",
            better="lower",
            description="trace, lowering and XLA compilation inside epoch 1 (jax.monitoring); 0 for eager PyTorch",
        )
        ctx.value(
            "cold epoch: compute",
            compute,
            unit="s",
            better="lower",
            description="epoch 1 minus its compilation: the work itself plus first-run costs (allocator growth, "
            "kernel selection, lazy module loading)",
        )
    ctx.value(
        "cold epoch / warm epoch",
        first_epoch / warm_median,
        unit="x",
        better="lower",
        description="epoch 1 (with compilation) over the median warm epoch",
        # Made of the epoch metric's seconds, where it was recorded (a steady epoch ran): excluded with it.
        derived_from="epoch" if any(m["name"] == "epoch" and m["kind"] == "time" for m in ctx.metrics) else None,
    )
    line = (
        f"cold epoch 1 {first_epoch:.3f} s {split}; "
        f"warm epoch median {warm_median:.3f} s; data to device once before epoch 1: {transfer:.3f} s"
    )
    ctx.note(line)
    ctx.progress(line)


def record_memory_extras(ctx: Context, *, reserve_bytes: int | None, label: str, description: str) -> None:
    if reserve_bytes is not None:
        ctx.value(label, reserve_bytes / 2**20, unit="MiB", better="lower", description=description)
