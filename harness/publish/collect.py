"""The runs and version bisects of a results folder, in order, and the folders that could not be read.

Everything under RESULTS_DIR is hostile: a run folder is read only through `load_run` (which
validates every file and never follows a link at a file), a folder that is itself a link is
never entered (that would read files from anywhere), and a folder that fails to load is skipped
with one line naming it, so one bad folder never stops the site. A `bisect-<id>` folder holds a
version bisect (bisects.py reads it), never a run.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.core import workload
from harness.core.errors import HarnessError
from harness.core.safe_files import kind
from harness.core.schema import load_summary
from harness.publish.bisects import PREFIX, PublishedBisect, load_bisect
from harness.store.run_folder import Run, load_run
from harness.text.escape import plain

Progress = Callable[[int], None]  # told once per folder read, with the number of folders


@dataclass(frozen=True)
class PublishedRun:
    key: int  # the run's number in this site (its page is run-<key>.html), in start order
    folder: str  # the folder's name, made inert for display
    run: Run
    started: dt.datetime | None  # the earliest job start; None when no job recorded a readable one

    @property
    def suite(self) -> str:
        return plain(self.run.summary.get("suite"))

    @property
    def run_id(self) -> str:
        return plain(self.run.summary.get("run_id"))

    @property
    def started_text(self) -> str:
        return self.started.strftime("%Y-%m-%d %H:%M:%S UTC") if self.started else "start unknown"

    @property
    def measured(self) -> bool:
        """Whether a job produced numbers. A run without (no job recorded, none finished) is listed and
        labelled, but never a default, a comparison or the "last run" of a suite."""
        return any(result["status"] == "ok" for result in self.run.results.values())

    @property
    def workload_key(self) -> str:
        """The workload of a run (its first job's; a run measures one suite at one setting)."""
        first = next(iter(self.run.results.values()), None)
        return workload.key(first) if first is not None else ""


@dataclass
class Catalogue:
    runs: list[PublishedRun] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # one inert line per folder left out, saying why
    bisects: list[PublishedBisect] = field(default_factory=list)  # in folder-name order
    seen: set[str] = field(default_factory=set)  # the suite of every readable summary, chosen or not

    def suites(self) -> dict[str, list[PublishedRun]]:
        """suite -> its runs in start order; suites sorted by name so their pages keep their numbers."""
        found: dict[str, list[PublishedRun]] = {}
        for entry in self.runs:
            found.setdefault(entry.suite, []).append(entry)
        return {name: found[name] for name in sorted(found)}

    def suite_bisects(self, suite: str) -> list[PublishedBisect]:
        return [entry for entry in self.bisects if entry.suite == suite]


def parse_time(value: object) -> dt.datetime | None:
    """An ISO 8601 time as UTC; None for anything else (a result file may say anything)."""
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=dt.timezone.utc) if parsed.tzinfo is None else parsed.astimezone(dt.timezone.utc)


def _problem(path: Path, what: str) -> str | None:
    """Why `path` is not a folder to read runs (or a bisect) from, or None."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as error:
        return f"cannot be read ({error.strerror})"
    return None if stat.S_ISDIR(mode) else f"is a {kind(mode)}, not a {what}"


def collect(
    results_dir: Path, leave_out: Path | None = None, suite: str | None = None, progress: Progress | None = None
) -> Catalogue:
    """Every run folder directly under `results_dir`; `leave_out` (the site's own folder) is not one.
    `suite`: only that suite's runs (each summary is read once, and the other runs' results not at all);
    `progress` is told of each folder read."""
    catalogue = Catalogue()
    loaded: list[tuple[float, str, str, Run, dt.datetime | None]] = []
    try:
        names = sorted(os.listdir(results_dir))
    except OSError as error:
        raise HarnessError(
            f"RESULTS_DIR {plain(results_dir)} cannot be listed ({error.strerror}); give the folder `harness run` writes"
        ) from None
    skip = leave_out.resolve() if leave_out is not None else None
    for name in names:
        path = results_dir / name
        if progress is not None:
            progress(len(names))
        if name.startswith("."):  # the harness's own caches (.calibration, .cache), never runs
            continue
        bisect = name.startswith(PREFIX)
        problem = _problem(path, "bisect folder" if bisect else "run folder")
        if problem is None and skip is not None and path.resolve() == skip:
            continue
        if bisect and suite is not None:
            continue  # a bisect is no run of a suite's history
        if problem is None and bisect:
            try:
                doc = load_bisect(path)
            except HarnessError as error:
                problem = str(error)
            else:
                catalogue.bisects.append(PublishedBisect(key=len(catalogue.bisects), folder=plain(name), doc=doc))
                continue
        elif problem is None:
            try:
                summary = load_summary(path / "summary.json")
                catalogue.seen.add(str(summary["suite"]))
                if suite is not None and summary["suite"] != suite:
                    continue
                run = load_run(path, summary)
            except HarnessError as error:
                problem = str(error)
            else:
                times = [t for r in run.results.values() if (t := parse_time(r.get("started_at"))) is not None]
                started = min(times, default=None)
                order = started.timestamp() if started else float("inf")
                loaded.append((order, plain(run.summary.get("run_id")), name, run, started))
                continue
        catalogue.skipped.append(f"skipped {plain(name)}: {plain(problem)}")
    for key, (_, _, name, run, started) in enumerate(sorted(loaded, key=lambda item: item[:3])):
        catalogue.runs.append(PublishedRun(key=key, folder=plain(name), run=run, started=started))
    return catalogue
