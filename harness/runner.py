"""Executes a plan: one job at a time, one result file per job, whatever happens to the others.

Every job ends with a status (docs/result-schema.md): ok, failed, timeout, oom,
invalid-output, skipped or interrupted. The run summary is rewritten after every job,
so a harness killed mid-run still leaves an index of what finished.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from harness import __version__
from harness.backends.base import Backend, JobOutcome
from harness.backends.streams import tail
from harness.errors import HarnessError
from harness.plan import Job, Plan
from harness.schema import InvalidResult, load_result
from suites.runtime.files import write_json_atomic
from suites.runtime.result import new_result, utc_now

# A run writes logs and results only, but a full disk mid-run loses them: demand some room.
MIN_FREE_MB = 100.0


def prepare_results_dir(results_dir: Path) -> None:
    if results_dir.exists() and not results_dir.is_dir():
        raise HarnessError(f"--results-dir {results_dir} is a file; give a directory")
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=results_dir):
            pass
    except OSError as error:
        raise HarnessError(f"--results-dir {results_dir} is not writable ({error.strerror}); choose another") from None
    need = float(os.environ.get("HARNESS_MIN_FREE_MB", MIN_FREE_MB))
    free = shutil.disk_usage(results_dir).free / 2**20
    if free < need:
        raise HarnessError(
            f"--results-dir {results_dir} has {free:.0f} MiB free, less than the {need:g} MiB a run needs; free space"
        )


def placeholder_result(run_id: str, job: Job, backend: str, status: str, reason: str) -> dict[str, Any]:
    result = new_result(
        run_id=run_id,
        suite=job.suite,
        framework=job.framework,
        stack=job.stack,
        backend=backend,
        device=job.device,
        params=job.params,
        settings={"repeat": job.repeat, "warmup": job.warmup, "threads": job.threads},
        status=status,
        reason=reason,
    )
    result["finished_at"] = utc_now()
    return result


def _classify(job: Job, out: Path, outcome: JobOutcome) -> tuple[dict[str, Any] | None, str, str]:
    """(the job's own valid result or None, status, reason) from what the backend saw."""
    if outcome.timed_out:
        return None, "timeout", f"killed after {job.timeout_s:g} s (raise it with --timeout)"
    if outcome.oom:
        return None, "oom", "killed for exceeding its memory limit (raise it with --memory)"
    try:
        result = load_result(out)
    except InvalidResult as error:
        if out.exists():
            out.replace(out.with_suffix(".invalid.json"))  # kept for inspection
            return None, "invalid-output", str(error)
        if outcome.exit_code is None:
            return None, "failed", "could not be started (see stderr tail)"
        if outcome.exit_code == 0:
            return None, "invalid-output", "exited 0 without writing a result file"
        return None, "failed", f"exited with code {outcome.exit_code} without writing a result"
    if (result["suite"], result["framework"]) != (job.suite, job.framework):
        out.replace(out.with_suffix(".invalid.json"))
        return None, "invalid-output", f"result file names {result['suite']}/{result['framework']}, not this job"
    return result, result["status"], result["reason"] or ""


def finalize(run_id: str, job: Job, backend: str, out: Path, outcome: JobOutcome) -> dict[str, Any]:
    """The job's result as written: its own valid file, or a placeholder saying what went wrong."""
    result, status, reason = _classify(job, out, outcome)
    if result is None:
        result = placeholder_result(run_id, job, backend, status, reason)
        result["duration_s"] = outcome.wall_s
    if result["status"] not in ("ok", "skipped") and not result.get("stderr_tail"):
        result["stderr_tail"] = tail(outcome.stderr_log) or None
    result["environment"]["launch"] = {**outcome.annotations, "exit_code": outcome.exit_code, "wall_s": outcome.wall_s}
    if "image" in outcome.annotations and result.get("image") is None:
        result["image"] = outcome.annotations["image"]
    write_json_atomic(out, result)
    return result


class Interrupted(KeyboardInterrupt):
    """SIGTERM, treated like Ctrl-C: stop the running job, keep everything finished."""


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise Interrupted()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def summary_entry(job: Job, result: dict[str, Any]) -> dict[str, Any]:
    return {
        "framework": job.framework,
        "status": result["status"],
        "reason": result["reason"],
        "file": job.result_file(),
    }


def new_summary(plan: Plan, backend: str, command: list[str] | None) -> dict[str, Any]:
    """summary.json of a run: rewritten after every job, so it always indexes what finished."""
    return {
        "run_id": plan.run_id,
        "suite": plan.suite,
        "baseline": plan.baseline,
        "backend": backend,
        "harness_version": __version__,
        "command": command if command is not None else sys.argv,
        "started_at": utc_now(),
        "finished_at": None,
        "jobs": [],
    }


def execute(
    plan: Plan,
    backend: Backend,
    results_dir: Path,
    argv: list[str] | None = None,
    *,
    resume_dir: Path | None = None,
) -> Path:
    """Run the plan's jobs; with `resume_dir`, only the jobs of that run that are not ok."""
    if resume_dir is None:
        prepare_results_dir(results_dir)
        run_dir = results_dir / plan.run_id
        run_dir.mkdir(parents=True, exist_ok=False)
        write_json_atomic(run_dir / "plan.json", plan.as_record())
        previous: dict[str, dict[str, Any]] = {}
    else:
        prepare_results_dir(resume_dir.parent)
        run_dir = resume_dir
        previous = _previous_results(run_dir)
    summary = new_summary(plan, backend.name, argv)
    interrupted = False
    with sigterm_as_interrupt():
        for job in plan.jobs:
            out = run_dir / job.result_file()
            kept = previous.get(job.framework)
            if kept is not None and kept["status"] == "ok":
                result = kept
            elif interrupted:
                result = placeholder_result(
                    plan.run_id, job, backend.name, "interrupted", "the run was interrupted first"
                )
                write_json_atomic(out, result)
            elif job.skip_reason is not None:
                result = placeholder_result(plan.run_id, job, backend.name, "skipped", job.skip_reason)
                write_json_atomic(out, result)
            else:
                if kept is not None:
                    out.replace(out.with_suffix(".previous.json"))  # the attempt being retried
                print(f"-> {job.suite}/{job.framework} ({job.stack} stack, {backend.name})", flush=True)
                try:
                    result = finalize(plan.run_id, job, backend.name, out, backend.run_job(job, plan.run_id, run_dir))
                except KeyboardInterrupt:
                    # The backend has already stopped its process or container on the way out.
                    interrupted = True
                    print("\ninterrupted: stopping; finished jobs are kept", file=sys.stderr, flush=True)
                    result = placeholder_result(
                        plan.run_id, job, backend.name, "interrupted", "interrupted while running"
                    )
                    write_json_atomic(out, result)
            summary["jobs"].append(summary_entry(job, result))
            write_json_atomic(run_dir / "summary.json", summary)
    summary["finished_at"] = utc_now()
    summary["interrupted"] = interrupted
    write_json_atomic(run_dir / "summary.json", summary)
    return run_dir


def _previous_results(run_dir: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in run_dir.glob("*.json"):
        if path.name in ("plan.json", "summary.json") or path.name.count(".") > 1:
            continue
        try:
            doc = load_result(path)
        except InvalidResult:
            continue
        found[doc["framework"]] = doc
    return found


def load_plan(run_dir: Path) -> Plan:
    """The plan a run was started with, for --resume."""
    import json

    try:
        record = json.loads((run_dir / "plan.json").read_text(encoding="utf-8"))
        jobs = tuple(Job(**job) for job in record["jobs"])
        return Plan(
            run_id=record["run_id"],
            suite=record["suite"],
            baseline=record["baseline"],
            jobs=jobs,
            backend=record.get("backend", "local"),
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise HarnessError(f"{run_dir / 'plan.json'}: cannot resume this run ({error}); start a new run") from None
