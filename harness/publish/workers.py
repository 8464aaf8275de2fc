"""A suite's run pages and comparisons, written by worker processes, each run's statistics sent back.

The interval of every metric's median (a bootstrap: about 10 ms each, in pure Python) was three
quarters of a large publish (1,500 runs: minutes on one core). Those intervals and the pages that
need only one run or one pair (run-N.html, compare-A-B.html) are independent, so forked workers
share them out; each worker works them out through the same assessment as every other page
(`Assessment.summary`), writes its pages, and sends back the statistics (small frozen objects) and
the names it wrote. The suite page, which needs every run's numbers, and the change points stay in
the parent, which the workers run beside. Forked, a worker inherits the runs already read and
validated: nothing is read from disk again. Where fork is not available, or one CPU is, the same
work runs in this process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

from harness.core.errors import HarnessError
from harness.core.statistics import Summary
from harness.publish.collect import PublishedRun
from harness.publish.compare_page import compare_page
from harness.publish.flags import FlagBook
from harness.publish.names import compare_file, run_file
from harness.publish.run_page import run_page

Write = Callable[[str, str], None]  # (site file name, page): site.py's writer
StatKey = tuple[int, str, str]  # (the run's key, framework, metric)
Item = tuple[int, int]  # (i, -1): run page of runs[i]; (i, j): runs[i] against runs[j]


@dataclass(frozen=True)
class Work:
    runs: list[PublishedRun]
    book: FlagBook
    suite_href: str
    write: Write


@dataclass
class Done:
    pages: list[str] = field(default_factory=list)
    statistics: dict[StatKey, Summary] = field(default_factory=dict)
    items: int = 0


_WORK: Work | None = None  # set before the workers fork; each inherits it


def _do(items: list[Item]) -> Done:
    try:
        return _pages(items)
    except HarnessError as error:
        # Sent back as the one line it is: a subclass with its own arguments (UnsafeFile) cannot be
        # rebuilt on the other side of the pipe, and would break the pool instead of saying why.
        raise HarnessError(str(error)) from None


def _pages(items: list[Item]) -> Done:
    work = _WORK
    assert work is not None, "the work is set before any worker starts"
    done = Done(items=len(items))
    for i, j in items:
        entry = work.runs[i]
        if j < 0:
            name = run_file(entry.key)
            work.write(name, run_page(entry, work.book, work.suite_href))
            judged = work.book.assessment(entry)
            for fw, result in entry.run.results.items():  # the suite page's points: every ok job's metrics
                for metric in result["metrics"] if result["status"] == "ok" else []:
                    done.statistics[(entry.key, fw, metric["name"])] = judged.summary(fw, metric["name"])
        else:
            other = work.runs[j]
            name = compare_file(entry.key, other.key)
            work.write(name, compare_page(entry, other, work.book, work.suite_href))
        done.pages.append(name)
    return done


def worker_count() -> int:
    """The CPUs this process may use (its affinity, where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _chunks(items: list[Item], parts: int) -> list[list[Item]]:
    """Runs' items spread over `parts` lists, each holding every part-th item (similar loads)."""
    return [chunk for chunk in (items[k::parts] for k in range(parts)) if chunk]


@contextlib.contextmanager
def started(work: Work, items: list[Item], workers: int) -> Iterator[Iterator[Done]]:
    """The items' pages under way (in `workers` forked processes, or here with one): the caller does
    its own work meanwhile, then reads each chunk's Done as it finishes (for progress)."""
    global _WORK
    _WORK = work
    try:
        if workers <= 1 or len(items) < 2 or "fork" not in multiprocessing.get_all_start_methods():
            yield (_do(chunk) for chunk in _chunks(items, max(1, len(items) // 25)))
            return
        # Small chunks: progress is told as each one finishes, and a slow one does not hold up the rest.
        chunks = _chunks(items, max(workers * 8, len(items) // 25))
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
        try:
            futures = [pool.submit(_do, chunk) for chunk in chunks]  # the workers fork here, with _WORK set
            yield (future.result() for future in as_completed(futures))
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # a failed page (a full disk) stops the rest
            raise
        pool.shutdown(wait=True)
    finally:
        _WORK = None
