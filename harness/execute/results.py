"""`harness show`, `compare` and `report`: finished run folders read back, judged, and two of them
compared as every medium compares them (judge/conclusion.py); cli/results.py renders and prints.

A run that is not whole is said here in words with its exit status (`unfinished`); the command
decides whether that stops it before anything is rendered."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.exit_codes import FAILED, INTERRUPTED
from harness.judge import conclusion
from harness.judge.assessment import Assessment as Assessment  # re-exported: what the renderers take
from harness.judge.assessment import assess as assess  # re-exported: every renderer prints from it
from harness.judge.compare import Comparison as Comparison  # re-exported: what the renderers take
from harness.judge.conclusion import gate as gate  # re-exported: --fail-above's exit status, and why
from harness.store.run_folder import Run as Run  # re-exported: a run folder as read back
from harness.store.run_folder import load_run
from harness.store.run_folder import resolve_run as resolve_run  # re-exported: the folder a RUN argument names
from harness.text.escape import plain


def read_run(folder: Path) -> Run:
    """The run in `folder`, if at least one of its result files could be read: a run whose every file
    was rejected holds nothing to show or compare, and a script must not read its silence as a pass."""
    run = load_run(folder)
    if not run.results and run.problems:
        raise HarnessError(
            f"run {plain(run.path.name)}: none of its result files could be read (first: {plain(run.problems[0])}); "
            "the folder was edited or is corrupt: run it again"
        )
    return run


def unfinished(run: Run) -> tuple[str, int] | None:
    """Why `run` is not a whole run to read as fine, with the exit status that says so, or None.

    A summary with `finished_at: null` was never ended: its harness is still running, or was killed
    (or `docker compose up` stopped) before it could mark the rest `interrupted`. That is 130's
    meaning in the README: finished jobs kept, the run can go on. A finished run with no jobs has
    nothing a script may read as a pass: 1."""
    name = plain(run.path.name)
    if "finished_at" in run.summary and run.summary["finished_at"] is None:
        done = len(run.summary["jobs"])
        how = (
            "the next `docker compose up` ends it (finished jobs kept, the rest interrupted)"
            if run.summary.get("backend") == "compose"
            else f"`harness run --resume {name}` goes on with it"
        )
        return (
            f"run {name} has not finished ({done} job{'s' * (done != 1)} ended so far; it is still running, or "
            f"it was stopped before it could end): {how}",
            INTERRUPTED,
        )
    if not run.summary["jobs"]:
        return f"run {name} has no jobs: nothing to show; the folder was edited or is corrupt: run it again", FAILED
    return None


@dataclass(frozen=True)
class Compared:
    """Two runs judged, and the first against the second, finished (judge/conclusion.py `finish`: the
    sequential correction, the noise floor of the machine that measured both runs)."""

    before: Assessment
    after: Assessment
    comparison: Comparison


def compared(before: Run, after: Run) -> Compared:
    a, b = assess(before), assess(after)
    return Compared(a, b, conclusion.finish(a, b))
