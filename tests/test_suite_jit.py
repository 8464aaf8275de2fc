"""The jit suite at tiny sizes through the real CLI, and its helpers."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable

import numpy as np
import pytest

from harness.core.schema import load_result
from suites.contract.errors import JobError
from suites.jit.common import SEED_F16, lengths, name, seed_points
from tests.conftest import finished, run_folder

# One length (L=1000, K=100 calls per loop) so torch.compile compiles once.


def test_lengths_are_the_seeds_decades_with_loop_counts() -> None:
    params = {"min_length": 10_000, "max_length": 10_000_000, "total": 100_000_000}
    assert lengths(params) == [(10_000, 10_000), (100_000, 1_000), (1_000_000, 100), (10_000_000, 10)]
    assert lengths({"min_length": 1000, "max_length": 5000, "total": 10}) == [(1000, 1)]
    assert name("jit", 1_000_000, 100) == "jit L=1e6 K=100"
    with pytest.raises(JobError, match="lower min_length"):
        lengths({"min_length": 10, "max_length": 1, "total": 10})


def test_seed_sanity_values_are_float16_results() -> None:
    """The seed's [1, 1.398, -0.76, ...] are f in float16 at float16 x, not float32."""
    x16 = seed_points()
    f16 = 0.2 * x16 + np.sin(x16) + np.cos(2 * x16)
    assert max(abs(float(v) - s) for v, s in zip(f16, SEED_F16, strict=True)) < 1e-3
    x32 = np.linspace(0, 4 * np.pi, 6, dtype=np.float32)
    f32 = 0.2 * x32 + np.sin(x32) + np.cos(2 * x32)
    assert max(abs(float(v) - s) for v, s in zip(f32, SEED_F16, strict=True)) > 1e-2


@pytest.mark.slow
def test_jit_on_three_frameworks(smoke_run: Callable[[str], subprocess.CompletedProcess[str]]) -> None:
    proc = smoke_run("jit")  # `run --smoke --backend local -q`, one thread: the run tests/test_conformance.py reads
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    docs = {fw: load_result(run / f"{fw}.json") for fw in ("numpy", "jax", "pytorch")}
    assert all(d["status"] == "ok" for d in docs.values())

    # Ground truth: the same float32 inputs, f evaluated in float64.
    x = np.linspace(0, 4 * np.pi, 6, dtype=np.float32).astype(np.float64)
    truth = 0.2 * x + np.sin(x) + np.cos(2 * x)
    for fw, doc in docs.items():
        checks = {c["name"]: c["value"] for c in doc["checks"]}
        f6 = np.asarray(checks["f_at_6"])
        assert np.allclose(f6, truth, rtol=2e-6, atol=1e-6), (fw, f6, truth)  # float32 tolerance
        assert checks["seed_f16_error"] <= 2.5e-3
        if fw != "numpy":
            assert checks["jit_vs_eager"] <= 1e-5
        names = [m["name"] for m in doc["metrics"]]
        assert name("eager", 1000, 100) in names
        loops = [m for m in doc["metrics"] if m["kind"] == "time"]
        assert loops and all(m["flops"] == 6 * 1000 * 100 and m["bytes"] == 8 * 1000 * 100 for m in loops), fw
        assert doc["environment"]["precision"].get("jax_enable_x64", False) is False  # float32 suite

    for fw in ("jax", "pytorch"):
        metrics = {m["name"]: m for m in docs[fw]["metrics"]}
        jit = metrics[name("jit", 1000, 100)]
        # The first loop carries the compilation; steady loops do not.
        assert jit["first_call"] > jit["stats"]["median"]
        # Compiling (cold caches) costs far more than one compiled call of 1000 elements.
        assert metrics["compile L=1e3"]["samples"][0] > 50 * jit["stats"]["median"] / 100
        speedup = metrics["speed-up L=1e3"]["samples"][0]
        eager = metrics[name("eager", 1000, 100)]["stats"]["median"]
        assert math.isclose(speedup, eager / jit["stats"]["median"])
    assert name("jit", 1000, 100) not in {m["name"] for m in docs["numpy"]["metrics"]}
    assert "f_at_6" in proc.stdout and "FAIL" not in proc.stdout


class _Output:
    """A stand-in for a jax.Array: counts how often the loop waited on it."""

    waits = 0

    def block_until_ready(self) -> _Output:
        _Output.waits += 1
        return self


def test_gpu_loop_waits_on_the_last_output_only_and_cpu_keeps_the_window() -> None:
    from suites.jit.common import IN_FLIGHT
    from suites.jit.impl_jax import dispatch_loop, in_flight_window

    calls: list[_Output] = []

    def fn(_: object) -> _Output:
        calls.append(_Output())
        return calls[-1]

    _Output.waits = 0
    out = dispatch_loop(fn, None, 10, in_flight_window("gpu"))
    assert in_flight_window("gpu") is None and _Output.waits == 0 and out == [calls[-1]] and len(calls) == 10
    calls.clear()
    out = dispatch_loop(fn, None, 10, in_flight_window("cpu"))
    assert in_flight_window("cpu") == IN_FLIGHT
    # every output but the last IN_FLIGHT is waited on inside the loop; those are returned for the contract
    assert _Output.waits == 10 - IN_FLIGHT and out == calls[-IN_FLIGHT:]


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_the_jax_jit_suite_uses_the_window_of_its_device(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite itself (not only the helper) picks the window by device kind; the jobs run on
    the CPU here, with the context saying `gpu` as a GPU job's would."""
    import jax

    from suites.contract.registry import all_suites
    from suites.jit import impl_jax
    from suites.runtime.context import Context

    seen: list[int | None] = []
    real = impl_jax.dispatch_loop

    def spy(fn: object, x: object, loops: int, window: int | None) -> list[object]:
        seen.append(window)
        return real(fn, x, loops, window)  # type: ignore[arg-type]

    monkeypatch.setattr(impl_jax, "dispatch_loop", spy)
    spec = all_suites()["jit"]
    params = spec.resolve({"min_length": 100, "max_length": 100, "total": 300})
    ctx = Context(spec, "jax", params, repeat=2, warmup=0, device=jax.devices("cpu")[0], device_kind=kind,
                  sync=jax.block_until_ready)  # fmt: skip
    impl_jax.run(ctx)
    assert seen and set(seen) == {impl_jax.in_flight_window(kind)}
