"""The version bisects of a results folder (`harness bisect` writes RESULTS_DIR/bisect-<id>/bisect.json).

Everything read is hostile: the record is read with `safe_files.read_bytes` (no link followed, a
regular file only, at most MAX_BYTES), checked with the bisect's own validator
(harness/execute/bisect/record.py) and then for the types the pages show, so a folder that fails is
skipped with one line naming it, never a crash. Nothing read here becomes part of a path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.safe_files import read_bytes
from harness.core.schema import number  # a huge int from a hostile record never reaches float()
from harness.execute.bisect import record
from harness.text.escape import plain

PREFIX = "bisect-"  # the folder `harness bisect` writes: never a run folder
MAX_BYTES = 4 << 20  # a bisect of dozens of versions is a few KiB
_TEXT = ("suite", "framework", "metric", "stack", "package")


@dataclass(frozen=True)
class PublishedBisect:
    key: int  # its number in this site (its page is bisect-<key>.html), in folder-name order
    folder: str  # the folder's name, made inert for display
    doc: dict[str, Any]  # validated: record.validate and `check_types`

    def text(self, key: str) -> str:
        return plain(self.doc[key])

    @property
    def suite(self) -> str:
        return self.text("suite")

    @property
    def unit(self) -> str:
        return plain(self.doc.get("unit") or "")

    @property
    def versions(self) -> list[str]:
        return [plain(v) for v in self.doc["versions"]]

    @property
    def answer(self) -> str:
        return plain(self.doc["answer"]["text"])


def _optional_number(value: Any) -> bool:
    return value is None or number(value)


def check_types(doc: dict[str, Any]) -> None:
    """What the pages show, beyond record.validate: text is text, numbers are finite numbers."""
    for key in _TEXT:
        if not isinstance(doc[key], str):
            raise HarnessError(f"{key}: expected text")
    if not isinstance(doc.get("unit", ""), str):
        raise HarnessError("unit: expected text")
    rounds = doc["rounds"]
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 0:
        raise HarnessError("rounds: expected a count")
    for version, result in doc["results"].items():
        where = f"results[{plain(version)!r}]"
        if not isinstance(result, dict):
            raise HarnessError(f"{where}: expected an object")
        if not _optional_number(result.get("median")):
            raise HarnessError(f"{where}.median: expected a finite number or null")
        medians = result.get("round_medians", [])
        if not isinstance(medians, list) or not all(number(m) for m in medians):
            raise HarnessError(f"{where}.round_medians: expected a list of finite numbers")
        if not isinstance(result.get("problem"), (str, type(None))):
            raise HarnessError(f"{where}.problem: expected text or null")
    for i, pair in enumerate(doc["pairs"]):
        for key in ("ratio", "ci_low", "ci_high", "ci_coverage", "p_value", "p_adjusted"):
            if not _optional_number(pair.get(key)):
                raise HarnessError(f"pairs[{i}].{key}: expected a finite number or null")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def load_bisect(folder: Path) -> dict[str, Any]:
    """The folder's bisect.json, validated; HarnessError saying why not."""
    data = read_bytes(folder / record.FILE, MAX_BYTES, what="bisect record")
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as error:
        raise HarnessError(f"{record.FILE} is not readable as JSON ({plain(error)})") from None
    try:
        record.validate(doc)
        check_types(doc)
    except (HarnessError, TypeError, ValueError) as error:
        raise HarnessError(f"{record.FILE}: {plain(error)}") from None
    return dict(doc)
