"""Reading a finished run folder back: the summary, every valid result, and what was rejected.

Every file is read through the safe reader (no links followed, regular files only, size
capped) and validated; a result is only accepted under the name its summary entry gives, for
the framework, suite and run that entry belongs to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.result_types import Result
from harness.safe_files import is_regular
from harness.schema import InvalidResult, job_entry_problem, load_result, load_summary
from harness.text.escape import plain


@dataclass
class Run:
    path: Path
    summary: dict[str, Any]
    results: dict[str, Result]  # framework -> validated result document, in run order
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
        if is_regular(candidate / "summary.json"):
            return candidate
    raise HarnessError(
        f"no run found at {plain(ref)!r} (looked for summary.json there and in {results_dir}); see `ls {results_dir}`"
    )


def mismatch(doc: Mapping[str, Any], framework: str, suite: str, run_id: str) -> str | None:
    """Why a valid result does not belong at this place of this run, or None."""
    if doc["framework"] != framework or doc["suite"] != suite:
        return f"names {doc['suite']}/{doc['framework']}, but the summary expects {suite}/{framework} there"
    if doc["run_id"] != run_id:
        return f"belongs to run {doc['run_id']}, not to this run ({run_id})"
    return None


def load_run(path: Path) -> Run:
    summary = load_summary(path / "summary.json")
    results: dict[str, Result] = {}
    problems: list[str] = []
    for entry in summary["jobs"]:
        problem = job_entry_problem(entry, summary["suite"])
        if problem:
            problems.append(f"summary.json: {problem}")
            continue
        name = entry["file"]
        try:
            doc = load_result(path / name)
        except InvalidResult as error:
            problems.append(str(error))
            continue
        wrong = mismatch(doc, entry["framework"], summary["suite"], summary["run_id"])
        if wrong or doc["framework"] in results:
            problems.append(f"{path / name}: {wrong or 'listed twice in summary.json'}; ignored")
            continue
        results[doc["framework"]] = doc
    return Run(path=path, summary=summary, results=results, problems=problems)
