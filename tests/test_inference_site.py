"""The published run page of an inference run (publish/inference_charts.py): throughput against batch
size as one line per framework, the batch-1 latency percentiles with their order-statistic intervals,
and for generation the time to first token and decode rate, all equal to the judged figures
(judge/inference.py) of real results of this machine (tests/data/inference/) read back from disk.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from harness.judge.assessment import assess
from harness.judge.inference import Figures, InferenceJudgement
from harness.publish import publish_site
from harness.publish.inference_charts import InferencePictures, section, throughput_data
from harness.report import palette
from harness.report.inference_text import rate_text, tail_cell
from harness.store.run_folder import load_run
from harness.text.escape import plain, script_json
from harness.text.numbers import fmt_time
from tests.test_publish import HOSTILE, site_data
from tests.test_publish_pictures import picture_results, run_pages

DATA = Path(__file__).parent / "data" / "inference"
CASES = ("gpt-infer", "resnet18-infer", "gpt-generate")


def _results(root: Path, cases: tuple[str, ...] = CASES) -> Path:
    results = root / "results"
    for case in cases:
        shutil.copytree(DATA / case, results / case)
    return results


def _pages(results: Path, site: Path) -> dict[str, str]:
    """case folder -> its run page, found by the run id its summary names."""
    pages = {p.name: p.read_text() for p in site.glob("run-*.html")}
    found = {}
    for folder in results.iterdir():
        run_id = json.loads((folder / "summary.json").read_text())["run_id"]
        [page] = [text for text in pages.values() if f"<h1>run {html.escape(run_id)}</h1>" in text]
        found[folder.name] = page
    return found


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("inference-site")
    results = _results(root)
    publish_site(results, root / "site")
    return results, _pages(results, root / "site")


def _judged(results: Path, case: str) -> InferenceJudgement:
    inference = assess(load_run(results / case)).inference
    assert inference is not None
    return inference


def _table(page: str, table_id: str) -> list[tuple[str, list[str]]]:
    """The body rows of the table with this id: (the row's class, its cells as text)."""
    found = re.search(rf'<table class="data inference" id="{table_id}">(.*?)</table>', page, re.S)
    assert found is not None, f"no table {table_id}"
    body = found.group(1).split("<tbody>")[1]
    rows = []
    for attributes, cells in re.findall(r"<tr([^>]*)>(.*?)</tr>", body, re.S):
        cls = re.search(r'class="([^"]*)"', attributes)
        rows.append((cls.group(1) if cls else "", [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", cells)]))
    return rows


@pytest.mark.parametrize("case", ["gpt-infer", "resnet18-infer"])
def test_the_throughput_chart_has_a_line_per_framework_with_the_judged_points(
    published: tuple[Path, dict[str, str]], case: str
) -> None:
    results, pages = published
    judged = _judged(results, case)
    spec = site_data(pages[case])["pictures"]["inference"]
    unit = f"{judged.figures[0].unit}/s"
    assert spec["id"] == "chart-throughput" and spec["unit"] == unit and spec["y"].startswith(unit)
    assert "log scale" in spec["x"]
    assert [s["framework"] for s in spec["series"]] == [f.framework for f in judged.figures] == ["flax", "pytorch"]
    for series, f in zip(spec["series"], judged.figures, strict=True):
        assert series["batches"] == [p.batch for p in f.sweep] == [1, 8]
        assert series["rates"] == [p.rate for p in f.sweep]
        assert series["low"] == [p.low for p in f.sweep] and series["high"] == [p.high for p in f.sweep]
        assert series["flags"] == [p.excluded for p in f.sweep]
        assert series["saturation"] == f.saturation and series["colour"] == palette.colour(f.framework)
        assert series["unit"] == unit
    page = pages[case]
    assert page.count('<div id="chart-throughput" class="chart picture" role="img"') == 1
    assert '<section id="inference" class="pictures"><h2>Inference</h2>' in page


def test_the_saturation_batch_is_drawn_and_said(published: tuple[Path, dict[str, str]]) -> None:
    _, pages = published
    spec = site_data(pages["gpt-infer"])["pictures"]["inference"]
    assert [(s["saturation"], s["saturation_label"]) for s in spec["series"]] == [
        (8, "flax saturates at batch 8"),
        (8, "pytorch saturates at batch 8"),
    ]
    assert all(flag is None for s in spec["series"] for flag in s["flags"])
    alt = re.search(r'id="chart-throughput" class="chart picture" role="img" aria-label="([^"]*)"', pages["gpt-infer"])
    assert alt is not None
    assert alt.group(1) == (
        "Throughput (sequences/s, median) against batch size for flax and pytorch; batch sizes 1, 8; "
        "saturates: flax at batch 8 and pytorch at batch 8"
    )


def test_flagged_points_are_marked_and_named_not_drawn_as_normal(published: tuple[Path, dict[str, str]]) -> None:
    """The recorded resnet18 run was contended: every point of both sweeps is kept out of ratios."""
    results, pages = published
    judged = _judged(results, "resnet18-infer")
    spec = site_data(pages["resnet18-infer"])["pictures"]["inference"]
    for series, f in zip(spec["series"], judged.figures, strict=True):
        assert all(flag is not None and flag.startswith("contended") for flag in series["flags"])
        assert series["flagged_label"] == f"{f.framework}: FLAGGED (not a normal point)"
        assert series["saturation"] is None  # judged on unflagged points only: there are none
    page = html.unescape(pages["resnet18-infer"])
    flax = judged.figures[0].sweep
    assert f"<li>flax FLAGGED: batch 1 ({flax[0].excluded}), batch 8 ({flax[1].excluded})</li>" in page
    assert "<li>flax: no saturation batch: every point of its sweep is FLAGGED</li>" in page
    assert "FLAGGED: flax batch 1 (contended" in page  # the alt text names them too


@pytest.mark.parametrize(("case", "table_id"), [("gpt-infer", "inference-latency"), ("resnet18-infer", "inference-latency"),
                                                ("gpt-generate", "inference-decode")])  # fmt: skip
def test_the_percentile_table_has_each_tail_with_its_interval(
    published: tuple[Path, dict[str, str]], case: str, table_id: str
) -> None:
    results, pages = published
    judged = _judged(results, case)
    rows = _table(pages[case], table_id)
    assert [cells[0] for _, cells in rows] == [f.framework for f in judged.figures]
    for (cls, cells), f in zip(rows, judged.figures, strict=True):
        assert [t.label for t in f.tails] == ["p50", "p90", "p99", "max"]
        assert cells[1] == str(f.requests) and cells[2] == fmt_time(f.cold_s or 0.0)
        assert cells[3:7] == [tail_cell(t, judged.level) for t in f.tails]
        # 30 requests: p50's interval covers 95.7 %, p99's only 26 %, and its cell says so; the max has none
        assert "%" not in cells[3] and cells[5].endswith(" 26%]") and "[" not in cells[6]
        flagged = f.latency_excluded is not None
        assert (cls == "flagged") == flagged and cells[7] == (f"FLAGGED: {f.latency_excluded}" if flagged else "")
    assert all(cls == "flagged" for cls, _ in rows) == (case == "resnet18-infer")


def test_generation_shows_time_to_first_token_and_decode_rate_and_no_chart(
    published: tuple[Path, dict[str, str]],
) -> None:
    results, pages = published
    judged = _judged(results, "gpt-generate")
    page = pages["gpt-generate"]
    rows = _table(page, "inference-generation")
    expected: list[Figures] = [f for f in judged.figures if f.generation is not None]
    assert len(rows) == len(expected) == 2
    for (_, cells), f in zip(rows, expected, strict=True):
        g = f.generation
        assert g is not None
        assert cells[:6] == [
            f.framework,
            f"{g.batch} x {g.prompt_len}",
            str(g.new_tokens),
            fmt_time(g.ttft_s),
            fmt_time(g.ttft_cold_s or 0.0),
            rate_text(g.tokens_per_s),
        ]
    assert site_data(page)["pictures"]["inference"] is None  # no sweep: nothing to draw
    assert 'id="chart-throughput"' not in page and 'id="inference-latency"' not in page
    assert "<h3>Latency per decode step</h3>" in page


def test_a_hostile_unit_and_stopped_reason_are_text(tmp_path: Path) -> None:
    results = _results(tmp_path, ("gpt-infer",))
    run = results / "gpt-infer"
    unit = "rows<script>alert(3)</script>"  # the schema's 40 characters at most
    stopped = "batch 64: " + HOSTILE
    for fw in ("flax", "pytorch"):
        doc = json.loads((run / f"{fw}.json").read_text())
        doc["inference"]["unit"] = unit
        doc["inference"]["stopped"] = stopped
        (run / f"{fw}.json").write_text(json.dumps(doc))
    judged = _judged(results, "gpt-infer")
    assert [(f.unit, f.stopped) for f in judged.figures] == [(unit, stopped)] * 2  # the planted text was read
    publish_site(results, tmp_path / "site")
    page = _pages(results, tmp_path / "site")["gpt-infer"]
    assert "<script>alert" not in page and "<img" not in page and "\u2028" not in page and "\u202e" not in page
    assert page.count("<script") == page.count("</script>")
    shown = html.unescape(page)  # every text is there, as text
    for fw in ("flax", "pytorch"):
        assert f"<li>{fw}: the sweep stopped early at {plain(stopped)}</li>" in shown
    assert f"Throughput ({unit}/s, median) against batch size for flax and pytorch;" in shown
    spec = site_data(page)["pictures"]["inference"]
    assert spec["unit"] == f"{unit}/s" and spec["y"].startswith(f"{unit}/s")
    assert [s["stopped"] for s in spec["series"]] == [plain(stopped)] * 2


def test_a_hostile_framework_name_is_text_in_the_section_and_data(published: tuple[Path, dict[str, str]]) -> None:
    """load_run refuses a framework its suite does not have, so the name is planted in the judged figures."""
    results, _ = published
    judged = _judged(results, "resnet18-infer")
    name = "torch" + HOSTILE
    figures = (judged.figures[0], replace(judged.figures[1], framework=name, stopped=HOSTILE))
    pictures = InferencePictures("resnet18" + HOSTILE, replace(judged, figures=figures))
    markup = section(pictures)
    assert "<script>" not in markup and "<img" not in markup and "\u2028" not in markup and "\u202e" not in markup
    assert f"<td>{html.escape(plain(name), quote=True)}</td>" in markup
    spec = throughput_data(pictures)
    assert spec is not None
    assert [s["framework"] for s in spec["series"]] == ["flax", plain(name)]
    assert spec["series"][1]["flagged_label"] == f"{plain(name)}: FLAGGED (not a normal point)"
    text = script_json(spec)
    assert not set("<>&\u2028\u2029") & set(text) and json.loads(text) == spec


def test_a_run_without_inference_has_no_inference_section(tmp_path: Path) -> None:
    results = picture_results(tmp_path)
    publish_site(results, tmp_path / "site")
    pages = run_pages(tmp_path / "site")
    assert set(pages) == {"mlp", "xla"}
    for page in pages.values():
        assert '<section id="inference"' not in page and "chart-throughput" not in page
        assert site_data(page)["pictures"]["inference"] is None
