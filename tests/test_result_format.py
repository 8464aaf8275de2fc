"""The result format is written once (harness/core/result_types.py): the doc names the same fields,
older versions are migrated on read, and wheel names are parsed by `packaging`."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, get_args

import pytest
from typing_extensions import get_type_hints

from harness.core import result_types
from harness.core.schema import InvalidResult, load_result, migrate, validate
from harness.judge.assessment import assess
from harness.store.images import wheel_fits
from suites.contract.result import RESULT_KEYS, SCHEMA_VERSION, STATUSES, new_result
from suites.runtime.syncguard import SYNC_STATES
from tests.factories import metric, result

DOC = Path(__file__).parents[1] / "docs" / "result-schema.md"
V1 = Path(__file__).parent / "golden" / "v1" / "numpy.json"


def _table_fields(heading: str) -> set[str]:
    """Field names in the first column of the table under `heading`."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(heading) :].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([a-z_0-9]+)`", row.split("|")[1])}


@pytest.mark.parametrize(
    ("heading", "typed"),
    [("## Top level", result_types.Result), ("## `metrics[]`", result_types.Metric),
     ("## `checks[]`", result_types.Check)],
)  # fmt: skip
def test_the_doc_names_every_field_of_the_definition(heading: str, typed: Any) -> None:
    assert _table_fields(heading) == set(get_type_hints(typed))


def test_the_job_side_writes_what_the_definition_holds() -> None:
    assert set(RESULT_KEYS) == set(get_type_hints(result_types.Result))
    assert get_args(result_types.Status) == STATUSES
    assert get_args(get_type_hints(result_types.Sync)["state"]) == SYNC_STATES
    assert new_result(run_id="r", suite="xla", framework="numpy", stack="numpy", backend="local", device="cpu",
                      params={}, settings={})["schema_version"] == SCHEMA_VERSION == 2  # fmt: skip


def test_a_real_version_1_file_is_migrated_and_reads_like_version_2(tmp_path: Path) -> None:
    raw = json.loads(V1.read_text())
    assert raw["schema_version"] == 1 and "dataset" not in raw and "training" not in raw
    loaded = load_result(V1)
    assert loaded["schema_version"] == 2 and loaded["dataset"] is None and loaded["training"] is None
    assert {k: v for k, v in loaded.items() if k not in ("schema_version", "dataset", "training")} == {
        k: v for k, v in raw.items() if k != "schema_version"
    }
    assert json.loads(V1.read_text()) == raw  # the reader never rewrites a file
    upgraded = tmp_path / "numpy.json"
    upgraded.write_text(json.dumps(dict(raw, schema_version=2, dataset=None, training=None)))
    assert load_result(upgraded) == loaded


def test_version_1_and_2_render_identically(tmp_path: Path) -> None:
    from harness.report.exports import Format, render_run
    from harness.store.run_folder import load_run
    from tests.factories import write_run

    docs = [result(fw, [metric("matmul", [1.0, 1.1, 0.9], flops=1e9)]) for fw in ("numpy", "jax")]
    old = copy.deepcopy(docs)
    for doc in old:
        doc["schema_version"] = 1
        del doc["dataset"], doc["training"]
    for fmt in Format:
        assert render_run(assess(load_run(write_run(tmp_path / "v1", old))), fmt) == render_run(
            assess(load_run(write_run(tmp_path / "v2", docs))), fmt
        )


def test_migration_leaves_training_results_alone() -> None:
    doc = result("numpy", [metric("m", [1.0])])
    doc.update(schema_version=1, training={"data": "host"})
    del doc["dataset"]
    migrated = migrate(doc)
    assert migrated["training"] == {"data": "host"} and migrated["dataset"] is None and doc["schema_version"] == 1


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (3, "schema_version is 3, newer than this harness reads (1 to 2); upgrade the harness to read it"),
        (0, "schema_version is 0; this harness reads versions 1 to 2"),
        (True, "schema_version is missing or not a whole number; this harness reads versions 1 to 2"),
        (None, "schema_version is missing or not a whole number; this harness reads versions 1 to 2"),
    ],
)
def test_unknown_versions_are_one_line_naming_the_version(version: Any, message: str) -> None:
    doc = result("numpy", [metric("m", [1.0])])
    doc["schema_version"] = version
    with pytest.raises(InvalidResult) as info:
        validate(doc, "f.json")
    assert str(info.value) == f"f.json: invalid result: {message}"


def test_a_version_2_file_must_hold_every_field() -> None:
    doc = result("numpy", [metric("m", [1.0])])
    del doc["training"]
    with pytest.raises(InvalidResult, match=r"f.json: invalid result: missing field\(s\): training$"):
        validate(doc, "f.json")


@pytest.mark.parametrize(
    ("filename", "fits"),
    [
        ("six-1.17.0-py2.py3-none-any.whl", ("six", "1.17.0")),
        ("pkg-1.0-1build-cp311-cp311-manylinux_2_28_x86_64.whl", ("pkg", "1.0")),  # a build tag
        ("cryptography-46.0.0-cp311-abi3-musllinux_1_2_x86_64.whl", ("cryptography", "46.0.0")),
        ("cryptography-46.0.0-cp312-abi3-manylinux_2_34_x86_64.whl", None),  # needs 3.12's stable ABI
        ("numpy-2.4.6-cp311-cp311-manylinux_2_28_aarch64.whl", None),
        ("numpy-2.4.6-cp311-cp311-win_amd64.whl", None),
        ("numpy-not!a!version-cp311-cp311-linux_x86_64.whl", None),
        ("numpy-2.4.6-cp311.whl", None),
    ],
)
def test_wheel_names_are_parsed_by_packaging(filename: str, fits: tuple[str, str] | None) -> None:
    assert wheel_fits(filename) == fits
