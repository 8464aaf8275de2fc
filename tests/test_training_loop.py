"""runtime/training.py without a framework: the epoch clock, time-to-target and the memory rows."""

from __future__ import annotations

import mmap
import time
from typing import Any

import pytest

from suites.contract.registry import all_suites
from suites.runtime import training
from suites.runtime.context import Context

MIB = 1 << 20


class Clock:
    """A fake perf_counter that only the fake epochs and evaluations advance."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _ctx(params: dict[str, Any] | None = None, sync: Any = None) -> Context:
    spec = all_suites()["mlp"]
    return Context(spec, "flax", spec.resolve(params or {}), repeat=1, warmup=0, device=None, device_kind="cpu",
                   sync=sync or (lambda out: None))  # fmt: skip


def _train(
    monkeypatch: pytest.MonkeyPatch, accuracies: list[float], target: float | None, epochs: int = 5, curve: bool = False
) -> Any:
    clock = Clock()
    monkeypatch.setattr(time, "perf_counter", clock)
    synced: list[Any] = []
    ctx = _ctx({"target_accuracy": target or 0.0, "curve": curve}, sync=synced.append)

    def run_epoch(e: int) -> Any:
        clock.now += 2.0  # every epoch: 2 s of training
        return ("state", e)

    remaining = iter(accuracies)

    def evaluate() -> float:
        clock.now += 0.5  # every evaluation: 0.5 s, on its own clock
        return next(remaining)

    history = training.train(ctx, epochs=epochs, run_epoch=run_epoch, read=lambda out: (1.0, 50.0),
                             samples_per_epoch=10, evaluate=evaluate, target=target,
                             curve=training.curve_of(ctx))  # fmt: skip
    training.record(ctx, history)
    return ctx, history, synced


def test_training_stops_at_the_first_epoch_reaching_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, history, synced = _train(monkeypatch, [40.0, 70.0, 91.0, 95.0, 99.0], target=90.0)
    assert history.reached_at == 3 and len(history.epochs) == 3
    assert [e.seconds for e in history.epochs] == [2.0, 2.0, 2.0]  # evaluations stay outside the epoch clock
    assert synced == [("state", 0), ("state", 1), ("state", 2)]  # one sync per epoch, on its state
    metrics = {m["name"]: m["samples"] for m in ctx.metrics}
    assert metrics["time to target"] == [6.0]  # training time of epochs 1..3
    assert metrics["wall time to target"] == [7.5]  # plus the three evaluations
    # The evaluations' own clock is a time metric: the first (compiling) one its first call, the rest its samples.
    assert metrics["epochs to target"] == [3] and metrics["evaluation time"] == [0.5, 0.5]
    evaluation = next(m for m in ctx.metrics if m["name"] == "evaluation time")
    assert evaluation["kind"] == "time" and evaluation["first_call"] == 0.5
    wall = next(m for m in ctx.metrics if m["name"] == "wall time to target")
    assert wall["derived_from"] == ["epoch", "evaluation time"]  # excluded with either clock
    target = ctx.training["target"]
    assert target["status"] == "reached" and target["accuracy_per_epoch"] == [40.0, 70.0, 91.0]


def test_a_target_never_reached_is_a_status_and_no_number(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, history, _ = _train(monkeypatch, [40.0, 50.0, 60.0], target=99.0, epochs=3)
    assert history.reached_at is None and len(history.epochs) == 3
    names = {m["name"] for m in ctx.metrics}
    assert not names & {"time to target", "wall time to target", "epochs to target"}
    target = ctx.training["target"]
    assert target["status"] == "not reached" and target["seconds"] is None and target["best_accuracy"] == 60.0


def test_reaching_the_target_in_epoch_1_reports_no_steady_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, history, _ = _train(monkeypatch, [95.0], target=90.0)
    assert len(history.epochs) == 1
    names = {m["name"] for m in ctx.metrics}
    assert "epoch" not in names and "throughput" not in names and "time to target" in names
    assert any("no steady epoch" in n for n in ctx.notes)


def test_without_a_target_or_a_curve_nothing_is_evaluated_between_epochs(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, history, _ = _train(monkeypatch, [], target=None, epochs=3)
    assert len(history.epochs) == 3 and history.evaluations == [] and "target" not in ctx.training
    assert ctx.training["curves"] == [
        {"epoch_seconds": [2.0, 2.0, 2.0], "train_loss": [1.0, 1.0, 1.0], "train_accuracy": [50.0, 50.0, 50.0],
         "test_accuracy": [], "evaluation_seconds": [], "seed": 42}
    ]  # fmt: skip


def test_a_learning_curve_evaluates_every_epoch_and_never_stops_early(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, history, synced = _train(monkeypatch, [40.0, 95.0, 97.0], target=None, epochs=3, curve=True)
    assert len(history.epochs) == 3 and history.reached_at is None
    assert [e.seconds for e in history.epochs] == [2.0, 2.0, 2.0]  # evaluations stay outside the epoch clock
    assert synced == [("state", 0), ("state", 1), ("state", 2)]
    (curve,) = ctx.training["curves"]
    assert curve["test_accuracy"] == [40.0, 95.0, 97.0] and curve["evaluation_seconds"] == [0.5, 0.5, 0.5]
    assert curve["epoch_seconds"] == [2.0, 2.0, 2.0]
    # Without a target the time-to-target record and its metrics stay out.
    assert "target" not in ctx.training and "evaluation time" not in {m["name"] for m in ctx.metrics}


def test_a_target_with_a_curve_still_stops_at_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, history, _ = _train(monkeypatch, [40.0, 91.0, 99.0], target=90.0, epochs=3, curve=True)
    assert history.reached_at == 2
    (curve,) = ctx.training["curves"]
    assert curve["epoch_seconds"] == [2.0, 2.0] and curve["test_accuracy"] == [40.0, 91.0]
    assert ctx.training["target"]["accuracy_per_epoch"] == [40.0, 91.0]


def test_the_curve_parameter_is_shared_and_on_by_default() -> None:
    for name in ("mlp", "mnist", "cifar10", "resnet18"):
        assert all_suites()[name].resolve({})["curve"] is True, name
    assert training.curve_of(_ctx({"curve": False})) is False


def test_device_peak_memory_is_reported_above_the_baseline() -> None:
    ctx = _ctx()
    baseline = training.MemoryBaseline(device_bytes=100 * MIB, host_bytes=None, host_reset=False)
    training.record_peak_memory(ctx, baseline=baseline, device_peak=350 * MIB, how="test allocator")
    values = {m["name"]: m["samples"][0] for m in ctx.metrics}
    assert values == {"peak memory above baseline": 250.0, "memory before training": 100.0}
    assert ctx.training["memory"] == {"peak": "observed", "how": "device allocator (test allocator)"}


@pytest.mark.parametrize(("peak_before", "observable"), [(400, False), (350, False), (300, True), (None, True)])
def test_a_device_peak_no_higher_than_the_peak_before_training_is_not_observable(
    peak_before: int | None, observable: bool
) -> None:
    """JAX cannot reset its allocator's peak: a training peak under an earlier one (a data copy,
    a probe) cannot be told apart from it, and reads as no number rather than a wrong one."""
    ctx = _ctx()
    baseline = training.MemoryBaseline(device_bytes=100 * MIB, host_bytes=None, host_reset=False)
    before = None if peak_before is None else peak_before * MIB
    training.record_peak_memory(ctx, baseline=baseline, device_peak=350 * MIB, how="jax", peak_before=before)
    values = {m["name"]: m["samples"][0] for m in ctx.metrics}
    assert values["memory before training"] == 100.0
    memory = ctx.training["memory"]
    if observable:
        assert values["peak memory above baseline"] == 250.0 and memory["peak"] == "observed"
    else:
        assert "peak memory above baseline" not in values
        assert memory["peak"] == "not observable" and "cannot be reset" in memory["why"]
        assert any("not observable" in n for n in ctx.notes)


def test_host_peak_memory_counts_what_training_allocates_after_the_baseline() -> None:
    ctx = _ctx()
    baseline = training.memory_baseline(None)
    assert baseline.host_reset and baseline.host_bytes and baseline.host_bytes > 10 * MIB  # Linux /proc
    # "Training" touches 64 MiB of pages fresh from the kernel: a bytearray could be served from
    # heap pages already resident in a long test process (seen in CI, after the framework tests),
    # which raise no RSS.
    block = mmap.mmap(-1, 64 * MIB)
    for offset in range(0, 64 * MIB, mmap.PAGESIZE):
        block[offset] = 1
    training.record_peak_memory(ctx, baseline=baseline, device_peak=None, how="")
    block.close()
    values = {m["name"]: m["samples"][0] for m in ctx.metrics}
    assert 60 <= values["peak memory above baseline"] < 200
    assert values["memory before training"] == pytest.approx(baseline.host_bytes / MIB)


@pytest.mark.parametrize(("peak_after", "observable"), [(900, True), (800, False)])
def test_a_host_peak_counter_that_cannot_be_reset_must_grow_to_count(
    monkeypatch: pytest.MonkeyPatch, peak_after: int, observable: bool
) -> None:
    """Without /proc/self/clear_refs the peak RSS is the process's: only a peak above the one at the
    baseline belongs to training."""
    peaks = iter([800 * MIB, peak_after * MIB])
    monkeypatch.setattr(training, "reset_host_peak", lambda: False)
    monkeypatch.setattr(training, "host_rss_bytes", lambda: 300 * MIB)
    monkeypatch.setattr(training, "host_peak_bytes", lambda: next(peaks))
    ctx = _ctx()
    baseline = training.memory_baseline(None)
    assert baseline.host_peak == 800 * MIB and not baseline.host_reset
    training.record_peak_memory(ctx, baseline=baseline, device_peak=None, how="")
    values = {m["name"]: m["samples"][0] for m in ctx.metrics}
    assert values["memory before training"] == 300.0
    if observable:
        assert values["peak memory above baseline"] == 600.0 and ctx.training["memory"]["peak"] == "observed"
    else:
        assert "peak memory above baseline" not in values and ctx.training["memory"]["peak"] == "not observable"


class BlindCounter:
    """A compilation counter whose events never arrive (interface: __call__ None, `why`)."""

    why = "jax 9.9 emitted no /jax/core/compile/backend_compile_duration event"

    def __call__(self) -> None:
        return None


class CountingCounter:
    how = "test compilations"

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> int:
        self.count += 1  # one compilation per epoch boundary read
        return self.count


def _train_with(monkeypatch: pytest.MonkeyPatch, counter: Any) -> tuple[Context, training.History]:
    clock = Clock()
    monkeypatch.setattr(time, "perf_counter", clock)
    ctx = _ctx()

    def run_epoch(e: int) -> int:
        clock.now += 1.0
        return e

    history = training.train(ctx, epochs=3, run_epoch=run_epoch, read=lambda out: (1.0, 50.0), samples_per_epoch=10,
                             compilations=counter)  # fmt: skip
    training.record(ctx, history)
    return ctx, history


def test_a_counter_that_cannot_observe_compilations_records_no_compilation_rows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ctx, history = _train_with(monkeypatch, BlindCounter())
    assert [e.compilations for e in history.epochs] == [None, None, None]
    names = {m["name"] for m in ctx.metrics}
    assert not names & {"compilations (first epoch)", "compilations (later epochs)"}
    assert ctx.training["compilations"] == {"observable": False, "why": BlindCounter.why}
    assert any("not observable" in n and BlindCounter.why in n for n in ctx.notes)
    assert "compilations not observable" in capsys.readouterr().out


def test_an_observable_counter_records_its_rows_and_what_it_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, history = _train_with(monkeypatch, CountingCounter())
    assert [e.compilations for e in history.epochs] == [1, 1, 1]
    values = {m["name"]: m["samples"] for m in ctx.metrics}
    assert values["compilations (first epoch)"] == [1] and values["compilations (later epochs)"] == [2]
    assert ctx.training["compilations"] == {"observable": True, "how": "test compilations"}


def test_a_loop_without_a_counter_compiles_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, _ = _train_with(monkeypatch, None)
    values = {m["name"]: m["samples"] for m in ctx.metrics}
    assert values["compilations (first epoch)"] == [0] and values["compilations (later epochs)"] == [0]
    assert ctx.training["compilations"]["observable"] is True
