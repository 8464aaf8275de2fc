"""`harness history RESULTS --suite S`: every series of a suite over its runs, and where it changed."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.options import FormatOption
from harness.cli.results import check_output_file
from harness.core.errors import HarnessError
from harness.core.safe_files import write_bytes_atomic
from harness.execute.history import change_points, history_series
from harness.publish.collect import Progress, collect
from harness.publish.progress import SHOW_FROM  # one size of a "large" results folder: history, publish
from harness.report.exports import Format
from harness.report.history_report import history_junit, render_history
from harness.text.escape import plain, utf8

PLAIN_EVERY_S = 5.0  # stderr that is not a terminal (a CI log): a whole line this often, no \r redraws


@contextlib.contextmanager
def progress_line(what: str, show_from: int = SHOW_FROM, every_s: float = PLAIN_EVERY_S) -> Iterator[Progress]:
    """Progress on stderr through a long step of a large history: thousands of runs take a while to
    read, and a silent command looks hung. On a terminal, one line redrawn in place; elsewhere (a CI
    log, a pipe) a whole line every `every_s` seconds once the step has taken that long, and a last
    one when it ends, so a log shows it working without a flood. The step calls the tick once per
    item, with the number of items."""
    done, shown = 0, 0.0
    live = sys.stderr.isatty()
    began = time.monotonic()
    said = began  # a plain line is written every_s after the step began, then after the last line

    def tick(total: int) -> None:
        nonlocal done, shown, said
        done += 1
        now = time.monotonic()
        if total < show_from:
            return
        if live and (now - shown > 0.2 or done in (1, total)):
            shown = now
            sys.stderr.write(f"\r{what}: {done}/{total}")
            sys.stderr.flush()
        elif not live and (now - said >= every_s or (done == total and said > began)):
            said = now
            sys.stderr.write(f"{what}: {done}/{total}\n")
            sys.stderr.flush()

    try:
        yield tick
    finally:
        if live and shown:
            sys.stderr.write("\r\033[K")  # the line is cleared: the answer follows on a clean screen
            sys.stderr.flush()


def history(
    results_dir: Annotated[Path, typer.Argument(metavar="RESULTS_DIR", help="the folder `harness run` writes into")],
    suite: Annotated[str, typer.Option("--suite", "-s", help="the suite whose runs are analysed")],
    framework: Annotated[Optional[str], typer.Option("--framework", "-f", help="only this framework's series")] = None,
    metric: Annotated[Optional[str], typer.Option("--metric", "-m", help="only this metric's series")] = None,
    junit: Annotated[
        Optional[Path], typer.Option("--junit", help="also write JUnit XML: one test case per series, for CI")
    ] = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Change points in every metric's history: the runs a level shift falls between, and what changed there."""
    if not results_dir.is_dir():
        raise HarnessError(
            f"RESULTS_DIR {plain(results_dir)} is not a folder; give the folder `harness run` writes into"
        )
    if junit is not None:
        check_output_file(junit, "--junit")
    with progress_line("reading run folders") as progress:
        catalogue = collect(results_dir, suite=suite, progress=progress)
    runs = [entry.run for entry in catalogue.runs]
    series = history_series(
        runs, suite=suite, seen=catalogue.seen, results_dir=results_dir, framework=framework, metric=metric
    )
    # Each series' search grows faster than its length: a long history is shown working, series by series.
    with progress_line("finding change points, series", 1 if len(runs) >= SHOW_FROM else len(series) + 1) as tick:
        changes = change_points(series, tick)
    for line in catalogue.skipped:
        typer.echo(line, err=True)
    typer.echo(render_history(suite, series, changes, fmt))
    if junit is not None:
        write_bytes_atomic(junit, utf8(history_junit(suite, series, changes)))
        typer.echo(f"junit: {plain(junit)}", err=True)
