"""A run folder, the one place that knows its files: written while the run goes, locked, read back.

A run folder holds `plan.json` (what was asked, re-validated whenever it is read), `summary.json`
(the index of finished jobs, rewritten after every job so a killed harness leaves a folder that
`show` and `--resume` understand) and one `<framework>.json` result per job. The runner, the
interleaved rounds, `harness collect` (Kubernetes) and the compose steps all write through
`RunWriter`, so a folder looks the same whichever backend made it.

Reading it back (`load_run`), every file goes through the safe reader (no links followed, regular
files only, size capped) and is validated; a result is only accepted under the name its summary
entry gives, for the framework, suite and run that entry belongs to. Before any of it,
`prepare_results_dir` refuses a results folder that is not writable or has no room.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from harness import __version__
from harness.core.errors import HarnessError
from harness.core.result_types import Result
from harness.core.safe_files import (
    NoSpace,
    flock_file,
    is_folder,
    is_regular,
    new_folder,
    probe,
    read_bytes,
    remove,
    remove_tree,
    write_bytes_atomic,
    write_json_atomic,
)
from harness.core.schema import (
    GIT_COMMIT,
    RUN_ID,
    InvalidResult,
    code_problem,
    interleaved_problem,
    job_entry_problem,
    load_result,
    load_summary,
    parse_json,
)
from harness.store.plan import Job, Plan, plan_from_record
from harness.text.escape import plain
from suites.contract.result import new_result, utc_now

PLAN_FILE = "plan.json"
SUMMARY_FILE = "summary.json"
MAX_PLAN_BYTES = 16 * 2**20  # a plan is a few jobs' options; more is not a plan


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


def within(run_dir: Path) -> Path:
    """The anchor of every write into a run folder: its results folder. The run folder and all
    below it are reached without following a link (harness/core/safe_files.py)."""
    return run_dir.parent


def open_run_folder(results_dir: Path, run_id: str, how: str, resume_dir: Path | None = None) -> Path:
    """The run folder a command writes into: a new one under `results_dir`, or (`resume_dir`) the run
    being resumed; either way its results folder was checked first (writable, room to write)."""
    prepare_results_dir(results_dir if resume_dir is None else resume_dir.parent)
    return new_run_folder(results_dir, run_id, how) if resume_dir is None else resume_dir


def new_run_folder(results_dir: Path, run_id: str, how: str) -> Path:
    """A run folder that did not exist: runs are never rewritten by a command that did not make them
    (only `run --resume` goes back into one), so an id already taken is refused, naming it."""
    run_dir = results_dir / run_id
    try:
        new_folder(run_dir, results_dir)
    except FileExistsError:
        raise HarnessError(
            f"run {run_id} already exists in {plain(results_dir)}; {how} into another --results-dir, "
            "or move that run away first"
        ) from None
    return run_dir


# A rounds run (harness/execute/rounds.py) keeps each round as a run folder of its own below it:
# RUN/rounds/round-K, run id `round-K`. Named here once, so a backend can tell whose round a job is.
ROUNDS_DIR = "rounds"
ROUND_ID = re.compile(r"round-([1-9][0-9]{0,5})")


def round_folder(run_dir: Path, number: int) -> Path:
    return run_dir / ROUNDS_DIR / f"round-{number}"


def finished_round(run_dir: Path, number: int) -> dict[str, Any] | None:
    """On resume: the summary round `number` of a rounds run left, or None where there is none to
    read (never begun, unreadable, or a link or a file where its folder goes: never read through)."""
    folder = round_folder(run_dir, number)
    if not (is_folder(folder.parent) and is_folder(folder)):
        return None
    try:
        return load_summary(folder / SUMMARY_FILE)
    except HarnessError:
        return None


def round_to_resume(run_dir: Path, number: int) -> Path | None:
    """On resume: round `number`'s folder as an interrupted run left it, to be resumed (its ok jobs
    kept), or None when it is to be made anew: it never began, or it was cut short before its summary
    was written (what it left is removed). A link or a file where it goes is refused, never written
    through."""
    folder = round_folder(run_dir, number)
    for path in (folder.parent, folder):
        if os.path.lexists(path) and not is_folder(path):
            raise HarnessError(f"{plain(path)} is not a folder of this run (a link or a file); remove it, then resume")
    if not os.path.lexists(folder):
        return None
    if not is_regular(folder / SUMMARY_FILE):
        remove_tree(folder)  # cut short before its summary was written: nothing of it to keep
        return None
    return folder


def round_of(run_dir: Path, run_id: str) -> tuple[str, int] | None:
    """(the run's id, K) when `run_dir` is round K of a rounds run, else None."""
    found = ROUND_ID.fullmatch(run_id)
    parent = run_dir.parent
    if found is None or run_dir.name != run_id or parent.name != ROUNDS_DIR or not RUN_ID.fullmatch(parent.parent.name):
        return None
    return parent.parent.name, int(found.group(1))


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


def load_run(path: Path, summary: dict[str, Any] | None = None) -> Run:
    """The run in `path`, every result validated; `summary`: its summary.json as `load_summary` read it
    (a caller that already read it to choose runs does not read it twice)."""
    summary = load_summary(path / "summary.json") if summary is None else summary
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


# Writing.


def read_plan_record(folder: Path) -> Any:
    """The raw JSON of `plan.json` (hostile until `plan_from_record` has checked it)."""
    path = folder / PLAN_FILE
    return parse_json(read_bytes(path, MAX_PLAN_BYTES), str(path))


def placeholder_result(run_id: str, job: Job, backend: str, status: str, reason: str) -> Result:
    """The record of a job that left no result of its own (skipped, interrupted, failed), with why."""
    result = new_result(
        run_id=run_id,
        suite=job.suite,
        framework=job.framework,
        stack=job.stack,
        backend=backend,
        device=job.device,
        params=job.params,
        settings={
            "repeat": job.repeat,
            "warmup": job.warmup,
            "threads": job.threads,
            "cache": job.cache,
            "precision": job.precision,
        },
        status=status,
        reason=reason,
    )
    result["finished_at"] = utc_now()
    return cast(Result, result)


def write_collected(
    results_dir: Path, plan: Plan, backend: str, command: list[str], result_of: Callable[[Job, Path], Result]
) -> Path:
    """A new run folder for jobs that ran elsewhere (`harness collect`: Kubernetes, Slurm), each job's
    result as `result_of(job, run_dir)` makes it from what the job left."""
    run_dir = open_run_folder(results_dir, plan.run_id, "collect")
    with writing(run_dir, plan, backend, command) as writer:
        for job in plan.jobs:
            writer.add(job, result_of(job, run_dir))
        writer.finish()
    return run_dir


# Room kept on the disk while a run writes: when a job fills the disk up, this file is removed so
# that the job's result (saying why it failed), the placeholders of the jobs not started and the
# summary still fit, and the run stays whole and resumable. Zeros, not a sparse file: real blocks.
RESERVE = ".reserve"
RESERVE_BYTES = 1 << 20


def new_summary(plan: Plan, backend: str, command: list[str] | None, code: dict[str, Any] | None) -> dict[str, Any]:
    """summary.json of a run that has just started (no job yet): what RunWriter writes first, and
    what a sequential look judges the rounds so far with (execute/ab.py)."""
    return {
        "run_id": plan.run_id,
        "suite": plan.suite,
        "baseline": plan.baseline,
        "backend": backend,
        "harness_version": __version__,
        "command": command if command is not None else sys.argv,
        "started_at": utc_now(),
        "finished_at": None,
        "code": code if code is not None else describe_code(),
        "jobs": [],
    }


class RunWriter:
    """One run folder being written: `start`, then `add` per job, then `finish`."""

    def __init__(
        self, run_dir: Path, plan: Plan, backend: str, command: list[str] | None, code: dict[str, Any] | None = None
    ) -> None:
        self.dir = run_dir
        self.anchor = within(run_dir)  # every write below it is made without following a link
        self.plan = plan
        self.backend = backend
        self.summary = new_summary(plan, backend, command, code)

    def start(self, *, plan_extra: dict[str, Any] | None = None, write_plan: bool = True) -> None:
        """The plan (unless resuming one) and an empty summary, before the first job starts."""
        if write_plan:
            write_json_atomic(self.dir / PLAN_FILE, dict(self.plan.as_record(), **(plan_extra or {})), self.anchor)
        self._write_summary()
        write_bytes_atomic(self.dir / RESERVE, bytes(RESERVE_BYTES), self.anchor)

    def release_reserve(self) -> None:
        """The disk filled up: free the room kept for the last records (see RESERVE)."""
        remove(self.dir / RESERVE, self.anchor)

    def add(self, job: Job, result: Result, *, write: bool = True) -> None:
        """Index a finished job (writing its result unless it is already on disk)."""
        if write:
            write_json_atomic(self.dir / job.result_file(), result, self.anchor)
        self.summary["jobs"].append(
            {
                "framework": job.framework,
                "status": result["status"],
                "reason": result["reason"],
                "file": job.result_file(),
            }
        )
        self._write_summary()

    def add_placeholder(self, job: Job, status: str, reason: str) -> None:
        """Index a job that left no result of its own (skipped, interrupted, failed), with the reason."""
        self.add(job, placeholder_result(self.plan.run_id, job, self.backend, status, reason))

    def finish(self, **fields: Any) -> None:
        self.summary.update(fields)
        self.summary["finished_at"] = utc_now()
        self._write_summary()
        self.release_reserve()

    def _write_summary(self) -> None:
        write_json_atomic(self.dir / SUMMARY_FILE, self.summary, self.anchor)


def resume_plan(run_dir: Path) -> Plan:
    """The plan a run was started with (for --resume)."""
    try:
        record = read_plan_record(run_dir)
    except HarnessError as error:
        raise HarnessError(f"cannot resume this run: {error}; start a new run") from None
    plan = plan_from_record(record, str(run_dir / PLAN_FILE))
    # The folder names the run: a plan.json naming another id (edited, or copied from another run)
    # would make every finished result look unfinished, to be run again and overwritten.
    if plan.run_id != run_dir.name:
        raise HarnessError(
            f"cannot resume this run: {run_dir / PLAN_FILE} names run {plan.run_id}, but the folder is run "
            f"{plain(run_dir.name)}; the plan was edited or copied: start a new run"
        )
    summary = load_summary(run_dir / "summary.json")
    problems = [f"it names run {plain(summary['run_id'])}"] if summary["run_id"] != plan.run_id else []
    problems += [found for entry in summary["jobs"] if (found := job_entry_problem(entry, plan.suite))]
    if problems:
        raise HarnessError(f"cannot resume this run: summary.json: {problems[0]}; start a new run")
    return plan


# The lock: one harness per run folder, held while a run (or its resume) writes there.
# Two `--resume` of one run would otherwise race: both redo the same jobs and one crashes on the
# other's files. The lock is an fcntl.flock on `<run>/.lock`, released by the kernel when the
# holder dies (even by SIGKILL), so a stale lock never blocks a later resume. The holder writes its
# pid and command into the file so the refusal can name it.
LOCK_NAME = ".lock"


@contextlib.contextmanager
def writing(
    run_dir: Path,
    plan: Plan,
    backend: str,
    command: list[str] | None,
    code: dict[str, Any] | None = None,
    *,
    extra: dict[str, Any] | None = None,
    limit: dict[str, Any] | None = None,
    write_plan: bool = True,
) -> Iterator[RunWriter]:
    """The run folder held (`run_lock`) and its writer started (`RunWriter.start`): how every command
    that fills a run folder begins, so a second harness is refused before anything is written.
    `extra` goes into both the summary and plan.json (an `ab` side's partner), `limit` into plan.json
    alone (the rounds, or the budget, a rounds run was planned with)."""
    with run_lock(run_dir):
        writer = RunWriter(run_dir, plan, backend, command, code)
        writer.summary.update(extra or {})
        writer.start(plan_extra={**(limit or {}), **(extra or {})}, write_plan=write_plan)
        yield writer


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    def refuse(holder: str) -> None:
        raise HarnessError(
            f"run {run_dir.name} is in use by another harness ({plain(holder)}); wait for it to finish or stop it"
        )

    anchor = within(run_dir)  # resolved before the lock file is opened below it
    with flock_file(run_dir / LOCK_NAME, "run folder", refuse, anchor=anchor):
        yield


# Which code produced a run, recorded in its summary: the suites' content hash, and the git commit
# when there is one. The suites folder is what every job executes (mounted read-only into
# containers), so its content hash identifies the measured code even in a tarball or a copy without
# `.git`; the git commit, and whether the checkout had uncommitted changes, say where to find it.
REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "suites"


def suites_digest(root: Path = SUITES) -> str:
    """sha256 over every .py file under `root` (relative path and bytes), in a fixed order."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        # Regular files only: a link, a FIFO or a folder named *.py is not code (and a FIFO would hang).
        if "__pycache__" in path.parts or path.is_symlink() or not path.is_file():
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _git(root: Path, *args: str) -> str | None:
    # Only a checkout's own .git (a folder, or a worktree's file): a copy inside another repository
    # (a results folder, /tmp in a repo) must not take that repository's commit as its own.
    if shutil.which("git") is None or not (root / ".git").exists():
        return None
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")  # reading must never take the index lock
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def describe_code(suites: Path = SUITES) -> dict[str, Any]:
    """`code` of a run's summary: suites digest, git commit (or None) and whether it was dirty."""
    head = (_git(suites.parent, "rev-parse", "HEAD") or "").strip()
    status = _git(suites.parent, "status", "--porcelain", "--untracked-files=no")
    return {
        "suites_sha256": suites_digest(suites),
        "git_commit": head if GIT_COMMIT.fullmatch(head) else None,
        "git_dirty": None if status is None else bool(status.strip()),
    }


def code_label(code: Any) -> str | None:
    """`code: suites 1a2b3c4d5e6f, git 0123abcd (uncommitted changes)` for a report, None if absent."""
    if code is None or code_problem(code):
        return None
    text = f"code: suites {code['suites_sha256'][:12]}"
    if code.get("git_commit"):
        text += f", git {code['git_commit'][:12]}" + (" (uncommitted changes)" if code.get("git_dirty") else "")
    return text


# Two runs measured in one session, round by round (`harness ab`): each side's summary carries
# `interleaved: {"side": "baseline" | "candidate", "partner": <the other run's id>}` (validated by
# schema.interleaved_problem). Two runs are taken as one session only when each names the other
# and they are different sides: a compare of such a pair needs no allowance for run-to-run drift
# (both sides saw the same drift, round by round), which is what lets it see a change smaller than it.


def interleaved_record(side: str, partner: str, margin: float = 0.0) -> dict[str, Any]:
    return {"interleaved": {"side": side, "partner": partner, "margin": margin}}


def partners(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """True when summaries `a` and `b` are the two sides of one interleaved session."""
    x, y = a.get("interleaved"), b.get("interleaved")
    if interleaved_problem(x) is not None or interleaved_problem(y) is not None:
        return False
    assert isinstance(x, dict) and isinstance(y, dict)
    return (
        x["partner"] == b.get("run_id")
        and y["partner"] == a.get("run_id")
        and x["side"] != y["side"]
        and a.get("run_id") != b.get("run_id")
    )


def session_margin(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """The smallest change a verdict on the two sides of one interleaved session may call (the
    `margin` each recorded, schema.interleaved_problem has bounded it; the wider if they disagree,
    so neither side's record is made easier to call); 0 for runs that are not one session."""
    if not partners(a, b):
        return 0.0
    return max(float(s["interleaved"].get("margin", 0.0)) for s in (a, b))


def session_label(value: Any) -> str | None:
    """`interleaved: the baseline side of one session with run <id> (harness ab)`, None if absent or malformed."""
    if value is None or interleaved_problem(value) is not None:
        return None
    return f"interleaved: the {value['side']} side of one session with run {value['partner']} (harness ab)"


# A run writes logs and results only, but a full disk mid-run loses them: demand some room.
MIN_FREE_MB = 100.0


def prepare_results_dir(results_dir: Path) -> None:
    need = min_free_mb()  # a bad setting is refused before anything is created
    if results_dir.exists() and not results_dir.is_dir():
        raise HarnessError(f"--results-dir {results_dir} is a file; give a directory")
    try:
        probe(results_dir)
    except NoSpace:
        raise
    except HarnessError as error:
        raise HarnessError(f"--results-dir {results_dir} is not writable ({error}); choose another") from None
    free = shutil.disk_usage(results_dir).free / 2**20
    if free < need:
        raise HarnessError(
            f"--results-dir {results_dir} has {free:.0f} MiB free, less than the {need:g} MiB a run needs; free space"
        )


def min_free_mb() -> float:
    text = os.environ.get("HARNESS_MIN_FREE_MB", "").strip()
    if not text:
        return MIN_FREE_MB
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise HarnessError(f"HARNESS_MIN_FREE_MB={plain(text)!r} is not a number of MiB (e.g. 100); fix or unset it")
    return value
