"""A history series is one machine with one thread setting: a results folder gathered from two machines
(or run at two thread counts) draws two series, each labelled, never one with a "change point" where
the machine changed."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, cast

import pytest

from harness.core import machine_id, workload
from harness.core.result_types import Result
from harness.judge.assessment import assess
from harness.judge.history import find_changes, series_of
from harness.publish.site import publish_site
from harness.report.exports import Format
from harness.report.history_report import render_history
from harness.store.run_folder import load_run
from tests.conftest import harness
from tests.factories import metric, result
from tests.test_publish import site_data, suite_page, write

CPU_A = {"model": "Test CPU A", "logical_cores": 4, "usable_cores": 4}
CPU_B = {"model": "Test CPU B", "logical_cores": 8, "usable_cores": 8}
RUNS = 8  # per machine: above change_points.MIN_POINTS, so each series is analysed


def _doc(level: float, rng: random.Random, day: int, cpu: dict[str, Any], threads: int | None) -> dict[str, Any]:
    doc = result("numpy", [metric("matmul", [level * (1 + rng.gauss(0, 0.01)) for _ in range(8)])])
    doc["started_at"] = doc["finished_at"] = f"2024-05-{day:02d}T12:00:00.000+00:00"
    doc["settings"]["threads"] = threads
    doc["environment"] = {"versions": {"numpy": "1.26.4"}, "machine": {"cpu": dict(cpu)}}
    return doc


def two_setups(root: Path, first: tuple[dict[str, Any], int | None], second: tuple[dict[str, Any], int | None]) -> Path:
    """RUNS runs at level 1.0 on `first` (cpu, threads), then RUNS at level 1.5 on `second`: each flat."""
    rng = random.Random(4)
    results = root / "results"
    for i in range(2 * RUNS):
        cpu, threads = first if i < RUNS else second
        doc = _doc(1.0 if i < RUNS else 1.5, rng, i + 1, cpu, threads)
        write(results, f"run-{i:02d}", f"run-{i:02d}", [doc])
    return results


def history_json(results: Path) -> dict[str, Any]:
    proc = harness("history", str(results), "--suite", "xla", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def rendered(results: Path, fmt: Format) -> str:
    """What `harness history RESULTS --suite xla --format FMT` prints, without a process of its own."""
    runs = [load_run(path) for path in sorted(results.iterdir())]
    series = series_of([(run, assess(run)) for run in runs])
    return render_history("xla", series, [c for s in series for c in find_changes(s)], fmt)


@pytest.mark.parametrize(
    ("first", "second", "labels"),
    [
        (
            (CPU_A, None),
            (CPU_B, None),
            ["machine Test CPU A (4 cores), default threads", "machine Test CPU B (8 cores), default threads"],
        ),
        (
            (CPU_A, 1),
            (CPU_A, 2),
            ["machine Test CPU A (4 cores), 1 thread", "machine Test CPU A (4 cores), 2 threads"],
        ),
    ],
    ids=["two machines", "two thread counts"],
)
def test_two_machines_or_thread_counts_are_two_series_without_a_change_point(
    tmp_path: Path,
    first: tuple[dict[str, Any], int | None],
    second: tuple[dict[str, Any], int | None],
    labels: list[str],
) -> None:
    results = two_setups(tmp_path, first, second)
    doc = history_json(results)
    # The 1.5x level of the second setup is not a change in the first's line (with the machine dropped
    # from the key, the 16 runs are one series and PELT finds a step at run-08: see the control below).
    assert doc["change_points"] == []
    assert [s["machine"] for s in doc["series"]] == labels
    assert [s["runs"] for s in doc["series"]] == [
        [f"run-{i:02d}" for i in range(RUNS)],
        [f"run-{i:02d}" for i in range(RUNS, 2 * RUNS)],
    ]
    assert [s["threads"] for s in doc["series"]] == [first[1], second[1]]
    assert len({s["machine_fingerprint"] for s in doc["series"]}) == 2
    table = harness("history", str(results), "--suite", "xla").stdout
    assert "no change points" in table and "2 series (framework, metric, workload, machine and threads)" in table
    assert f"{labels[0]}: 1 series, {RUNS} runs, run-00 to run-07" in table  # which runs are which machine's
    assert f"{labels[1]}: 1 series, {RUNS} runs, run-08 to run-15" in table
    markdown = rendered(results, Format.markdown)  # in process: the formats share one renderer
    assert "no change points" in markdown and f"{labels[1]}: 1 series, {RUNS} runs, run-08 to run-15" in markdown


def test_control_the_same_runs_on_one_machine_have_their_change_point(tmp_path: Path) -> None:
    """The test above has the power to fail: one machine, the same levels, one series with its step."""
    doc = history_json(two_setups(tmp_path, (CPU_A, None), (CPU_A, None)))
    [series] = doc["series"]
    assert series["machine"] == "machine Test CPU A (4 cores), default threads" and len(series["runs"]) == 2 * RUNS
    [change] = doc["change_points"]
    assert (change["run_before"], change["run_after"]) == ("run-07", "run-08")
    assert change["ratio"] == pytest.approx(1.5, rel=0.02)


def test_the_site_draws_one_chart_per_machine_each_titled_with_it(tmp_path: Path) -> None:
    results = two_setups(tmp_path, (CPU_A, None), (CPU_B, None))
    publish_site(results, tmp_path / "site")
    page = suite_page(tmp_path / "site", "xla")
    charts = site_data(page)["metrics"]
    assert [m["title"] for m in charts] == [
        "matmul (machine Test CPU A (4 cores), default threads)",
        "matmul (machine Test CPU B (8 cores), default threads)",
    ]
    assert [sorted(p["x"] for p in m["points"]) for m in charts] == [list(range(RUNS)), list(range(RUNS, 2 * RUNS))]
    assert [m["changes"] for m in charts] == [[], []]
    for chart in charts:
        assert f"<h2>{chart['title']}</h2>" in page
    assert page.count("No change point in this history.") == 2


def test_one_machine_keeps_its_titles_short(tmp_path: Path) -> None:
    results = two_setups(tmp_path, (CPU_A, 2), (CPU_A, 2))
    doc = history_json(results)
    assert doc["series"][0]["machine"] == "machine Test CPU A (4 cores), 2 threads"
    table = harness("history", str(results), "--suite", "xla").stdout
    assert "numpy matmul (matrix_size=8, fp32, cpu) " in table and "machine Test CPU" not in table
    publish_site(results, tmp_path / "site")
    [chart] = site_data(suite_page(tmp_path / "site", "xla"))["metrics"]
    assert chart["title"] == "matmul"


def test_a_hostile_cpu_model_is_inert_in_the_terminal_and_on_the_site(tmp_path: Path) -> None:
    hostile = dict(CPU_B, model="evil\x1b[31m</h2><script>alert(1)</script>\u202e")
    results = two_setups(tmp_path, (CPU_A, None), (hostile, None))
    rng = random.Random(5)
    for i in range(2 * RUNS, 3 * RUNS):  # the hostile machine's level steps: its title is in the table
        write(results, f"run-{i:02d}", f"run-{i:02d}", [_doc(2.0, rng, i + 1, hostile, None)])
    table = harness("history", str(results), "--suite", "xla").stdout
    assert "\x1b" not in table and "\u202e" not in table and "run-15 -> run-16" in table
    assert "numpy matmul (matrix_size=8, fp32, cpu; machine evil\\x1b[31m</h2><script>alert(1)</script>" in table
    publish_site(results, tmp_path / "site")
    page = suite_page(tmp_path / "site", "xla")
    assert "<script>alert" not in page and "\x1b" not in page and "\u202e" not in page
    assert "machine evil\\x1b[31m&lt;/h2&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_series_key_adds_machine_and_threads_and_the_workload_key_is_unchanged() -> None:
    a = cast(Result, _doc(1.0, random.Random(1), 1, CPU_A, None))
    other_cpu, other_threads = json.loads(json.dumps(a)), json.loads(json.dumps(a))
    other_cpu["environment"]["machine"]["cpu"]["model"] = "Test CPU B"
    other_threads["settings"]["threads"] = 1
    for b in (other_cpu, other_threads):
        assert workload.key(a) == workload.key(b) and workload.differences(a, b) == []  # compare: as before
        assert workload.series_key(a) != workload.series_key(b)  # history: another series
    assert workload.series_key(a) == workload.series_key(json.loads(json.dumps(a)))


def test_two_machines_that_read_alike_get_two_labels() -> None:
    a = cast(Result, _doc(1.0, random.Random(1), 1, CPU_A, None))
    b = json.loads(json.dumps(a))
    b["environment"]["machine"]["memory_bytes"] = 64 << 30  # same CPU and cores, more memory
    names = machine_id.labels({machine_id.identity(a): a, machine_id.identity(b): b})
    assert len(set(names.values())) == 2
    assert all(n.startswith("machine Test CPU A (4 cores), default threads [") for n in names.values())
    assert machine_id.labels({machine_id.identity(a): a}) == {
        machine_id.identity(a): "machine Test CPU A (4 cores), default threads"
    }


def test_a_gpu_job_is_named_by_its_gpus() -> None:
    doc = cast(Result, _doc(1.0, random.Random(1), 1, CPU_A, None))
    doc["device"] = "gpu"
    doc["environment"]["nvml"] = {"gpus": [{"name": "NVIDIA H100"}, {"name": "NVIDIA H100"}]}
    assert machine_id.label(doc) == "machine 2x NVIDIA H100, default threads"
    doc["environment"]["nvml"] = None
    doc["environment"]["device"] = {"name": "NVIDIA A10G"}
    assert machine_id.label(doc) == "machine NVIDIA A10G, default threads"
