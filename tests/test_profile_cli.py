"""`--profile` at the command line: bad combinations are one line and exit 2, and `show` / `compare`
print the breakdowns of recorded runs (tests/data/profiles) from their files alone."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import harness

DATA = Path(__file__).parent / "data" / "profiles"


def copied(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(DATA / name, target)
    return target


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("run", "--suite", "xla", "--profile-steps", "3", "--dry-run"), "--profile-steps goes with --profile"),
        (("run", "--suite", "xla", "--profile", "--profile-steps", "0", "--dry-run"), "from 1 to 50"),
        (("run", "--suite", "xla", "--profile", "--profile-steps", "51", "--dry-run"), "from 1 to 50"),
        (("ab", "HEAD", "--suite", "xla", "--profile-side", "candidate", "--dry-run"), "add --profile"),
    ],
)
def test_a_bad_profile_option_is_one_line_and_exit_2(args: tuple[str, ...], said: str) -> None:
    proc = harness(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_dry_run_plans_the_profile_into_every_job() -> None:
    proc = harness("run", "--suite", "xla", "--profile", "--profile-steps", "7", "--dry-run", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["jobs"] and all(job["profile"] == 7 for job in plan["jobs"])


def test_show_profile_prints_both_frameworks_breakdowns(tmp_path: Path) -> None:
    run = copied("gpt-smoke-cpu", tmp_path)
    proc = harness("show", str(run), "--profile")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "profile: train step" in text
    assert "matrix products and convolutions" in text and "profiled against timed" in text
    for framework in ("flax", "pytorch"):
        assert f"{framework}: profiled step" in text
        assert f"{framework}-artifacts/profiles/train-step.trace.json.gz" in text
    assert "aten::" in text  # PyTorch's own operation names


def test_show_profile_goes_with_the_table_format_only(tmp_path: Path) -> None:
    proc = harness("show", str(copied("gpt-smoke-cpu", tmp_path)), "--profile", "--format", "json")
    assert proc.returncode == 2 and "--profile" in proc.stderr


def test_a_broken_trace_costs_only_its_own_breakdown(tmp_path: Path) -> None:
    run = copied("gpt-smoke-cpu", tmp_path)
    (run / "pytorch-artifacts" / "profiles" / "train-step.trace.json.gz").write_bytes(gzip.compress(b"{not json"))
    proc = harness("show", str(run), "--profile")
    assert proc.returncode == 0, proc.stderr
    assert "flax: profiled step" in proc.stdout and "pytorch: profiled step" not in proc.stdout
    assert "pytorch" in proc.stdout.split("profiled against timed")[-1]  # the problem line names it


def test_compare_profile_sets_two_runs_side_by_side(tmp_path: Path) -> None:
    before = copied("gpt-smoke-cpu", tmp_path / "a")
    after = copied("gpt-smoke-cpu", tmp_path / "b")
    proc = harness("compare", str(before), str(after), "--profile")
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    assert "profiles:" in proc.stdout
    for framework in ("flax", "pytorch"):
        assert f"{framework} train-step" in proc.stdout or f"{framework} train step" in proc.stdout


def chrome_trace_problems(doc: Any) -> list[str]:
    """What keeps a trace-event document from loading in a trace viewer (the Trace Event Format's
    JSON Object Format: `traceEvents`, each event's phase, times in microseconds, pid and tid)."""
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list) or not events:
        return ["no traceEvents list"]
    problems = []
    for event in events:
        if not isinstance(event, dict):
            problems.append(f"not an object: {event!r}"[:80])
            continue
        ph = event.get("ph")
        if ph == "X":
            if not all(isinstance(event.get(k), (int, float)) for k in ("ts", "dur")) or event["dur"] < 0:
                problems.append(f"complete event without ts/dur: {event.get('name')!r}")
            if not isinstance(event.get("name"), str):
                problems.append("complete event without a name")
        elif ph == "M" and not isinstance((event.get("args") or {}).get("name", event.get("args")), (str, dict, int)):
            problems.append(f"metadata without args: {event!r}"[:80])
        if ph in ("X", "B", "E", "i", "M") and not isinstance(event.get("pid"), (int, str)):
            problems.append(f"event without a pid: {event.get('name')!r}")
    return problems[:5]


@pytest.mark.parametrize("run", sorted(p.name for p in DATA.iterdir()))
def test_every_recorded_trace_is_a_trace_event_file_a_viewer_loads(run: str) -> None:
    traces = sorted((DATA / run).glob("*-artifacts/profiles/*.trace.json.gz"))
    assert traces
    for trace in traces:
        doc = json.loads(gzip.decompress(trace.read_bytes()))
        assert chrome_trace_problems(doc) == [], trace
        names = {e.get("name") for e in (doc["traceEvents"] if isinstance(doc, dict) else doc)}
        assert "harness.step" in names


def with_profiles_in_round(run: Path, round_name: object) -> None:
    """`run` as pooled rounds leave it: the traces under rounds/round-3/, each entry naming its round."""
    target = run / "rounds" / "round-3"
    target.mkdir(parents=True)
    for framework in ("flax", "pytorch"):
        shutil.move(str(run / f"{framework}-artifacts"), str(target / f"{framework}-artifacts"))
        path = run / f"{framework}.json"
        doc = json.loads(path.read_text())
        for entry in doc["profiles"]:
            entry["round"] = round_name
        path.write_text(json.dumps(doc))


def test_pooled_rounds_read_the_profile_from_the_round_that_wrote_it(tmp_path: Path) -> None:
    run = copied("gpt-smoke-cpu", tmp_path)
    with_profiles_in_round(run, "round-3")
    proc = harness("show", str(run), "--profile")
    assert proc.returncode == 0, proc.stderr
    assert "rounds/round-3/flax-artifacts/profiles/train-step.trace.json.gz" in proc.stdout
    assert "pytorch: profiled step" in proc.stdout


@pytest.mark.parametrize("round_name", ["../../..", "round-0", "round-3/../round-3", 3])
def test_a_round_that_is_not_a_round_folder_name_is_refused(tmp_path: Path, round_name: object) -> None:
    run = copied("gpt-smoke-cpu", tmp_path)
    with_profiles_in_round(run, round_name)
    proc = harness("show", str(run), "--profile")
    assert proc.returncode in (0, 2), proc.stderr
    assert "profiled step" not in proc.stdout and "Traceback" not in proc.stderr


def test_a_round_folder_planted_as_a_link_is_never_followed(tmp_path: Path) -> None:
    run = copied("gpt-smoke-cpu", tmp_path)
    with_profiles_in_round(run, "round-3")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(run / "rounds" / "round-3"), str(elsewhere))
    (run / "rounds" / "round-3").symlink_to(elsewhere, target_is_directory=True)
    proc = harness("show", str(run), "--profile")
    assert "profiled step" not in proc.stdout
    assert "not a folder" in proc.stdout


def test_the_json_export_carries_each_breakdown(tmp_path: Path) -> None:
    proc = harness("show", str(copied("gpt-smoke-cpu", tmp_path)), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    found = {p["framework"]: p for p in doc["profiles"]}
    assert sorted(found) == ["flax", "pytorch"] and doc["profile_problems"] == []
    for record in found.values():
        assert record["metric"] == "train step" and record["steps"] == 5
        total = sum(c["seconds"] for c in record["categories"]) + record["unattributed_s"]
        assert total == pytest.approx(record["step_s"], rel=1e-9)
        assert record["profiler_overhead"] == pytest.approx(record["step_s"] / record["timed_step_s"] - 1)
        assert [c["key"] for c in record["categories"]][0] == "matmul"


def test_a_run_without_profiles_exports_the_same_document_as_before(tmp_path: Path) -> None:
    run = copied("gpt-smoke-cpu", tmp_path)
    for framework in ("flax", "pytorch"):
        path = run / f"{framework}.json"
        doc = json.loads(path.read_text())
        del doc["profiles"]
        path.write_text(json.dumps(doc))
    proc = harness("show", str(run), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert "profiles" not in json.loads(proc.stdout)
