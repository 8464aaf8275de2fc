"""Is the `mnist` suite at least as fast as the plain loop people write? (issue: training suites)

For flax and pytorch, the steady epoch time and samples/s of the same CNN (suites/mnist) on
synthetic MNIST-shaped data, measured two ways:
  suite:     `harness run --suite mnist` (data resident on the device, one jitted step with donated
             state / preloaded tensors with index batches, nothing synchronised inside an epoch);
  reference: a plain loop written the way the official examples write theirs, in its own process:
             flax  -- the Flax NNX MNIST tutorial: `@nnx.jit train_step(model, optimizer, batch)`,
                      batches gathered on the host from NumPy arrays by a permutation (like the
                      Flax Linen example), the loss kept per step and averaged after the epoch;
             pytorch -- pytorch/examples mnist: a DataLoader(shuffle=True, batch 128) over the
                      (already normalised) tensors, `.to(device)` per batch, `loss.item()` every
                      10 batches for the log line.
Both sides use the same model, the same number of samples per epoch, SGD lr .01 momentum .9,
batch 128, and report the median of the epochs after the first (which compiles).
`--rounds` interleaved rounds (reference, then suite): the verdict is the median over rounds of
the suite/reference ratio within a round, which cancels most drift from other load on the
machine; the best round of each side is printed too. Target: suite / reference <= 1.

    python benchmarks/mnist_reference.py [--samples 5120] [--epochs 4] [--rounds 2] [--frameworks flax,pytorch]

A full 60 000-image epoch of this CNN takes minutes on a 2-core CPU, so the default is 40 steps
of 128 per epoch (5 120 images drawn by the same synthetic generator): pass --samples 60000 for
full epochs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BATCH, LR, MOMENTUM = 128, 0.01, 0.9


def _data(samples: int, seed: int) -> tuple[Any, Any]:
    """The suite's own synthetic generator, normalised as the suite does: the same pixels."""
    import numpy as np

    from suites.contract.datasets import synthetic_images
    from suites.mnist.common import MEAN, SHAPE, STD

    data = synthetic_images(SHAPE, 10, samples, 10, seed, "MNIST")
    x = ((data.train_x.astype(np.float32) / 255.0 - MEAN) / STD).astype(np.float32)
    return x, data.train_y.astype(np.int64)


def reference_flax(samples: int, epochs: int, seed: int) -> list[float]:
    import jax
    import numpy as np
    import optax
    from flax import nnx

    from suites.mnist.models_flax import CNN

    jax.config.update("jax_default_matmul_precision", "highest")  # as the harness sets it
    x, y = _data(samples, seed)  # NHWC float32 on the host, like the tutorial's NumPy batches
    model = CNN(nnx.Rngs(params=seed, dropout=seed + 1))
    optimizer = nnx.Optimizer(model, optax.sgd(LR, momentum=MOMENTUM), wrt=nnx.Param)

    @nnx.jit
    def train_step(model: CNN, optimizer: nnx.Optimizer, images: jax.Array, labels: jax.Array) -> jax.Array:
        def loss_fn(model: CNN) -> jax.Array:
            logits = model(images)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    rng = np.random.default_rng(seed)
    steps = samples // BATCH
    times = []
    for _ in range(epochs):
        start = time.perf_counter()
        perms = rng.permutation(samples)[: steps * BATCH].reshape(steps, BATCH)  # skip the incomplete batch
        losses = []
        for perm in perms:
            losses.append(train_step(model, optimizer, x[perm], y[perm].astype(np.int32)))
        float(np.mean(jax.device_get(losses)))  # the epoch's log line: waits for every step
        times.append(time.perf_counter() - start)
    return times


def reference_pytorch(samples: int, epochs: int, seed: int) -> list[float]:
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset

    from suites.mnist.models_torch import CNN

    torch.manual_seed(seed)
    x, y = _data(samples, seed)
    dataset = TensorDataset(torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(y))
    loader = DataLoader(dataset, batch_size=BATCH, shuffle=True)
    device = torch.device("cpu")
    model = CNN().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    times = []
    for _ in range(epochs):
        start = time.perf_counter()
        model.train()
        for batch_idx, (data, target) in enumerate(loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = F.log_softmax(model(data), dim=1)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            if batch_idx % 10 == 0:
                loss.item()  # the example's log line
        times.append(time.perf_counter() - start)
    return times


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # as the harness sets it
    return env


def run_reference(framework: str, samples: int, epochs: int, seed: int) -> list[float]:
    proc = subprocess.run(
        [sys.executable, __file__, "--reference", framework, "--samples", str(samples), "--epochs", str(epochs),
         "--seed", str(seed)],
        capture_output=True, text=True, cwd=REPO, env=_env(), check=True,
    )  # fmt: skip
    return [float(t) for t in json.loads(proc.stdout.strip().splitlines()[-1])]


def run_suite(framework: str, samples: int, epochs: int, seed: int, results: Path, variant: str) -> list[float]:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--suite", "mnist", "--frameworks", framework,
         "--backend", "local", "--param", "dataset=synthetic", "--param", f"train_samples={samples}",
         "--param", "test_samples=1000",
         "--param", f"epochs={epochs}", "--param", f"seed={seed}", "--param", f"variant={variant}",
         "--results-dir", str(results), "-q"],
        capture_output=True, text=True, cwd=REPO, env=_env(),
    )  # fmt: skip
    if proc.returncode not in (0, 1):
        raise RuntimeError(proc.stdout + proc.stderr)
    run_dir = Path(proc.stdout.split("run folder: ")[-1].strip())
    doc = json.loads((run_dir / f"{framework}.json").read_text())
    epoch = next(m for m in doc["metrics"] if m["name"] == "epoch")
    return [float(epoch["first_call"])] + [float(s) for s in epoch["samples"]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=40 * BATCH)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--frameworks", default="flax,pytorch")
    parser.add_argument("--flax-scan", action="store_true", help="also time the suite's lax.scan variant")
    parser.add_argument("--reference", choices=("flax", "pytorch"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.samples % BATCH:
        parser.error(f"--samples must be a multiple of {BATCH} so no side has a partial batch")
    if args.reference:
        sys.path.insert(0, str(REPO))
        loop = reference_flax if args.reference == "flax" else reference_pytorch
        print(json.dumps(loop(args.samples, args.epochs, args.seed)))
        return

    def steady(times: list[float]) -> float:
        return statistics.median(times[1:])

    print(f"mnist CNN, {args.samples} synthetic 28x28 images per epoch ({args.samples // BATCH} steps of {BATCH}), "
          f"{args.epochs} epochs: median of epochs 2..{args.epochs}; best of {args.rounds} interleaved rounds")  # fmt: skip
    print(f"{'framework':18} {'reference s/epoch':>18} {'suite s/epoch':>14} {'reference img/s':>16} "
          f"{'suite img/s':>12} {'suite/ref time':>15}")  # fmt: skip
    print("(times and rates: best round of each side; suite/ref: median over rounds of the paired ratio)")
    with tempfile.TemporaryDirectory() as tmp:
        for framework in args.frameworks.split(","):
            variants = ["default"] + (["scan"] if framework == "flax" and args.flax_scan else [])
            ref: list[float] = []
            ours: dict[str, list[float]] = {v: [] for v in variants}
            for _ in range(args.rounds):  # interleaved so drift hits both alike
                ref.append(steady(run_reference(framework, args.samples, args.epochs, args.seed)))
                for v in variants:
                    ours[v].append(steady(run_suite(framework, args.samples, args.epochs, args.seed, Path(tmp), v)))
            for v in variants:
                r, o = min(ref), min(ours[v])
                # Each round runs reference then suite back to back, so the ratio within a round
                # cancels most of the drift from other load; the median of those ratios is the verdict.
                paired = statistics.median(b / a for a, b in zip(ref, ours[v], strict=True))
                label = framework + ("" if v == "default" else f" ({v})")
                # Within 2 %: the rounds' spread on a shared 2-core machine; not a win, not a loss.
                verdict = "faster" if paired < 0.98 else "parity (within 2 %)" if paired <= 1.02 else "SLOWER"
                print(f"{label:18} {r:18.3f} {o:14.3f} {args.samples / r:16.1f} {args.samples / o:12.1f} "
                      f"{paired:15.3f}  {verdict}")  # fmt: skip
                rounds = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(ref, ours[v], strict=True))
                print(f"{'':18} per round, reference/suite s/epoch: {rounds}")


if __name__ == "__main__":
    main()
