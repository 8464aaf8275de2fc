"""Ending a compose run: what each job service left in its own folder, taken back into the run folder.

No harness process lives through a compose run: the plan step writes the run folder (summary with
`finished_at: null`) and exits, the job services run, and the report step ends the run. When `up`
is stopped in between (Ctrl-C, `docker compose stop`, a service that could not start), the report
step never runs: the run folder has no jobs and each finished job's result is still in its job
folder. `finish_run` is how both the report step and the next plan step end such a run, so a
finished job's result is never thrown away and the jobs that did not finish are `interrupted`, as
`harness run` marks them (harness/execute/runner.py).

What a job folder holds (images/compose/job.sh): `job.args` (from the plan step), `stdout.log` (made
when the job starts), the job's result and artefacts, `stderr.log`, and `exit` (its exit code,
written when it ends). No `exit` and no result: the job never ended; no `stdout.log` either: it never
started. Everything in it is the job's and read as hostile: regular files only, no link followed,
size-capped (harness/core/safe_files.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends import job_folder
from harness.backends.base import JobOutcome
from harness.backends.job_folder import finalize, tail_text
from harness.core.errors import HarnessError
from harness.core.result_types import Result
from harness.core.safe_files import (
    UnsafeFile,
    read_bytes,
    read_tail,
    remove_tree,
    write_bytes_atomic,
    write_json_atomic,
)
from harness.core.schema import RUN_ID, load_summary
from harness.judge.assessment import FAILED, assess, run_exit_code
from harness.store.plan import Job, Plan, plan_from_record
from harness.store.run_folder import (
    PLAN_FILE,
    SUMMARY_FILE,
    RunWriter,
    load_run,
    placeholder_result,
    read_plan_record,
    within,
)
from harness.text.escape import plain

COMMAND = ["docker", "compose", "up"]
BACKEND = "compose"
ARGS, EXIT, STDOUT, STDERR = "job.args", "exit", "stdout.log", "stderr.log"  # names in a job folder (job.sh)
MAX_LOG_BYTES = 16 * 2**20  # a log copied into the run folder keeps at most its last 16 MiB
MAX_SMALL = 64 * 1024
NOT_STARTED = "the run was stopped before this job started"  # Ctrl-C, or a service that did not complete
CUT_SHORT = "interrupted while running (its service was stopped)"
# Carried from the summary the plan step wrote: when the run began and which code it ran.
KEPT_FIELDS = ("started_at", "command", "code", "harness_version")


@dataclass(frozen=True)
class ComposeRun:
    run_id: str
    run_dir: Path
    plan: Plan
    summary: dict[str, Any]  # summary.json as the plan step (or a finished report) left it, validated

    @property
    def finished(self) -> bool:
        return self.summary.get("finished_at") is not None


def chown_tree(paths: list[Path], uid: int, gid: int) -> None:
    """Only root can give files away; as anyone else the files are already the caller's."""
    if os.getuid() != 0:
        return
    for top in paths:
        os.lchown(top, uid, gid)
        for folder, dirs, files in os.walk(top, followlinks=False):
            for name in dirs + files:
                os.lchown(os.path.join(folder, name), uid, gid)


def pointed_run(results: Path, pointer: Path) -> ComposeRun:
    """The run the pointer file names (the plan step's last), plan and summary validated."""
    try:
        run_id = read_bytes(pointer, MAX_SMALL).decode("utf-8", "replace").strip()
        if not RUN_ID.fullmatch(run_id):
            raise HarnessError(f"{pointer}: {plain(run_id)!r} is not a run id")
        run_dir = results / run_id
        record = read_plan_record(run_dir)
        summary = load_summary(run_dir / SUMMARY_FILE)
    except HarnessError as error:
        raise HarnessError(f"no compose run to finish ({error}); the plan service must run first") from None
    plan = plan_from_record(record, str(run_dir / PLAN_FILE))
    if plan.run_id != run_id or summary["run_id"] != run_id:
        raise HarnessError(f"{run_dir}: its plan or summary belongs to another run than {run_id}; run `up` again")
    return ComposeRun(run_id, run_dir, plan, summary)


def _exit_code(work: Path) -> int | None:
    """The job's exit code as job.sh wrote it; None when it wrote none (the job never ended)."""
    try:
        text = read_bytes(work / EXIT, MAX_SMALL).decode("ascii", "replace").strip()
    except UnsafeFile:
        return None
    return int(text) if text.lstrip("-").isdigit() and len(text) < 6 else None


def _copy_log(work: Path, name: str, target: Path) -> bytes:
    try:
        data = read_tail(work / name, MAX_LOG_BYTES)
    except UnsafeFile as error:
        data = f"harness: the job's {name} was not copied: {error.reason}\n".encode()
    write_bytes_atomic(target, data, within(target.parent.parent))  # <results>/<run>/logs/<name>
    return data


def collect(run_dir: Path, work: Path, run_id: str, job: Job) -> Result:
    """What the runner makes of a job, from what its compose service left in its own folder."""
    out = run_dir / job.result_file()
    if job.skip_reason or not any(os.path.lexists(work / name) for name in (STDOUT, EXIT, job.result_file())):
        status, reason = ("skipped", job.skip_reason) if job.skip_reason else ("interrupted", NOT_STARTED)
        result = placeholder_result(run_id, job, BACKEND, status, reason)
        write_json_atomic(out, result, within(run_dir))  # as finalize() writes the others
        return result
    code = _exit_code(work)
    left_result = os.path.lexists(work / job.result_file())
    logs = run_dir / "logs"
    stdout_log, stderr_log = logs / f"{job.framework}.stdout.log", logs / f"{job.framework}.stderr.log"
    _copy_log(work, STDOUT, stdout_log)
    stderr = _copy_log(work, STDERR, stderr_log)
    found = job_folder.harvest(work, run_dir, job)
    outcome = JobOutcome(
        exit_code=code,
        timed_out=False,
        stdout_log=stdout_log,
        stderr_log=stderr_log,
        wall_s=0.0,
        annotations={"compose_service": job.stack},
        stderr_tail=tail_text(stderr[-16384:]),
    )
    if code is None and not left_result:
        # Stopped mid-job: job.sh never wrote its exit code and there is no result to judge. The
        # status outranks whatever a finish cut short left at `out` (finalize).
        outcome.status, outcome.reason = "interrupted", CUT_SHORT
    return finalize(run_id, job, BACKEND, out, job_folder.note_harvest(outcome, found))


def finish_run(results: Path, jobs_root: Path, run: ComposeRun) -> RunWriter:
    """Give every planned job of `run` its result from its job folder, write the finished summary
    (`interrupted` when a job did not finish) and hand the run folder to the owner of `results`.
    The job folders go last: a finish cut short is done again from them by the next plan step."""
    writer = RunWriter(run.run_dir, run.plan, BACKEND, COMMAND)
    writer.summary.update({key: run.summary[key] for key in KEPT_FIELDS if run.summary.get(key) is not None})
    for job in run.plan.jobs:
        writer.add(job, collect(run.run_dir, jobs_root / job.framework, run.run_id, job), write=False)
    interrupted = any(entry["status"] == "interrupted" for entry in writer.summary["jobs"])
    writer.finish(interrupted=interrupted)
    for job in run.plan.jobs:
        remove_tree(jobs_root / job.framework)
    owner = results.stat()
    chown_tree([run.run_dir], owner.st_uid, owner.st_gid)  # the results belong to whoever owns ./results
    return writer


def statuses(writer: RunWriter) -> str:
    """`numpy ok, jax interrupted, pytorch interrupted`"""
    return ", ".join(f"{entry['framework']} {entry['status']}" for entry in writer.summary["jobs"])


def show_and_judge(run_dir: Path) -> int:
    """Print the run's table with `harness show`; the run's exit status, as `harness run` gives it
    (0, 1, 3 when only the machine disturbed it, 130 when it was interrupted)."""
    shown = subprocess.run([sys.executable, "-m", "harness.cli", "show", str(run_dir)], check=False)
    print(f"\nrun folder: results/{run_dir.name}")
    code = run_exit_code(assess(load_run(run_dir)))
    return code if shown.returncode == 0 else FAILED
