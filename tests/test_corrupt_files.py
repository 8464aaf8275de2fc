"""Result files handed to us broken or hostile: each rejected by name, the rest still renders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.schema import MAX_RESULT_BYTES
from tests.conftest import harness
from tests.factories import metric, result, write_run


def good_run(tmp_path: Path) -> Path:
    docs = [result(fw, [metric("matmul", [1.0, 1.1, 0.9])]) for fw in ("numpy", "jax", "pytorch")]
    return write_run(tmp_path / "run", docs)


def corrupt(path: Path, how: str) -> str:
    """Break jax.json one way; return the message `show` must print."""
    target = path / "jax.json"
    doc = json.loads(target.read_text())
    if how == "truncated":
        target.write_text(target.read_text()[:200])
        return "jax.json: not valid JSON"
    if how == "wrong-type":
        doc["metrics"][0]["samples"] = "fast"
        target.write_text(json.dumps(doc))
        return "samples: expected a non-empty list of finite numbers"
    if how == "nan":
        target.write_text(json.dumps(doc).replace('"samples": [1.0', '"samples": [NaN'))
        return "NaN is not a number this harness accepts"
    if how == "infinity":
        target.write_text(json.dumps(doc).replace('"first_call": 1.0', '"first_call": Infinity'))
        return "Infinity is not a number this harness accepts"
    if how == "schema":
        doc["schema_version"] = 99
        target.write_text(json.dumps(doc))
        return "schema_version is 99, newer than this harness reads (1 to 2); upgrade the harness to read it"
    if how == "huge":
        with target.open("ab") as handle:
            handle.truncate(MAX_RESULT_BYTES + 1)
        return "is too large for a result file"
    if how == "escape":
        summary = json.loads((path / "summary.json").read_text())
        summary["jobs"][1]["file"] = "../../etc/passwd"
        (path / "summary.json").write_text(json.dumps(summary))
        return "has no plain result file name"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["truncated", "wrong-type", "nan", "infinity", "schema", "huge", "escape"])
def test_show_rejects_the_bad_file_and_renders_the_rest(tmp_path: Path, how: str) -> None:
    run = good_run(tmp_path)
    message = corrupt(run, how)
    proc = harness("show", str(run))
    assert proc.returncode == 0, proc.stderr
    assert "rejected files" in proc.stdout and message in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    header = next(line for line in proc.stdout.splitlines() if line.startswith("metric"))
    assert "numpy" in header and "pytorch" in header and "jax" not in header


def test_unreadable_summary_is_a_one_line_error(tmp_path: Path) -> None:
    run = good_run(tmp_path)
    (run / "summary.json").write_text("{")
    proc = harness("show", str(run))
    assert proc.returncode == 2 and "unreadable run summary" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_results_dir_without_free_space(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_MIN_FREE_MB", str(10**12))  # more than any real disk has
    proc = harness("run", "--suite", "fault", "--frameworks", "numpy", "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "free space" in proc.stderr and "Traceback" not in proc.stderr
