"""The table's words: a missing ratio says why, no heading stands over nothing, MFU is called MFU."""

from __future__ import annotations

from pathlib import Path

from harness.judge.assessment import assess
from harness.report.table import render
from harness.store.run_folder import load_run
from suites.contract.registry import all_suites
from tests.factories import metric, result, write_run
from tests.test_contention import _timed
from tests.test_gpu_peaks import TERA, _mib, gpu_result


def test_a_ratio_missing_because_the_baseline_was_contended_says_so(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", [result("numpy", [_timed("matmul", list(range(9)))]),
                                              result("jax", [_timed("matmul", [])])]))  # fmt: skip
    row = next(line for line in render(assess(run)).splitlines() if line.startswith("matmul "))
    assert row.endswith("(no ratio: numpy CONTENDED)"), row


def test_a_crowded_run_has_no_contended_samples_heading_over_no_samples(tmp_path: Path) -> None:
    docs = [result(fw, [_timed("matmul", list(range(9)))]) for fw in ("numpy", "jax")]
    text = render(assess(load_run(write_run(tmp_path / "r", docs))))
    assert "RUN FLAGGED: 18 of 20 samples" in text
    assert "contended samples (" not in text  # both metrics are in the CONTENDED section: no list here


def test_a_framework_with_no_versions_has_no_stacks_line(tmp_path: Path) -> None:
    bare = result("numpy", [metric("matmul", [0.01] * 3)])
    bare["environment"]["versions"] = {"numpy": None}
    text = render(assess(load_run(write_run(tmp_path / "r", [bare]))))
    assert "\nstacks\n" not in text and "numpy: \n" not in text + "\n"


def test_gpt_s_train_step_share_of_peak_is_called_mfu(tmp_path: Path) -> None:
    spec = all_suites()["gpt"]
    doc = result("pytorch", [dict(metric("train step", [1.0] * 3, flops=50.0 * TERA), dtype="float32")], checks=[])
    doc["suite"], doc["params"] = "gpt", spec.resolve({})
    doc["device"] = "gpu"
    doc["environment"] = gpu_result("NVIDIA H200", _mib(143771), 700.0, "fp32")["environment"]
    text = render(assess(load_run(write_run(tmp_path / "gpt", [doc]))))
    assert "75% of peak (MFU)" in text, text
    xla = result("pytorch", [dict(metric("matmul", [1.0] * 3, flops=50.0 * TERA), dtype="float32")])
    xla["device"], xla["environment"] = "gpu", doc["environment"]
    plain = render(assess(load_run(write_run(tmp_path / "xla", [xla]))))
    assert "75% of peak" in plain and "MFU" not in plain  # the word is the suite's, not every rate's
