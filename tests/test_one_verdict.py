"""One verdict in every medium (judge/conclusion.py): `compare`, `--junit`, `reproduce`, the site's compare
page and `ab`'s final verdict print the rows of one finished comparison, never one assembled on their own.

Two cases where a later step changes what an earlier one would say: a stored noise floor that holds a
4 % change as run-to-run drift, and the two sides of a budgeted `ab` session judged at the alpha its
looks left. Before issue 56 the site and `reproduce` printed "4 % slower" where `compare` printed "not
significant", and the site ignored the recorded alpha.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html import unescape
from pathlib import Path

import pytest

from harness.execute.ab import Session
from harness.judge.assessment import assess
from harness.judge.compare import Comparison, compare_runs
from harness.judge.conclusion import finish, gate
from harness.report.exports import Format
from harness.store.run_folder import load_run
from tests.conftest import harness
from tests.test_ab import partner
from tests.test_noise_floor import rounds_run


def _verdicts(comparison: Comparison) -> dict[tuple[str, str], str]:
    return {(c.framework, c.metric): c.verdict for c in comparison.changes}


def _site_verdicts(results: Path, out: Path) -> dict[tuple[str, str], str]:
    """Each row's verdict on the published compare page of the two runs under `results`."""
    proc = harness("publish", str(results), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    [page] = sorted(out.glob("compare-*.html"))
    html = page.read_text(encoding="utf-8")
    table = html.split('id="changes"', 1)[1].split("</table>", 1)[0]
    found = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, flags=re.S)[1:]:
        cells = [unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        found[(cells[0], cells[1])] = cells[6]
    return found


def _junit_verdicts(path: Path) -> tuple[dict[tuple[str, str], str], set[tuple[str, str]]]:
    """(row -> the verdict its case carries, the rows whose case failed) of a JUnit report."""
    verdicts, failed = {}, set()
    for case in ET.parse(path).getroot().iter("testcase"):
        framework = case.get("classname", "").rsplit(".", 1)[1]
        key = (framework, case.get("name", ""))
        text = case.findtext("system-out") or ""
        verdicts[key] = text.split(": ", 1)[1]  # the verdict itself may hold ": " (a no verdict's reason)
        if case.find("failure") is not None:
            failed.add(key)
    return verdicts, failed


def _printed(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    return captured.out + captured.err


def _same_everywhere(
    a: Path, b: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> dict[tuple[str, str], str]:
    """Every medium's verdict for each row of A against B, asserted equal to the finished comparison's."""
    from harness.cli.ab import session_verdict
    from harness.cli.reproduce import print_comparison
    from harness.execute.ab_session import judge_session

    finished = finish(assess(load_run(a)), assess(load_run(b)))
    expected = _verdicts(finished)
    shown = harness("compare", str(a), str(b), "--junit", str(tmp_path / "compare.xml"), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert {(r["framework"], r["metric"]): r["verdict"] for r in json.loads(shown.stdout)["changes"]} == expected
    table = harness("compare", str(a), str(b))
    for verdict in expected.values():
        assert verdict in table.stdout, table.stdout
    junit, failed = _junit_verdicts(tmp_path / "compare.xml")
    assert junit == expected
    assert failed == {key for key, c in zip(expected, finished.changes, strict=True) if c.fails(None)}
    results = tmp_path / "published"
    results.mkdir()
    for run in (a, b):
        _copy(run, results / run.name)
    assert _site_verdicts(results, tmp_path / "site") == expected
    print_comparison(load_run(a), assess(load_run(b)), Format.json)
    reproduced = json.loads(_printed(capsys))
    assert {(r["framework"], r["metric"]): r["verdict"] for r in reproduced["changes"]} == expected
    code = session_verdict(judge_session(Session(a, b, None, 1.0)), Format.json, None, None)
    printed = _printed(capsys)
    body = printed[printed.index("{") : printed.rindex("}") + 1]
    assert {(r["framework"], r["metric"]): r["verdict"] for r in json.loads(body)["changes"]} == expected
    assert code == gate(finished, None).code == 0
    return expected


def _copy(source: Path, target: Path) -> None:
    target.mkdir()
    for item in source.iterdir():
        if item.is_file():
            (target / item.name).write_bytes(item.read_bytes())


def test_a_noise_floor_that_holds_a_change_holds_it_in_every_medium(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    drifted = [rounds_run(tmp_path / f"s{i}", 0.005, i, scale=f) for i, f in enumerate((0.95, 1.0, 1.05))]
    assert harness("noise", *map(str, drifted)).returncode == 0
    a = partner(rounds_run(tmp_path / "a", 0.005, 10), "ra", "baseline", None)
    b = partner(rounds_run(tmp_path / "b", 0.005, 11, scale=1.04), "rb", "candidate", None)
    bare = _verdicts(compare_runs(assess(load_run(a)), assess(load_run(b))))
    assert all(v.endswith("slower") for v in bare.values()), bare  # without the floor: a change
    verdicts = _same_everywhere(a, b, tmp_path, capsys)
    assert all(v.startswith("not significant (within run-to-run noise") for v in verdicts.values()), verdicts


def test_a_sequential_session_is_judged_at_its_recorded_alpha_in_every_medium(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = partner(rounds_run(tmp_path / "a", 0.01, 20, rounds=6), "ra", "baseline", "rb")
    b = partner(rounds_run(tmp_path / "b", 0.01, 21, rounds=6, scale=1.3), "rb", "candidate", "ra")
    bare = _verdicts(compare_runs(assess(load_run(a)), assess(load_run(b))))
    assert all(v.endswith("slower") for v in bare.values()), bare  # at the plain alpha: called
    for run in (a, b):  # the session's looks left it an alpha the exact test at 6 rounds cannot reach
        summary = json.loads((run / "summary.json").read_text())
        summary["sequential"] = {"alpha": 0.001, "looks": 4, "rounds": 6, "stopped": "the budget was spent"}
        (run / "summary.json").write_text(json.dumps(summary))
    verdicts = _same_everywhere(a, b, tmp_path, capsys)
    # Out of reach of the recorded alpha: no verdict, and it says why (never a silent "not significant").
    reach = "no verdict: 6 rounds a side cannot reach the session's recorded alpha 0.001"
    assert verdicts and all(v.startswith(reach) for v in verdicts.values()), verdicts
