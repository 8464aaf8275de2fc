"""The precision actually used: classified from a probe's outputs, compared across frameworks."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.judge.assessment import assess
from harness.report.table import render
from harness.store.run_folder import load_run
from suites.contract import precision
from tests import precision_emulation as emulation
from tests.conftest import REPO
from tests.factories import metric, result, write_run


@pytest.fixture(scope="module")
def probes() -> dict[str, precision.Probe]:
    return {op: emulation.probe_for(op) for op in ("matmul", "conv")}


@pytest.mark.parametrize(("op", "name"), list(emulation.EMULATIONS))
def test_each_emulated_arithmetic_reads_as_its_class_clear_of_every_threshold(
    probes: dict[str, precision.Probe], op: str, name: str
) -> None:
    expected, emulate = emulation.EMULATIONS[(op, name)]
    probe = probes[op]
    found = probe.measure(emulate(probe.lhs, probe.rhs))
    assert found["class"] == expected
    # Half a bit of room on either side of every line: a metric or threshold that drifts towards
    # a neighbouring class fails here before it misreads a GPU.
    assert all(abs(found["bits"] - floor) >= 0.5 for _, floor in precision.THRESHOLDS), found["bits"]


def test_split_precision_products_do_not_read_as_fp32(probes: dict[str, precision.Probe]) -> None:
    """The old identity probe's blind spot: bfloat16 passes summed to look like float32."""
    probe = probes["matmul"]
    found = probe.measure(emulation.split3(emulation.matmul, 7)(probe.lhs, probe.rhs))
    assert found["class"] == "bf16x3"
    assert precision.CLASSES.index(found["class"]) > precision.CLASSES.index("fp32")


def test_the_operands_are_large_random_and_carry_every_low_order_bit(probes: dict[str, precision.Probe]) -> None:
    matmul, conv = probes["matmul"], probes["conv"]
    # Sizes where library heuristics pick the workload's kernels: no dimension of the product and
    # no convolution reduction below 512.
    assert min(matmul.lhs.shape + matmul.rhs.shape) >= 512
    assert math.prod(conv.rhs.shape[1:]) >= 512
    for operand in (matmul.lhs, matmul.rhs, conv.lhs, conv.rhs):
        values = operand.ravel()[:-1] if operand is conv.lhs else operand.ravel()
        values = values[values != precision.OVERFLOW_PROBE]
        # Every value needs float32's last significand bit: rounding to 22 bits moves each one.
        assert (emulation.round_mantissa(values, 22, truncate=True) != values).all()
        assert 0.4 < (values < 0).mean() < 0.6  # mixed signs, so sums cancel as in real layers
        assert len(np.unique(values)) > 0.9 * values.size  # random, not a pattern
    # The same bits in every framework and every NumPy release: a hash of the seed, not a generator.
    again = precision.matmul_probe()
    assert (again.lhs.view(np.uint32) == matmul.lhs.view(np.uint32)).all()
    assert [f"{v:08x}" for v in matmul.rhs.view(np.uint32)[0, :3]] == GOLDEN_RHS_BITS


GOLDEN_RHS_BITS = ["3fc7c955", "bfd7e515", "3fadc7eb"]


def test_only_the_overflow_slice_decides_fp16_and_it_stays_out_of_the_error(
    probes: dict[str, precision.Probe],
) -> None:
    probe = probes["matmul"]
    out = (probe.lhs @ probe.rhs).astype(np.float64)
    out[-1, :] = np.inf  # what fp16 makes of the 73728 row
    found = probe.measure(out)
    assert found["class"] == "fp16" and found["fp16_overflow"] and found["bits"] > precision.FP32_BITS
    assert found["max_rel_error"] is not None and found["non_finite"] == 0
    out = (probe.lhs @ probe.rhs).astype(np.float64)
    out[0, :] = np.nan  # broken elsewhere: counted, and as wrong as can be, but not fp16
    found = probe.measure(out)
    assert found["class"] == "fp32" and found["non_finite"] == probe.exact.shape[1]
    assert found["max_rel_error"] is None


def test_an_output_of_the_wrong_shape_is_refused(probes: dict[str, precision.Probe]) -> None:
    with pytest.raises(ValueError, match="probe output has shape"):
        probes["matmul"].measure(np.zeros((64, 64)))


def test_a_bf16_compute_dtype_is_declared_bf16_whatever_float32_matmuls_do() -> None:
    assert precision.declared_class("float32", "bfloat16") == "bf16"
    assert precision.declared_class("float32", "float32") == "fp32"
    assert precision.declared_class("tf32") == "tf32"


PROBE_IN_A_FRESH_PROCESS = """
import json, sys
from suites.contract.settings import Settings
from suites.runtime import adapter_{module} as adapter
found = {{}}
for wanted in ("fp32", "bf16"):
    settings = Settings(device="cpu", threads=None, x64=False, precision=wanted)
    adapter.configure(settings)
    found[wanted] = adapter.precision_probe(settings)
print(json.dumps(found))
"""


@pytest.mark.slow
@pytest.mark.parametrize("module", ["numpy", "jax", "pytorch"])
def test_each_framework_measures_what_this_cpu_computes(module: str) -> None:
    """fp32 reads fp32 everywhere; bf16 operands (autocast, jnp.bfloat16) read bf16. NumPy has no
    bf16 mode: its float32 BLAS reads fp32 whatever is asked."""
    code = PROBE_IN_A_FRESH_PROCESS.format(module=module)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    ops = ["matmul"] if module == "numpy" else ["matmul", "conv"]
    assert {op: found["fp32"][op]["class"] for op in ops} == dict.fromkeys(ops, "fp32")
    bf16 = "fp32" if module == "numpy" else "bf16"
    assert {op: found["bf16"][op]["class"] for op in ops} == dict.fromkeys(ops, bf16)
    assert found["fp32"]["method"] == precision.METHOD


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
    text = render(assess(run))
    header = text.splitlines()[2]
    assert "jax †" in header
    row = next(line for line in text.splitlines() if line.startswith("matmul "))
    assert "0.50x" not in row  # no ratio for the TF32 column
    assert "measured precision differs" in text
    assert json.loads(json.dumps(docs))  # documents stay plain JSON
