"""The Data-parallel section in every medium that shows a run: the terminal table, report.md (markdown)
and the JSON export, from the constructed run folders of tests/data/parallel/ read back from disk."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from harness.judge.assessment import assess
from harness.judge.parallel import Figures, RankRow, Straggler
from harness.report.exports import Format, render_run
from harness.report.folder import write_report
from harness.report.parallel_text import HEADING, MAX_RANK_ROWS, bandwidth_cell, efficiency_cell, shown_ranks
from harness.store.run_folder import load_run
from tests.factories import metric, result, write_run

DATA = Path(__file__).parent / "data" / "parallel"
HOSTILE = "gpu-node\x1b[2J<script>alert(1)</script>|**x**[y](http://evil.example)"


def section(text: str, heading: str) -> str:
    """From the Data-parallel heading to the next section that is not its own ("stacks")."""
    start = text.index(heading)
    end = text.find("stacks", start)
    return text[start : end if end >= 0 else None]


def test_the_terminal_section_has_one_row_per_framework_with_the_judged_figures() -> None:
    text = render_run(assess(load_run(DATA / "good")), Format.table)
    part = section(text, f"\n{HEADING}\n")
    rows = {line.split()[0]: line for line in part.splitlines() if line.startswith(("flax ", "pytorch "))}
    assert set(rows) == {"flax", "pytorch"}
    flax = rows["flax"].split()
    # devices, scaling, global batch, N-way step, 1-way step, efficiency, compute, exposed, all-reduce, GB/s, overlap
    assert flax[1:4] == ["2", "(nccl)", "strong"] and "64" in flax
    assert "20 ms" in rows["flax"] and "36 ms (64 rows)" in rows["flax"]
    assert " 90% " in rows["flax"] and " 93% " in rows["pytorch"]  # 0.036 / (2 x 0.020), 0.028 / (2 x 0.015)
    assert "400 us" in rows["flax"] and "598 us" in rows["flax"]
    assert "15.9 (64% of peak)" in rows["flax"] and "18 (72% of peak)" in rows["pytorch"]
    assert rows["flax"].rstrip().endswith("none")  # no straggler
    assert "flax: ranks" in part and "pytorch: ranks" in part
    assert "node-a" in part and "STRAGGLER" not in part
    # the gate, shown like check rows
    gate = part[part.index("data-parallel gate") :]
    assert gate.count("(pass, rel diff 2e-08)") == 6 and "FAIL" not in gate
    assert "rtol 1e-05, atol 1e-06 vs N-way" in gate


def test_efficiency_is_never_called_significant() -> None:
    for case in ("good", "straggler", "disagree"):
        text = render_run(assess(load_run(DATA / case)), Format.table)
        assert "significant" not in section(text, f"\n{HEADING}\n").lower()


def test_the_straggler_row_and_the_contended_efficiency_are_marked() -> None:
    text = render_run(assess(load_run(DATA / "straggler")), Format.table)
    part = section(text, f"\n{HEADING}\n")
    flax_row = next(line for line in part.splitlines() if line.startswith("flax "))
    assert "CONTENDED 57%" in flax_row and "rank 1 (1.60x)" in flax_row
    pytorch_row = next(line for line in part.splitlines() if line.startswith("pytorch "))
    assert "CONTENDED" not in pytorch_row and " 59% " in pytorch_row
    marked = [line for line in part.splitlines() if "STRAGGLER" in line]
    assert len(marked) == 2 and all(line.startswith("1 ") for line in marked)
    assert "flax efficiency CONTENDED: dp step: 2 of 5 samples disturbed" in part
    assert "pytorch straggler: the job named no straggler" in part


def test_hostile_host_names_are_escaped_for_the_terminal_and_for_markdown(tmp_path: Path) -> None:
    judged = assess(load_run(DATA / "straggler"))
    terminal = render_run(judged, Format.table)
    assert "\x1b" not in terminal and "gpu-node\\x1b[2J<script>" in terminal
    markdown = render_run(judged, Format.markdown)
    assert "\x1b" not in markdown and "<script>" not in markdown
    assert r"gpu-node\\x1b\[2J\<script\>alert(1)\</script\>\|\*\*x\*\*\[y\]" in markdown
    report = write_report(judged, tmp_path / "report", figures=False).read_text(encoding="utf-8")
    assert "### Data-parallel" in report and "<script>" not in report and "\x1b" not in report
    page = render_run(judged, Format.html)
    assert "<script>" not in page and "\x1b" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_markdown_section_is_a_github_table_per_part() -> None:
    markdown = render_run(assess(load_run(DATA / "good")), Format.markdown)
    part = section(markdown, "### Data-parallel")
    assert "### flax: ranks" in part and "### data-parallel gate" in part
    header = next(line for line in part.splitlines() if line.startswith("| framework"))
    assert all(name in header for name in ("efficiency", "exposed comm", "bus GB/s", "overlap", "straggler"))
    assert re.search(r"\| flax +\| 2 \(nccl\) +\| strong +\| 64 +\|", part)
    assert r"dp\_first\_step\_loss" in part  # names escaped for markdown like every cell


def test_a_failed_gate_is_shown_with_its_reason() -> None:
    text = render_run(assess(load_run(DATA / "disagree")), Format.table)
    gate = section(text, "data-parallel gate")
    first = next(line for line in gate.splitlines() if line.startswith("dp_first_step_loss"))
    assert "FAIL: 1-way differs from N-way by 0.001 (rtol 1e-05)" in first
    curve = next(line for line in gate.splitlines() if line.startswith("dp_loss_curve"))
    assert "N-way [8 values] (FAIL: no 1-way value)" in curve
    assert "failed the agreement gate" in text  # the frameworks' dagger lines, as for a failed check


def test_the_json_export_carries_the_judged_figures_and_the_gate() -> None:
    document = json.loads(render_run(assess(load_run(DATA / "straggler")), Format.json))
    parallel = document["parallel"]
    flax, pytorch = parallel["figures"]
    assert flax["framework"] == "flax" and flax["devices"] == 2
    assert flax["efficiency"] == pytest.approx(0.036 / (2 * 0.0316)) and flax["efficiency_flag"] == "CONTENDED"
    assert flax["straggler"] == {"rank": 1, "ratio": pytest.approx(0.0312 / 0.0195)}
    assert pytorch["straggler"]["rank"] == 1 and pytorch["job_straggler"] is None and pytorch["notes"]
    assert [r["rank"] for r in flax["ranks"]] == [0, 1] and flax["ranks"][1]["straggler"] is True
    assert flax["ranks"][1]["host"] == HOSTILE  # JSON escapes it itself; the value stays what the job wrote
    assert flax["peak_share"] == pytest.approx(15.9e9 / 25e9) and flax["items"] == 64
    assert parallel["gate_passed"] is True and parallel["missing_block"] == []
    assert [row["name"] for row in parallel["gate"]] == ["dp_first_step_loss", "dp_step_weights", "dp_loss_curve"]
    failed = json.loads(render_run(assess(load_run(DATA / "disagree")), Format.json))
    assert failed["parallel"]["gate_passed"] is False
    first = failed["parallel"]["gate"][0]
    assert first["passed"] == {"flax": True, "pytorch": False}
    assert first["rel_diff"]["pytorch"] == pytest.approx(1e-3, rel=1e-3)
    assert set(failed["gate_failed"]) == {"flax", "pytorch"}
    json.dumps(failed, allow_nan=False)  # every figure finite


def test_runs_without_a_data_parallel_job_show_nothing_new(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "xla", [result(fw, [metric("m", [1.0, 1.1, 0.9])]) for fw in ("numpy", "jax")]))
    judged = assess(run)
    assert HEADING not in render_run(judged, Format.table)
    assert HEADING not in render_run(judged, Format.markdown)
    assert "parallel" not in json.loads(render_run(judged, Format.json))


def _figures(**changes: object) -> Figures:
    judged = assess(load_run(DATA / "good"))
    assert judged.parallel is not None
    return dataclasses.replace(judged.parallel.figures[0], **changes)  # type: ignore[arg-type]


def test_a_bus_bandwidth_above_the_links_peak_is_flagged_not_printed_as_a_share() -> None:
    assert bandwidth_cell(_figures(busbw_Bps=30e9)) == "IMPLAUSIBLE 30 > peak 25"
    assert bandwidth_cell(_figures(peak_Bps=None)) == "15.9"
    assert bandwidth_cell(_figures(busbw_Bps=None, peak_Bps=None)) == "-"
    assert efficiency_cell(_figures(efficiency=None)) == "-"
    assert efficiency_cell(_figures(efficiency_flag="RECOMPILED")) == "RECOMPILED 90%"


def test_many_ranks_are_cut_but_the_straggler_is_always_shown() -> None:
    ranks = tuple(RankRow(r, f"h{r}", 1.0, 1.0, None, r == 900) for r in range(1024))
    many = _figures(devices=1024, ranks=ranks, straggler=Straggler(900, 1.5))
    shown = shown_ranks(many)
    assert len(shown) == MAX_RANK_ROWS + 1 and shown[-1].rank == 900
