"""compare, exports, report and figures, on synthetic runs with known answers."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from harness.judge.assessment import assess
from harness.judge.compare import compare_runs
from harness.report.exports import Format, render_run
from harness.report.folder import write_report
from harness.report.records import RECORD_FIELDS
from harness.store.run_folder import load_run
from tests.conftest import harness
from tests.factories import metric, result, write_run

CPU = {"model": "test", "logical_cores": 2, "usable_cores": 2, "vector": "avx2", "mhz": 2000.0, "max_mhz": None}


def noisy(center: float, n: int = 12, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-0.03, 0.03)) for _ in range(n)]


def doc(fw: str, matmul: float, seed: int, versions: dict[str, str] | None = None) -> dict[str, Any]:
    d = result(fw, [metric("matmul", noisy(matmul, seed=seed), flops=2e9, first=matmul * 3)])
    d["environment"] = {"machine": {"cpu": CPU}, "versions": versions or {fw: "1.0"}}
    return d


def make(
    tmp: Path, name: str, scale: float, seed: int, versions: dict[str, str] | None = None, rounds: int = 6
) -> Path:
    """Two frameworks; `rounds` interleaved processes (their medians 1 % apart at random), 0 for one process."""
    docs = [doc("numpy", 0.1 * scale, seed, versions), doc("jax", 0.05 * scale, seed + 1)]
    for d in docs if rounds else []:
        d["settings"]["rounds"] = rounds
        for m in d["metrics"]:
            rng = random.Random(seed * 7 + len(m["name"]))
            m["round_medians"] = [m["stats"]["median"] * (1 + rng.gauss(0, 0.01)) for _ in range(rounds)]
    return write_run(tmp / name, docs)


def test_compare_finds_a_known_2x_and_calls_no_difference_not_significant(tmp_path: Path) -> None:
    a = load_run(make(tmp_path, "a", 1.0, 0))
    same = compare_runs(assess(a), assess(load_run(make(tmp_path, "same", 1.0, 10))))
    assert all(not c.significant and c.verdict == "not significant" for c in same.changes)
    assert all(c.processes == (6, 6) and c.basis == "round medians" for c in same.changes)
    slower = compare_runs(assess(a), assess(load_run(make(tmp_path, "slow", 2.0, 20))))
    for change in slower.changes:
        assert change.significant and 1.9 < change.ratio < 2.1 and change.ci_low > 1.8
        assert change.verdict.endswith("slower")
    assert 1.9 < slower.geomean() < 2.1


def test_compare_warns_about_differing_stacks(tmp_path: Path) -> None:
    a = load_run(make(tmp_path, "a", 1.0, 0))
    b = load_run(make(tmp_path, "b", 1.0, 1, versions={"numpy": "2.0"}))
    assert compare_runs(assess(a), assess(b)).warnings == ["numpy: runs differ in versions"]


def test_one_process_a_side_gives_the_ratio_and_no_verdict_however_large_the_change(tmp_path: Path) -> None:
    """Samples of one process are not independent evidence about the code: 2x slower from one
    process a side is a ratio, not a verdict, and --fail-above says it cannot judge it."""
    a, slow = make(tmp_path, "a", 1.0, 0, rounds=0), make(tmp_path, "slow", 2.0, 20, rounds=0)
    comparison = compare_runs(assess(load_run(a)), assess(load_run(slow)))
    for change in comparison.changes:
        assert change.processes == (1, 1) and 1.9 < change.ratio < 2.1 and change.p_value < 1e-4
        assert not change.significant and change.verdict == "no verdict: 1 process a side; `--rounds 5` gives one"
    proc = harness("compare", str(a), str(slow), "--fail-above", "10")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--fail-above cannot judge 2 row(s) without a verdict" in proc.stderr
    assert "no verdict on 2 of 2 rows" in proc.stdout
    # Rounds on one side only: still one process on the other.
    one_sided = compare_runs(assess(load_run(a)), assess(load_run(make(tmp_path, "r", 2.0, 3))))
    assert all(min(c.processes) == 1 and c.no_verdict for c in one_sided.changes)


def test_the_rows_of_a_compare_are_one_family_holm_corrected(tmp_path: Path) -> None:
    """Six rows at 5 processes a side; one row's raw p is 0.016 (one overlap in 5 vs 5): alone it
    would be called, in a family of six it is not. Dropping the correction fails this test."""
    from harness.core.statistics import holm

    def run(name: str, shifted: bool) -> Path:
        metrics = []
        for k in range(6):
            medians = [1.0 + 0.01 * i for i in range(5)]
            if shifted and k == 0:
                medians = [m + 0.035 for m in medians]  # one overlapping pair: U = 1, p = 4/252
            m = metric(f"op{k}", [x for x in medians for _ in range(3)])
            m["round_medians"] = medians
            metrics.append(m)
        d = result("numpy", metrics)
        d["settings"]["rounds"] = 5
        return write_run(tmp_path / name, [d])

    comparison = compare_runs(assess(load_run(run("a", False))), assess(load_run(run("b", True))))
    first = comparison.changes[0]
    assert first.p_value < 0.05 and first.p_adjusted == pytest.approx(min(1.0, 6 * first.p_value))
    assert not first.significant and first.verdict == "not significant"
    assert all(c.no_verdict is None for c in comparison.changes)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_compare_writes_a_junit_report_one_case_per_verdict(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    a, slow = make(tmp_path, "a", 1.0, 0), make(tmp_path, "slow", 1.5, 5)
    out = tmp_path / "compare.xml"
    proc = harness("compare", str(a), str(slow), "--junit", str(out))
    assert proc.returncode == 0, proc.stderr
    suite = ET.parse(out).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "2"
    cases = suite.findall("testcase")
    assert {c.get("classname") for c in cases} == {"harness.judge.compare.xla.numpy", "harness.judge.compare.xla.jax"}
    assert all((f := c.find("failure")) is not None and "slower" in (f.get("message") or "") for c in cases)
    # Above the gate: the same changes pass; one process a side: skipped, never passed or failed.
    harness("compare", str(a), str(slow), "--junit", str(out), "--fail-above", "80")
    assert ET.parse(out).getroot().find("testsuite").get("failures") == "0"  # type: ignore[union-attr]
    single = make(tmp_path, "one", 1.5, 5, rounds=0)
    harness("compare", str(make(tmp_path, "one-a", 1.0, 0, rounds=0)), str(single), "--junit", str(out))
    skipped = ET.parse(out).getroot().findall(".//skipped")
    assert len(skipped) == 2 and all("no verdict" in (s.get("message") or "") for s in skipped)
    for bad in (tmp_path, tmp_path / "missing" / "x.xml"):
        proc = harness("compare", str(a), str(slow), "--junit", str(bad))
        assert proc.returncode == 2 and proc.stderr.startswith("error: --junit") and proc.stderr.count("\n") == 1


def test_compare_cli_fail_above_and_formats(tmp_path: Path) -> None:
    a, slow = make(tmp_path, "a", 1.0, 0), make(tmp_path, "slow", 1.5, 5)
    proc = harness("compare", str(a), str(slow), "--fail-above", "20")
    assert proc.returncode == 1 and "significant slowdown above 20 %" in proc.stderr
    assert harness("compare", str(a), str(slow), "--fail-above", "60").returncode == 0
    data = json.loads(harness("compare", str(a), str(slow), "--format", "json").stdout)
    assert data["format"] == "harness-comparison" and len(data["changes"]) == 2
    rows = list(csv.DictReader(io.StringIO(harness("compare", str(a), str(slow), "--format", "csv").stdout)))
    assert {r["framework"] for r in rows} == {"numpy", "jax"} and all(r["significant"] == "True" for r in rows)


def test_every_export_format_parses_back(tmp_path: Path) -> None:
    run = load_run(make(tmp_path, "a", 1.0, 0))
    rows = list(csv.DictReader(io.StringIO(render_run(assess(run), Format.csv))))
    assert tuple(rows[0].keys()) == RECORD_FIELDS and len(rows) == 2
    jax_row = next(r for r in rows if r["framework"] == "jax")
    assert 0.45 < float(jax_row["ratio_to_baseline"]) < 0.55 and float(jax_row["ratio_ci_high"]) < 1
    document = json.loads(render_run(assess(run), Format.json))
    assert document["format"] == "harness-run-report" and document["baseline"] == "numpy"
    assert {m["framework"] for m in document["metrics"]} == {"numpy", "jax"}
    page = render_run(assess(run), Format.html)
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page and "matmul" in page
    markdown = render_run(assess(run), Format.markdown)
    assert "| matmul" in markdown and "### checks" in markdown


def test_report_folder_with_png_figures(tmp_path: Path) -> None:
    path = write_report(assess(load_run(make(tmp_path, "a", 1.0, 0))), tmp_path / "report")
    text = path.read_text()
    assert "## Fairness settings" in text and "## Environment" in text and "](figures/xla-steady.png)" in text
    for png in (tmp_path / "report" / "figures").iterdir():
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_lint_flags_a_fabricated_too_fast_metric_and_leaves_an_honest_one(tmp_path: Path) -> None:
    honest = doc("numpy", 0.1, 0)  # 2 GFLOP in 0.1 s = 20 GFLOP/s on a 2-core AVX2 CPU
    fast = doc("jax", 1e-6, 1)  # 2 PFLOP/s: impossible
    run = load_run(write_run(tmp_path / "r", [honest, fast]))
    findings = {f.framework: f for f in assess(run).findings}
    assert findings["numpy"].plausible and 0 < (findings["numpy"].fraction or 0) < 1
    assert not findings["jax"].plausible
    text = render_run(assess(run), Format.table)
    assert "IMPLAUSIBLE" in text and "likely a missing device synchronisation" in text
    jax_row = next(
        r for r in csv.DictReader(io.StringIO(render_run(assess(run), Format.csv))) if r["framework"] == "jax"
    )
    assert jax_row["plausible"] == "False" and jax_row["ratio_to_baseline"] == ""


def test_compare_tests_significance_on_round_medians_when_both_runs_have_rounds(tmp_path: Path) -> None:
    def rounds_run(name: str, scale: float) -> Path:
        docs = [doc("numpy", 0.1 * scale, 0), doc("jax", 0.05 * scale, 1)]
        for d in docs:
            for m in d["metrics"]:
                m["round_medians"] = [m["stats"]["median"] * f for f in (0.98, 1.0, 1.02)]
        return write_run(tmp_path / name, docs)

    comparison = compare_runs(assess(load_run(rounds_run("a", 1.0))), assess(load_run(rounds_run("b", 1.3))))
    for change in comparison.changes:
        assert change.basis == "round medians"
        # Three independent observations a side cannot reach p < 0.05 (the exact minimum is 0.1),
        # however many correlated samples each round pooled: no verdict, and the rounds that give one.
        assert change.p_value == pytest.approx(0.1) and not change.significant
        assert change.verdict == "no verdict: 3 processes a side; `--rounds 5` gives one"
    assert "(rounds)" in harness("compare", str(tmp_path / "a"), str(tmp_path / "b")).stdout


def test_a_run_names_the_code_that_measured_it_and_compare_notices_a_change(tmp_path: Path) -> None:
    import json

    from harness.core.schema import code_problem, summary_problem
    from harness.judge.compare import compare_runs
    from harness.report.table import render
    from harness.store.run_folder import describe_code, load_run
    from tests.factories import metric, result, write_run

    code = describe_code()
    assert len(code["suites_sha256"]) == 64 and code_problem(code) is None
    folders = []
    for name, digest in (("a", code["suites_sha256"]), ("b", "0" * 64)):
        folder = write_run(tmp_path / name, [result("numpy", [metric("matmul", [1.0, 1.0, 1.0])])])
        summary = json.loads((folder / "summary.json").read_text())
        summary["code"] = dict(code, suites_sha256=digest)
        (folder / "summary.json").write_text(json.dumps(summary))
        folders.append(load_run(folder))
    assert f"code: suites {code['suites_sha256'][:12]}" in render(assess(folders[0]))
    assert any("suites' code differs" in w for w in compare_runs(assess(folders[0]), assess(folders[1])).warnings)
    for hostile in ({"suites_sha256": "../x"}, {"suites_sha256": "0" * 64, "git_commit": "HEAD; rm"}, "x"):
        assert summary_problem(dict(summary, code=hostile)) is not None


def test_a_comparison_with_every_time_metric_excluded_has_no_geomean_not_nan(tmp_path: Path) -> None:
    """A metric whose work escaped its clock leaves the comparison; with none left there is no
    geometric mean (the JSON export says null, never NaN, which is not JSON)."""
    from harness.report.comparison import render_comparison

    def impossible(seed: int) -> dict[str, Any]:
        rng = random.Random(seed)
        escaped = metric("matmul", [0.001 * (1 + 0.01 * rng.random()) for _ in range(8)])
        escaped["sync"] = {"state": "escaped"}
        return result("numpy", [escaped])

    a, b = (load_run(write_run(tmp_path / name, [impossible(i)])) for i, name in enumerate("ab"))
    comparison = compare_runs(assess(a), assess(b))
    assert [c.excluded for c in comparison.changes] != [None]
    assert comparison.geomean() is None
    doc = json.loads(render_comparison(comparison, Format.json), parse_constant=lambda c: pytest.fail(c))
    assert doc["geomean"] is None
    table = render_comparison(comparison, Format.table)
    assert "all: none (no time metric left after exclusions)" in table
    row = next(line for line in table.splitlines() if line.startswith("numpy"))
    assert "excluded" in row and "x [" not in row  # a flagged number gets no ratio or p-value
