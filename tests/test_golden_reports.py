"""Golden outputs: whole renderings of one fixed run (and one comparison), byte for byte.

Substring asserts let a column shift, a precision change or a lost footer pass unnoticed; these
compare everything a reader sees. After an intended change of the output, regenerate with
`HARNESS_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_reports.py` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from harness.judge.assessment import assess
from harness.judge.compare import compare_runs
from harness.report.comparison import render_comparison
from harness.report.exports import Format, render_run
from harness.store.run_folder import load_run
from tests.factories import check, metric, result, write_run

GOLDEN = Path(__file__).parent / "golden"
STAMP = "2026-01-02T03:04:05+00:00"


def _fixed(doc: dict[str, Any], versions: dict[str, str]) -> dict[str, Any]:
    doc["started_at"] = doc["finished_at"] = STAMP
    doc["environment"] = {"versions": versions, "precision": {"measured": {"class": "fp32"}}}
    return doc


def _run(folder: Path, scale: float = 1.0) -> Path:
    """numpy (baseline), jax and pytorch on xla: 12 samples (bootstrap interval), 5 samples
    (order-statistic interval with its coverage), a FLOP rate, checks that pass."""
    drift = [1.0 + 0.01 * ((i * 7) % 5) for i in range(12)]
    docs = []
    for fw, base, first in (("numpy", 2.0, 2.5), ("jax", 0.8, 4.0), ("pytorch", 1.1, 3.0)):
        matmul = metric("matmul", [scale * base * d for d in drift], first=first, flops=2e9)
        small = metric("small matmul", [scale * base * 1e-4 * d for d in drift[:5]], first=first * 1e-3)
        checks = [check("residual", 1e-12, limit=1e-6), check("product_sum", 3.3e7, rtol=1e-9)]
        versions = {"numpy": "2.3.0"} if fw == "numpy" else {fw: "9.9.9", "numpy": "2.3.0"}
        docs.append(_fixed(result(fw, [matmul, small], checks), versions))
    return write_run(folder, docs)


def _golden(name: str, text: str, folder: Path = GOLDEN) -> None:
    path = folder / name
    if os.environ.get("HARNESS_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: run with HARNESS_UPDATE_GOLDEN=1 once and commit it"
    assert text == path.read_text(encoding="utf-8"), f"{name} changed; see the module docstring"


@pytest.mark.parametrize(
    ("fmt", "name"),
    [(Format.table, "run.txt"), (Format.markdown, "run.md"), (Format.csv, "run.csv"), (Format.html, "run.html")],
)
def test_a_run_renders_exactly_as_recorded(tmp_path: Path, fmt: Format, name: str) -> None:
    _golden(name, render_run(assess(load_run(_run(tmp_path / "run"))), fmt))


def test_a_comparison_renders_exactly_as_recorded(tmp_path: Path) -> None:
    a = load_run(_run(tmp_path / "a"))
    b = load_run(_run(tmp_path / "b", scale=1.1))
    _golden("compare.txt", render_comparison(compare_runs(assess(a), assess(b)), Format.table))


def test_the_golden_check_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARNESS_UPDATE_GOLDEN", raising=False)
    (tmp_path / "x.txt").write_text("1.00x", encoding="utf-8")
    _golden("x.txt", "1.00x", tmp_path)
    with pytest.raises(AssertionError, match="x.txt changed"):
        _golden("x.txt", "1.000x", tmp_path)
