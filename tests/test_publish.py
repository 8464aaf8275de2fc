"""`harness publish`: the site's data and pages, from runs built in memory (no browser here).

`build_results` is shared with the headless-browser test: two suites, several runs over four
days on two machines and two jax versions, with an escaped, an implausible and a not-comparable
metric among them.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import HarnessError
from harness.execute.bisect import record
from harness.execute.bisect.verdict import VersionRun, answer, compare_pair, judge
from harness.publish import publish_site
from harness.publish.site import pairs_to_compare
from harness.text.escape import script_json
from harness.text.numbers import fmt_ratio, fmt_value
from suites.contract.files import write_json_atomic
from tests.conftest import harness
from tests.factories import check, metric, result, write_run
from tests.test_reports import noisy

CPU_A = {"model": "Test CPU A", "logical_cores": 2, "usable_cores": 2, "vector": "avx2", "mhz": 2000.0, "max_mhz": None}
CPU_B = dict(CPU_A, model="Test CPU B")
JIT_CHECKS = [
    check("f_at_6", [1.0, 1.3995, -0.76, 1.653, 1.7319, 3.508], rtol=1e-5),
    check("seed_f16_error", 1e-3, limit=2.5e-3),
]


ROUNDS = 6


def timed(name: str, center: float, seed: int, flops: float | None = None, sync: str = "ok") -> dict[str, Any]:
    m = metric(name, noisy(center, seed=seed), flops=flops, first=center * 3)
    m["sync"] = {"state": sync, "excess_median_s": 0.02, "sample_median_s": center}
    m["round_medians"] = noisy(center, n=ROUNDS, seed=seed + 1000)  # interleaved processes: verdicts exist
    return m


def job(
    suite: str, fw: str, day: int, cpu: dict[str, Any], version: str, metrics: list[dict[str, Any]]
) -> dict[str, Any]:
    doc = result(
        fw,
        metrics,
        checks=None
        if suite == "xla"
        else [*JIT_CHECKS] + ([check("jit_vs_eager", 0.0, limit=1e-5)] if fw == "jax" else []),
    )
    doc["suite"] = suite
    doc["settings"]["rounds"] = ROUNDS
    doc["started_at"] = doc["finished_at"] = f"2024-05-0{day}T12:00:00.000+00:00"
    doc["environment"] = {"machine": {"cpu": cpu}, "versions": {fw: version}}
    return doc


def write(root: Path, folder: str, run_id: str, docs: list[dict[str, Any]]) -> Path:
    """factories.write_run, with this run's own id (write_run names every run r1)."""
    for doc in docs:
        doc["run_id"] = run_id
    path = write_run(root / folder, docs)
    summary = json.loads((path / "summary.json").read_text())
    summary["run_id"] = run_id
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def build_results(root: Path) -> Path:
    """Four xla runs and two jit runs; xla run 2 has an escaped, run 3 an implausible, run 4 a
    not-comparable jax metric; numpy is 2x slower from run 3 on (a new machine)."""
    results = root / "results"
    plan = [  # day, cpu, jax version, numpy matmul, jax matmul, jax flops, jax sync, jax product_sum
        (1, CPU_A, "0.4.30", 0.10, 0.050, None, "ok", 3.3e7),
        (2, CPU_A, "0.4.30", 0.10, 0.050, None, "escaped", 3.3e7),
        (3, CPU_B, "0.4.31", 0.20, 1e-6, 2e9, "ok", 3.3e7),
        (4, CPU_B, "0.4.31", 0.20, 0.050, None, "ok", 9.9e7),
    ]
    for day, cpu, version, numpy_s, jax_s, flops, sync, product in plan:
        jax_doc = job("xla", "jax", day, cpu, version, [timed("matmul", jax_s, day * 10 + 1, flops, sync)])
        jax_doc["checks"] = [check("residual", 1e-10, limit=1e-6), check("product_sum", product, rtol=1e-9)]
        docs = [job("xla", "numpy", day, cpu, "1.26.4", [timed("matmul", numpy_s, day * 10)]), jax_doc]
        write(results, f"2024050{day}-120000-xla-{day:04x}", f"2024050{day}-120000-xla-{day:04x}", docs)
    for day in (1, 3):
        docs = [
            job("jit", fw, day, CPU_A, "1.0", [timed("eager L=10000", 0.01 * (day if fw == "numpy" else 1), day)])
            for fw in ("numpy", "jax")
        ]
        write(results, f"2024050{day}-130000-jit-{day:04x}", f"2024050{day}-130000-jit-{day:04x}", docs)
    return results


def site_data(page: str) -> Any:
    found = re.search(r'<script type="application/json" id="site-data">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))


def suite_page(site: Path, suite: str) -> str:
    for path in sorted(site.glob("suite-*.html")):
        text = path.read_text()
        if f"<h1>suite {suite}</h1>" in text:
            return text
    raise AssertionError(f"no page for suite {suite}")


@pytest.fixture
def published(tmp_path: Path) -> Path:
    publish_site(build_results(tmp_path), tmp_path / "site")
    return tmp_path / "site"


def test_site_has_every_suite_run_comparison_and_the_vendored_chart(published: Path) -> None:
    index = (published / "index.html").read_text()
    assert "6 runs of 2 suites" in index and ">jit</a>" in index and ">xla</a>" in index
    assert len(list(published.glob("run-*.html"))) == 6
    assert len(list(published.glob("compare-*.html"))) == 6 + 1  # every pair: 4 xla runs, 2 jit runs
    assert (published / "uPlot.iife.min.js").read_text().startswith("/*! https://github.com/leeoniya/uPlot (v1.6.32)")
    assert "MIT" in (published / "uPlot.LICENSE.txt").read_text()


def test_every_flag_is_shown_and_no_flagged_point_is_a_normal_one(published: Path) -> None:
    page = suite_page(published, "xla")
    for word in ("ESCAPED: sync escaped", "IMPLAUSIBLE: ", "NOT COMPARABLE (†): failed the agreement gate"):
        assert word in page
    # CPU_A measured runs 1-2, CPU_B runs 3-4: one chart per machine, each titled with its machine.
    charts = site_data(page)["metrics"]
    assert [m["title"] for m in charts] == [
        "matmul (machine Test CPU A (2 cores), default threads)",
        "matmul (machine Test CPU B (2 cores), default threads)",
    ]
    assert [sorted({p["x"] for p in m["points"]}) for m in charts] == [[0, 1], [2, 3]]
    points = [p for m in charts for p in m["points"]]
    jax = {p["x"]: p for p in points if p["framework"] == "jax"}
    assert jax[0]["flags"] == []
    assert [f.split(":")[0] for f in jax[1]["flags"]] == ["ESCAPED"]
    assert [f.split(":")[0] for f in jax[2]["flags"]] == ["IMPLAUSIBLE"]
    assert [f.split(":")[0] for f in jax[3]["flags"]] == ["NOT COMPARABLE (†)"]
    assert all(p["lo"] <= p["y"] <= p["hi"] for p in points)
    # Machines and versions are the series the history can be split by.
    assert {p["machine"] for p in points} == {"Test CPU A (2 cores)", "Test CPU B (2 cores)"}
    assert {p["version"] for p in jax.values()} == {"jax 0.4.30", "jax 0.4.31"}


def test_comparison_pages_carry_the_verdicts_of_harness_compare(published: Path) -> None:
    data = site_data(suite_page(published, "xla"))
    first_to_third = (published / data["pairs"]["0-2"]).read_text()
    assert re.search(r"<span class=\"verdict\">(9\d|10\d)\.\d% slower</span>", first_to_third)  # numpy doubled
    assert "excluded: implausible FLOP/s (above device peak)" in first_to_third
    assert "WARNING: numpy: runs differ in cpu" in first_to_third
    first_to_last = (published / data["pairs"]["0-3"]).read_text()
    assert "excluded: not comparable in run B (failed the agreement gate)" in first_to_last
    assert "B: NOT COMPARABLE" in first_to_last


def test_run_page_shows_environment_fairness_settings_and_the_harness_table(published: Path) -> None:
    page = next(p.read_text() for p in published.glob("run-*.html") if "xla-0002" in p.read_text())
    assert 'id="fairness"' in page and 'id="environment"' in page
    assert "settings.repeat" in page and "machine.cpu.model" in page
    assert "jax matmul: ESCAPED" in page
    assert "ESCAPED" in html.unescape(page.split('class="harness-table">')[1])


HOSTILE = "</script><script>alert(1)</script><img src=x onerror=alert(2)>\u2028\u202e&amp;"


def test_hostile_names_are_text_in_html_and_json(tmp_path: Path) -> None:
    results = build_results(tmp_path)
    path = results / "20240501-120000-xla-0001"
    for name in ("numpy.json", "jax.json"):
        doc = json.loads((path / name).read_text())
        doc["metrics"][0]["name"] = "matmul" + HOSTILE
        doc["environment"]["versions"] = {"jax" + HOSTILE: HOSTILE}
        doc["environment"]["machine"]["cpu"]["model"] = HOSTILE
        (path / name).write_text(json.dumps(doc))
    publish_site(results, tmp_path / "site")
    for page in (tmp_path / "site").glob("*.html"):
        text = page.read_text()
        assert "<script>alert" not in text and "<img" not in text and "\u2028" not in text and "\u202e" not in text
        assert text.count("<script") == text.count("</script>")
    data = site_data(suite_page(tmp_path / "site", "xla"))
    titles = [m["title"] for m in data["metrics"]]
    # The run's hostile CPU model is a machine of its own: its chart's title names it, as inert text.
    hostile_title = "matmul</script><script>alert(1)</script><img src=x onerror=alert(2)>\\u2028\\u202e&amp; (machine "
    assert any(title.startswith(hostile_title + "</script><script>") for title in titles), titles


def test_script_json_cannot_close_its_element() -> None:
    text = script_json({"a": "</script><!--\u2028\u2029&"})
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == {"a": "</script><!--\u2028\u2029&"}
    with pytest.raises(ValueError):
        script_json({"a": float("nan")})


def test_hostile_folders_are_skipped_with_a_line_each(tmp_path: Path) -> None:
    results = build_results(tmp_path)
    (results / "garbage").mkdir()
    (results / "garbage" / "summary.json").write_text("{not json")
    (results / "empty").mkdir()
    os.mkfifo(results / "fifo-run")
    (results / "linked").symlink_to(results / "20240501-120000-xla-0001")
    (results / "evil\x1b[31m").mkdir()
    fifo_summary = results / "fifo-summary"
    fifo_summary.mkdir()
    os.mkfifo(fifo_summary / "summary.json")
    proc = harness("publish", str(results), "--out", str(tmp_path / "site"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 6 and all(line.startswith("skipped ") for line in lines), proc.stderr
    assert "\x1b" not in proc.stderr and "evil\\x1b[31m" in proc.stderr
    assert "symbolic link" in proc.stderr and "FIFO" in proc.stderr
    assert "6 runs of 2 suites" in proc.stdout
    index = (tmp_path / "site" / "index.html").read_text()
    assert "Folders not published" in index and "skipped garbage" in index


def test_a_link_planted_in_out_is_replaced_not_written_through(tmp_path: Path) -> None:
    results = build_results(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (site / "index.html").symlink_to(victim)
    (site / "run-99.html").write_text("stale page of an earlier publish")
    (site / "run-98.html").write_text("the user's own page that only looks like one of ours")
    (site / ".fw-harness-site.json").write_text('{"pages": ["run-99.html", "../victim.txt"]}')
    publish_site(results, site)
    assert victim.read_text() == "keep"
    assert not (site / "index.html").is_symlink() and "Benchmark results" in (site / "index.html").read_text()
    assert not (site / "run-99.html").exists()  # named by the earlier publish's manifest: removed
    assert (site / "run-98.html").read_text().startswith("the user's own page")  # issue 23: never ours to delete
    pages = json.loads((site / ".fw-harness-site.json").read_text())["pages"]
    assert pages and all((site / name).is_file() for name in pages) and "run-98.html" not in pages
    linked_out = tmp_path / "linked-site"
    linked_out.symlink_to(site)
    with pytest.raises(HarnessError, match="symbolic link"):
        publish_site(results, linked_out)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = harness("publish", str(tmp_path / "nope"), "--out", str(tmp_path / "site"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr and len(missing.stderr.splitlines()) == 1
    results = build_results(tmp_path)
    (tmp_path / "file").write_text("x")
    as_file = harness("publish", str(results), "--out", str(tmp_path / "file"))
    assert as_file.returncode == 2 and "is a file; give a folder" in as_file.stderr
    (tmp_path / "none").mkdir()
    nothing = harness("publish", str(tmp_path / "none"), "--out", str(tmp_path / "site"))
    assert nothing.returncode == 2 and "no run folder" in nothing.stderr


def test_many_runs_compare_neighbours_and_the_newest() -> None:
    assert pairs_to_compare(4, 10) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    few = pairs_to_compare(5, 3)
    assert few == [(0, 1), (0, 4), (1, 2), (1, 4), (2, 3), (2, 4), (3, 4)]


BISECT = "bisect-20240505-120000-xla-0005"
BISECT_VERSIONS = ["0.4.30", "0.4.31", "0.4.32"]


def bisect_doc(package: str = "jax") -> dict[str, Any]:
    """What `harness bisect` records (record.py's writer): jax matmul twice as slow from 0.4.32 on."""
    runs = {}
    for i, version in enumerate(BISECT_VERSIONS):
        center = 0.2 if version == "0.4.32" else 0.1
        medians = [center * (1 + 0.01 * ((k + i) % 3)) for k in range(5)]
        runs[version] = VersionRun(version, medians, [m for m in medians for _ in range(3)])
    pairs = judge([compare_pair(runs[a], runs[b], "matmul", "s", "lower") for a, b in pairwise(BISECT_VERSIONS)])
    header = {
        "id": BISECT[len("bisect-") :],
        "suite": "xla",
        "framework": "jax",
        "metric": "matmul",
        "unit": "s",
        "better": "lower",
        "stack": "jax",
        "package": package,
        "versions": BISECT_VERSIONS,
        "rounds": 5,
        "params": {},
        "repeat": 3,
    }
    locks = {v: {"file": f"locks/{v}.txt", "lock_hash": hashlib.sha256(v.encode()).hexdigest()} for v in runs}
    results = {v: record.version_record(runs[v], [f"{v}/round-{k}" for k in range(1, 6)]) for v in runs}
    doc = record.make_record(header, locks, results, pairs, answer(pairs))
    record.validate(doc)
    return doc


def write_bisect(results: Path, doc: dict[str, Any], folder: str = BISECT) -> Path:
    (results / folder).mkdir()
    write_json_atomic(results / folder / record.FILE, doc)
    return results / folder


def test_a_bisect_has_a_row_on_the_index_a_page_and_a_link_from_its_suite(tmp_path: Path) -> None:
    results = build_results(tmp_path)
    doc = bisect_doc()
    write_bisect(results, doc)
    published = publish_site(results, tmp_path / "site")
    assert published.bisects == 1 and published.skipped == [] and published.runs == 6
    index = (tmp_path / "site" / "index.html").read_text()
    assert "Version bisects" in index and '<a href="bisect-0.html">' + BISECT + "</a>" in index
    assert doc["answer"]["text"] == "first significant change: 0.4.32 (100.0% slower than 0.4.31)"
    assert html.escape(doc["answer"]["text"]) in index and "0.4.30, 0.4.31, 0.4.32" in index
    assert 'href="bisect-0.html"' in suite_page(tmp_path / "site", "xla")
    assert 'href="bisect-0.html"' not in suite_page(tmp_path / "site", "jit")
    page = (tmp_path / "site" / "bisect-0.html").read_text()
    assert 'href="suite-1.html"' in page and "bisect of jax in the jax stack: xla/jax, metric matmul" in page
    for version in BISECT_VERSIONS:
        assert doc["locks"][version]["lock_hash"] in page
    first = doc["results"]["0.4.30"]
    assert fmt_value(first["median"], "s") in page
    assert ", ".join(fmt_value(m, "s") for m in first["round_medians"]) in page
    for pair in doc["pairs"]:
        assert html.escape(f"{pair['before']} -> {pair['after']}") in page and pair["verdict"] in page
    assert fmt_ratio(doc["pairs"][1]["ratio"]) in page and "not significant" in page
    # A second publish into the same folder: the page of a bisect that is gone is removed.
    (results / BISECT / record.FILE).unlink()
    (results / BISECT).rmdir()
    assert publish_site(results, tmp_path / "site").bisects == 0
    assert not (tmp_path / "site" / "bisect-0.html").exists()


def test_hostile_bisects_are_skipped_with_a_line_or_shown_as_text(tmp_path: Path) -> None:
    results = build_results(tmp_path)
    write_bisect(results, bisect_doc(package="jax" + HOSTILE), folder="bisect-1-hostile-text")
    valid = write_bisect(results, bisect_doc(), folder="bisect-0-valid")
    (results / "bisect-2-linked-folder").symlink_to(valid)
    (results / "bisect-3-linked-file").mkdir()
    (results / "bisect-3-linked-file" / record.FILE).symlink_to(valid / record.FILE)
    (results / "bisect-4-fifo").mkdir()
    os.mkfifo(results / "bisect-4-fifo" / record.FILE)
    wrong = bisect_doc()
    wrong["results"]["0.4.30"]["median"] = "fast"
    write_bisect(results, wrong, folder="bisect-5-wrong-median")
    wrong = bisect_doc()
    wrong["package"] = ["jax"]
    write_bisect(results, wrong, folder="bisect-6-wrong-package")
    (results / "bisect-7-nan").mkdir()
    text = json.dumps(bisect_doc()).replace('"ratio": ' + json.dumps(bisect_doc()["pairs"][0]["ratio"]), '"ratio": NaN')
    (results / "bisect-7-nan" / record.FILE).write_text(text)
    wrong = bisect_doc()
    wrong["versions"] = "0.4.30"
    write_bisect(results, wrong, folder="bisect-8-no-versions")
    (results / "bisect-9-huge").mkdir()
    (results / "bisect-9-huge" / record.FILE).write_text("[" * 100_000 + "]" * 100_000)
    (results / "bisect-10-a-file").write_text("{}")
    proc = harness("publish", str(results), "--out", str(tmp_path / "site"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 9 and all(line.startswith("skipped bisect-") for line in lines), proc.stderr
    assert not any(line.startswith(("skipped bisect-0-", "skipped bisect-1-")) for line in lines)
    for folder, why in [
        ("bisect-2-linked-folder", "symbolic link"),
        ("bisect-3-linked-file", "symbolic link"),
        ("bisect-4-fifo", "FIFO"),
        ("bisect-5-wrong-median", "median: expected a finite number"),
        ("bisect-6-wrong-package", "package: expected text"),
        ("bisect-7-nan", "not readable as JSON"),
        ("bisect-8-no-versions", "versions: expected a list"),
        ("bisect-9-huge", "not readable as JSON"),
        ("bisect-10-a-file", "not a bisect folder"),
    ]:
        assert any(line.startswith(f"skipped {folder}: ") and why in line for line in lines), (folder, proc.stderr)
    site = tmp_path / "site"
    assert sorted(p.name for p in site.glob("bisect-*.html")) == ["bisect-0.html", "bisect-1.html"]
    for page in site.glob("*.html"):
        text = page.read_text()
        assert "<script>alert" not in text and "<img" not in text and "\u2028" not in text and "\u202e" not in text
    hostile = (site / "bisect-1.html").read_text()
    assert "bisect of jax&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in hostile
    assert "jax&lt;/script&gt;" in (site / "index.html").read_text()


def test_a_machine_is_named_by_its_own_cores_not_the_ones_a_job_was_pinned_to() -> None:
    from harness.publish import labels

    doc = result("numpy", [metric("matmul", [0.1, 0.1, 0.1])])
    doc["environment"]["machine"] = {"cpu": {"model": "AMD EPYC", "logical_cores": 2, "usable_cores": 1}}
    assert labels.machine(doc) == "AMD EPYC (2 cores)"  # a --threads 1 run is the same machine
    doc["environment"]["machine"] = {"cpu": {"model": "AMD EPYC", "usable_cores": 4}}
    assert labels.machine(doc) == "AMD EPYC (4 cores)"
