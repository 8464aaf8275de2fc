"""`harness history RESULTS --suite S`: every series of a suite over its runs, and where it changed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.assessment import assess
from harness.cli.options import FormatOption
from harness.cli.results import check_output_file
from harness.errors import HarnessError
from harness.history import find_changes, series_of
from harness.publish.collect import collect
from harness.report.exports import Format
from harness.report.history_report import history_junit, render_history
from harness.safe_files import write_bytes_atomic
from harness.text.escape import plain


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
    catalogue = collect(results_dir)
    runs = [entry.run for entry in catalogue.runs if entry.run.summary.get("suite") == suite]
    if not runs:
        known = sorted({str(entry.run.summary.get("suite")) for entry in catalogue.runs})
        raise HarnessError(
            f"no runs of suite {plain(suite)!r} in {plain(results_dir)}"
            + (f" (it has {', '.join(plain(k) for k in known)})" if known else "")
            + "; run `harness run --suite SUITE` first, or name another --suite"
        )
    series = [
        s
        for s in series_of([(run, assess(run)) for run in runs])
        if (framework is None or s.framework == framework) and (metric is None or s.metric == metric)
    ]
    if not series:
        raise HarnessError(f"no series matches --framework {framework!r} --metric {metric!r} in suite {plain(suite)}")
    changes = [c for s in series for c in find_changes(s)]
    for line in catalogue.skipped:
        typer.echo(line, err=True)
    typer.echo(render_history(suite, series, changes, fmt))
    if junit is not None:
        write_bytes_atomic(junit, history_junit(suite, series, changes).encode("utf-8"))
        typer.echo(f"junit: {plain(junit)}", err=True)
