"""The pc suite (seed 003): a float64 NumPy reference of the algorithm, and both frameworks
at tiny sizes through the real CLI, agreeing with each other and with the reference."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.core.schema import load_result
from suites.pc import common
from tests.conftest import finished, harness, run_folder

# 4 batches of 128 per epoch; the default network, T and learning rates.


def params(**overrides: Any) -> dict[str, Any]:
    from suites.pc.spec import SPEC

    return SPEC.resolve({**SPEC.smoke, **overrides})


class _Ctx:
    """Just enough of a job context for common.load (parameters, notes)."""

    def __init__(self, p: dict[str, Any]) -> None:
        self.params, self.data_dir, self.notes = p, None, []

    def note(self, text: str) -> None:
        self.notes.append(text)


def reference_first_step(p: dict[str, Any], *, mean_energy: bool = False, tanh_grad: bool = True) -> dict[str, Any]:
    """NOTES.md's algorithm on the first batch, float64 NumPy, gradients by hand.

    `mean_energy` / `tanh_grad=False` are deliberate mistakes, to show the tolerances catch them.
    """
    data = common.load(_Ctx(p))  # type: ignore[arg-type]
    rows = common.first_batch(data)
    x0, target = data.train_x[rows].astype(np.float64), data.train_t[rows].astype(np.float64)
    ws = [(w.astype(np.float64), b.astype(np.float64)) for w, b in common.init_weights(p)]
    hidden, scale = len(ws) - 1, 1.0 / len(rows) if mean_energy else 1.0
    free, x = [], x0
    for w, b in ws[:-1]:
        x = np.tanh(x @ w + b)
        free.append(x)

    def errors() -> tuple[list[Any], list[Any], float]:
        inputs, es, ds = [x0, *free], [], []
        for layer, (w, b) in enumerate(ws):
            a = inputs[layer] @ w + b
            u = np.tanh(a) if layer < hidden else a
            e = (free[layer] if layer < hidden else target) - u
            es.append(e)
            ds.append(e * (1 - u * u) if layer < hidden and tanh_grad else e)
        return es, ds, scale * 0.5 * sum(float(np.sum(e * e)) for e in es)

    energies = []
    for _ in range(int(p["T"])):
        es, ds, value = errors()
        energies.append(value)
        free = [f - p["x_lr"] * scale * (es[i] - ds[i + 1] @ ws[i + 1][0].T) for i, f in enumerate(free)]
    es, ds, value = errors()
    energies.append(value)
    inputs = [x0, *free]
    grads = [g for i in range(len(ws)) for g in (-scale * inputs[i].T @ ds[i], -scale * ds[i].sum(axis=0))]
    return {"energies": energies, "grad_norms": common.grad_norms(grads)}


def rel(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b) / np.abs(b)))


def test_initial_weights_follow_equinox_linear_and_are_shared() -> None:
    p = params()
    weights = common.init_weights(p)
    assert [w.shape for w, _ in weights] == [(784, 128), (128, 128), (128, 10)]
    for (w, b), fan_in in zip(weights, (784, 128, 128), strict=True):
        bound = 1 / np.sqrt(fan_in)
        assert w.dtype == np.float32 and np.abs(w).max() <= bound and np.abs(b).max() <= bound
        assert np.abs(w).max() > 0.95 * bound  # uniform over the whole interval
    again = common.init_weights(p)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(weights, again, strict=True))


def test_reference_inference_lowers_the_energy_and_mistakes_exceed_the_tolerance() -> None:
    """The declared rtol (1e-4) is far below what a changed algorithm does to the checks."""
    p = params()
    ref = reference_first_step(p)
    assert all(b < a for a, b in zip(ref["energies"], ref["energies"][1:], strict=False))
    wrong_lr = reference_first_step(params(x_lr=0.011))
    no_tanh_grad = reference_first_step(p, tanh_grad=False)
    mean = reference_first_step(p, mean_energy=True)
    assert rel(wrong_lr["energies"], ref["energies"]) > 1e-3
    assert rel(no_tanh_grad["grad_norms"], ref["grad_norms"]) > 1e-2
    assert rel(mean["energies"], ref["energies"]) > 0.5


def test_weight_summary_ignores_adams_ill_conditioned_entries() -> None:
    """One entry whose first Adam step flipped sign moves the norms by far less than the rtol."""
    rng = np.random.default_rng(0)
    w0 = [rng.uniform(-0.036, 0.036, (784, 128)).astype(np.float32)]
    step = np.sign(rng.normal(size=(784, 128))).astype(np.float32) * 1e-3
    a, b = [w0[0] - step], [w0[0] - step]
    b[0][3, 7] = w0[0][3, 7] + step[3, 7]  # the flipped entry
    summary_a, summary_b = common.weight_summary(a, w0, 1e-3), common.weight_summary(b, w0, 1e-3)
    assert rel(summary_b, summary_a) < 1e-5
    assert summary_a[1] == pytest.approx(np.sqrt(784 * 128), rel=1e-4)  # every entry moved by lr


@pytest.mark.slow
def test_pc_agrees_across_frameworks_and_with_the_reference(
    smoke_run: Callable[[str], subprocess.CompletedProcess[str]],
) -> None:
    proc = smoke_run("pc")  # the smoke size, one thread: the run tests/test_conformance.py reads too
    assert finished(proc), proc.stdout + proc.stderr  # includes the agreement gate
    run = run_folder(proc.stdout)
    ref = reference_first_step(params())
    docs = {fw: load_result(run / f"{fw}.json") for fw in ("jax", "pytorch")}
    for fw, doc in docs.items():
        assert doc["status"] == "ok"
        checks = {c["name"]: c["value"] for c in doc["checks"]}
        metrics = {m["name"]: m for m in doc["metrics"]}
        energies = checks["energy_x_steps"]
        assert len(energies) == 5 and all(b < a for a, b in zip(energies, energies[1:], strict=False))
        assert checks["x_step_energy_ratio"] < 1.0
        # float32 frameworks against the float64 reference
        assert rel(energies, ref["energies"]) < 1e-5, fw
        assert rel(checks["w_grad_norms"], ref["grad_norms"]) < 1e-4, fw
        assert checks["variants_agree"] < 1e-4
        for variant in ("per-batch", "low-overhead"):
            epoch = metrics[f"epoch [{variant}]"]
            assert epoch["stats"]["n"] == 1 and epoch["sync"]["state"] == "ok"
            assert metrics[f"test accuracy [{variant}]"]["samples"][0] > 40.0  # chance is 10 %
            first = metrics[f"energy after x-steps, epoch 1 [{variant}]"]["samples"][0]
            last = metrics[f"energy after x-steps, last epoch [{variant}]"]["samples"][0]
            assert last < first
        slow, fast = (metrics[f"epoch [{v}]"]["stats"]["median"] for v in ("per-batch", "low-overhead"))
        assert math.isclose(metrics["speed-up low-overhead vs per-batch"]["samples"][0], slow / fast)
    assert "FAIL" not in proc.stdout and "energy_x_steps" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("fast", ["manual", "compile"])
def test_pytorch_other_low_overhead_variants_match_the_eager_step(results: Path, fast: str) -> None:
    from suites.pc.spec import SPEC

    tiny = {**SPEC.smoke, "train_samples": 256, "test_samples": 128, "pytorch_fast": fast}
    args = [a for k, v in tiny.items() for a in ("--param", f"{k}={v}")]
    proc = harness("run", "--suite", "pc", "--frameworks", "pytorch", "--backend", "local", "--threads", "1", *args,
                   "--results-dir", str(results))  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    doc = load_result(run_folder(proc.stdout) / "pytorch.json")
    checks = {c["name"]: c["value"] for c in doc["checks"]}
    assert checks["variants_agree"] < 1e-4
    assert any(f"pytorch_fast={fast}" in note for note in doc["notes"])
    if fast == "compile":
        compiled = {m["name"]: m for m in doc["metrics"]}["epoch [low-overhead]"]
        assert compiled["first_call"] > compiled["stats"]["median"]  # torch.compile's compilation is in epoch 1
