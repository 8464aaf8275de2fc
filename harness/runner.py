"""Executes a plan: one job at a time, one result file per job, whatever happens to the others."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from harness import __version__
from harness.backends.base import Backend, JobOutcome
from harness.backends.streams import tail
from harness.errors import HarnessError
from harness.plan import Job, Plan
from harness.schema import InvalidResult, load_result
from suites.runtime.files import write_json_atomic
from suites.runtime.result import new_result, utc_now


def prepare_results_dir(results_dir: Path) -> None:
    if results_dir.exists() and not results_dir.is_dir():
        raise HarnessError(f"--results-dir {results_dir} is a file; give a directory")
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise HarnessError(
            f"--results-dir {results_dir} cannot be created ({error.strerror}); choose another"
        ) from None


def _placeholder(plan: Plan, job: Job, backend: str, status: str, reason: str) -> dict[str, Any]:
    result = new_result(
        run_id=plan.run_id,
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


def _finalize(plan: Plan, job: Job, backend: str, out: Path, outcome: JobOutcome) -> dict[str, Any]:
    """The job's own file if it is valid and its own; otherwise a failed result saying why."""
    problem: str | None = None
    result: dict[str, Any] | None = None
    if outcome.timed_out:
        problem = f"timed out after {job.timeout_s:g} s (raise it with --timeout)"
    else:
        try:
            result = load_result(out)
            if (result["suite"], result["framework"]) != (job.suite, job.framework):
                problem = f"result file names {result['suite']}/{result['framework']}, not this job"
                result = None
        except InvalidResult as error:
            if out.exists():
                out.replace(out.with_suffix(".invalid.json"))  # kept for inspection
                problem = str(error)
            elif outcome.exit_code is None:
                problem = "could not be started (see stderr tail)"
            else:
                problem = f"exited with code {outcome.exit_code} without writing a result"
    if result is None:
        result = _placeholder(plan, job, backend, "failed", problem or "no result")
        result["duration_s"] = outcome.wall_s
    if result["status"] == "failed" and not result.get("stderr_tail"):
        result["stderr_tail"] = tail(outcome.stderr_log) or None
    launch = {**outcome.annotations, "exit_code": outcome.exit_code, "wall_s": outcome.wall_s}
    result["environment"]["launch"] = launch
    write_json_atomic(out, result)
    return result


def execute(plan: Plan, backend: Backend, results_dir: Path, argv: list[str] | None = None) -> Path:
    prepare_results_dir(results_dir)
    run_dir = results_dir / plan.run_id
    run_dir.mkdir(parents=True, exist_ok=False)
    write_json_atomic(run_dir / "plan.json", plan.as_record())
    summary: dict[str, Any] = {
        "run_id": plan.run_id,
        "suite": plan.suite,
        "baseline": plan.baseline,
        "backend": backend.name,
        "harness_version": __version__,
        "command": argv if argv is not None else sys.argv,
        "started_at": utc_now(),
        "finished_at": None,
        "jobs": [],
    }
    for job in plan.jobs:
        out = run_dir / job.result_file()
        if job.skip_reason is not None:
            result = _placeholder(plan, job, backend.name, "skipped", job.skip_reason)
            write_json_atomic(out, result)
        else:
            print(f"-> {job.suite}/{job.framework} ({job.stack} stack, {backend.name})", flush=True)
            result = _finalize(plan, job, backend.name, out, backend.run_job(job, plan.run_id, run_dir))
        summary["jobs"].append(
            {"framework": job.framework, "status": result["status"], "reason": result["reason"], "file": out.name}
        )
        # The summary is rewritten after every job so a killed harness still leaves an index.
        write_json_atomic(run_dir / "summary.json", summary)
    summary["finished_at"] = utc_now()
    write_json_atomic(run_dir / "summary.json", summary)
    return run_dir
