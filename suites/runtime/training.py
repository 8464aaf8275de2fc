"""The timing contract for training suites: epochs instead of repeated calls.

One epoch is one sample. The first epoch (trace, compile, autotune, plus one epoch of work)
is the metric's first call, the later epochs are its steady samples, and every epoch ends with
the framework's synchronisation on the whole training state before the clock stops. Loss and
accuracy stay on the device during an epoch and are read only after the clock has stopped, so
no host synchronisation happens inside an epoch.

Standard library only; the framework-specific loops live in training_jax.py / training_torch.py.
"""

from __future__ import annotations

import gc
import math
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suites.runtime.context import Context
from suites.runtime.spec import Param
from suites.runtime.syncguard import Probe

MIB = float(1 << 20)

# Shared by every training suite so `harness run --param` reads the same everywhere.
VARIANTS = ("default", "eager", "compiled", "scan")
VARIANT_HELP = (
    "default: each framework's idiomatic fast path (flax: jax.jit of one train step; pytorch: eager); "
    "eager: no compilation (flax op by op, pytorch eager); compiled: flax jit step, pytorch torch.compile; "
    "scan: flax jits a whole epoch with lax.scan (pytorch: skipped)"
)


def common_params(
    *,
    datasets: tuple[str, ...],
    dataset_help: str,
    epochs: int,
    batch_size: int,
    lr: float,
    drop_last: bool,
    seed: int = 42,
) -> tuple[Param, ...]:
    """The parameters every training suite shares, with the same names, ranges and meanings."""
    return (
        Param("dataset", "str", datasets[0], dataset_help, choices=datasets),
        Param("epochs", "int", epochs, "training epochs; epoch 1 (compilation) is reported apart", min=2, max=1000),
        Param("batch_size", "int", batch_size, "samples per training step", min=1, max=65536),
        Param("lr", "float", lr, "learning rate", min=0.0, max=10.0),
        Param(
            "seed",
            "int",
            seed,
            "seed of the data (synthetic), split, sample orders and model init",
            min=0,
            max=2**31 - 1,
        ),  # fmt: skip
        Param("drop_last", "bool", drop_last, "skip the last partial batch of each epoch (one compilation less)"),
        Param("train_samples", "int", 0, "use the first N training samples (0: all)", min=0, max=10_000_000),
        Param("test_samples", "int", 0, "use the first N test samples (0: all)", min=0, max=10_000_000),
        Param("variant", "str", "default", VARIANT_HELP, choices=VARIANTS),
        Param("artifacts", "bool", False, "write the model summary (and jaxpr/HLO of the JAX train step)"),
    )


@dataclass(frozen=True)
class Layer:
    """A layer with weights, in Flax's layout: conv kernel (kh, kw, in, out), dense kernel (in, out).

    `flattened_from`: for the first dense layer after a conv stack, the (C, H, W) it flattens;
    PyTorch flattens channel-first, Flax channel-last, so its rows are permuted for PyTorch.
    """

    name: str
    kernel: tuple[int, ...]
    flattened_from: tuple[int, int, int] | None = None


def initial_weights(layers: Sequence[Layer], seed: int) -> dict[str, tuple[Any, Any]]:
    """The same initial weights for every framework, drawn once with NumPy.

    PyTorch's default rule for Linear and Conv (weights and biases uniform in +-1/sqrt(fan_in)),
    so that both frameworks start from one point: the `initial_logits` check then proves the two
    models compute the same function, and accuracy differences come only from dropout streams.
    """
    import numpy as np

    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x1417]))
    weights = {}
    for layer in layers:
        fan_in = math.prod(layer.kernel[:-1])
        bound = 1.0 / math.sqrt(fan_in)
        kernel = rng.uniform(-bound, bound, size=layer.kernel).astype(np.float32)
        bias = rng.uniform(-bound, bound, size=layer.kernel[-1]).astype(np.float32)
        weights[layer.name] = (kernel, bias)
    return weights


PROBE_SAMPLES = 4


def initial_logits_check(ctx: Context, logits: list[list[float]], loss: float) -> None:
    """Logits of the shared initial weights on the first samples: equal only if the models are."""
    ctx.check("initial_logits", [v for row in logits for v in row])  # flat: sample-major
    ctx.progress(
        f"initial loss on the first batch {loss:.6f}; logits of sample 0: " + " ".join(f"{v:.5f}" for v in logits[0])
    )


@dataclass
class Epoch:
    seconds: float
    loss: float  # mean training loss over the epoch's samples
    accuracy: float  # training accuracy over the epoch, percent
    compilations: int
    probe: Probe | None = None  # the sync-escape barrier run after the epoch's clock stopped


@dataclass
class History:
    epochs: list[Epoch] = field(default_factory=list)
    samples_per_epoch: int = 0

    @property
    def first(self) -> Epoch:
        return self.epochs[0]

    @property
    def steady(self) -> list[Epoch]:
        return self.epochs[1:]


def train(
    ctx: Context,
    *,
    epochs: int,
    run_epoch: Callable[[int], Any],
    read: Callable[[Any], tuple[float, float]],
    samples_per_epoch: int,
    compilations: Callable[[], int] = lambda: 0,
) -> History:
    """Run `epochs` epochs, one clock per epoch.

    `run_epoch(e)` dispatches epoch e and returns what must be synchronised (the final state
    and the on-device loss/accuracy totals); `read(out)` turns that into (mean loss, accuracy
    percent) after the clock has stopped; `compilations()` is a running count of compilations.
    """
    history = History(samples_per_epoch=samples_per_epoch)
    for e in range(epochs):
        before = compilations()
        gc.collect()
        was_enabled = gc.isenabled()
        gc.disable()  # a collection inside one epoch is noise another framework may not pay
        try:
            start = time.perf_counter()
            out = run_epoch(e)
            ctx.sync(out)
            seconds = time.perf_counter() - start
        finally:
            if was_enabled:
                gc.enable()
        probe = ctx.probe_escape()  # outside the clock: finds work the epoch left running
        loss, accuracy = read(out)
        compiled = compilations() - before
        history.epochs.append(Epoch(seconds, loss, accuracy, compiled, probe))
        ctx.progress(
            f"epoch {e + 1}/{epochs}: loss {loss:.4f}, train accuracy {accuracy:.2f} %, {seconds:.3f} s"
            + (f", {compiled} compilation{'s' if compiled != 1 else ''}" if compiled else "")
        )
    return history


def record(ctx: Context, history: History, *, flops_per_sample: float | None = None) -> None:
    """The metrics every training suite reports, under the same names."""
    first, steady = history.first, history.steady
    n = history.samples_per_epoch
    ctx.record_time(
        "epoch",
        first_call=first.seconds,
        samples=[e.seconds for e in steady],
        flops=flops_per_sample * n if flops_per_sample else None,
        dtype="float32" if flops_per_sample else None,
        description="one training epoch; first call = epoch 1 with compilation, samples = later epochs",
        probes=[e.probe for e in steady],
        first_probe=first.probe,
    )
    ctx.value(
        "throughput",
        [n / e.seconds for e in steady],
        unit="samples/s",
        description="training samples per second in the steady epochs",
    )
    ctx.value("train loss (first epoch)", first.loss, unit="", better="lower", description="mean loss of epoch 1")
    ctx.value(
        "train loss (last epoch)", steady[-1].loss, unit="", better="lower", description="mean loss of the last epoch"
    )
    ctx.value(
        "compilations (first epoch)",
        first.compilations,
        unit="",
        better="lower",
        description="XLA / torch.compile compilations during epoch 1 (one per distinct batch shape when jitted)",
    )
    ctx.value(
        "compilations (later epochs)",
        sum(e.compilations for e in steady),
        unit="",
        better="lower",
        description="compilations after epoch 1; anything but 0 means retracing in the steady state",
    )
    ctx.note("train loss per epoch: " + " ".join(f"{e.loss:.4f}" for e in history.epochs))
    ctx.note("train accuracy per epoch (%): " + " ".join(f"{e.accuracy:.2f}" for e in history.epochs))
    ctx.note("compilations per epoch: " + " ".join(str(e.compilations) for e in history.epochs))


def record_accuracy(ctx: Context, accuracy: float) -> None:
    ctx.value("test accuracy", accuracy, unit="%", description="accuracy on the test split after the last epoch")
    ctx.check("test_accuracy", accuracy)
    ctx.progress(f"test accuracy {accuracy:.2f} %")


# ---------------------------------------------------------------------------------------------
# Peak memory. On the CPU the process's peak resident set; on a GPU the framework's allocator.

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def reset_host_peak() -> bool:
    """Restart the kernel's peak-RSS counter (Linux: write 5 to clear_refs); False if unsupported."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def host_peak_bytes() -> int:
    """Peak resident set size of this process: VmHWM where available, else ru_maxrss."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)  # macOS reports bytes, Linux KiB


def record_peak_memory(ctx: Context, *, device_bytes: int | None, host_reset: bool, how: str) -> None:
    """`device_bytes`: the GPU allocator's peak (None on the CPU, where host RSS is the number)."""
    if device_bytes is not None:
        ctx.value(
            "peak memory",
            device_bytes / MIB,
            unit="MiB",
            better="lower",
            description=f"peak device memory during training from the allocator ({how})",
        )
        ctx.note(f"peak memory: device allocator statistics ({how})")
        return
    since = "since just before training" if host_reset else "since the process started (peak counter not resettable)"
    ctx.value(
        "peak memory",
        host_peak_bytes() / MIB,
        unit="MiB",
        better="lower",
        description=f"peak resident memory of the job process {since}: framework, data and training",
    )
    ctx.note(f"peak memory: host RSS (VmHWM) {since}")


# ---------------------------------------------------------------------------------------------
# Artefacts.


def model_summary(title: str, rows: Sequence[tuple[str, tuple[int, ...]]]) -> str:
    """A plain-text table of parameter tensors: name, shape, count, and the total."""
    width = max([len(name) for name, _ in rows] + [9])
    lines = [title, "", f"{'parameter':<{width}}  {'shape':<20}  {'count':>10}"]
    total = 0
    for name, shape in rows:
        count = 1
        for d in shape:
            count *= d
        total += count
        lines.append(f"{name:<{width}}  {str(tuple(shape)):<20}  {count:>10,}")
    lines.append(f"{'total':<{width}}  {'':<20}  {total:>10,}")
    return "\n".join(lines) + "\n"


def write_artifact(ctx: Context, name: str, text: str) -> Path:
    path = ctx.artifact_path(name)
    path.write_text(text, encoding="utf-8")
    ctx.note(f"artefact: {path.parent.name}/{name}")
    return path
