"""Executes a plan: one job at a time, one result file per job, whatever happens to the others.

Every job ends with a status (docs/result-schema.md): ok, failed, timeout, oom,
invalid-output, skipped or interrupted. The run summary is written before the first job and
rewritten after every job, so a harness killed at any point leaves a run that `--resume`
finishes. One harness at a time works on a run folder (run_folder.run_lock).

The calibration runs the same way, before a run's jobs: its hidden suite through the run's
backend (`calibrate`, at the end of this module).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from harness.backends.base import Backend
from harness.backends.job_folder import finalize, set_aside
from harness.core import cache_home
from harness.core.result_types import Result
from harness.core.safe_files import NoSpace, is_regular, remove_tree
from harness.core.schema import InvalidResult, load_result
from harness.store.calibration import (
    Limits,
    cache_lock,
    cache_problem,
    fingerprint,
    gpu_names,
    load_cache,
    rates_from_result,
    smoke_frameworks,
    stack_representatives,
    store,
)
from harness.store.peaks import machine_limits
from harness.store.plan import Plan, PlanRequest, make_plan
from harness.store.run_folder import SUMMARY_FILE, RunWriter, mismatch, open_run_folder, writing
from harness.text.escape import plain
from suites.contract import machine

FIRST = "the run was interrupted first"


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, treated like Ctrl-C: stop the running job, keep everything finished."""


def _terminals() -> list[int]:
    """stdout/stderr fds that are terminals now (after a hangup isatty itself fails with EIO)."""
    found = []
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd):
                found.append(fd)
    return found


def _quiet_dead_terminal(fds: list[int]) -> None:
    """After a hangup the terminal is gone and writing to it fails (EIO): send that output nowhere.

    Only terminals are redirected; output to a file or a pipe still gets the final lines.
    """
    for fd in fds:
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    terminals = _terminals()

    def handler(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGHUP:
            _quiet_dead_terminal(terminals)
        raise Interrupted()

    try:
        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def say(text: str) -> None:
    """Progress on the terminal; a terminal that went away must not stop the run."""
    with contextlib.suppress(OSError, ValueError):
        print(text, flush=True)


def warn(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


def execute(
    plan: Plan,
    backend: Backend,
    results_dir: Path,
    argv: list[str] | None = None,
    *,
    resume_dir: Path | None = None,
    code: dict[str, Any] | None = None,
) -> Path:
    """Run the plan's jobs; with `resume_dir`, only the jobs of that run that are not ok. `code`
    describes the suites the backend runs (default: this checkout's)."""
    run_dir = open_run_folder(results_dir, plan.run_id, "run", resume_dir)
    try:
        # Written before the first job: a harness killed during it leaves a run `--resume` can finish.
        with writing(run_dir, plan, backend.name, argv, code, write_plan=resume_dir is None) as writer:
            return _execute(plan, backend, writer, resume=resume_dir is not None)
    except NoSpace as error:
        if is_regular(run_dir / SUMMARY_FILE):
            raise  # the summary on disk is whole (each write is a rename): the run can be resumed
        if resume_dir is None:
            remove_tree(run_dir)  # nothing was run: no folder that neither show nor --resume understands
        raise NoSpace(error.path, error.strerror, "nothing was run: free some space and run again") from None


def _execute(plan: Plan, backend: Backend, writer: RunWriter, resume: bool) -> Path:
    run_dir = writer.dir
    previous = _previous_results(run_dir, plan) if resume else {}
    interrupted = False
    full: NoSpace | None = None
    with sigterm_as_interrupt():
        for job in plan.jobs:
            out = run_dir / job.result_file()
            kept = previous.get(job.framework)
            try:
                if kept is not None and kept["status"] == "ok":
                    writer.add(job, kept, write=False)
                elif interrupted:
                    writer.add_placeholder(job, "interrupted", FIRST)
                elif full is not None:
                    writer.add_placeholder(job, "failed", f"not started: {full.reason}")
                elif job.skip_reason is not None:
                    writer.add_placeholder(job, "skipped", job.skip_reason)
                else:
                    if kept is not None or os.path.lexists(out):
                        set_aside(out, ".previous.json")  # the attempt being retried
                    say(f"-> {job.suite}/{job.framework} ({job.stack} stack, {backend.name})")
                    outcome = backend.run_job(job, plan.run_id, run_dir)
                    writer.add(job, finalize(plan.run_id, job, backend.name, out, outcome), write=False)
            except KeyboardInterrupt:
                # The backend has already stopped its process or container on the way out.
                interrupted = True
                warn("\ninterrupted: stopping; finished jobs are kept")
                writer.add_placeholder(job, "interrupted", "interrupted while running")
            except NoSpace as error:
                # The disk filled up during this job: it failed for that reason, and the jobs after it
                # are not started. The small records below may still fit where the job's output did
                # not; if not, the summary on disk stays the last whole one (each write is a rename).
                full = error
                warn(f"\n{error.reason}: stopping; finished jobs are kept")
                writer.release_reserve()
                writer.add_placeholder(job, "failed", f"{error.reason} while it ran")
        writer.finish(interrupted=interrupted)
    if full is not None:
        fix = f"run {plan.run_id} is kept: free some space, then `harness run --resume {plan.run_id}`"
        raise NoSpace(full.path, full.strerror, fix)
    return run_dir


def _previous_results(run_dir: Path, plan: Plan) -> dict[str, Result]:
    """The valid results of a run being resumed, read only under the planned frameworks' names."""
    found = {}
    for job in plan.jobs:
        try:
            doc = load_result(run_dir / job.result_file())
        except InvalidResult:
            continue
        if mismatch(doc, job.framework, plan.suite, plan.run_id) is None:
            found[job.framework] = doc
    return found


# Running the calibration: the hidden `calibrate` suite through the same backend as the run.
#
# Its runs and the ceilings they gave live in the cache home (harness/core/cache_home.py), not in a
# results folder: one calibration per machine fingerprint serves every results folder, and one
# harness measures at a time (a second waits on the fingerprint's lock, then reads what the first
# stored instead of measuring with the first still busy on the same cores).
def calibrate(
    frameworks: list[str],
    *,
    device: str,
    threads: int | None,
    cpus: float | None,
    backend: Backend,
    force: bool = False,
    smoke: bool = False,
) -> dict[str, Any] | None:
    """Ceilings for this machine, measuring the stacks not yet in the cache; None if none could be.
    `smoke`: at the calibrate suite's smoke size (quick, and lower ceilings than the real size's)."""
    doc = _ceilings(frameworks, device, threads, cpus, backend, force, smoke)
    smoked = smoke_frameworks(doc) if doc is not None else []
    if smoked and not smoke:
        # Lower than the machine's: a run's "% of achievable" reads high against them, so it says why.
        warn(
            f"warning: the ceilings of {', '.join(smoked)} were measured at the smoke size (harness calibrate"
            " --smoke), below what this machine reaches; `harness calibrate` measures them in full"
        )
    return doc


def _ceilings(
    frameworks: list[str],
    device: str,
    threads: int | None,
    cpus: float | None,
    backend: Backend,
    force: bool,
    smoke: bool,
) -> dict[str, Any] | None:
    fp = fingerprint(device, threads, cpus)
    wanted = stack_representatives(frameworks)
    limits = _peaks_here(device, backend)
    problem = cache_problem(fp, limits)  # e.g. a figure above the device's peak: dropped and measured again
    if problem is not None:
        warn(f"warning: {plain(problem)}")
    cached = load_cache(fp, limits)
    if not force and not _missing(cached, wanted):
        return cached
    with cache_home.locked(cache_lock(fp), f"calibration of this machine (fingerprint {fp})"):
        cached = load_cache(fp, limits)  # what another harness measured while this one waited
        todo = wanted if force else _missing(cached, wanted)
        if not todo:
            return cached
        measured = _measure(todo, fp, device, threads, backend, smoke=smoke)
        return store(fp, device, measured, limits) if measured else cached


def _peaks_here(device: str, backend: Backend) -> Limits:
    """This machine's peaks, which no cached figure may exceed. Slurm's jobs run on compute nodes this
    host cannot describe: only the physical bounds every figure is held to (calibration.parse) apply."""
    if backend.name == "slurm":
        return {}
    return machine_limits(device, machine.describe()["cpu"], gpu_names() if device == "gpu" else [])


def _missing(cached: dict[str, Any] | None, wanted: list[str]) -> list[str]:
    have = set(cached["frameworks"]) if cached else set()
    return [fw for fw in wanted if fw not in have]


def _measure(
    todo: list[str], fp: str, device: str, threads: int | None, backend: Backend, *, smoke: bool = False
) -> dict[str, dict[str, Any]]:
    """The calibrate suite run with `todo`: the figures of each framework that gave usable ones."""
    print(
        f"calibrating this machine (fingerprint {fp}, once): achievable FLOP/s and bandwidth with {', '.join(todo)}",
        file=sys.stderr,
        flush=True,
    )
    plan = make_plan(
        PlanRequest(suite="calibrate", frameworks=",".join(todo), device=device, threads=threads, smoke=smoke),
        backend=backend.name,
    )
    run_dir = execute(plan, backend, cache_home.calibration_runs_dir(), argv=["harness", "calibrate"])
    measured: dict[str, dict[str, Any]] = {}
    for job in plan.jobs:
        try:
            result = load_result(run_dir / job.result_file())
        except InvalidResult as error:
            print(f"calibration: {error}", file=sys.stderr)
            continue
        rates = rates_from_result(result)
        if not rates:
            print(f"calibration: {job.framework} gave no usable figure ({result['status']})", file=sys.stderr)
            continue
        measured[job.framework] = {
            **rates,
            "run_id": plan.run_id,
            "measured_at": result.get("finished_at"),
            "size": "smoke" if smoke else "full",
        }
    return measured
