"""The Inference section of a run, in every medium that shows one (terminal, report.md, JSON export),
from real results of this machine (tests/data/inference/) read back from disk; pooled rounds keep it."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from harness.execute.rounds import pool
from harness.judge.assessment import assess
from harness.judge.inference import Tail
from harness.report.exports import Format, render_run
from harness.report.inference_text import HEADING, rate_text, tail_cell
from harness.store.run_folder import load_run
from suites.contract.inference import percentile, quantile_interval

DATA = Path(__file__).parent / "data" / "inference"


def rows_of(text: str, heading: str) -> dict[str, str]:
    """The framework rows of the table under `heading` (terminal layout)."""
    part = text[text.index(heading) :].split("\n\n")[0]
    return {line.split()[0]: line for line in part.splitlines() if line.startswith(("flax ", "pytorch "))}


def test_the_latency_table_gives_each_percentile_its_interval_and_says_what_it_covers() -> None:
    judged = assess(load_run(DATA / "gpt-infer"))
    text = render_run(judged, Format.table)
    rows = rows_of(text, f"{HEADING}: latency of single requests at batch 1")
    assert set(rows) == {"flax", "pytorch"}
    samples = next(m for m in json.loads((DATA / "gpt-infer" / "flax.json").read_text())["metrics"]
                   if m["name"] == "latency (batch 1)")["samples"]  # fmt: skip
    low, high, coverage = quantile_interval(samples, 0.99)
    p99 = Tail("p99", percentile(samples, 0.99), low, high, coverage)
    assert tail_cell(p99, 0.95) in rows["flax"]
    assert "26%]" in rows["flax"]  # 30 requests: the max bounds p99 with 26 % probability, and the cell says so
    assert rows["flax"].split()[1] == "30"


def test_the_sweep_table_has_a_row_per_batch_and_where_it_saturates() -> None:
    judged = assess(load_run(DATA / "gpt-infer"))
    assert judged.inference is not None
    text = render_run(judged, Format.table)
    part = text[text.index(f"{HEADING}: throughput against batch size") :].split("\n\n")[0]
    lines = part.splitlines()
    assert [line.split()[0] for line in lines[3:5]] == ["1", "8"]
    flax = next(f for f in judged.inference.figures if f.framework == "flax")
    assert rate_text(flax.sweep[1].rate) in lines[4]
    assert lines[5].startswith("saturates at") and lines[5].split()[-2:] == ["8", "8"]


def test_generation_shows_time_to_first_token_and_decode_rate_and_no_sweep() -> None:
    judged = assess(load_run(DATA / "gpt-generate"))
    text = render_run(judged, Format.table)
    rows = rows_of(text, f"{HEADING}: generation (greedy, KV cache)")
    assert "1 x 8" in rows["pytorch"] and rows["pytorch"].split()[4] == "8"
    assert f"{HEADING}: latency per decode step" in text
    assert "throughput against batch size" not in text


def test_contended_samples_put_the_figures_in_parentheses_with_the_reason() -> None:
    text = render_run(assess(load_run(DATA / "resnet18-infer")), Format.table)
    rows = rows_of(text, f"{HEADING}: latency of single requests at batch 1")
    assert all("(" in row for row in rows.values())
    assert "flax latency in parentheses: contended" in text


def test_markdown_escapes_what_the_file_says(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "gpt-infer", run)
    for fw in ("flax", "pytorch"):
        path = run / f"{fw}.json"
        doc = json.loads(path.read_text())
        doc["inference"]["unit"] = "rows|**x**<b>"
        doc["inference"]["stopped"] = "batch 64: |<script>| [y](http://evil.example)"
        path.write_text(json.dumps(doc))
    markdown = render_run(assess(load_run(run)), Format.markdown)
    assert f"### {HEADING}: throughput against batch size" in markdown
    assert "<script>" not in markdown and "<b>" not in markdown and " [y](http" not in markdown
    assert "rows\\|" in markdown and "\\[y\\]" in markdown


def test_the_json_export_has_every_percentile_with_its_interval() -> None:
    document = json.loads(render_run(assess(load_run(DATA / "resnet18-infer")), Format.json))
    figures = {f["framework"]: f for f in document["inference"]["figures"]}
    assert set(figures) == {"flax", "pytorch"}
    tails = {t["label"]: t for t in figures["pytorch"]["tails"]}
    assert list(tails) == ["p50", "p90", "p99", "max"]
    assert tails["p50"]["low"] <= tails["p50"]["seconds"] <= tails["p50"]["high"]
    assert tails["max"]["low"] is None and figures["pytorch"]["requests"] == 30


@pytest.mark.parametrize("case", ["gpt-infer", "gpt-generate"])
def test_pooled_rounds_keep_the_block_and_the_sweep_every_round_timed(case: str) -> None:
    docs = [json.loads((DATA / case / "flax.json").read_text()) for _ in range(2)]
    if case == "gpt-infer":  # round 2's sweep stopped before batch 8
        second = copy.deepcopy(docs[1])
        second["metrics"] = [m for m in second["metrics"] if "batch 8" not in m["name"]]
        second["inference"]["sweep"] = second["inference"]["sweep"][:1]
        second["inference"]["stopped"] = "batch 1: one call took 3 s"
        docs[1] = second
    pooled = pool(docs, "pooled-run")  # type: ignore[arg-type]
    block = pooled["inference"]  # type: ignore[typeddict-item]
    names = {m["name"] for m in pooled["metrics"]}
    assert all(p["time"] in names and p["throughput"] in names for p in block["sweep"])
    if case == "gpt-infer":
        assert [p["batch"] for p in block["sweep"]] == [1] and "3 s" in block["stopped"]
    p99 = next(m for m in pooled["metrics"] if m["name"] == block["latency"]["percentiles"]["p99"])
    assert len(p99["round_medians"]) == 2  # one per process: what compare and ab judge
