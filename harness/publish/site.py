"""`harness publish`: every page of the static site, written into --out without trusting what is there.

Each file is replaced in one rename (`write_bytes_atomic`), so a link planted in --out is
replaced, never written through, and --out itself must be a real folder. The site's own file
names are numbers (names.py): nothing read from a run becomes part of a path.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness.core import workload
from harness.core.errors import HarnessError
from harness.core.safe_files import MissingFile, UnsafeFile, read_bytes, real_folder, write_bytes_atomic
from harness.judge.verdicts import Verdicts
from harness.publish.bisect_page import bisect_label, bisect_page
from harness.publish.collect import Catalogue, PublishedRun, collect
from harness.publish.flags import FlagBook
from harness.publish.history import suite_history
from harness.publish.index_page import index_page
from harness.publish.names import GENERATED, INDEX, MANIFEST, bisect_file, compare_file, suite_file
from harness.publish.progress import Progress
from harness.publish.suite_page import Changes, suite_page
from harness.publish.workers import Work, started, worker_count
from harness.text.escape import plain, utf8

_HERE = Path(__file__).resolve().parent
# site file name -> the file shipped in this package (the vendored uPlot and the site's own code).
ASSETS = {
    "site.js": _HERE / "assets" / "site.js",
    "site.css": _HERE / "assets" / "site.css",
    "uPlot.iife.min.js": _HERE / "vendor" / "uPlot.iife.min.js",
    "uPlot.min.css": _HERE / "vendor" / "uPlot.min.css",
    "uPlot.LICENSE.txt": _HERE / "vendor" / "LICENSE",
}
PARALLEL_FROM = 100  # pages of a suite (about a second's work) from which worker processes write them
DEFAULT_MAX_PAIRS = 100  # each pair bootstraps every metric: about 0.2 s for 15 metrics on this machine


@dataclass
class Published:
    index: Path
    runs: int = 0
    suites: int = 0
    comparisons: int = 0
    bisects: int = 0
    skipped: list[str] = field(default_factory=list)


def pairs_to_compare(count: int, max_pairs: int) -> list[tuple[int, int]]:
    """(earlier, later) positions: every pair when there are at most `max_pairs`, else each run
    against the one before it and against the newest (comparisons are not free)."""
    if count * (count - 1) // 2 <= max_pairs:  # counted first: 1,500 runs have 1.1 million pairs
        return [(i, j) for i in range(count) for j in range(i + 1, count)]
    return sorted({(i - 1, i) for i in range(1, count)} | {(i, count - 1) for i in range(count - 1)})


def workload_pairs(runs: list[PublishedRun], max_pairs: int) -> list[tuple[int, int]]:
    """`pairs_to_compare` within each workload: runs of different work are never put side by side,
    and a run in which no job produced numbers has nothing to compare."""
    groups: dict[str, list[int]] = {}
    for position, entry in enumerate(runs):
        if entry.measured:
            groups.setdefault(entry.workload_key, []).append(position)
    return sorted((group[i], group[j]) for group in groups.values() for i, j in pairs_to_compare(len(group), max_pairs))


def _change_points(runs: list[PublishedRun], book: FlagBook) -> Changes:
    """Every series' change points, by (metric, workload.series_key); none when ruptures is missing (said once)."""
    found: Changes = {}
    try:
        shifts = book.verdicts.change_points([entry.run for entry in runs])
    except HarnessError as error:
        print(f"publish: no change points on the charts: {error}", file=sys.stderr)
        return {}
    for shift in shifts:
        series, first = shift.series, shift.series.points[0].result
        metric = next((m for m in first["metrics"] if m["name"] == series.metric), None)
        found.setdefault((series.metric, workload.series_key(first, metric)), []).append(shift)
    return found


_PAGES: list[str] = []  # the pages this publish wrote, for its manifest


def check_paths(results_dir: Path, out: Path) -> None:
    """Refuse bad input before anything is read or written, each in one line naming the fix."""
    if not results_dir.is_dir():
        what = "does not exist" if not os.path.lexists(results_dir) else "is not a folder"
        raise HarnessError(
            f"RESULTS_DIR {plain(results_dir)} {what}; give the folder `harness run` writes its run folders into "
            "(default ./results)"
        )
    if out.is_symlink():
        raise HarnessError(
            f"--out {plain(out)} is a symbolic link; give a real folder (the site is never written through a link)"
        )
    if os.path.lexists(out) and not out.is_dir():
        raise HarnessError(f"--out {plain(out)} is a file; give a folder for the site (it is created when missing)")


def _written_before(out: Path) -> set[str]:
    """The pages an earlier publish into `out` says it wrote (its manifest, read as hostile)."""
    try:
        doc = json.loads(read_bytes(out / MANIFEST, 4 << 20))
    except (MissingFile, UnsafeFile, ValueError, RecursionError):
        return set()
    names = doc.get("pages") if isinstance(doc, dict) else None
    if not isinstance(names, list):
        return set()
    return {name for name in names if isinstance(name, str) and GENERATED.fullmatch(name)}


def _clear_old_pages(out: Path) -> None:
    """Remove the pages an earlier publish wrote, as its manifest lists them (links are removed,
    never followed); any other file in `out` is the user's and stays."""
    for name in _written_before(out):
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            if not stat.S_ISDIR(os.lstat(out / name).st_mode):
                os.unlink(out / name)


def _write(out: Path, name: str, data: str | bytes, record: bool = True) -> None:
    """`record`: list the page in the manifest (a worker's pages are listed from what it sends back)."""
    if record and GENERATED.fullmatch(name):
        _PAGES.append(name)
    try:
        write_bytes_atomic(out / name, utf8(data) if isinstance(data, str) else data)
    except OSError as error:
        raise HarnessError(
            f"--out {plain(out)}: cannot write {name} ({error.strerror}); choose another folder"
        ) from None


def _publish_suite(
    out: Path,
    number: int,
    suite: str,
    runs: list[PublishedRun],
    book: FlagBook,
    max_pairs: int,
    bisects: list[tuple[str, str]],
    progress: Progress,
    workers: int | None,
) -> int:
    """The suite's page, its runs' pages and comparisons; the last two (and every run's statistics,
    the bulk of the work) in worker processes while this one finds the change points."""
    href = suite_file(number)
    chosen = workload_pairs(runs, max_pairs)
    pairs = {f"{i}-{j}": compare_file(runs[i].key, runs[j].key) for i, j in chosen}
    items = [(i, -1) for i in range(len(runs))] + chosen
    work = Work(runs, book, href, lambda name, page: _write(out, name, page, record=False))
    if workers is None:  # a small suite is done before a pool of processes would have started
        workers = worker_count() if len(items) >= PARALLEL_FROM else 1
    with started(work, items, workers) as finished:
        processes = "this process" if workers == 1 else f"{workers} worker processes"
        progress.note(f"suite {suite}: {len(runs)} runs, {len(chosen)} comparisons, in {processes}")
        changes = _change_points(runs, book)
        histories = suite_history(runs, book)
        done = 0
        for chunk in finished:
            done += chunk.items
            _PAGES.extend(chunk.pages)
            book.remember(chunk.statistics)
            progress.step(f"suite {suite}: run pages and comparisons", done, len(items))
    _write(out, href, suite_page(suite, runs, histories, book, pairs, bisects, changes))
    return len(pairs)


def _publish_bisects(out: Path, catalogue: Catalogue) -> int:
    """One page per bisect, linked back to its suite's page when the site has one."""
    numbers = {suite: number for number, suite in enumerate(catalogue.suites())}
    for entry in catalogue.bisects:
        number = numbers.get(entry.suite)
        _write(out, bisect_file(entry.key), bisect_page(entry, suite_file(number) if number is not None else None))
    return len(catalogue.bisects)


def publish_site(
    results_dir: Path,
    out: Path,
    max_pairs: int = DEFAULT_MAX_PAIRS,
    progress: Progress | None = None,
    workers: int | None = None,
) -> Published:
    """`progress`: told of every step (default: a Progress that is never loud, as code calling this
    expects); `workers`: processes for the run pages and comparisons (default: one per usable CPU, for a
    suite of PARALLEL_FROM pages or more)."""
    progress = progress or Progress()
    check_paths(results_dir, out)
    read = itertools.count(1)
    catalogue = collect(
        results_dir, leave_out=out, progress=lambda total: progress.step("run folders read", next(read), total)
    )
    if not catalogue.runs and not catalogue.bisects:
        raise HarnessError(
            f"no run folder under {plain(results_dir)} could be read ({len(catalogue.skipped)} skipped); "
            "give the folder `harness run` writes its run folders into"
        )
    real_folder(out)
    _clear_old_pages(out)
    _PAGES.clear()
    book = FlagBook(Verdicts())
    suites = catalogue.suites()
    published = Published(index=out / INDEX, runs=len(catalogue.runs), suites=len(suites), skipped=catalogue.skipped)
    for number, (suite, runs) in enumerate(suites.items()):
        bisects = [(bisect_file(entry.key), bisect_label(entry)) for entry in catalogue.suite_bisects(suite)]
        published.comparisons += _publish_suite(out, number, suite, runs, book, max_pairs, bisects, progress, workers)
    published.bisects = _publish_bisects(out, catalogue)
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    _write(out, INDEX, index_page(catalogue, book, plain(results_dir), generated))
    for name, source in ASSETS.items():
        _write(out, name, source.read_bytes())
    _write(out, MANIFEST, json.dumps({"format": "fw-harness-site", "pages": sorted(_PAGES)}) + "\n")
    progress.note(f"{len(_PAGES)} pages written")
    return published
