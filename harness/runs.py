"""Reading a finished run folder back: the summary, every valid result, and what was rejected."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.schema import InvalidResult, load_result


@dataclass
class Run:
    path: Path
    summary: dict[str, Any]
    results: dict[str, dict[str, Any]]  # framework -> result document, in run order
    problems: list[str] = field(default_factory=list)

    @property
    def baseline(self) -> str:
        """The requested baseline if it produced numbers, else the first framework that did."""
        base = self.summary.get("baseline")
        ok = [fw for fw, r in self.results.items() if r["status"] == "ok"]
        if base in ok:
            return str(base)
        return ok[0] if ok else str(base or next(iter(self.results), ""))


def resolve_run(ref: str, results_dir: Path) -> Path:
    for candidate in (Path(ref), results_dir / ref):
        if (candidate / "summary.json").is_file():
            return candidate
    raise HarnessError(
        f"no run found at {ref!r} (looked for summary.json there and in {results_dir}); see `ls {results_dir}`"
    )


def load_run(path: Path) -> Run:
    try:
        summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
        if not isinstance(summary, dict) or not isinstance(summary.get("jobs"), list):
            raise ValueError("expected an object with a jobs list")
    except (OSError, ValueError) as error:
        raise HarnessError(f"{path / 'summary.json'}: unreadable run summary ({error})") from None
    results: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for entry in summary["jobs"]:
        name = str(entry.get("file", "")) if isinstance(entry, dict) else ""
        if not name or Path(name).name != name or not name.endswith(".json"):
            problems.append(f"summary.json: job entry {entry!r} has no plain result file name")
            continue
        try:
            doc = load_result(path / name)
        except InvalidResult as error:
            problems.append(str(error))
            continue
        results[doc["framework"]] = doc
    return Run(path=path, summary=summary, results=results, problems=problems)
