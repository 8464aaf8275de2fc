"""The timing contract for training suites: epochs instead of repeated calls.

One epoch is one sample. The first epoch (trace, compile, autotune, plus one epoch of work)
is the metric's first call, the later epochs are its steady samples, and every epoch ends with
the framework's synchronisation on the whole training state before the clock stops. Loss and
accuracy stay on the device during an epoch and are read only after the clock has stopped, so
no host synchronisation happens inside an epoch.

With `curve=true` (the default) or `target_accuracy=P` the test split is evaluated after every
epoch, outside the training clock (on its own clock), and the result's `training.curves` holds
the learning curve; with a target, training stops at the first epoch that reaches P: time-to-target
is the training time of the epochs up to it (epoch 1's compilation included, as a user waits for
it), "not reached" is a status of its own and never a number.

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

from suites.contract import datasets
from suites.contract.datasets import ImageData
from suites.contract.settings import compute_dtype
from suites.runtime import contention, nvml
from suites.runtime.context import ClockState, Context, Readings
from suites.runtime.syncguard import Probe

MIB = float(1 << 20)


def fairness(ctx: Context) -> dict[str, Any]:
    """The result's `training.fairness`: setting -> value, compared across frameworks by the host
    (harness/judge/assessment.py); each framework's loop adds what it controls."""
    found: dict[str, Any] = ctx.training.setdefault("fairness", {})
    return found


def host_copy(device_kind: str, host: bool) -> str | None:
    """How a data=host batch reaches the device: "async" on a GPU (PyTorch: a pinned buffer and a
    non_blocking copy; JAX: jax.device_put, which returns before the copy ends); None with
    data=device or on the CPU (nothing to copy; pinning needs CUDA)."""
    return "async" if host and device_kind == "gpu" else None


def record_fairness(ctx: Context, **settings: bool | str | None) -> None:
    """What the loop used (`settings`: the host copy it made, its algorithm search), and the compute
    dtype `--precision` sets, which every loop records alike."""
    fairness(ctx).update(settings, compute_dtype=compute_dtype(ctx.precision))


def dataset_name(ctx: Context) -> str:
    """The `dataset` parameter with `auto` resolved against the data folder (a JobError if absent)."""
    spec = ctx.spec.param("dataset")
    return datasets.resolve(str(ctx.params["dataset"]), spec.choices or (), ctx.data_dir)


def use_data(ctx: Context, data: ImageData, unit: str = "samples") -> None:
    """Record which data this run trains on: the result's `dataset` field and a note."""
    ctx.dataset = datasets.describe(data)
    fp = ctx.dataset.get("fingerprint")
    ctx.note(
        f"data: {data.source}; {len(data.train_y)} train, {len(data.test_y)} test {unit}"
        + (f"; fingerprint {fp[:16]}" if isinstance(fp, str) else "")
    )


def target_of(ctx: Context) -> float | None:
    value = float(ctx.params.get("target_accuracy", 0.0) or 0.0)
    return value if value > 0 else None


def curve_of(ctx: Context) -> bool:
    """The `curve` parameter; False for a suite that does not declare it (no evaluation it did not ask for)."""
    return bool(ctx.params.get("curve", False))


@dataclass(frozen=True)
class Layer:
    """A layer with weights, in Flax's layout: conv kernel (kh, kw, in, out), dense kernel (in, out).

    `flattened_from`: for the first dense layer after a conv stack, the (C, H, W) it flattens;
    PyTorch flattens channel-first, Flax channel-last, so its rows are permuted for PyTorch.
    """

    name: str
    kernel: tuple[int, ...]
    flattened_from: tuple[int, int, int] | None = None


@dataclass(frozen=True)
class Recipe:
    """One training job as both frameworks' loops read it (training_jax.run, training_torch.run): the
    suite's model (its layers, from which the shared initial weights come; its work per sample; its
    title) and the job's parameters that `common_params` declares for every training suite."""

    layers: Sequence[Layer]
    title: str
    flops_per_sample: float | None  # None: the suite declares no FLOP count (no % of peak)
    seed: int
    batch: int
    drop_last: bool
    epochs: int
    variant: str
    artifacts: bool
    lr: float


def recipe(ctx: Context, *, layers: Sequence[Layer], title: str, flops_per_sample: float | None) -> Recipe:
    p = ctx.params
    return Recipe(
        layers=layers,
        title=title,
        flops_per_sample=flops_per_sample,
        seed=int(p["seed"]),
        batch=int(p["batch_size"]),
        drop_last=bool(p["drop_last"]),
        epochs=int(p["epochs"]),
        variant=str(p["variant"]),
        artifacts=bool(p["artifacts"]),
        lr=float(p["lr"]),
    )


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


def first_step_checks(
    ctx: Context,
    *,
    loss_before: float,
    loss_after: float,
    before: dict[str, Any],
    after: dict[str, Any],
    order: Sequence[str],
    lr: float,
) -> None:
    """Report the first-step checks from NumPy copies of each tensor before and after the step.

    Norms are independent of the layout (a kernel transposed for PyTorch has the same norm), so
    both frameworks report the same numbers for the same step.
    """
    import numpy as np

    values: list[float] = []
    for name in order:
        w0 = np.asarray(before[name], dtype=np.float64)
        w1 = np.asarray(after[name], dtype=np.float64)
        values.append(float(np.linalg.norm(w1)))
        values.append(float(np.linalg.norm(w1 - w0)) / (lr if lr > 0 else 1.0))
    ctx.check("first_step_loss", [loss_before, loss_after])
    ctx.check("first_step_weights", values)
    ctx.progress(f"first step on the first batch: loss {loss_before:.6f} -> {loss_after:.6f}")


@dataclass
class Epoch:
    seconds: float
    loss: float  # mean training loss over the epoch's samples
    accuracy: float  # training accuracy over the epoch, percent
    compilations: int | None  # None: the counter cannot observe compilations in this framework release
    probe: Probe | None = None  # the sync-escape barrier run after the epoch's clock stopped
    energy: Any = None  # GPU jobs: the epoch's nvml.EnergyReading (meter entered/left outside the clock)
    # What the process got while the epoch's clock ran (runtime/contention.py): read just before it
    # started and just after it stopped; `gpu`: the GPU's clock state after it (GPU jobs).
    before: contention.Reading | None = None
    after: contention.Reading | None = None
    gpu: ClockState | None = None


@dataclass
class Evaluation:
    accuracy: float  # test accuracy after the epoch, percent (a language model's: its validation loss)
    seconds: float  # the evaluation's own time (outside the training clock)
    wall: float  # seconds since training started, at the end of this evaluation
    compilations: int | None = None  # inside the evaluation's clock (None: not observable)
    probe: Probe | None = None  # the sync-escape barrier run after the evaluation's clock stopped
    # What the process got while the evaluation's clock ran, as for an epoch.
    before: contention.Reading | None = None
    after: contention.Reading | None = None


@dataclass
class History:
    epochs: list[Epoch] = field(default_factory=list)
    samples_per_epoch: int = 0
    evaluations: list[Evaluation] = field(default_factory=list)
    target: float | None = None
    reached_at: int | None = None  # 1-based epoch that first reached the target
    # The result's `training.compilations`: {"observable": True, "how": ...} or {"observable": False, "why": ...}.
    compilations: dict[str, Any] = field(default_factory=dict)

    @property
    def first(self) -> Epoch:
        return self.epochs[0]

    @property
    def steady(self) -> list[Epoch]:
        return self.epochs[1:]

    def guarded(self) -> dict[str, Any]:
        """`record_time`'s `readings` and `compiled` of the steady epochs (sample i: steady epoch i),
        so every timed number of a training loop reaches the host's guards as `measure`'s do."""
        steady = self.steady
        first = self.first
        readings = Readings(context=[r for r in (first.before, first.after) if r is not None])
        for e in steady:
            if e.before is not None and e.after is not None:
                readings.before.append(e.before)
                readings.after.append(e.after)
            if e.gpu is not None:
                readings.gpu.append(e.gpu)
        complete = len(readings.after) == len(steady)  # epochs built by hand (tests) carry none
        return {"readings": readings if complete else None, "compiled": [e.compilations for e in steady]}


def train(
    ctx: Context,
    *,
    epochs: int,
    run_epoch: Callable[[int], Any],
    read: Callable[[Any], tuple[float, float]],
    samples_per_epoch: int,
    compilations: Callable[[], int | None] | None = None,
    evaluate: Callable[[], float] | None = None,
    target: float | None = None,
    curve: bool = False,
    loss: bool = False,
) -> History:
    """Run up to `epochs` epochs, one clock per epoch.

    `run_epoch(e)` dispatches epoch e and returns what must be synchronised (the final state
    and the on-device loss/accuracy totals); `read(out)` turns that into (mean loss, accuracy
    percent) after the clock has stopped; `compilations()` is a running count of compilations, or
    None when the counter cannot observe them (its `why` says so; None: a loop that compiles nothing).
    `evaluate()`: test accuracy of the current state, run after each epoch's clock has stopped
    when a `target` is set or `curve` asks for a learning curve; training stops early only at
    the first epoch whose accuracy reaches `target`. `loss`: a language model's loop (suites/gpt),
    where an epoch is an interval of steps, `read` gives no accuracy and `evaluate()` answers a
    validation loss, which reaches `target` at or below it.
    """
    unit = "interval" if loss else "epoch"
    counter = compilations if compilations is not None else NothingCompiles()
    history = History(samples_per_epoch=samples_per_epoch, target=target, compilations=compile_record(counter))
    if not history.compilations["observable"]:
        ctx.progress(f"compilations not observable: {history.compilations['why']}")
    began = time.perf_counter()
    for e in range(epochs):
        before = counter()
        gc.collect()
        was_enabled = gc.isenabled()
        gc.disable()  # a collection inside one epoch is noise another framework may not pay
        try:
            with ctx.meter() as meter:  # GPU energy of the epoch; a no-op elsewhere
                clock_state = getattr(meter, "clock_state", None)  # GPU jobs: NVML's SM clock and reasons
                got_before = contention.read(before=True)  # outside the clock, as `measure` reads them
                start = time.perf_counter()
                out = run_epoch(e)
                ctx.sync(out)
                seconds = time.perf_counter() - start
                got_after = contention.read(before=False)
                gpu = clock_state() if clock_state is not None else None
        finally:
            if was_enabled:
                gc.enable()
        probe = ctx.probe_escape()  # outside the clock: finds work the epoch left running
        train_loss, accuracy = read(out)
        after = counter()
        compiled = None if before is None or after is None else after - before
        history.epochs.append(
            Epoch(seconds, train_loss, accuracy, compiled, probe, getattr(meter, "reading", None), got_before,
                  got_after, gpu)
        )  # fmt: skip
        ctx.progress(
            f"{unit} {e + 1}/{epochs}: loss {train_loss:.4f}"
            + ("" if loss else f", train accuracy {accuracy:.2f} %")
            + f", {seconds:.3f} s"
            + (f", {compiled} compilation{'s' if compiled != 1 else ''}" if compiled else "")
        )
        # Time-to-target and learning curves: evaluation after the epoch's clock has stopped, on a
        # clock of its own (reading the accuracy back synchronises it), so the epoch times are the
        # same whether or not a curve is drawn.
        if evaluate is not None and (target is not None or curve):
            ahead = counter()
            got_before = contention.read(before=True)  # outside the clock, as for an epoch
            start = time.perf_counter()
            value = evaluate()
            done = time.perf_counter()
            got_after = contention.read(before=False)
            probe = ctx.probe_escape()
            behind = counter()
            compiled = None if ahead is None or behind is None else behind - ahead
            history.evaluations.append(
                Evaluation(value, done - start, done - began, compiled, probe, got_before, got_after)
            )
            if loss:
                aim = f" (target {target:g})" if target is not None else ""
                ctx.progress(f"{unit} {e + 1}: validation loss {value:.4f}{aim}")
            else:
                aim = f" (target {target:g} %)" if target is not None else ""
                ctx.progress(f"{unit} {e + 1}: test accuracy {value:.2f} %{aim}")
            if target is not None and (value <= target if loss else value >= target):
                history.reached_at = e + 1
                break
    return history


class NothingCompiles:
    """The counter of a loop that compiles nothing (eager code with no compiler behind it)."""

    how = "nothing compiles in this loop (no compiler counter given)"

    def __call__(self) -> int:
        return 0


def compile_record(counter: Callable[[], int | None]) -> dict[str, Any]:
    """The result's `training.compilations`: what the counter counts, or why it cannot count.

    A counter built on events a framework release may rename answers None rather than 0: a silent
    zero would read as "no recompilation" in the steady epochs.
    """
    if counter() is None:
        why = getattr(counter, "why", None)
        return {"observable": False, "why": str(why or "the compilation counter cannot observe compilations")}
    return {"observable": True, "how": str(getattr(counter, "how", None) or "the framework's compilation counter")}


def record(
    ctx: Context, history: History, *, flops_per_sample: float | None = None, variant: str | None = None
) -> None:
    """The metrics every training suite reports, under the same names; `variant`: the loop that ran
    (jit, scan, eager, compiled), shown beside the epoch row so a reader sees what was compared."""
    first, steady = history.first, history.steady
    n = history.samples_per_epoch
    if steady:
        ctx.record_time(
            "epoch",
            first_call=first.seconds,
            samples=[e.seconds for e in steady],
            flops=flops_per_sample * n if flops_per_sample else None,
            dtype="float32" if flops_per_sample else None,
            description="one training epoch; first call = epoch 1 with compilation, samples = later epochs",
            probes=[e.probe for e in steady],
            first_probe=first.probe,
            variant=variant,
            **history.guarded(),
        )
        ctx.value(
            "throughput",
            [n / e.seconds for e in steady],
            unit="samples/s",
            description="training samples per second in the steady epochs",
            derived_from="epoch",
        )
        energy = [e.energy for e in steady if e.energy is not None]
        if energy:  # epoch 1 left out: its energy is mostly compilation on the CPU, idle GPU draw
            nvml.record_energy(ctx, "epoch", energy, n)
    else:  # the target was reached in epoch 1: there is no steady epoch to report
        ctx.note("one epoch only (target reached in epoch 1): no steady epoch, epoch time and throughput not reported")
    last = history.epochs[-1]
    ctx.value("train loss (first epoch)", first.loss, unit="", better="lower", description="mean loss of epoch 1")
    ctx.value("train loss (last epoch)", last.loss, unit="", better="lower", description="mean loss of the last epoch")
    record_compilations(ctx, history)
    ctx.note("train loss per epoch: " + " ".join(f"{e.loss:.4f}" for e in history.epochs))
    ctx.note("train accuracy per epoch (%): " + " ".join(f"{e.accuracy:.2f}" for e in history.epochs))
    ctx.training["curves"] = [learning_curve(ctx, history)]
    if history.target is not None:
        record_target(ctx, history)


def record_compilations(ctx: Context, history: History) -> None:
    """The compilation rows, or none at all (and the reason) when the counter could not observe them."""
    counts = [e.compilations for e in history.epochs]
    observable = dict(history.compilations or {"observable": True, "how": "the framework's compilation counter"})
    if any(c is None for c in counts) and observable.get("observable"):
        observable = {"observable": False, "why": "the compilation counter stopped answering during training"}
    ctx.training["compilations"] = observable
    if not observable["observable"]:
        ctx.note(f"compilations per epoch: not observable ({observable['why']})")
        return
    first, *later = [c for c in counts if c is not None]
    ctx.value(
        "compilations (first epoch)",
        first,
        unit="",
        better="lower",
        description="XLA / torch.compile compilations during epoch 1 (one per distinct batch shape when jitted)",
    )
    ctx.value(
        "compilations (later epochs)",
        sum(later),
        unit="",
        better="lower",
        description="compilations after epoch 1; anything but 0 means retracing in the steady state",
    )
    ctx.note("compilations per epoch: " + " ".join(str(c) for c in counts) + f" ({observable['how']})")


def learning_curve(ctx: Context, history: History) -> dict[str, Any]:
    """One process's learning curve (the result's `training.curves`; rounds concatenate them).

    Every epoch's training seconds, epoch 1 (with compilation) included, because a curve plots
    accuracy against the training time a user waited for; test accuracy only where it was
    evaluated after an epoch (`curve` or a target), never filled in from the final evaluation.
    """
    seed = ctx.params.get("seed")
    curve: dict[str, Any] = {
        "epoch_seconds": [e.seconds for e in history.epochs],
        "train_loss": [e.loss for e in history.epochs],
        "train_accuracy": [e.accuracy for e in history.epochs],
        "test_accuracy": [v.accuracy for v in history.evaluations],
        "evaluation_seconds": [v.seconds for v in history.evaluations],
        "seed": seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
    }
    for key, values in curve.items():
        # The host refuses a file with NaN; fail here with the field's name instead.
        if isinstance(values, list) and not all(math.isfinite(v) for v in values):
            raise ValueError(f"learning curve: {key} holds a value that is not a finite number")
    return curve


@dataclass(frozen=True)
class Goal:
    """What a time-to-target run evaluates: test accuracy after epochs (higher is better), or a
    language model's validation loss after intervals of steps (lower is better)."""

    key: str  # the result's training.target field: "accuracy" or "loss"
    words: str
    split: str
    unit: str  # what one timed unit is called
    lower: bool
    percent: bool
    timed: str = "epoch"  # the time metric of the steady units' seconds (`record`, gpt's `train step`)

    def value(self, v: float) -> str:
        return f"{v:g} %" if self.percent else f"{v:g}"

    def shown(self, v: float) -> str:
        return f"{v:.2f} %" if self.percent else f"{v:.4f}"


ACCURACY = Goal("accuracy", "test accuracy", "test", "epoch", lower=False, percent=True)
LOSS = Goal("loss", "validation loss", "validation", "interval", lower=True, percent=False, timed="train step")


EVALUATION = "evaluation time"


def record_evaluations(ctx: Context, evals: Sequence[Evaluation], goal: Goal) -> None:
    """The evaluations' own clock as a time metric: the first (which compiles) is its first call, the
    later ones its samples, each with its contention readings, compile count and sync probe, so
    the host's guards judge it as every other timed number (a retrace per evaluation is RECOMPILED).
    One evaluation has no steady sample: a note says what it took."""
    first, steady = evals[0], list(evals[1:])
    if not steady:
        ctx.note(f"{EVALUATION}: one evaluation, {first.seconds:.3f} s with its compilation (no steady one)")
        return
    complete = all(e.before is not None and e.after is not None for e in evals)  # built by hand: none
    readings = None
    if complete:
        readings = Readings(
            before=[e.before for e in steady if e.before is not None],
            after=[e.after for e in steady if e.after is not None],
            context=[r for r in (first.before, first.after) if r is not None],
        )
    ctx.record_time(
        EVALUATION,
        first_call=first.seconds,
        samples=[e.seconds for e in steady],
        description=f"{goal.split}-split evaluation after each {goal.unit} (outside the training clock); first "
        "call = the first evaluation, with its compilation",
        probes=[e.probe for e in steady],
        first_probe=first.probe,
        readings=readings,
        compiled=[e.compilations for e in steady],
    )


def record_target(ctx: Context, history: History, goal: Goal = ACCURACY) -> None:
    """Time to target: metrics only when the target was reached; otherwise a status, never a number."""
    target = history.target
    assert target is not None
    evals, unit = history.evaluations, goal.unit
    values = [v.accuracy for v in evals]
    record_evaluations(ctx, evals, goal)
    per = f"{goal.words} per {unit}" + (" (%)" if goal.percent else "")
    ctx.note(f"{per}: " + " ".join(f"{v:.2f}" if goal.percent else f"{v:.4f}" for v in values))
    best = min(values) if goal.lower else max(values)
    record: dict[str, Any] = {
        goal.key: target,
        "status": "not reached",
        "epochs": None,
        "seconds": None,
        "wall_seconds": None,
        "epochs_run": len(history.epochs),
        f"best_{goal.key}": best,
        f"{goal.key}_per_epoch": values,
        "evaluation_seconds": [v.seconds for v in evals],
        "seed": ctx.params.get("seed"),
    }
    if history.reached_at is None:
        ctx.training["target"] = record
        aim = f"{goal.value(target)} {goal.words}" if goal.percent else f"{goal.words} {goal.value(target)}"
        line = f"time to target: not reached ({aim}; best {goal.shown(best)} in {len(history.epochs)} {unit}s)"
        ctx.note(line)
        ctx.progress(line)
        return
    k = history.reached_at
    seconds = sum(e.seconds for e in history.epochs[:k])
    wall = evals[k - 1].wall
    record.update(status="reached", epochs=k, seconds=seconds, wall_seconds=wall)
    ctx.training["target"] = record
    ctx.value(
        "time to target",
        seconds,
        unit="s",
        better="lower",
        description=f"training time until the {goal.words} first reached {goal.value(target)} ({unit}s 1..{k}, "
        f"{unit} 1's compilation included; evaluations excluded)",
        # The same clocks as the steady units' time metric (recorded whenever there is a steady unit).
        derived_from=goal.timed if history.steady else None,
    )
    timed = [name for name in (goal.timed, EVALUATION) if any(m["name"] == name for m in ctx.metrics)]
    ctx.value(
        "wall time to target",
        wall,
        unit="s",
        better="lower",
        description=f"wall clock from the start of {unit} 1 to the end of the evaluation that reached the target "
        "(training, evaluations and read-backs)",
        # The training and evaluation clocks it spans: excluded with either (a steady one recorded).
        derived_from=timed or None,
    )
    ctx.value("epochs to target", k, unit=f"{unit}s", better="lower",
              description=f"first {unit} reaching {goal.value(target)}")  # fmt: skip
    line = f"time to target: {goal.value(target)} reached after {unit} {k}: {seconds:.3f} s training, {wall:.3f} s wall"
    ctx.note(line)
    ctx.progress(line)


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


def host_rss_bytes() -> int | None:
    """Current resident set size of this process (VmRSS), or None where /proc has none."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@dataclass
class MemoryBaseline:
    """What is allocated just before training (framework, model, data), on the device or the host."""

    device_bytes: int | None  # the GPU allocator's bytes in use (None on the CPU)
    host_bytes: int | None  # the process's resident set (CPU runs)
    host_reset: bool  # the peak-RSS counter was restarted at this point
    # CPU runs whose peak-RSS counter could not be restarted: the peak so far, which training must
    # exceed for its own peak to be told apart from an earlier one.
    host_peak: int | None = None


def memory_baseline(device_bytes: int | None) -> MemoryBaseline:
    """Take the baseline right before training allocates anything of its own (after any reset of
    the peak counters): before the optimiser state exists, which PyTorch creates inside epoch 1."""
    if device_bytes is not None:
        return MemoryBaseline(device_bytes, None, False)
    reset = reset_host_peak()
    return MemoryBaseline(None, host_rss_bytes(), reset, None if reset else host_peak_bytes())


PEAK_METRIC = "peak memory above baseline"


def record_peak_memory(
    ctx: Context, *, baseline: MemoryBaseline, device_peak: int | None, how: str, peak_before: int | None = None
) -> None:
    """Peak memory of training itself: the peak during training minus the baseline taken just before.

    Like for like across frameworks: JAX cannot reset its allocator's peak, PyTorch can, and
    copies made before training (data transfers, probes) differ between the suites' code paths;
    above the baseline both count the same thing (optimiser state, activations, gradients,
    workspaces). The baseline itself is reported as `memory before training`.

    `peak_before`: the device allocator's peak when the baseline was taken, for an allocator whose
    peak cannot be reset (JAX). A peak after training no higher than that may be an earlier one
    (a data copy, a probe): then the training peak is not observable, and no number is recorded.
    The result's `training.memory` says which it was.
    """
    if device_peak is not None and baseline.device_bytes is not None:
        peak, base, earlier = device_peak, baseline.device_bytes, peak_before
        where = f"device allocator ({how})"
    else:
        peak, earlier = host_peak_bytes(), baseline.host_peak
        base = baseline.host_bytes if baseline.host_bytes is not None else 0
        where = (
            "host RSS (VmHWM after a reset just before training, minus VmRSS then)"
            if baseline.host_reset
            else "host RSS (VmHWM, not resettable here, minus VmRSS just before training)"
        )
    ctx.value(
        "memory before training",
        base / MIB,
        unit="MiB",
        better="lower",
        description=f"allocated just before training (framework, model, resident data): {where}",
    )
    if earlier is not None and peak <= earlier:
        why = (
            f"the peak after training ({peak / MIB:.1f} MiB) is no higher than the peak before it "
            f"({earlier / MIB:.1f} MiB), and the peak counter cannot be reset: training's own peak is hidden "
            f"under an earlier one ({where})"
        )
        ctx.training["memory"] = {"peak": "not observable", "why": why}
        ctx.note(f"{PEAK_METRIC}: not observable: {why}")
        ctx.progress(f"{PEAK_METRIC}: not observable ({why})")
        return
    ctx.value(
        PEAK_METRIC,
        max(peak - base, 0) / MIB,
        unit="MiB",
        better="lower",
        description=f"peak during training above the bytes allocated just before epoch 1 (the optimiser state "
        f"included): {where}",
    )
    ctx.training["memory"] = {"peak": "observed", "how": where}
    ctx.note(f"{PEAK_METRIC}: {where}; peak {peak / MIB:.1f} MiB, baseline {base / MIB:.1f} MiB")


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
