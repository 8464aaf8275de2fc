"""Writing a run folder: the one place that knows its files (run_reader.py reads them back).

A run folder holds `plan.json` (what was asked, re-validated whenever it is read), `summary.json`
(the index of finished jobs, rewritten after every job so a killed harness leaves a folder that
`show` and `--resume` understand) and one `<framework>.json` result per job. The runner, the
interleaved rounds, `harness collect` (Kubernetes) and the compose steps all write through
`RunWriter`, so a folder looks the same whichever backend made it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from harness import __version__, provenance
from harness.errors import HarnessError
from harness.plan import Job, Plan, plan_from_record
from harness.result_types import Result
from harness.safe_files import read_bytes
from harness.schema import parse_json
from suites.runtime.files import write_json_atomic
from suites.runtime.result import utc_now

PLAN_FILE = "plan.json"
SUMMARY_FILE = "summary.json"
MAX_PLAN_BYTES = 16 * 2**20  # a plan is a few jobs' options; more is not a plan


def summary_entry(job: Job, result: Result) -> dict[str, Any]:
    return {
        "framework": job.framework,
        "status": result["status"],
        "reason": result["reason"],
        "file": job.result_file(),
    }


def new_summary(plan: Plan, backend: str, command: list[str] | None) -> dict[str, Any]:
    return {
        "run_id": plan.run_id,
        "suite": plan.suite,
        "baseline": plan.baseline,
        "backend": backend,
        "harness_version": __version__,
        "command": command if command is not None else sys.argv,
        "started_at": utc_now(),
        "finished_at": None,
        "code": provenance.describe(),
        "jobs": [],
    }


def read_plan(folder: Path) -> Plan:
    """`plan.json` of a run (or of exported manifests), validated like a fresh plan."""
    path = folder / PLAN_FILE
    return plan_from_record(read_plan_record(folder), str(path))


def read_plan_record(folder: Path) -> Any:
    """The raw JSON of `plan.json` (hostile until `plan_from_record` has checked it)."""
    path = folder / PLAN_FILE
    return parse_json(read_bytes(path, MAX_PLAN_BYTES), str(path))


class RunWriter:
    """One run folder being written: `start`, then `add` per job, then `finish`."""

    def __init__(self, run_dir: Path, plan: Plan, backend: str, command: list[str] | None) -> None:
        self.dir = run_dir
        self.plan = plan
        self.summary = new_summary(plan, backend, command)

    def start(self, *, plan_extra: dict[str, Any] | None = None, write_plan: bool = True) -> None:
        """The plan (unless resuming one) and an empty summary, before the first job starts."""
        if write_plan:
            write_json_atomic(self.dir / PLAN_FILE, dict(self.plan.as_record(), **(plan_extra or {})))
        self._write_summary()

    def write_result(self, job: Job, result: Result) -> None:
        write_json_atomic(self.dir / job.result_file(), result)

    def add(self, job: Job, result: Result, *, write: bool = True) -> None:
        """Index a finished job (writing its result unless it is already on disk)."""
        if write:
            self.write_result(job, result)
        self.summary["jobs"].append(summary_entry(job, result))
        self._write_summary()

    def finish(self, **fields: Any) -> None:
        self.summary.update(fields)
        self.summary["finished_at"] = utc_now()
        self._write_summary()

    def _write_summary(self) -> None:
        write_json_atomic(self.dir / SUMMARY_FILE, self.summary)


def resume_plan(run_dir: Path) -> Plan:
    """The plan a run was started with (for --resume)."""
    try:
        record = read_plan_record(run_dir)
    except HarnessError as error:
        raise HarnessError(f"cannot resume this run: {error}; start a new run") from None
    return plan_from_record(record, str(run_dir / PLAN_FILE))
