"""Every time metric of the compute suites declares a FLOP and a byte count (its roofline point), and
the calibration keeps the best rate per quantity now that every metric declares both."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from harness.store.calibration import rates_from_result
from suites.contract.registry import all_suites, implementation_module
from suites.runtime.context import Context
from tests.factories import metric, result


def _run_numpy(suite: str, params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The suite's NumPy implementation in this process at a tiny size: its time metrics by name."""
    spec = all_suites()[suite]
    ctx = Context(spec, "numpy", spec.resolve({**spec.smoke, **params}), repeat=2, warmup=0, device="cpu",
                  device_kind="cpu", sync=lambda out: None)  # fmt: skip
    importlib.import_module(implementation_module(suite, "numpy")).run(ctx)
    return {m["name"]: m for m in ctx.metrics if m["kind"] == "time"}


def test_xla_declares_flops_and_compulsory_bytes() -> None:
    n = 32
    metrics = _run_numpy("xla", {"matrix_size": n})
    assert metrics["matmul"]["flops"] == 2 * n**3 and metrics["matmul"]["bytes"] == 3 * n * n * 8
    assert metrics["inverse"]["flops"] == 2 * n**3 and metrics["inverse"]["bytes"] == 2 * n * n * 8
    mean_sum = metrics["mean_sum"]
    assert mean_sum["flops"] == 4 * n * n and mean_sum["bytes"] == 2 * n * n * 8 and mean_sum["dtype"] == "float64"
    assert metrics["generate"]["flops"] is None and metrics["generate"]["bytes"] is None  # nothing to hold it to


def test_jit_loops_declare_six_operations_per_element() -> None:
    metrics = _run_numpy("jit", {"min_length": 1000, "max_length": 1000, "total": 10_000})
    (loop,) = metrics.values()
    length, loops = 1000, 10
    assert loop["flops"] == 6 * length * loops and loop["bytes"] == 8 * length * loops


def test_calibrate_declares_both_quantities_on_every_metric() -> None:
    n, mib = 64, 1
    metrics = _run_numpy("calibrate", {"matmul_size": n, "stream_mib": mib})
    assert metrics["matmul float32/fp32"]["bytes"] == 3 * n * n * 4
    assert metrics["matmul float64/fp64"]["bytes"] == 3 * n * n * 8
    elements = mib * 2**20 // 4
    stream = metrics["stream scale"]
    assert stream["flops"] == elements and stream["dtype"] == "float32" and stream["bytes"] == 8 * elements


@pytest.mark.parametrize("stream_first", [True, False])
def test_calibration_rates_take_the_best_metric_per_quantity(stream_first: bool) -> None:
    """The matmul's implied bandwidth and the stream's FLOP/s are far below the real ceilings:
    whichever order the metrics come in, each ceiling is the best any metric reached."""
    # 100 GFLOP/s and 0.1 GB/s; the stream 1 GFLOP/s and 8 GB/s.
    matmul = dict(metric("matmul float32/fp32", [0.01] * 3, flops=1e9), bytes=1e6, dtype="float32")
    stream = dict(metric("stream scale", [0.1] * 3, flops=1e8), bytes=8e8, dtype="float32")
    order = [stream, matmul] if stream_first else [matmul, stream]
    rates = rates_from_result(result("numpy", order))
    assert rates == {"flops": {"float32/fp32": pytest.approx(1e11)}, "bandwidth": pytest.approx(8e9)}
