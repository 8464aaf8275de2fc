"""The timing contract: first call apart, warm-up untimed, every call synchronised."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from suites.contract.spec import CheckSpec, SuiteSpec
from suites.runtime.context import Context

SPEC = SuiteSpec("t", "test", ("numpy",), checks=(CheckSpec("c", "a check", rtol=1e-6),))


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    def sync(self, out: Any) -> None:
        self.events.append(f"sync:{out}")


def make(recorder: Recorder, ticks: list[float]) -> Context:
    clock = iter(ticks)
    return Context(
        SPEC, "numpy", {}, repeat=3, warmup=2, device="cpu", device_kind="cpu", sync=recorder.sync,
        clock=lambda: next(clock),
    )  # fmt: skip


def test_first_call_is_separate_and_every_call_is_synchronised() -> None:
    rec = Recorder()
    counter = itertools.count()

    def work() -> int:
        n = next(counter)
        rec.events.append(f"call:{n}")
        return n

    # clock reads: first call (0 -> 10), then three timed calls of 1, 2, 3 seconds
    ctx = make(rec, [0.0, 10.0, 20.0, 21.0, 30.0, 32.0, 40.0, 43.0])
    out = ctx.measure("m", work)
    assert out == 5  # 1 first + 2 warm-up + 3 timed
    assert rec.events == [e for n in range(6) for e in (f"call:{n}", f"sync:{n}")]
    metric = ctx.metrics[0]
    assert metric["first_call"] == 10.0
    assert metric["samples"] == [1.0, 2.0, 3.0]
    assert metric["stats"]["median"] == 2.0 and metric["warmup"] == 2


def test_per_divides_samples_into_per_call_times() -> None:
    ctx = make(Recorder(), [0.0, 8.0, 0.0, 4.0, 0.0, 4.0, 0.0, 4.0])
    ctx.measure("loop", lambda: None, per=4, warmup=0)
    assert ctx.metrics[0]["samples"] == [1.0, 1.0, 1.0]
    assert ctx.metrics[0]["first_call"] == 2.0


def test_checks_carry_the_declared_tolerance_and_reject_nan() -> None:
    ctx = make(Recorder(), [])
    ctx.check("c", [1.0, 2.0])
    assert ctx.checks[0]["rtol"] == 1e-6 and ctx.checks[0]["value"] == [1.0, 2.0]
    with pytest.raises(ValueError, match="not a finite number"):
        ctx.check("c", float("nan"))
    with pytest.raises(KeyError):
        ctx.check("undeclared", 1.0)


class Compiles:
    """A stand-in compile counter: `work` compiles on the calls listed (0 = the first call)."""

    def __init__(self, on: set[int]) -> None:
        self.on, self.calls, self.count = on, 0, 0

    def work(self) -> int:
        if self.calls in self.on:
            self.count += 1
        self.calls += 1
        return self.calls

    def counter(self) -> Any:
        return lambda: self.count


def counted(compiles: Compiles | None, built: list[int] | None = None) -> Context:
    def factory() -> Any:
        if built is not None:
            built.append(1)
        return compiles.counter() if compiles is not None else (lambda: None)

    return Context(SPEC, "jax", {}, repeat=4, warmup=1, device="cpu", device_kind="cpu", sync=lambda out: None,
                   compile_counter=factory)  # fmt: skip


def test_a_compile_inside_a_steady_samples_clock_marks_that_sample() -> None:
    # calls: 0 first (compiles: fine), 1 warm-up, 2-5 the samples; 3 and 5 compile again (a retrace)
    compiles = Compiles({0, 3, 5})
    built: list[int] = []
    ctx = counted(compiles, built)
    ctx.measure("m", compiles.work)
    ctx.measure("again", compiles.work)  # no compile here; the counter was built once
    first, again = ctx.metrics
    assert first["marks"].get("compiled") == [1, 3] and first["steady_compilations"] == 2
    assert "compiled" not in again["marks"] and again["steady_compilations"] == 0
    assert built == [1] and first["compiles"] is False


def test_the_first_call_and_warm_up_may_compile_and_a_declared_metric_is_counted_not_marked() -> None:
    compiles = Compiles({0, 1})
    ctx = counted(compiles)
    ctx.measure("m", compiles.work)
    assert "compiled" not in ctx.metrics[0]["marks"] and ctx.metrics[0]["steady_compilations"] == 0
    every = Compiles(set(range(100)))
    ctx = counted(every)
    ctx.measure("seed", every.work, compiles=True)  # a seed's retrace, reproduced on purpose
    assert "compiled" not in ctx.metrics[0]["marks"] and ctx.metrics[0]["steady_compilations"] == 4
    assert ctx.metrics[0]["compiles"] is True


def test_a_framework_without_a_counter_records_none_never_zero() -> None:
    for ctx in (counted(None), make(Recorder(), [float(t) for t in range(8)])):
        ctx.measure("m", lambda: 1)
        assert ctx.metrics[0]["steady_compilations"] is None and "compiled" not in ctx.metrics[0]["marks"]
