"""`harness show`, `compare` and `report`: everything read back from finished run folders."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.assessment import assess
from harness.cli.options import FormatOption, ResultsDir, RunRef, default_results_dir
from harness.compare import compare_runs
from harness.errors import HarnessError
from harness.report.comparison import render_comparison
from harness.report.exports import Format, render_run
from harness.report.folder import write_report
from harness.report.sparklines import render_plots
from harness.run_folder import load_run, resolve_run


def show(
    run_ref: RunRef,
    results_dir: ResultsDir = None,
    fmt: FormatOption = Format.table,
    plot: Annotated[
        bool, typer.Option("--plot", help="after the table: every sample in order as a sparkline, and learning curves")
    ] = False,
) -> None:
    """Re-render a finished run from its files alone."""
    if plot and fmt != Format.table:
        raise HarnessError(f"--plot draws text for a terminal and goes with --format table, not {fmt.value}")
    loaded = load_run(resolve_run(run_ref, results_dir or default_results_dir()))
    judged = assess(loaded)
    typer.echo(render_run(loaded, fmt, judged))
    if plot:
        typer.echo("\n" + render_plots(loaded, judged))


def compare(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A", help="the reference run (before)")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B", help="the run compared with it (after)")],
    fail_above: Annotated[
        Optional[float], typer.Option("--fail-above", help="exit 1 on a significant slowdown above PCT percent")
    ] = None,
    results_dir: ResultsDir = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Two runs of one suite: per-metric ratio with its interval, significance, geometric mean."""
    if fail_above is not None and not (fail_above >= 0 and math.isfinite(fail_above)):  # nan would disable the gate
        raise HarnessError(f"--fail-above {fail_above} must be a finite percentage of 0 or more")
    base = results_dir or default_results_dir()
    comparison = compare_runs(load_run(resolve_run(run_a, base)), load_run(resolve_run(run_b, base)))
    typer.echo(render_comparison(comparison, fmt))
    worst = comparison.worst_significant_slowdown()
    if fail_above is not None and worst is not None and worst.slowdown * 100 > fail_above:
        typer.echo(
            f"significant slowdown above {fail_above:g} %: {worst.framework} {worst.metric} "
            f"{worst.slowdown:.1%} worse (p={worst.p_value:.3g})",
            err=True,
        )
        raise typer.Exit(1)


def report(
    run_ref: RunRef,
    out: Annotated[Optional[Path], typer.Option("--out", help="report folder [default: RUN/report]")] = None,
    figures: Annotated[bool, typer.Option("--figures/--no-figures", help="draw PNG figures (needs matplotlib)")] = True,
    results_dir: ResultsDir = None,
) -> None:
    """Write a self-contained report folder: report.md (tables, checks, environment) and figures."""
    run_dir = resolve_run(run_ref, results_dir or default_results_dir())
    path = write_report(load_run(run_dir), out or run_dir / "report", figures=figures)
    typer.echo(f"report: {path}")
