"""Each job's own writable folder, what the harness takes back from it, and its output streams.

A job may write only into `<run>/.jobs/<framework>-<random>/`: its result file and its artefact folder.
The run folder itself (logs, plan, summary, other jobs' results) is never handed to a job. After
the job, the harness copies back the job's own `<framework>.json` (a regular, singly linked file
within the size limit, read without following links) and the regular files of
`<framework>-artifacts/`, then removes the folder. Whatever else the job left there -- links
to host files, FIFOs, devices, other names -- is never read and goes with the folder.

`finalize` then makes the job's result file of what came back, for every backend and export: the
job's own valid result, or a placeholder naming what happened (timeout, oom, invalid-output...).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO, TypeVar

from harness.backends.base import JobOutcome
from harness.core.result_types import Result
from harness.core.safe_files import (
    MissingFile,
    UnsafeFile,
    copy_regular_tree,
    create,
    new_folder,
    read_bytes,
    remove_tree,
    rename,
    write_bytes_atomic,
    write_json_atomic,
)
from harness.core.schema import MAX_RESULT_BYTES, InvalidResult, load_result
from harness.store.plan import Job
from harness.store.run_folder import placeholder_result, within
from harness.text.escape import plain
from suites.contract import job_spec

WORK_DIR = ".jobs"
MAX_ARTIFACT_BYTES = 256 * 2**20
MAX_ARTIFACT_FILES = 1000
R = TypeVar("R")


def artifacts_name(job: Job) -> str:
    """The artefact folder the job runtime writes beside its result (suites/__main__.py)."""
    return f"{job.framework}-artifacts"


def fresh(run_dir: Path, job: Job) -> Path:
    """An empty folder for this job only."""
    root = run_dir / WORK_DIR
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            remove_tree(root)  # a link or a file left where the jobs' folders go: removed, not followed
    # A fresh name each time: whatever a previous attempt left (even a tree it made unremovable)
    # can never be mistaken for this job's output, nor block it.
    work = root / f"{job.framework}-{secrets.token_hex(4)}"
    new_folder(work, within(run_dir))
    return work


@dataclass
class Harvest:
    problem: str | None = None  # the result file exists but is not one the harness accepts
    skipped: list[str] = field(default_factory=list)  # artefacts left behind, and why


def harvest(work: Path, run_dir: Path, job: Job) -> Harvest:
    """Copy the job's own result and artefacts from its folder into the run folder."""
    found = Harvest()
    try:
        data = read_bytes(work / job.result_file(), MAX_RESULT_BYTES, single_link=True)
    except MissingFile:
        pass  # the runner reports the missing result (failed or invalid-output)
    except UnsafeFile as error:
        found.problem = f"refused its result file {job.result_file()}: {error.reason}"
    else:
        write_bytes_atomic(run_dir / job.result_file(), data, within(run_dir))
    copied = copy_regular_tree(
        work / artifacts_name(job),
        run_dir / artifacts_name(job),
        max_bytes=MAX_ARTIFACT_BYTES,
        max_files=MAX_ARTIFACT_FILES,
        anchor=within(run_dir),
    )
    found.skipped = copied.skipped
    return found


def write_spec(work: Path, spec: job_spec.JobSpec, anchor: Path | None = None) -> Path:
    """The job's job.json in its folder (default: one `fresh` made, <results>/<run>/.jobs/<name>)."""
    path = work / job_spec.JOB_FILE
    write_bytes_atomic(path, job_spec.dumps(spec).encode("utf-8"), work.parents[2] if anchor is None else anchor)
    return path


def open_log(logs: Path, name: str) -> BinaryIO:
    """A new log file in the run's `logs/` folder, reached from the results folder without links."""
    return create(logs, name, anchor=within(logs.parent))


def run_in_folder(run_dir: Path, job: Job, run: Callable[[Path], R]) -> tuple[R, Harvest]:
    """The lifecycle every backend shares: a fresh folder for the job, `run(work)`, then only the
    job's own result and artefacts taken back, and the folder removed whatever happened."""
    work = fresh(run_dir, job)
    try:
        value = run(work)
        found = harvest(work, run_dir, job)
    finally:
        remove_tree(work)
        with contextlib.suppress(OSError):
            work.parent.rmdir()  # the last job's folder gone: no empty .jobs left in the run
    return value, found


def note_harvest(outcome: JobOutcome, found: Harvest) -> JobOutcome:
    """What taking the result back found, on the outcome (a problem the backend saw first wins)."""
    outcome.result_problem = outcome.result_problem or found.problem
    if found.skipped:
        outcome.annotations["artifacts_skipped"] = found.skipped
    return outcome


def not_started(
    logs: Path, job: Job, started: float, message: str, annotations: dict[str, Any] | None = None
) -> JobOutcome:
    """The outcome of a job that never ran: an empty stdout log, and `message` as its stderr log and tail."""
    stdout_log, stderr_log = logs / f"{job.framework}.stdout.log", logs / f"{job.framework}.stderr.log"
    open_log(logs, stdout_log.name).close()
    with open_log(logs, stderr_log.name) as sink:
        sink.write(message.rstrip().encode() + b"\n")
    wall = time.perf_counter() - started
    return JobOutcome(None, False, stdout_log, stderr_log, wall, annotations or {}, stderr_tail=message.strip())


# Copy a child's output to a log file and, line by line, to the terminal while it runs.
#
# The log is a file the harness created itself (see safe_files.create) and the stderr tail that
# goes into a failed result is kept here in memory: nothing the job later plants at a log's path
# is ever read or written through.
TAIL_BYTES = 16 * 1024
LONGEST_ECHO_LINE = 64 * 1024  # a job printing without newlines must not grow our memory
MAX_LOG_BYTES = 64 * 2**20  # per stream and job: a job printing without end must not fill the disk
TRUNCATED = b"\n[harness: this log was cut at %d MiB; the rest of the stream was read and discarded]\n"


class Tail:
    """The last bytes a stream carried, for the stderr tail of a failed result."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self.lock:
            self.data += chunk
            if len(self.data) > TAIL_BYTES:
                del self.data[: len(self.data) - TAIL_BYTES]

    def text(self) -> str:
        with self.lock:
            return tail_text(bytes(self.data))


def tail_text(data: bytes, lines: int = 30, max_chars: int = 4000) -> str:
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])[-max_chars:]


def pump(chunks: Iterable[bytes], sink: BinaryIO, echo: IO[str] | None, tail: Tail | None = None) -> threading.Thread:
    """A thread copying `chunks` into `sink` (closed at the end), echoing whole lines with controls escaped."""

    def show(line: bytes) -> None:
        nonlocal echo
        if echo is None:
            return
        try:
            echo.write("  " + plain(line.decode("utf-8", "replace")) + "\n")
            echo.flush()
        except (OSError, ValueError):  # the terminal went away (SIGHUP): keep logging, stop echoing
            echo = None

    def copy() -> None:
        nonlocal echo
        pending = b""
        written, cut = 0, False
        with contextlib.ExitStack() as closing:
            closing.callback(_close_quietly, sink)
            for chunk in chunks:
                if tail is not None:
                    tail.add(chunk)  # the tail (a failure's reason) stays the stream's real end
                if cut:
                    continue  # keep draining the pipe, or the job would block on a full one
                room = MAX_LOG_BYTES - written
                try:
                    sink.write(chunk[:room])
                    written += min(len(chunk), room)
                    if len(chunk) > room:
                        cut = True
                        sink.write(TRUNCATED % (MAX_LOG_BYTES // 2**20))
                        show(b"[harness: log cut at the size cap; not echoing the rest]")
                        echo = None
                    sink.flush()
                except OSError as error:
                    # A full disk (or a failing one) cuts the log, not the job: the pipe is still
                    # drained, and whatever the run writes next meets the same disk and says so.
                    cut = True
                    show(f"[harness: this log could not be written on ({error.strerror}); cut here]".encode())
                    echo = None
                if echo is not None:
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        show(line)
                    if len(pending) > LONGEST_ECHO_LINE:
                        show(pending)
                        pending = b""
            if pending:
                show(pending)

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread


def _close_quietly(sink: BinaryIO) -> None:
    with contextlib.suppress(OSError):  # the flush on close meets the same full disk
        sink.close()


def read_chunks(source: IO[bytes]) -> Iterable[bytes]:
    """What a pipe carries, as it arrives, until the writer closes it."""
    try:
        while True:
            if not (chunk := source.read1(1 << 16)):  # type: ignore[attr-defined]
                return
            yield chunk
    finally:
        source.close()


# -- what a job leaves behind, as its result file -----------------------------------------------------


def _classify(run_id: str, job: Job, out: Path, outcome: JobOutcome) -> tuple[Result | None, str, str]:
    """(the job's own valid result or None, status, reason) from what the backend saw."""
    if outcome.status is not None:  # the scheduler's word (cancelled, a node failure) outranks the job's file
        return None, outcome.status, outcome.reason or outcome.status
    if outcome.timed_out:
        return None, "timeout", f"killed after {job.timeout_s:g} s (raise it with --timeout)"
    if outcome.oom:
        return None, "oom", "killed for exceeding its memory limit (raise it with --memory)"
    if outcome.result_problem is not None:
        return None, "invalid-output", outcome.result_problem
    try:
        result = load_result(out)
    except InvalidResult as error:
        if os.path.lexists(out):
            set_aside(out, ".invalid.json")  # kept for inspection
            return None, "invalid-output", str(error)
        if outcome.exit_code is None:
            return None, "failed", "could not be started (see stderr tail)"
        if outcome.exit_code == 0:
            return None, "invalid-output", "exited 0 without writing a result file"
        if outcome.exit_code == 137:  # SIGKILL: what a kernel OOM kill looks like when the engine missed it
            why = "the kernel's OOM killer does this (raise the limit with --memory), as does a kill from outside"
            return None, "failed", f"killed by SIGKILL (exit code 137) without writing a result: {why}"
        return None, "failed", f"exited with code {outcome.exit_code} without writing a result"
    if (result["suite"], result["framework"]) != (job.suite, job.framework):
        set_aside(out, ".invalid.json")
        return None, "invalid-output", f"result file names {result['suite']}/{result['framework']}, not this job"
    if result["run_id"] != run_id:
        set_aside(out, ".invalid.json")
        return None, "invalid-output", f"result file belongs to run {result['run_id']}, not this run"
    return result, result["status"], result["reason"] or ""


def set_aside(out: Path, suffix: str) -> None:
    rename(out.parent, out.name, out.with_suffix(suffix).name, within(out.parent))


def finalize(run_id: str, job: Job, backend: str, out: Path, outcome: JobOutcome) -> Result:
    """The job's result as written: its own valid file, or a placeholder saying what went wrong."""
    result, status, reason = _classify(run_id, job, out, outcome)
    if result is None:
        result = placeholder_result(run_id, job, backend, status, reason)
        result["duration_s"] = outcome.wall_s
    if result["status"] not in ("ok", "skipped") and not result.get("stderr_tail"):
        result["stderr_tail"] = outcome.stderr_tail or None
    result["environment"]["launch"] = {**outcome.annotations, "exit_code": outcome.exit_code, "wall_s": outcome.wall_s}
    if "image" in outcome.annotations and result.get("image") is None:
        result["image"] = outcome.annotations["image"]
    write_json_atomic(out, result, within(out.parent))
    return result
