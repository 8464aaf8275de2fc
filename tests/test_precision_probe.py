"""The precision actually used: classified from a probe's outputs, compared across frameworks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.assessment import assess
from harness.report.table import render
from harness.run_folder import load_run
from suites.runtime import precision
from tests.factories import metric, result, write_run


def round_mantissa(x: np.ndarray, bits: int) -> np.ndarray:
    """float32 rounded to `bits` explicit mantissa bits, nearest-even (what TF32/bf16 inputs get)."""
    raw = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    drop = 23 - bits
    half = np.uint64(1 << (drop - 1))
    lsb = (raw >> np.uint64(drop)) & np.uint64(1)
    rounded = (raw + half - np.uint64(1) + lsb) >> np.uint64(drop) << np.uint64(drop)
    return rounded.astype(np.uint32).view(np.float32)


def product_with(rounding: str) -> list[float]:
    """A @ I as a GPU would compute it in each arithmetic class: the inputs rounded, fp32 accumulate."""
    a_rows, b_rows = precision.identity_operands()
    a, b = np.asarray(a_rows, np.float32), np.asarray(b_rows, np.float32)
    if rounding == "tf32":
        out = round_mantissa(a, 10) @ round_mantissa(b, 10)
    elif rounding == "bf16":
        out = round_mantissa(a, 7) @ round_mantissa(b, 7)
    elif rounding == "bf16x3":  # XLA's bfloat16_3x: hi*hi + hi*lo + lo*hi, each part a bfloat16
        a_hi, b_hi = round_mantissa(a, 7), round_mantissa(b, 7)
        a_lo, b_lo = round_mantissa(a - a_hi, 7), round_mantissa(b - b_hi, 7)
        out = a_hi @ b_hi + a_hi @ b_lo + a_lo @ b_hi
    elif rounding == "fp16":
        with np.errstate(over="ignore", invalid="ignore"):
            out = (a.astype(np.float16) @ b.astype(np.float16)).astype(np.float32)
    else:
        out = a @ b
    return out[: precision.MAX_BITS + 1, 0].astype(float).tolist()


@pytest.mark.parametrize(
    ("rounding", "expected", "bits"),
    [("fp32", "fp32", 23), ("tf32", "tf32", 10), ("bf16", "bf16", 7), ("bf16x3", "bf16x3", 16), ("fp16", "fp16", 10)],
)
def test_each_arithmetic_class_is_told_apart(rounding: str, expected: str, bits: int) -> None:
    found = precision.classify(product_with(rounding))
    assert found["class"] == expected
    assert abs(found["bits"] - bits) <= 1


def test_winograd_noise_of_a_few_ulp_still_reads_fp32() -> None:
    outputs = product_with("fp32")
    noisy = [v * (1 + 3 * 2.0**-24) for v in outputs]  # 3 ulp off everywhere
    assert precision.classify(noisy)["class"] == "fp32"


def test_the_wrong_number_of_outputs_is_refused() -> None:
    with pytest.raises(ValueError, match="probe outputs"):
        precision.classify([1.0] * 5)


@pytest.mark.slow
@pytest.mark.parametrize("module", ["adapter_numpy", "adapter_jax", "adapter_pytorch"])
def test_every_framework_measures_fp32_on_this_cpu(module: str) -> None:
    import importlib

    from suites.runtime.settings import Settings

    adapter = importlib.import_module(f"suites.runtime.{module}")
    settings = Settings(device="cpu", threads=None, x64=False)
    adapter.configure(settings)
    measured = adapter.precision_probe(settings)
    assert measured["matmul"]["class"] == "fp32" and measured["matmul"]["bits"] == 23
    if module != "adapter_numpy":
        assert measured["conv"]["class"] == "fp32"


def with_measured(doc: dict, matmul: str) -> dict:
    doc["environment"]["precision"] = {"measured": {"matmul": {"class": matmul, "bits": 10}}}
    return doc


def test_frameworks_with_different_measured_arithmetic_are_not_put_side_by_side(tmp_path: Path) -> None:
    docs = [
        with_measured(result("pytorch", [metric("matmul", [2.0, 2.0, 2.0])]), "fp32"),
        with_measured(result("jax", [metric("matmul", [1.0, 1.0, 1.0])]), "tf32"),
    ]
    run = load_run(write_run(tmp_path, docs))
    assert assess(run).precision_mismatches == {"jax": "measured precision differs from pytorch: matmul tf32 vs fp32"}
    text = render(run)
    header = text.splitlines()[2]
    assert "jax †" in header
    row = next(line for line in text.splitlines() if line.startswith("matmul "))
    assert "0.50x" not in row  # no ratio for the TF32 column
    assert "measured precision differs" in text
    assert json.loads(json.dumps(docs))  # documents stay plain JSON
